"""The fingerprint stage: every module a train stage runs, by its code alone (comments, docstrings and
formatting do not count), the engine apart from the code that decides no number, each algorithm apart."""

from __future__ import annotations

import ast
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
import yaml

from pipeline import fingerprint
from pipeline.algorithms import names
from support.import_graph import imported_modules, module_file

REPO = Path(__file__).resolve().parents[2]


def closure_by_import_graph(start: list[Path]) -> set[str]:
    """The package modules `start` imports, directly or through others: the test suite's own reading of the
    import graph (tests/support/import_graph.py), independent of fingerprint.train_closure."""
    seen, todo = set(), list(start)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo.extend(module_file(name) for name in imported_modules(path))
    return {path.relative_to(REPO).as_posix() for path in seen}


def copy_package(root: Path) -> None:
    shutil.copytree(REPO / "pipeline", root / "pipeline", ignore=shutil.ignore_patterns("__pycache__"))


def test_the_fingerprint_covers_exactly_what_the_train_command_and_the_algorithms_import():
    algorithms = {REPO / "pipeline" / "algorithms" / f"{name}.py" for name in names()}
    imported = closure_by_import_graph([REPO / "pipeline" / "train.py", *algorithms])
    covered = fingerprint.train_closure(REPO)
    # the package's __init__ files run on any import: the test graph leaves them out, the fingerprint not
    assert covered - {p for p in covered if p.endswith("__init__.py")} == imported - {
        p.relative_to(REPO).as_posix() for p in algorithms
    } - {p for p in imported if p.endswith("__init__.py")}
    assert {"pipeline/path_score.py", "pipeline/algorithms/common.py", "pipeline/training.py"} <= covered


def test_the_engine_is_the_numeric_code_and_the_rest_decides_no_number():
    engine = set(fingerprint.engine_modules(REPO))
    assert {"pipeline/cohort.py", "pipeline/rounds.py", "pipeline/training.py", "pipeline/settings.py"} <= engine
    assert not engine & {
        "pipeline/train.py",
        "pipeline/outputs.py",
        "pipeline/probe_files.py",
        "pipeline/launch.py",
        "pipeline/results.py",
        "pipeline/options.py",
    }
    assert fingerprint.NOT_NUMERIC <= {
        f"pipeline/{p.relative_to(REPO / 'pipeline').as_posix()}" for p in (REPO / "pipeline").rglob("*.py")
    }  # no stale name in the list


def test_train_stages_depend_on_the_fingerprints_and_no_module_directly():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    assert stages["fingerprint"]["deps"] == ["pipeline"]
    assert stages["fingerprint"]["outs"] == [{"fingerprint": {"cache": False, "persist": True}}]
    deps = stages["train"]["do"]["deps"]
    assert "fingerprint/engine.json" in deps and "fingerprint/algorithms/${item.algorithm}.json" in deps
    assert not [dep for dep in deps if dep.startswith("pipeline")]


SOURCE = '''"""A module."""
import torch


def step(x, lr):
    """One step."""
    return x - lr * torch.ones(3)  # a comment
'''


@pytest.mark.parametrize(
    "edit",
    [
        lambda s: s.replace("# a comment", "# another comment, longer"),
        lambda s: s.replace('"""One step."""', '"""One step, said at length.\n\n    Over two paragraphs."""'),
        lambda s: s.replace('"""A module."""', '"""A module, documented anew."""'),
        lambda s: s.replace("return x - lr * torch.ones(3)", "return (\n        x - lr * torch.ones(3)\n    )"),
        lambda s: s + "\n\n# a trailing comment\n",
        lambda s: s.replace("def step(x, lr):\n", "def step(x, lr):  # why\n"),
        lambda s: s.replace('"""One step."""\n', ""),
    ],
    ids=[
        "comment",
        "docstring",
        "module_docstring",
        "reformatted",
        "trailing_comment",
        "inline_comment",
        "docstring_removed",
    ],
)
def test_prose_and_layout_leave_a_modules_digest_unchanged(edit):
    assert fingerprint.code_digest(edit(SOURCE)) == fingerprint.code_digest(SOURCE)


@pytest.mark.parametrize(
    "edit",
    [
        lambda s: s.replace("lr * torch", "2 * lr * torch"),
        lambda s: s.replace("torch.ones(3)", "torch.ones(4)"),
        lambda s: s.replace("x - lr", "x + lr"),
        lambda s: s.replace('"""One step."""', '"""One step."""\n    x = x.clone()'),
    ],
    ids=["constant", "argument", "operator", "statement"],
)
def test_a_code_change_changes_a_modules_digest(edit):
    assert fingerprint.code_digest(edit(SOURCE)) != fingerprint.code_digest(SOURCE)


def test_a_string_statement_that_is_not_a_docstring_is_code():
    with_string = SOURCE.replace("    return x", '    x = x\n    "a string after a statement"\n    return x')
    without = SOURCE.replace("    return x", "    x = x\n    return x")
    assert fingerprint.code_digest(with_string) != fingerprint.code_digest(without)


def test_the_canonical_form_skips_fields_newer_pythons_add_empty():
    """Python 3.12 adds `type_params=[]` to every function and 3.13 leaves empty fields out of ast.dump: the
    canonical text drops empty and absent fields, so both give the digest 3.10 and 3.11 give."""
    tree = ast.parse("def f(x):\n    return x\n")
    function = tree.body[0]
    before = fingerprint.canonical(tree)
    function.type_params = []  # as 3.12 parses it
    assert fingerprint.canonical(tree) == before
    assert "type_params" not in before and "returns" not in before


def test_a_comment_in_any_engine_module_leaves_engine_json_as_it_was(tmp_path, monkeypatch):
    copy_package(tmp_path)
    monkeypatch.chdir(tmp_path)
    fingerprint.main()
    before = (tmp_path / fingerprint.OUTPUT).read_bytes()
    algorithms_before = {p.name: p.read_bytes() for p in (tmp_path / fingerprint.ALGORITHM_OUTPUTS).iterdir()}
    for path in [*fingerprint.engine_modules(tmp_path), "pipeline/algorithms/fedcurv.py"]:
        with open(tmp_path / path, "a") as handle:
            handle.write("\n# a note for the next reader\n")
        text = (tmp_path / path).read_text()
        (tmp_path / path).write_text(text.replace('"""', '"""Reworded. ', 1))
    fingerprint.main()
    assert (tmp_path / fingerprint.OUTPUT).read_bytes() == before
    assert {p.name: p.read_bytes() for p in (tmp_path / fingerprint.ALGORITHM_OUTPUTS).iterdir()} == algorithms_before


def test_a_code_edit_changes_the_engine_digest_or_only_its_algorithms(tmp_path, monkeypatch):
    copy_package(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = {name: fingerprint.run_code_digest.__wrapped__(name, tmp_path) for name in names()}
    assert len(set(before.values())) == len(before)  # each algorithm's runs have their own code
    record = json.loads(json.dumps(fingerprint.fingerprints(tmp_path)[0]))
    cohort = tmp_path / "pipeline" / "cohort.py"
    cohort.write_text(cohort.read_text().replace("CHUNK_BYTES = 24 * 1024 * 1024", "CHUNK_BYTES = 23 * 1024 * 1024"))
    after_engine = {name: fingerprint.run_code_digest.__wrapped__(name, tmp_path) for name in names()}
    assert all(after_engine[name] != before[name] for name in names())
    assert (
        fingerprint.fingerprints(tmp_path)[0]["engine"]["pipeline/cohort.py"] != record["engine"]["pipeline/cohort.py"]
    )
    fedprox = tmp_path / "pipeline" / "algorithms" / "fedprox.py"
    fedprox.write_text(fedprox.read_text().replace('HYPERPARAMS = {"mu": 0.01}', 'HYPERPARAMS = {"mu": 0.02}'))
    after_fedprox = {name: fingerprint.run_code_digest.__wrapped__(name, tmp_path) for name in names()}
    assert [name for name in names() if after_fedprox[name] != after_engine[name]] == ["fedprox"]


def test_output_code_changes_engine_json_but_not_the_engine_digest(tmp_path, monkeypatch):
    """A change to how outputs are written reruns the train stages (engine.json changes) without re-keying
    checkpoints and kept results (the engine's digest stays): they write their outputs again, untrained."""
    copy_package(tmp_path)
    record = fingerprint.fingerprints(tmp_path)[0]
    outputs = tmp_path / "pipeline" / "outputs.py"
    outputs.write_text(outputs.read_text().replace("indent=4", "indent=2"))
    changed = fingerprint.fingerprints(tmp_path)[0]
    assert changed["sha256"] != record["sha256"] and changed["engine_sha256"] == record["engine_sha256"]
    assert fingerprint.run_code_digest.__wrapped__("fedavg", tmp_path) == fingerprint.run_code_digest.__wrapped__(
        "fedavg", REPO
    )


def test_the_stage_writes_each_modules_digest_of_its_code(tmp_path, monkeypatch):
    copy_package(tmp_path)
    monkeypatch.chdir(tmp_path)
    fingerprint.main()
    written = json.loads((tmp_path / fingerprint.OUTPUT).read_text())
    assert sorted(written["engine"]) == fingerprint.engine_modules(tmp_path)
    # the module with every comment removed by the tokenizer (an independent route to "its code alone")
    source = (REPO / "pipeline" / "rounds.py").read_text()
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type != tokenize.COMMENT]
    assert written["engine"]["pipeline/rounds.py"] == fingerprint.code_digest(tokenize.untokenize(tokens))
    assert written["engine"]["pipeline/rounds.py"] != hashlib.sha256(source.encode()).hexdigest()
    fedcurv = json.loads((tmp_path / fingerprint.ALGORITHM_OUTPUTS / "fedcurv.json").read_text())
    assert fedcurv["file"] == "pipeline/algorithms/fedcurv.py"


def test_a_module_python_cannot_read_is_one_line_and_the_fingerprints_stay(tmp_path):
    """A syntax error in an algorithm (a user's edit) is one line naming the file and the line, exit 2, no
    traceback; the fingerprints written before are left as they were."""
    copy_package(tmp_path)
    done = subprocess.run([sys.executable, "-m", "pipeline.fingerprint"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    before = {p: p.read_bytes() for p in (tmp_path / "fingerprint").rglob("*.json")}
    broken = tmp_path / "pipeline" / "algorithms" / "fedprox.py"
    lines = broken.read_text().splitlines() + ["x = = 1"]
    broken.write_text("\n".join(lines) + "\n")
    done = subprocess.run([sys.executable, "-m", "pipeline.fingerprint"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"error: pipeline/algorithms/fedprox.py, line {len(lines)}: invalid syntax")
    assert "fix it and rerun" in line
    assert {p: p.read_bytes() for p in (tmp_path / "fingerprint").rglob("*.json")} == before
