"""Fingerprint stage: the code each stage runs, summed up in small files the stages depend on.

    python -m pipeline.fingerprint    # -> fingerprint/engine.json, fingerprint/algorithms/<name>.json,
                                      #    fingerprint/commands/<command>.json

A module's digest is the digest of its syntax tree with the docstrings taken out (comments are not in
the tree at all), written out in a canonical form that no formatting and no Python version from 3.10
on changes. So a comment, a docstring, a reformatted line or a renamed temporary file changes no
digest and retrains nothing; a change to the code does.

Which modules: every module of the package that the train command imports (read from the import
statements, `train_closure`), in two groups. The engine decides the numbers: a change there re-keys
checkpoints and retrains. The rest (`NOT_NUMERIC`: the command line, output writing, plots, the torchrun
launcher, validation, paths, file and error helpers) decides no number; a change there reruns the train
stages, which then write their outputs again from each seed's kept result (pipeline.results) without
training. Each algorithm's module has its own file, so that a train stage depends on its own
algorithm only: adding or editing one algorithm reruns no other algorithm's runs.

The other stages (download, partition, resolve, report) depend on the same kind of file for their own
command, fingerprint/commands/<command>.json: every module the command imports, by its code. So every
stage depends on exactly the code it runs (tests/unit/test_stage_dependencies.py), and a comment anywhere
reruns none of them.

Why a stage of its own: DVC parses and rewrites a whole dvc.lock after every stage it runs, so each
line of a lock costs every stage; one small file stands for the ~30 modules a train stage runs.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

from pipeline.errors import UserError, exit_on_user_error
from pipeline.io import write_json

OUTPUT = Path("fingerprint/engine.json")
ALGORITHM_OUTPUTS = Path("fingerprint/algorithms")
COMMAND_OUTPUTS = Path("fingerprint/commands")
# The other stages' commands: the module each runs (`python -m <module>`), by the name its file has here.
COMMANDS = {
    "download": "pipeline/download.py",
    "partition": "pipeline/partition.py",
    "resolve": "pipeline/resolve.py",
    "report": "pipeline/report/__main__.py",
}
REPORT_DIR = "pipeline/report"
PACKAGE = "pipeline"
TRAIN_COMMAND = "pipeline/train.py"
ALGORITHMS_DIR = "pipeline/algorithms"
# The train command's modules that decide no number: how the command runs, how results are written,
# what is valid, where files live. Every other module it imports is the engine.
NOT_NUMERIC = frozenset(
    f"pipeline/{name}"
    for name in (
        "__init__.py",
        "train.py",
        "outputs.py",
        "probe_files.py",
        "launch.py",
        "results.py",
        "options.py",
        "checks.py",
        "paths.py",
        "errors.py",
        "io.py",
        "fingerprint.py",
    )
)


# ---------------------------------------------------------------- a module's code, without its prose


def strip_docstrings(tree: ast.AST) -> ast.AST:
    """The tree with the docstring (a leading string expression) of every module, class and function
    removed, in place."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:]
    return tree


# Fields that carry no code: type comments, a string's `u` prefix; fields that newer Pythons add empty
# (`type_params`) are dropped with every other empty or absent field below.
IGNORED_FIELDS = frozenset({"type_comment", "kind"})


def canonical(node) -> str:
    """A text of the tree that is the same on every Python from 3.10 on: node names and their non-empty
    fields in order (ast.dump's output differs between versions: 3.12 adds `type_params=[]`, 3.13 drops
    empty fields)."""
    if isinstance(node, ast.AST):
        fields = [
            f"{name}={canonical(value)}"
            for name, value in ast.iter_fields(node)
            if name not in IGNORED_FIELDS and value is not None and value != []
        ]
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return "[" + ", ".join(canonical(item) for item in node) + "]"
    return f"{type(node).__name__}:{node!r}"


def code_digest(source: str, path: str = "") -> str:
    """sha256 of a module's code: its syntax tree without docstrings, in canonical form."""
    return hashlib.sha256(canonical(strip_docstrings(parse(source, path))).encode()).hexdigest()


def parse(source: str, path: str = "") -> ast.Module:
    """The module's syntax tree; a module Python cannot read is the user's edit to fix, said in one line."""
    try:
        return ast.parse(source)
    except SyntaxError as error:
        where = f"{path or error.filename or 'a module'}, line {error.lineno}"
        raise UserError(
            f"{where}: {error.msg}: Python cannot read it, so no stage can run it; fix it and rerun"
        ) from None


# ---------------------------------------------------------------- which modules a train stage runs


def module_path(name: str, root: Path) -> str | None:
    """The repository path of a dotted module of the package (a package's __init__.py), or None."""
    path = Path(*name.split("."))
    if (root / path.with_suffix(".py")).is_file():
        return path.with_suffix(".py").as_posix()
    if (root / path / "__init__.py").is_file():
        return (path / "__init__.py").as_posix()
    return None


def imports_of(path: str, root: Path) -> set[str]:
    """The package's module files that `path` imports, at its top or inside a function: `import
    pipeline.x`, `from pipeline.x import y` (pipeline/x.py, and pipeline/x/y.py where y is a module),
    relative forms resolved. A package's own __init__ counts for every module under it."""
    parts = Path(path).with_suffix("").parts
    package = parts[:-1] if parts[-1] == "__init__" else parts[:-1]
    names = []
    for node in ast.walk(without_type_checking(parse((root / path).read_text(), path))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            names += [base] + [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    found = set()
    for name in names:
        if name == PACKAGE or name.startswith(PACKAGE + "."):
            pieces = name.split(".")
            for end in range(1, len(pieces) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__
                file = module_path(".".join(pieces[:end]), root)
                if file is not None:
                    found.add(file)
    return found - {path}


def without_type_checking(tree: ast.AST) -> ast.AST:
    """The tree without the bodies of `if TYPE_CHECKING:` blocks: imports for type checkers only, never run."""
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            node.body = []
    return tree


def closure(start: list[str], root: Path) -> set[str]:
    """Every package module the `start` files import, directly or through others, and the files themselves."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo.extend(imports_of(path, root))
    return seen


def algorithm_files(root: Path) -> dict[str, str]:
    """Each algorithm's name -> its module file (found as pipeline.algorithms finds them: every module of
    the folder but common.py and names starting with _)."""
    return {
        path.stem: path.relative_to(root).as_posix()
        for path in sorted((root / ALGORITHMS_DIR).glob("*.py"))
        if path.stem != "common" and not path.stem.startswith("_")
    }


def train_closure(root: Path) -> set[str]:
    """The modules a train stage runs, besides its algorithm's own file: what the train command imports,
    and what each algorithm imports (the algorithms themselves are loaded by name at run time)."""
    algorithms = algorithm_files(root)
    return closure([TRAIN_COMMAND, *algorithms.values()], root) - set(algorithms.values())


def command_closure(command: str, root: Path) -> set[str]:
    """The modules stage command `command` (a COMMANDS key) runs: what its module imports, and what is loaded by
    name at run time: every algorithm where the algorithms package is imported (their HYPERPARAMS are resolved,
    their `check` validates), every paper's report module for the report."""
    start = [COMMANDS[command]]
    if command == "report":
        start += [f"{REPORT_DIR}/{name}.py" for name in report_modules(root)]
    found = closure(start, root)
    if f"{ALGORITHMS_DIR}/__init__.py" in found:
        found = closure([*found, *algorithm_files(root).values()], root)
    return found


def report_modules(root: Path) -> list[str]:
    """The papers' report modules (pipeline/papers.py's PAPERS, each a pipeline/report/<paper>.py)."""
    papers = ast.literal_eval(
        next(
            node.value
            for node in ast.walk(parse((root / "pipeline/papers.py").read_text(), "pipeline/papers.py"))
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "TITLES"
        )
    )
    return sorted(papers)


def file_digests(paths, root: Path) -> dict[str, str]:
    return {path: code_digest((root / path).read_text(), path) for path in sorted(paths)}


def combined_digest(digests: dict) -> str:
    """One sha256 over the (path, digest) pairs in path order."""
    summary = hashlib.sha256()
    for path in sorted(digests):
        summary.update(f"{path}\0{digests[path]}\n".encode())
    return summary.hexdigest()


def engine_modules(root: Path) -> list[str]:
    return sorted(train_closure(root) - NOT_NUMERIC)


@functools.cache
def run_code_digest(algorithm: str, root: Path | None = None) -> str:
    """The code that decides a run's numbers: the engine and the run's algorithm. It keys checkpoints
    and kept results (a result made by other code, a fixed bug say, is stale) and is written into every
    seed's timing.json."""
    root = root or Path(__file__).resolve().parents[1]
    files = algorithm_files(root)
    return combined_digest(file_digests([*engine_modules(root), files[algorithm]], root))


def command_fingerprints(root: Path) -> dict[str, dict]:
    """{command: its file's content}: every module the command runs and one sha256 over them."""
    out = {}
    for command in COMMANDS:
        digests = file_digests(command_closure(command, root), root)
        out[command] = {"modules": digests, "sha256": combined_digest(digests)}
    return out


def fingerprints(root: Path) -> tuple[dict, dict[str, dict]]:
    """(engine.json's content, {algorithm: its file's content})."""
    closure_files = train_closure(root)
    engine = file_digests(closure_files - NOT_NUMERIC, root)
    other = file_digests(closure_files & NOT_NUMERIC, root)
    record = {
        "engine": engine,
        "not_numeric": other,
        "engine_sha256": combined_digest(engine),
        "sha256": combined_digest({**engine, **other}),
    }
    algorithms = {
        name: {"file": path, "sha256": code_digest((root / path).read_text(), path)}
        for name, path in algorithm_files(root).items()
    }
    return record, algorithms


@exit_on_user_error
def main() -> None:
    root = Path(".")
    record, algorithms = fingerprints(root)
    write_json(OUTPUT, record)
    ALGORITHM_OUTPUTS.mkdir(parents=True, exist_ok=True)
    for name, content in algorithms.items():
        write_json(ALGORITHM_OUTPUTS / f"{name}.json", content)
    for stale in ALGORITHM_OUTPUTS.glob("*.json"):
        if stale.stem not in algorithms:
            stale.unlink()
    COMMAND_OUTPUTS.mkdir(parents=True, exist_ok=True)
    for command, content in command_fingerprints(root).items():
        write_json(COMMAND_OUTPUTS / f"{command}.json", content)
    print(
        f"{OUTPUT}: {len(record['engine'])} engine modules and {len(record['not_numeric'])} others, "
        f"sha256 {record['sha256'][:16]}; {len(algorithms)} algorithms -> {ALGORITHM_OUTPUTS}/; "
        f"{len(COMMANDS)} other commands -> {COMMAND_OUTPUTS}/"
    )


if __name__ == "__main__":
    main()
