"""One run on two processes (torchrun, gloo on CPU): the metrics, curves, probes and final model are
byte-identical to the same run in one process, for FedAvg (C < 1 with example-forgetting events; a
BatchNorm CNN trained one client at a time), FedCurv (per-client store), SCAFFOLD (per-client control
variates), FedNova, FedWAvg (its server step evaluates the gathered local models) and Importance with
RWalk (a per-client trajectory tracker). FEDFORGET_TORCHRUN asking for more processes than a cohort
trains with as many as the cohort has. A rank killed mid-run is named in one line, leaves no outputs, and a
rerun resumes from the checkpoint to the same result. Bad launches (more processes than the cohort,
no rendezvous, options torchrun does not know) are one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from pipeline.distributed import Ranks, positions_of_rank

pytestmark = pytest.mark.e2e

BASE = {
    "paper": "fedcurv",
    "partition": "shards",
    "model": "mlp_200",
    "rounds": 4,
    "client_fraction": 1.0,
    "local_epochs": 1,
    "batch_size": 16,
    "lr": 0.01,
    "momentum": 0.5,
    "seeds": [0],
    "targets": [0.5],
    "probe_rounds": [2, 4],
    "probe_clients": 3,
    "forgettable_every": 2,
    "checkpoint_every": 1,
}
RUNS = {
    "fedavg_events": {**BASE, "client_fraction": 0.5, "example_events": True, "algorithm": {"name": "fedavg"}},
    "fedavg_cnn": {**BASE, "model": "cnn_fedavg_bn", "rounds": 2, "probe_rounds": [2], "algorithm": {"name": "fedavg"}},
    "fedcurv": {**BASE, "algorithm": {"name": "fedcurv", "lambda": 0.1, "sums_over": "latest"}},
    "scaffold": {**BASE, "algorithm": {"name": "scaffold"}},
    "fednova": {**BASE, "algorithm": {"name": "fednova"}},
    "fedwavg": {**BASE, "algorithm": {"name": "fedwavg", "alpha": 0.3, "period": 1}},
    "rwalk": {**BASE, "algorithm": {"name": "importance", "lambda": 10.0, "importance": "rwalk"}},
    "long_fedcurv": {
        **BASE,
        "rounds": 60,
        "local_epochs": 2,
        "checkpoint_every": 2,
        "algorithm": {"name": "fedcurv", "lambda": 0.1, "sums_over": "latest"},
    },
}
PARAMS = {
    "profile": "default",
    "datasets": {"mnist": {"train_size": 300, "test_size": 60}},
    "partitions": {"shards": {"dataset": "mnist", "scheme": "shards", "clients": 6, "shards_per_client": 2, "seed": 0}},
    "runs": {f"fedcurv_{name}": run for name, run in RUNS.items()},
}
TWO = {"FEDFORGET_TORCHRUN": "--nproc-per-node 2"}


def run_dir(root: Path, key: str) -> Path:
    return root / "reports" / "runs" / key / "seed0"


def outputs(root: Path, key: str) -> dict:
    """Every output file of the run except timing.json, and the final model's tensors."""
    folder = run_dir(root, key)
    files = {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "timing.json"
    }
    model = torch.load(root / "data" / "models" / f"{key}-seed0.pt")
    return {"files": files, "model": {k: v.numpy().tobytes() for k, v in model.items()}}


# On the CPU (gloo) whatever the host has: these tests compare CPU bytes, and on a host with one GPU
# NCCL could not start two processes (the GPU tier, tests/test_gpu.py, splits a cohort over GPUs).
ON_THE_CPU = {"FEDFORGET_DEVICE": "cpu"}


def train(repo, key: str, env: dict | None = None, check: bool = True, timeout: float = 300):
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.train", key, "--seed", "0"],
        cwd=repo.root,
        env={**repo.env, **ON_THE_CPU, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def fresh(repo, key: str) -> None:
    shutil.rmtree(repo.root / ".checkpoints", ignore_errors=True)
    shutil.rmtree(run_dir(repo.root, key), ignore_errors=True)
    (repo.root / "data" / "models" / f"{key}-seed0.pt").unlink(missing_ok=True)


@pytest.fixture(scope="module")
def repo(pipeline_repo):
    return pipeline_repo(PARAMS, build=("partition@shards", "resolve"))


def test_ranks_hold_contiguous_balanced_blocks_that_cover_the_cohort():
    for count in range(1, 12):
        for size in range(1, count + 1):
            blocks = [positions_of_rank(count, Ranks(r, size, r)) for r in range(size)]
            assert sum(blocks, []) == list(range(count))  # in rank order, every position once
            assert max(map(len, blocks)) - min(map(len, blocks)) <= 1 and min(map(len, blocks)) >= 1


@pytest.mark.parametrize(
    "name, env",
    [(name, TWO) for name in ("fedavg_events", "fedavg_cnn", "fedcurv", "scaffold", "fednova", "fedwavg", "rwalk")]
    + [("fedavg_events", {"FEDFORGET_TORCHRUN": "--nproc-per-node 4"})],
    ids=lambda value: value if isinstance(value, str) else value["FEDFORGET_TORCHRUN"][-1],
)
def test_several_processes_give_byte_identical_outputs(repo, name, env):
    key = f"fedcurv_{name}"
    fresh(repo, key)
    train(repo, key)
    one = outputs(repo.root, key)
    fresh(repo, key)
    result = train(repo, key, env)
    if env["FEDFORGET_TORCHRUN"].endswith("4"):  # C = 0.5 of 6 clients: three processes, one client each
        assert "note: run fedcurv_fedavg_events trains 3 clients a round: 3 processes, not the 4" in result.stdout
    two = outputs(repo.root, key)
    assert sorted(two["files"]) == sorted(one["files"])
    assert "2" in json.loads(one["files"]["forgetting/rounds.json"])  # the probes ran (on rank 0 only)
    for path in one["files"]:
        assert two["files"][path] == one["files"][path], path
    assert two["model"] == one["model"]
    assert result.stdout.count(f"{key}-seed0: ok") == 1  # rank 0 alone reports


def worker_pids(tag: str) -> dict[int, int]:
    """rank -> pid of the torchrun workers whose environment carries `tag`."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = dict(item.split("=", 1) for item in (proc / "environ").read_text().split("\0") if "=" in item)
        except OSError:
            continue
        if env.get("DISTRIBUTED_TEST_TAG") == tag and "LOCAL_RANK" in env:
            found[int(env["RANK"])] = int(proc.name)
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the ranks through /proc")
def test_a_killed_rank_is_named_leaves_no_outputs_and_the_rerun_resumes_to_the_same_result(repo):
    key = "fedcurv_long_fedcurv"
    fresh(repo, key)
    train(repo, key)
    uninterrupted = outputs(repo.root, key)
    fresh(repo, key)
    tag = f"kill-{os.getpid()}"
    launcher = subprocess.Popen(
        [sys.executable, "-m", "pipeline.train", key, "--seed", "0"],
        cwd=repo.root,
        env={**repo.env, **ON_THE_CPU, **TWO, "DISTRIBUTED_TEST_TAG": tag},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    while not list((repo.root / ".checkpoints").glob(f"{key}-*.pt")) and time.time() < deadline:
        time.sleep(0.2)
    assert list((repo.root / ".checkpoints").glob(f"{key}-*.pt")), "no checkpoint written within 120 s"
    pids = worker_pids(tag)
    assert sorted(pids) == [0, 1]
    os.kill(pids[1], signal.SIGKILL)
    _, stderr = launcher.communicate(timeout=120)
    assert launcher.returncode != 0
    errors = [line for line in stderr.splitlines() if line.startswith("error: torchrun")]
    assert len(errors) == 1 and "rank 1 was killed by SIGKILL" in errors[0], stderr
    assert "Traceback" not in stderr, stderr
    assert not run_dir(repo.root, key).exists() and not (repo.root / "data" / "models" / f"{key}-seed0.pt").exists()
    resumed = train(repo, key, TWO)
    assert "resuming after round" in resumed.stdout
    assert outputs(repo.root, key) == uninterrupted


def test_plain_torchrun_with_more_processes_than_the_cohort_says_so_once(repo):
    """torchrun prints its own report (and traceback) of the failed workers; of ours, one line (local rank 0's)."""
    key = "fedcurv_fedavg_events"
    fresh(repo, key)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "4",
            "-m",
            "pipeline.train",
            key,
            "--seed",
            "0",
        ],
        cwd=repo.root,
        env={**repo.env, **ON_THE_CPU},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    ours = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("error:")]
    assert ours == [
        "error: torchrun: 4 processes exceed run fedcurv_fedavg_events's cohort of 3 clients a round; "
        "allowed: 1 to 3 processes (--nproc-per-node x --nnodes)"
    ]
    assert 'pipeline/train.py", line' not in result.stderr  # torchrun's own traceback only, none of ours
    assert not run_dir(repo.root, key).exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "env, expected",
    [
        (
            {"FEDFORGET_TORCHRUN": "--nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:PORT"},
            "torchrun: 4 processes exceed run fedcurv_fedavg_events's cohort of 3 clients a round; allowed: 1 to 3",
        ),
        (
            {"FEDFORGET_TORCHRUN": "--no-such-option 2"},
            "FEDFORGET_TORCHRUN: '--no-such-option 2' are not torchrun options",
        ),
        (
            {
                "FEDFORGET_TORCHRUN": "--nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:PORT "
                "--rdzv-conf join_timeout=3"
            },
            "torchrun: the rendezvous at 127.0.0.1:",
        ),
        (
            {
                "RANK": "1",
                "WORLD_SIZE": "2",
                "LOCAL_RANK": "0",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": "PORT",
                "FEDFORGET_DIST_TIMEOUT": "3",
            },
            "torch.distributed: rank 1 of 2: the rendezvous at 127.0.0.1:",
        ),
        ({"RANK": "1", "WORLD_SIZE": "2"}, "torch.distributed: rank 1 of 2: the rendezvous at ?:? did not complete"),
    ],
    ids=[
        "more-processes-than-cohort-on-two-nodes",
        "bad-options",
        "second-node-never-comes",
        "nobody-at-rank-0",
        "no-rendezvous-address",
    ],
)
def test_bad_launches_are_one_line_errors_without_outputs(repo, env, expected):
    key = "fedcurv_fedavg_events"
    fresh(repo, key)
    port = str(free_port())
    env = {k: v.replace("PORT", port) for k, v in env.items()}
    result = train(repo, key, env, check=False, timeout=120)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], result.stderr
    assert not run_dir(repo.root, key).exists()
