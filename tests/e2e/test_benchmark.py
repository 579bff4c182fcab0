"""Smoke test of the speed benchmark: `python -m benchmarks.speed --quick` runs on tiny synthetic sizes,
writes its JSON and markdown, gives every implementation a time or a named skip, and its ratios, rates
and FLOP counts agree with its times and with a hand count. No timing is asserted.

Two runs, side by side: every workload with flwr made unimportable (a `flwr` package on PYTHONPATH that
raises ImportError: the path of a machine without the `bench` extra), and, where flwr is installed,
workload 1 with Flower's simulation engine really running."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # the benchmark's runs, as subprocesses

REPO = Path(__file__).resolve().parents[2]
HAS_FLOWER = all(importlib.util.find_spec(name) is not None for name in ("flwr", "ray"))
FLOWER_MISSING = "skipped: flwr not installed (pip install -e .[bench])"

# Tiny sizes: 8x8x1 images, 10 classes, 20 clients of 2 shards of 8 samples; workload 1 samples 2 clients
# (C = 0.1) for 1 epoch. mlp_200 is 64-200-10: 2 FLOPs per multiply-add, a step = 3 forward passes.
TINY_MLP_STEP_FLOPS = 3 * 2 * (64 * 200 + 200 * 10)  # 88,800
TINY_W1_ROUND_FLOPS = 2 * 16 * 1 * TINY_MLP_STEP_FLOPS  # 2,841,600
# cnn_mnist on 8x8x1: conv 1->32 3x3 (6x6 out), conv 32->64 3x3 (4x4 out), pool, fc 256->128, fc 128->10.
TINY_CNN_STEP_FLOPS = 3 * 2 * (6 * 6 * 9 * 1 * 32 + 4 * 4 * 9 * 32 * 64 + 256 * 128 + 128 * 10)


def start(out: Path, args: list[str], env: dict) -> subprocess.Popen:
    # One thread each: the two runs share the machine, and an OpenMP pool of 2 threads on a busy core
    # waits a scheduler slice at every parallel op (tiny rounds took 20x longer under load).
    env = {**env, "OMP_NUM_THREADS": "1"}
    # A session of its own, so that a hung run is killed with every process it started (Ray's too).
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.speed", "--quick", "--out", str(out), *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish(name: str, process: subprocess.Popen) -> tuple[str, str]:
    try:
        stdout, stderr = process.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"{name}: still running after 240 s, killed\n{stderr[-3000:]}")
    assert process.returncode == 0, f"{name}: exit {process.returncode}\n{stderr[-3000:]}"
    return stdout, stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """name -> (completed process, JSON report, markdown) of the benchmark runs."""
    root = tmp_path_factory.mktemp("bench")
    shim = root / "shim" / "flwr"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('raise ImportError("hidden by tests/test_benchmark.py")\n')
    hidden = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim.parent), os.environ.get("PYTHONPATH", "")])}
    processes = {"no_flower": start(root / "no_flower", ["--repeats", "2"], hidden)}
    if HAS_FLOWER:
        processes["flower"] = start(root / "flower", ["--workloads", "1", "--repeats", "1"], dict(os.environ))
    results = {}
    for name, process in processes.items():
        stdout, _ = finish(name, process)
        out = root / name
        results[name] = (stdout, json.loads((out / "speed.json").read_text()), (out / "speed.md").read_text())
    return results


def implementations(report: dict):
    for number, workload in report["workloads"].items():
        for key, entry in workload["implementations"].items():
            yield number, workload, key, entry


def test_writes_json_and_markdown_for_every_workload(runs):
    stdout, report, markdown = runs["no_flower"]
    assert sorted(report["workloads"], key=int) == ["1", "2", "3", "4", "5", "6", "7", "8"]
    assert report["sizes"] == "tiny" and report["repeats"] == 2
    assert {"cpu", "logical_cores", "torch", "torch_threads", "device"} <= set(report["machine"])
    assert report["matmul"]["flops_per_second"] > 0
    for number in report["workloads"]:
        assert f"## Workload {number}:" in markdown
    assert "## Targets" in markdown and markdown.strip() in stdout


def test_every_implementation_has_a_time_or_a_named_skip(runs):
    for stdout, report, _ in runs.values():
        for number, workload, key, entry in implementations(report):
            if "skipped" in entry:
                assert entry["skipped"].startswith("skipped: "), (number, key)
                continue
            assert len(entry["seconds_per_round_repeats"]) == report["repeats"], (number, key)
            for seconds in entry["seconds_per_round_repeats"] + [entry["seconds_per_round"]]:
                assert math.isfinite(seconds) and seconds > 0, (number, key)


def test_ratios_and_rates_follow_from_the_times(runs):
    for stdout, report, _ in runs.values():
        matmul = report["matmul"]["flops_per_second"]
        for number, workload, key, entry in implementations(report):
            if "skipped" in entry:
                continue
            seconds = entry["seconds_per_round"]
            base = workload["implementations"][workload["baseline"]]["seconds_per_round"]
            assert seconds == pytest.approx(statistics.median(entry["seconds_per_round_repeats"]), rel=1e-12)
            assert entry["time_over_baseline"] == pytest.approx(seconds / base, rel=1e-9)
            assert entry["rate_over_baseline"] == pytest.approx(base / seconds, rel=1e-9)
            assert entry["rounds_per_second"] == pytest.approx(1 / seconds, rel=1e-9)
            assert entry["flops_per_second"] == pytest.approx(workload["flops_per_round"] / seconds, rel=1e-9)
            assert entry["fraction_of_matmul"] == pytest.approx(entry["flops_per_second"] / matmul, rel=1e-9)


def test_flop_counts_are_the_analytic_ones(runs):
    workloads = runs["no_flower"][1]["workloads"]
    assert workloads["1"]["flops_per_sample_step"] == TINY_MLP_STEP_FLOPS == 88_800
    assert workloads["1"]["samples_per_round"] == 32
    assert workloads["1"]["flops_per_round"] == TINY_W1_ROUND_FLOPS == 2_841_600
    assert workloads["2"]["flops_per_round"] == 5 * TINY_W1_ROUND_FLOPS  # E = 5
    assert workloads["3"]["flops_per_sample_step"] == TINY_CNN_STEP_FLOPS
    assert workloads["3"]["reduction"] and workloads["3"]["full_round_scale"] == 5  # 4 of 20 clients
    # The shallow ResNet on 8x8x3 images, the TCE and McMahan CNNs: the workloads of issue 17
    assert workloads["6"]["model"] == "resnet_shallow" and workloads["6"]["clients_per_round"] == 4
    assert workloads["7"]["clients_per_round"] == 2 and workloads["8"]["clients_per_round"] == 4


def test_every_registered_algorithm_is_timed_against_fedavg(runs):
    from pipeline.algorithms import names

    workload = runs["no_flower"][1]["workloads"]["5"]
    assert workload["baseline"] == "fedavg"
    assert sorted(workload["implementations"]) == sorted([*names(), "tce"])  # TCE is a loss, timed with FedAvg


def test_without_flwr_flower_is_a_named_skip(runs):
    workloads = runs["no_flower"][1]["workloads"]
    for number in "123678":
        assert workloads[number]["implementations"]["flower"]["skipped"] == FLOWER_MISSING
    assert FLOWER_MISSING in runs["no_flower"][2]


@pytest.mark.skipif(not HAS_FLOWER, reason="flwr[simulation] not installed (pip install -e .[bench])")
def test_flower_runs_when_installed(runs):
    entry = runs["flower"][1]["workloads"]["1"]["implementations"]["flower"]
    assert "skipped" not in entry and entry["seconds_per_round"] > 0


def test_targets_are_listed_with_pass_or_miss(runs):
    report = runs["no_flower"][1]
    rows = {row["what"]: row for row in report["targets"]}
    assert rows["workload 1: (a) engine vs (e) Flower, speed-up"]["note"] == FLOWER_MISSING
    for row in report["targets"]:
        if row["measured"] is None:
            assert row["passed"] is None and row["note"]
        else:
            op, bound = row["required"].split()
            assert row["passed"] == (row["measured"] >= float(bound) if op == ">=" else row["measured"] <= float(bound))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--workloads", "1,9"], "error: --workloads: '1,9' is not allowed"),
        (["--repeats", "0"], "error: --repeats: 0 is not allowed"),
        (["--device", "tpu"], "error: argument --device: invalid choice"),
        (["--data", "/nonexistent/mnist.npz"], "error: --data /nonexistent/mnist.npz: file not found"),
    ],
)
def test_user_mistakes_are_one_line_errors(args, message, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(REPO))
    from benchmarks import speed

    with pytest.raises(SystemExit) as exit_info:
        speed.main(args)
    assert exit_info.value.code == 2
    stderr = capsys.readouterr().err.strip()
    assert stderr.startswith(message) and "\n" not in stderr


def test_the_careful_loop_trains_tce_on_the_clients_own_classes_with_adam(monkeypatch):
    """Loop (c)'s TCE: the logits of classes a client lacks get no gradient, so with plain SGD their
    output biases do not move; with Adam the loop's optimiser is torch.optim.Adam."""
    monkeypatch.syspath_prepend(str(REPO))
    import torch
    from torch import nn

    from benchmarks.loops import client_optimizer, local_training

    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 5))
    x, y = torch.randn(8, 12), torch.tensor([0, 2, 2, 0, 2, 0, 0, 2])
    keep = torch.tensor([True, False, True, False, False])
    before = model[1].bias.detach().clone()
    local_training(model, lambda: [(x, y)], {"local_epochs": 1, "lr": 0.5}, keep)
    moved = (model[1].bias.detach() != before).tolist()
    assert moved == [True, False, True, False, False]
    assert isinstance(client_optimizer(model, {"optimizer": "adam", "lr": 0.1}), torch.optim.Adam)


def test_every_engine_implementation_has_a_profile_of_one_round(runs):
    """The profile that explains a missed target: one more round of each engine path under cProfile, its
    top functions by own time, whose shares of that round cannot add up to more than all of it."""
    _, report, markdown = runs["no_flower"]
    for number, workload in report["workloads"].items():
        ran = [key for key, entry in workload["implementations"].items() if "skipped" not in entry]
        engine = [key for key in ran if key.startswith("engine")]
        expected = ran if number in ("4", "5") else engine
        assert sorted(workload["profiles"]) == sorted(expected), number
        for key, profile in workload["profiles"].items():
            assert 0 < len(profile["top"]) <= 6 and profile["seconds"] > 0, (number, key)
            shares = [row["share"] for row in profile["top"]]
            assert shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 1.0, (number, key)
            assert all(row["calls"] >= 1 and row["function"] for row in profile["top"]), (number, key)
    assert markdown.count("Where one more round goes") == len(report["workloads"])
