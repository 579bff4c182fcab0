"""The fingerprint stage: the engine's code as one file, and every module that decides a run's numbers in it."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from import_graph import imported_modules, module_file
from pipeline import fingerprint, stagefiles
from pipeline.algorithms import ALGORITHMS

REPO = Path(__file__).resolve().parents[1]
# Imported by the training code, but they decide no number: errors and file writing, params.yaml's
# checks (a run's settings reach training through resolved/<run>.json), where datasets download from,
# and the package's empty __init__.
NOT_NUMERIC = {"pipeline/__init__.py", "pipeline/errors.py", "pipeline/io.py", "pipeline/config.py", "pipeline/checks.py",
               "pipeline/sources.py", "pipeline/fingerprint.py", "pipeline/stagefiles.py"}


def imported_closure(start: list[Path]) -> set[str]:
    seen, todo = set(), list(start)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo.extend(module_file(name) for name in imported_modules(path))
    return {path.relative_to(REPO).as_posix() for path in seen}


def test_engine_code_is_exactly_what_training_imports_that_decides_numbers():
    algorithm_files = {fingerprint.algorithm_code(name) for name in ALGORITHMS}
    used = imported_closure([REPO / "pipeline/train.py", *(REPO / path for path in algorithm_files)])
    assert "pipeline/path_score.py" in used and "pipeline/algorithms/common.py" in used  # the walk works
    assert set(fingerprint.ENGINE_CODE) == used - NOT_NUMERIC - algorithm_files


def test_dvc_yaml_fingerprint_stage_lists_the_engine_and_train_stages_depend_on_it():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    assert stages["fingerprint"]["deps"] == ["pipeline"]  # the list of engine modules is ENGINE_CODE alone
    assert stages["fingerprint"]["outs"] == [{str(fingerprint.OUTPUT): {"cache": False}}]
    train_deps = yaml.safe_load(stagefiles.stage_text("fedcurv"))["stages"]["train"]["do"]["deps"]
    assert str(fingerprint.OUTPUT) in train_deps
    assert "pipeline/algorithms/${item.algorithm}.py" in train_deps
    assert not [dep for dep in train_deps if dep in fingerprint.ENGINE_CODE]


def copy_engine(root: Path) -> None:
    for path in {*fingerprint.ENGINE_CODE, *(fingerprint.algorithm_code(name) for name in ALGORITHMS)}:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / path, root / path)


def test_one_changed_byte_of_the_engine_or_the_runs_algorithm_changes_the_run_code_digest(tmp_path):
    copy_engine(tmp_path)
    before = {name: fingerprint.run_code_digest(name, tmp_path) for name in ALGORITHMS}
    assert len(set(before.values())) == len(ALGORITHMS)  # each algorithm's runs have their own code
    with open(tmp_path / "pipeline/cohort.py", "a") as handle:
        handle.write("\n")
    after_engine = {name: fingerprint.run_code_digest(name, tmp_path) for name in ALGORITHMS}
    assert all(after_engine[name] != before[name] for name in ALGORITHMS)
    with open(tmp_path / "pipeline/algorithms/fedprox.py", "a") as handle:
        handle.write("\n")
    after_fedprox = {name: fingerprint.run_code_digest(name, tmp_path) for name in ALGORITHMS}
    assert [name for name in ALGORITHMS if after_fedprox[name] != after_engine[name]] == ["fedprox"]


def test_stage_writes_every_engine_module_digest(tmp_path, monkeypatch):
    copy_engine(tmp_path)
    monkeypatch.chdir(tmp_path)
    fingerprint.main()
    written = json.loads((tmp_path / fingerprint.OUTPUT).read_text())
    assert sorted(written["files"]) == sorted(fingerprint.ENGINE_CODE)
    import hashlib  # an independent digest of one file
    assert written["files"]["pipeline/rounds.py"] == hashlib.sha256((REPO / "pipeline/rounds.py").read_bytes()).hexdigest()
    with open(tmp_path / "pipeline/losses.py", "a") as handle:
        handle.write("# changed\n")
    fingerprint.main()
    assert json.loads((tmp_path / fingerprint.OUTPUT).read_text())["sha256"] != written["sha256"]
