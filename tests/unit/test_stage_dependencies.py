"""Every stage of dvc.yaml depends on exactly the code its command runs: through a fingerprint file whose
module list is the command's import closure (read here independently of pipeline/fingerprint.py), and on
no module of the package directly (a comment there would rerun the stage)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml

from pipeline import fingerprint
from pipeline.papers import PAPERS

REPO = Path(__file__).resolve().parents[2]
STAGES = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]


def module_file(name: str) -> str | None:
    path = REPO / Path(*name.split("."))
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py").relative_to(REPO).as_posix()
    if (path / "__init__.py").is_file():
        return (path / "__init__.py").relative_to(REPO).as_posix()
    return None


def run_imports(path: str) -> set[str]:
    """The package modules a file imports when it runs: every import statement but those under `if
    TYPE_CHECKING:`; `import a.b.c` runs a/__init__ and a/b/__init__ too."""
    tree = ast.parse((REPO / path).read_text())
    skipped = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
        for child in node.body
        for n in ast.walk(child)
    }
    package = Path(path).with_suffix("").parts[:-1]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (
                ".".join([*package[: len(package) - node.level + 1], *([node.module] if node.module else [])])
                if node.level
                else node.module or ""
            )
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "pipeline":
                found.update(f for end in range(1, len(parts) + 1) if (f := module_file(".".join(parts[:end]))))
    return found - {path}


def reached(start: list[str]) -> set[str]:
    seen, todo = set(), list(start)
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo.extend(run_imports(path))
    return seen


ALGORITHMS = sorted(
    p.relative_to(REPO).as_posix()
    for p in (REPO / "pipeline/algorithms").glob("*.py")
    if p.stem != "common" and not p.stem.startswith("_")
)
# What each stage's command is, and what it loads by name at run time besides its imports.
COMMANDS = {
    "download": ("pipeline/download.py", ALGORITHMS),  # validation loads every algorithm's HYPERPARAMS
    "partition": ("pipeline/partition.py", ALGORITHMS),
    "resolve": ("pipeline/resolve.py", ALGORITHMS),
    "report": ("pipeline/report/__main__.py", ALGORITHMS + [f"pipeline/report/{p}.py" for p in PAPERS]),
}


@pytest.mark.parametrize("stage", sorted(COMMANDS))
def test_a_stage_depends_on_its_commands_fingerprint_and_the_fingerprint_lists_what_it_runs(stage):
    definition = STAGES[stage]["do"] if "do" in STAGES[stage] else STAGES[stage]
    deps = definition["deps"]
    assert f"fingerprint/commands/{stage}.json" in deps
    assert not [dep for dep in deps if dep.startswith("pipeline") and not dep.endswith(".yaml")], deps
    command, loaded = COMMANDS[stage]
    assert definition["cmd"].split()[2] == command.removesuffix(".py").removesuffix("/__main__").replace("/", ".")
    written = json.loads((REPO / "fingerprint" / "commands" / f"{stage}.json").read_text())
    assert set(written["modules"]) == reached([command, *loaded])


def test_the_train_stage_depends_on_the_engine_and_its_algorithm_and_they_cover_what_it_runs():
    deps = STAGES["train"]["do"]["deps"]
    assert "fingerprint/engine.json" in deps and "fingerprint/algorithms/${item.algorithm}.json" in deps
    assert not [dep for dep in deps if dep.startswith("pipeline")]
    written = json.loads((REPO / "fingerprint" / "engine.json").read_text())
    covered = set(written["engine"]) | set(written["not_numeric"])
    assert covered == reached(["pipeline/train.py", *ALGORITHMS]) - set(ALGORITHMS)
    for path in ALGORITHMS:  # each algorithm apart
        assert json.loads((REPO / "fingerprint" / "algorithms" / f"{Path(path).stem}.json").read_text())["file"] == path


def test_the_committed_fingerprints_are_what_the_code_gives():
    record, algorithms = fingerprint.fingerprints(REPO)
    assert json.loads((REPO / fingerprint.OUTPUT).read_text()) == record
    for name, content in algorithms.items():
        assert json.loads((REPO / fingerprint.ALGORITHM_OUTPUTS / f"{name}.json").read_text()) == content
    for command, content in fingerprint.command_fingerprints(REPO).items():
        assert json.loads((REPO / fingerprint.COMMAND_OUTPUTS / f"{command}.json").read_text()) == content


def test_the_fingerprint_stage_itself_depends_on_the_whole_package():
    assert STAGES["fingerprint"]["deps"] == ["pipeline"]
