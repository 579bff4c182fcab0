"""A run killed with SIGKILL mid-way and started again resumes from its last checkpoint and ends with
metrics and curves byte-identical to an uninterrupted run; a changed setting never resumes from a stale
checkpoint; a finished run leaves no round checkpoint but its kept result, so `dvc repro -f` re-renders the
same bytes without training, and with the kept results deleted retrains from round 1."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.e2e

KEY = "long_run"
PARAMS = {
    "profile": "default",
    "datasets": {"mnist": {"train_size": 600, "test_size": 100}},
    "partitions": {
        "shards": {"dataset": "mnist", "scheme": "shards", "clients": 10, "shards_per_client": 2, "seed": 0}
    },
    "runs": {
        KEY: {
            "paper": "fedcurv",
            "partition": "shards",
            "model": "mlp_200",
            "rounds": 150,
            "client_fraction": 0.5,
            "local_epochs": 2,
            "batch_size": 16,
            "lr": 0.05,
            "momentum": 0.5,
            "seeds": [3],
            "targets": [0.5, 0.8],
            "checkpoint_every": 2,
            "probe_rounds": [1, 75, 150],
            "probe_clients": 3,
            "forgettable_every": 10,
            "algorithm": {"name": "fedcurv", "lambda": 0.1, "sums_over": "latest"},
        }
    },
}


def outputs(root) -> dict[str, bytes]:
    folder = root / "reports" / "runs" / KEY / "seed3"
    files = [folder / "metrics.json", folder / "settings.json", folder / "curves.tsv", folder / "test_accuracy.tsv"]
    files += sorted((folder / "forgetting").glob("*.json")) + sorted((folder / "forgetting").glob("*.tsv"))
    return {str(path.relative_to(folder)): path.read_bytes() for path in files}


@pytest.fixture(scope="module")
def repo(pipeline_repo):
    return pipeline_repo(PARAMS, build=("partition@shards", "resolve"))


def train(repo) -> str:
    """Resolve the params (as the resolve stage would), then train the run's one seed."""
    repo.run(sys.executable, "-m", "pipeline.resolve")
    return repo.run(sys.executable, "-m", "pipeline.train", KEY, "--seed", "3", timeout=300)


def checkpoints(root) -> list:
    """The seed's round checkpoints (not its kept result, `*.result.pt`)."""
    folder = root / ".checkpoints"
    found = folder.glob(f"{KEY}-seed3-*.pt") if folder.exists() else []
    return [path for path in found if not path.name.endswith(".result.pt")]


def kept_results(root) -> list:
    folder = root / ".checkpoints"
    return list(folder.glob(f"{KEY}-seed3-*.result.pt")) if folder.exists() else []


def kill_after_a_checkpoint(repo) -> None:
    """Start the run and SIGKILL it once it has written a checkpoint, inside a later round."""
    root = repo.root
    shutil.rmtree(root / "reports" / "runs" / KEY / "seed3", ignore_errors=True)  # as DVC removes a stage's outs
    shutil.rmtree(root / ".checkpoints", ignore_errors=True)  # no kept result: this start trains
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline.train", KEY, "--seed", "3"],
        cwd=root,
        env=repo.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 240
    while time.time() < deadline and not checkpoints(root):
        time.sleep(0.05)
    time.sleep(0.3)  # past the first checkpoint, somewhere inside a later round
    assert process.poll() is None, "the run finished before it could be killed; make it longer"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (root / "reports" / "runs" / KEY / "seed3" / "metrics.json").exists()


def test_a_run_killed_with_sigkill_resumes_to_identical_metrics(repo):
    root = repo.root
    shutil.rmtree(root / ".checkpoints", ignore_errors=True)
    train(repo)
    uninterrupted = outputs(root)
    shutil.rmtree(root / "reports" / "runs" / KEY / "seed3")

    kill_after_a_checkpoint(repo)
    log = train(repo)
    assert "resuming after round" in log
    resumed_after = int(log.split("resuming after round ")[1].split()[0])
    assert 0 < resumed_after < PARAMS["runs"][KEY]["rounds"]
    assert outputs(root) == uninterrupted


def test_a_finished_run_keeps_its_result_so_a_forced_rerun_rerenders_and_without_it_retrains(repo):
    """`dvc repro -f` of a finished stage reruns its command: it takes the seed's kept result (the same
    bytes, no training); with `.checkpoints/` deleted it trains from round 1 (no round checkpoint is left
    behind to resume from) to the same bytes."""
    root = repo.root
    shutil.rmtree(root / ".checkpoints", ignore_errors=True)
    train(repo)
    assert checkpoints(root) == [] and len(kept_results(root)) == 1
    first = outputs(root)
    again = train(repo)
    assert "from its kept result, not trained again" in again and outputs(root) == first
    shutil.rmtree(root / ".checkpoints")
    retrained = train(repo)
    assert "resuming" not in retrained and "kept result" not in retrained
    assert outputs(root) == first


def test_a_changed_setting_does_not_resume_from_a_stale_checkpoint(repo):
    root = repo.root
    kill_after_a_checkpoint(repo)
    assert checkpoints(root)  # one (two, if the kill fell between writing the next and removing the last)
    params = repo.params()
    params["runs"][KEY]["lr"] = 0.02
    params["runs"][KEY]["rounds"] = 4
    params["runs"][KEY]["probe_rounds"] = [1, 4]
    repo.write_params(params)
    log = train(repo)
    assert "resuming" not in log
    assert checkpoints(root) == []  # the stale one was replaced, never reused, and the finished run's removed
    changed = outputs(root)
    train(repo)
    assert outputs(root) == changed


def test_a_diverging_run_is_recorded_as_diverged_and_the_stage_succeeds(repo):
    params = repo.params()
    params["runs"][KEY].update({"lr": 1.0e6, "rounds": 6, "probe_rounds": []})
    repo.write_params(params)
    log = train(repo)  # exit code 0 is asserted by Repo.run
    import json

    metrics = json.loads((repo.root / "reports" / "runs" / KEY / "seed3" / "metrics.json").read_text())
    assert metrics["status"] == "diverged" and metrics["diverged"] == 1
    assert metrics["rounds_completed"] < 6
    assert "diverged" in log


def test_a_saved_model_has_the_same_bytes_whatever_the_file_it_goes_to(tmp_path):
    """DVC hashes the model file: the same tensors written twice (each through its own randomly named
    temporary file) must give the same bytes, or every rerun would record a new model."""
    import torch

    from pipeline.results import save_torch

    state = {"0.weight": torch.arange(6.0).reshape(2, 3), "0.bias": torch.tensor([0.5, -1.0])}
    first, second = tmp_path / "a" / "run-seed0.pt", tmp_path / "b" / "other-seed1.pt"
    for path in (first, second):
        path.parent.mkdir()
        save_torch(state, path)
    assert first.read_bytes() == second.read_bytes()
    loaded = torch.load(second)
    assert loaded.keys() == state.keys() and all(torch.equal(loaded[k], state[k]) for k in state)
    assert [p.name for p in second.parent.iterdir()] == ["other-seed1.pt"]  # no temporary file left
