"""`python -m pipeline.train RUN --seed S` refuses a (run, seed) no train stage has, in one line, before
it reads or writes anything: a seed the run does not list, a run that does not exist (issue 38, part 4).
The pairs are grid.yaml's, the active profile's runs and seeds."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline import config
from pipeline.train import main as train_main

REPO = Path(__file__).resolve().parents[2]
RUN = {"paper": "fedcurv", "partition": "p", "model": "mlp_200", "rounds": 2, "client_fraction": 1.0,
       "local_epochs": 1, "batch_size": 8, "lr": 0.05, "algorithm": {"name": "fedcurv", "lambda": 1.0}}
PARAMS = {"profile": "default", "datasets": {"mnist": {"train_size": 60, "test_size": 20}},
          "partitions": {"p": {"dataset": "mnist", "scheme": "iid", "clients": 3, "seed": 0}},
          "runs": {"fedcurv_e10_fedavg": {**RUN, "seeds": [0, 2], "scaled": {"seeds": [0, 1, 2]}},
                   "fedcurv_e10_fedcurv": RUN,
                   "paper_only": {**RUN, "profiles": ["paper"]}}}


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """params.yaml and the grid.yaml `python -m pipeline.profile` writes from it; nothing resolved."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(PARAMS, sort_keys=False))
    grid = config.derive_grid(config.load_params(tmp_path / "params.yaml"))
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump({"grid": grid}, sort_keys=True))
    return tmp_path


def train(capsys, *args: str) -> str:
    """The one stderr line of a refused train command (exit 2, no traceback, nothing written)."""
    with pytest.raises(SystemExit) as exit_:
        train_main(list(args))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert not Path("reports").exists() and not Path("data").exists()
    return lines[0]


def test_a_seed_the_run_does_not_list_is_refused_naming_the_allowed_seeds(project, capsys):
    line = train(capsys, "fedcurv_e10_fedavg", "--seed", "7")
    assert line == ("error: runs.fedcurv_e10_fedavg: seed 7 is not one of the run's seeds in profile default; "
                    "allowed: 0, 1, 2 (to add one, list it in the run's seeds in params.yaml and run "
                    "`python -m pipeline.profile`)")


def test_a_run_that_does_not_exist_is_no_run_named_with_the_close_matches(project, capsys):
    line = train(capsys, "fedcurv_e10_fedavgg", "--seed", "0")
    assert line == ("error: runs.fedcurv_e10_fedavgg: no run named 'fedcurv_e10_fedavgg' in profile default "
                    "(grid.yaml); did you mean 'fedcurv_e10_fedavg', 'fedcurv_e10_fedcurv'?")
    assert "not written yet" not in line
    line = train(capsys, "zzz", "--seed", "0")
    assert line.endswith("no run named 'zzz' in profile default (grid.yaml); allowed: the keys of `runs` in "
                         "params.yaml")


def test_a_run_of_the_other_profile_only_is_not_a_run_of_this_one(project, capsys):
    assert "no run named 'paper_only' in profile default" in train(capsys, "paper_only", "--seed", "0")


def test_a_listed_seed_of_a_run_not_resolved_yet_still_says_which_stage_to_run(project, capsys):
    line = train(capsys, "fedcurv_e10_fedavg", "--seed", "1")
    assert "resolved/fedcurv_e10_fedavg.json" in line and "dvc repro resolve" in line


def test_the_command_refuses_an_unlisted_seed_in_one_line(project):
    env = {**os.environ, "PYTHONPATH": str(REPO), "CI": "1"}
    result = subprocess.run([sys.executable, "-m", "pipeline.train", "fedcurv_e10_fedcurv", "--seed", "1"],
                            cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        ("error: runs.fedcurv_e10_fedcurv: seed 1 is not one of the run's seeds in profile default; allowed: 0 "
         "(to add one, list it in the run's seeds in params.yaml and run `python -m pipeline.profile`)")]


@pytest.mark.parametrize("variable, value, allowed", [
    ("FEDFORGET_THREADS", "two", "expected an integer >= 1"), ("FEDFORGET_CHUNK", "all", "expected mmap or device"),
    ("FEDFORGET_COMPILE", "max", "expected off, on, cudagraphs"), ("FEDFORGET_FOREACH", "1", "expected off or on")])
def test_a_bad_speed_setting_is_refused_before_the_run_is_looked_up(project, capsys, monkeypatch, variable, value,
                                                                    allowed):
    # refused ahead of everything: the run here is not even resolved yet
    monkeypatch.setenv(variable, value)
    assert train(capsys, "fedcurv_e10_fedavg", "--seed", "1") == f"error: {variable}: {value!r} is not allowed; {allowed}"
