"""`python -m pipeline.train RUN [--seed S]` refuses, in one line and before it reads or writes anything, what
no train stage has: a run that does not exist in the profile, a seed the run does not list, a bad runtime
option, a resolved file that is missing, cut short or lacks a setting, a working directory that is not the
repository's root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline import config
from pipeline.train import main as train_main
from support.helpers import smallest_valid_run

REPO = Path(__file__).resolve().parents[2]
RUN = smallest_valid_run()
PARAMS = {
    "profile": "default",
    "datasets": {"mnist": {"train_size": 60, "test_size": 20}},
    "partitions": {"p": {"dataset": "mnist", "scheme": "iid", "clients": 3, "seed": 0}},
    "runs": {
        "fedcurv_e10_fedavg": {**RUN, "seeds": [0, 2], "scaled": {"seeds": [0, 1, 2]}},
        "fedcurv_e10_fedcurv": RUN,
        "paper_only": {**RUN, "profiles": ["paper"]},
    },
}


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """params.yaml, dvc.yaml and the grid.yaml `python -m pipeline.profile` writes; nothing resolved."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(PARAMS, sort_keys=False))
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    grid = config.derive_grid(config.load_params(tmp_path / "params.yaml"))
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump({"grid": grid}, sort_keys=True))
    return tmp_path


def resolve(project: Path, run: str, **changes) -> Path:
    from pipeline.runs import resolve_run

    settings = {k: v for k, v in resolve_run(config.load_params(project / "params.yaml"), run).items() if k != "note"}
    settings.update(changes)
    path = project / "resolved" / f"{run}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(settings))
    return path


def train(capsys, *args: str) -> str:
    """The one stderr line of a refused train command (exit 2, no traceback, nothing written)."""
    with pytest.raises(SystemExit) as exit_:
        train_main(list(args))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert not Path("reports").exists() and not Path("data").exists() and not Path(".checkpoints").exists()
    return lines[0]


def test_a_seed_the_run_does_not_list_is_refused_naming_the_run_seeds(project, capsys):
    resolve(project, "fedcurv_e10_fedavg")
    line = train(capsys, "fedcurv_e10_fedavg", "--seed", "7")
    assert line == (
        "error: --seed 7: not a seed of run fedcurv_e10_fedavg (its seeds: 0, 1, 2, resolved/fedcurv_e10_fedavg.json)"
    )


def test_a_run_that_does_not_exist_is_no_run_named_with_the_close_matches(project, capsys):
    line = train(capsys, "fedcurv_e10_fedavgg")
    assert line == (
        "error: runs.fedcurv_e10_fedavgg: no run named 'fedcurv_e10_fedavgg' in profile default "
        "(grid.yaml); did you mean 'fedcurv_e10_fedavg', 'fedcurv_e10_fedcurv'?"
    )
    line = train(capsys, "zzz")
    assert line.endswith(
        "no run named 'zzz' in profile default (grid.yaml); allowed: the keys of `runs` in params.yaml"
    )


def test_a_run_of_the_other_profile_only_is_not_a_run_of_this_one(project, capsys):
    assert "no run named 'paper_only' in profile default" in train(capsys, "paper_only")


def test_a_run_not_resolved_yet_says_which_stage_to_run(project, capsys):
    line = train(capsys, "fedcurv_e10_fedavg")
    assert "resolved/fedcurv_e10_fedavg.json" in line and "dvc repro resolve" in line


def test_a_resolved_file_cut_short_or_missing_a_setting_is_one_line(project, capsys):
    path = resolve(project, "fedcurv_e10_fedavg")
    path.write_text(path.read_text()[:40])
    line = train(capsys, "fedcurv_e10_fedavg")
    assert (
        line.startswith("error: resolved/fedcurv_e10_fedavg.json: not readable JSON (") and "dvc repro resolve" in line
    )
    settings = json.loads(resolve(project, "fedcurv_e10_fedavg").read_text())
    del settings["lr"]
    path.write_text(json.dumps(settings))
    assert train(capsys, "fedcurv_e10_fedavg") == (
        "error: resolved/fedcurv_e10_fedavg.json: missing lr; run `dvc repro resolve` to write it again"
    )
    resolve(project, "fedcurv_e10_fedavg", seeds="all")
    assert "seeds 'all' is not a list of integers" in train(capsys, "fedcurv_e10_fedavg")


def test_outside_the_repository_root_the_command_says_so(project, capsys, monkeypatch):
    (project / "reports").mkdir()
    monkeypatch.chdir(project / "reports")
    with pytest.raises(SystemExit) as exit_:
        train_main(["fedcurv_e10_fedavg"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "not the repository's root" in err and "Traceback" not in err


def test_the_command_refuses_an_unlisted_seed_in_one_line(project):
    resolve(project, "fedcurv_e10_fedcurv")
    env = {**os.environ, "PYTHONPATH": str(REPO), "CI": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.train", "fedcurv_e10_fedcurv", "--seed", "1"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: --seed 1: not a seed of run fedcurv_e10_fedcurv (its seeds: 0, resolved/fedcurv_e10_fedcurv.json)"
    ]


@pytest.mark.parametrize(
    "variable, value, allowed",
    [
        ("FEDFORGET_THREADS", "two", "expected an integer >= 1"),
        ("FEDFORGET_WORKERS", "0", "expected an integer >= 1"),
        ("FEDFORGET_CHUNK", "all", "expected one of mmap, device"),
        ("FEDFORGET_COMPILE", "max", "expected one of off, on, cudagraphs"),
        ("FEDFORGET_FOREACH", "1", "expected one of off, on"),
    ],
)
def test_a_bad_runtime_option_is_refused_before_the_run_is_looked_up(
    project, capsys, monkeypatch, variable, value, allowed
):
    monkeypatch.setenv(variable, value)  # refused ahead of everything: the run here is not even resolved yet
    assert train(capsys, "fedcurv_e10_fedavg") == f"error: {variable}: {value!r} is not allowed; {allowed}"
