"""The GPU tier (`pytest -m gpu`, run by scripts/gpu-check.sh; skipped where CUDA is not available):
what tests/e2e/test_device.py checks on its CPU stand-in, on CUDA itself, and what only a GPU can show.

- every algorithm on both paths for one round, with the server state asserted on the GPU and no host
  sync inside the training steps (torch.cuda.set_sync_debug_mode counts them);
- CUDA and the CPU agree in float64 (models without random draws: a GPU draws other dropout masks);
- dropout masks and crop-and-flip draws, keyed by (seed, round, client), do not depend on the chunking, and
  the device-memory chunk rule (FEDFORGET_CHUNK=device: Levers(chunk="device")) stacks a small cohort whole
  with the same float64 round;
- vmap's evaluation of stacked BatchNorm models matches evaluating them one at a time;
- a run killed after a checkpoint resumes to the uninterrupted run's state;
- two processes share one GPU over gloo and give one process's numbers; over NCCL they need a GPU
  each (skipped with fewer than two), and asking for more is one line naming the override;
- FEDFORGET_DETERMINISTIC's kernels train AdaptiveAvgPool2d models, where the strict setting stops them;
- the compiled step (FEDFORGET_COMPILE, both modes: Levers(compile=...)) agrees with the eager one in
  float64 and, once compiled, makes no host sync;
- the optimiser's multi-tensor step (FEDFORGET_FOREACH: Levers(foreach=True)) gives its loop's bits on CUDA.

The runtime options reach the engine as arguments (pipeline.options.RuntimeOptions, read once from the
environment): the speed levers as run_round's `levers`, the backend and the device as RuntimeOptions
fields; tests/support/round_driver.py reads them from its environment as a train stage does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path
from unittest import mock

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

import pipeline.rounds
from pipeline import launch
from pipeline.cohort import AugmentDraws, DropoutDraws, Levers
from pipeline.errors import UserError
from pipeline.metrics import cohort_correct_on_own, cohort_correct_on_shared, correct_predictions
from pipeline.models import build_model
from pipeline.options import DEVICE, DIST_BACKEND, RuntimeOptions
from support.device_cases import CASES, SETUPS, SIZES, case_id, device_leaves, on, round_on
from support.helpers import finished, lines_until
from support.synthetic import make_data

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
REPO = Path(__file__).resolve().parents[2]
CUDA = torch.device("cuda")


def gpus() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@contextlib.contextmanager
def syncs_in_training(found: list):
    """Every host sync CUDA reports inside train_vectorized / train_sequential, appended to `found`."""
    stack = contextlib.ExitStack()
    for name in ("train_vectorized", "train_sequential"):
        real = getattr(pipeline.rounds, name)

        def watched(*args, real=real, **kwargs):
            torch.cuda.synchronize()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn")
                try:
                    return real(*args, **kwargs)
                finally:
                    torch.cuda.set_sync_debug_mode("default")
                    found.extend(
                        str(w.message)
                        for w in caught
                        if "synchroniz" in str(w.message) and "prototype feature" not in str(w.message)
                    )  # the mode's own notice

        stack.enter_context(mock.patch.object(pipeline.rounds, name, watched))
    with stack:
        yield


@pytest.mark.parametrize("vectorized", [True, False], ids=["vectorized", "sequential"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_a_round_of_every_algorithm_runs_on_cuda_without_syncs_in_its_steps(case, vectorized):
    setup, name, hp = case
    found: list = []
    with syncs_in_training(found):
        state, losses = round_on(CUDA, setup, name, hp, vectorized)
    off = [path for path, value in device_leaves(state) if value.device.type != "cuda"]
    assert not off, f"server state tensors off the GPU: {off}"
    assert all(torch.isfinite(torch.tensor(losses)))
    assert not found, found[:5]


AGREEING = [
    ("mlp_sgd", "fedcurv", {}),
    ("mlp_adam", "scaffold", {}),
    ("augmented_gn", "fedavg", {}),
    ("batch_norm", "fedavg", {}),
]


@pytest.mark.parametrize("vectorized", [True, False], ids=["vectorized", "sequential"])
@pytest.mark.parametrize("setup, name, hp", AGREEING, ids=[f"{s}-{n}" for s, n, _ in AGREEING])
def test_cuda_agrees_with_the_cpu_in_float64(setup, name, hp, vectorized):
    """Two rounds in float64 (no TF32 there), on models whose rounds draw nothing on the device (a GPU
    draws other crop-and-flip offsets than the CPU: the augmented setup trains without them here)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with mock.patch.dict(
            SETUPS, {setup: (SETUPS[setup][0], SETUPS[setup][1], {**SETUPS[setup][2], "augment": "none"})}
        ):
            cuda_state, cuda_losses = round_on(CUDA, setup, name, hp, vectorized, rounds=2, dtype=torch.float64)
            cpu_state, cpu_losses = round_on(
                torch.device("cpu"), setup, name, hp, vectorized, rounds=2, dtype=torch.float64
            )
    finally:
        torch.set_default_dtype(previous)
    assert cuda_losses == pytest.approx(cpu_losses, rel=1e-9)
    theirs = dict(device_leaves(cpu_state))
    for path, value in device_leaves(cuda_state):
        if value.dtype.is_floating_point:
            torch.testing.assert_close(value.cpu(), theirs[path], rtol=1e-8, atol=1e-10, msg=path)
        else:
            assert torch.equal(value.cpu(), theirs[path]), path


def test_keyed_draws_do_not_depend_on_the_chunking():
    model = build_model("cnn_mnist", (8, 8, 1), 3, 0).to(CUDA)
    example = torch.zeros(1, 1, 8, 8, device=CUDA)
    whole = DropoutDraws(model, [0, 1, 2, 3], 7, 2, 4, example)
    chunk = DropoutDraws(model, [2, 3], 7, 2, 4, example)
    fill = torch.zeros(3, device=CUDA)
    augment_whole, augment_chunk = AugmentDraws([0, 1, 2, 3], 7, 2, 4, fill), AugmentDraws([2, 3], 7, 2, 4, fill)
    for _ in range(3):  # step by step, the streams stay in step
        a, b = whole.stacked([True] * 4), chunk.stacked([True, True])
        assert all(torch.equal(a[name][2:], b[name]) for name in a)
        assert all(m.device.type == CUDA.type for m in a.values())
        assert torch.equal(augment_whole.draws(3), augment_chunk.draws(1))
    # a round in float64, so that the kernels' choices by batch shape (TF32 convolutions in float32) do not
    # hide a difference in the draws
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        cut, uncut = (
            round_on(CUDA, "dropout_cnn", "fedavg", {}, True, max_chunk=size, dtype=torch.float64)[0] for size in (1, 4)
        )
    finally:
        torch.set_default_dtype(previous)
    for (path, left), (_, right) in zip(device_leaves(cut), device_leaves(uncut)):
        torch.testing.assert_close(left, right, rtol=1e-9, atol=1e-12, msg=path)


def test_the_device_chunk_rule_stacks_the_whole_cohort_and_agrees_in_float64(monkeypatch):
    # FEDFORGET_CHUNK=device (Levers(chunk="device")) on a real GPU: the round asks the rule (spied on) and
    # stacks the small cohort whole, and the round (float64, so that kernel choices by shape do not hide a
    # difference) equals one trained a client at a time.
    device_chunk = Levers(chunk="device")
    chosen = []

    def spy(*args):
        chosen.append(chunk_for_round(*args))
        return chosen[-1]

    chunk_for_round = pipeline.rounds.chunk_for_round
    monkeypatch.setattr(pipeline.rounds, "chunk_for_round", spy)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        device_rule = round_on(
            CUDA, "dropout_cnn", "fedavg", {}, True, max_chunk=None, dtype=torch.float64, levers=device_chunk
        )[0]
        one_at_a_time = round_on(
            CUDA, "dropout_cnn", "fedavg", {}, True, max_chunk=1, dtype=torch.float64, levers=device_chunk
        )[0]
    finally:
        torch.set_default_dtype(previous)
    assert len(chosen) == 1 and chosen[0] >= len(SIZES)  # asked once (max_chunk=1 skips the rule)
    for (path, left), (_, right) in zip(device_leaves(device_rule), device_leaves(one_at_a_time)):
        torch.testing.assert_close(left, right, rtol=1e-9, atol=1e-12, msg=path)


@pytest.mark.parametrize("model_name, shape", [("cnn_fedavg_bn", (8, 8, 3)), ("resnet_shallow_small", (16, 16, 3))])
def test_vmap_evaluation_of_batch_norm_models_matches_one_model_at_a_time(model_name, shape):
    data = on(make_data([40, 30], shape=shape, classes=3, seed=3), CUDA)
    models = []
    for seed in range(3):
        model = build_model(model_name, shape, 3, seed).to(CUDA)
        with torch.no_grad():  # running statistics unlike the initial ones, so that they matter
            for name, buffer in model.named_buffers():
                if name.endswith("running_mean"):
                    buffer.normal_(0, 0.3)
                elif name.endswith("running_var"):
                    buffer.uniform_(0.5, 2.0)
        models.append({**dict(model.named_parameters()), **dict(model.named_buffers())})
    stacked = {
        name: torch.stack([m[name].detach() for m in models])
        for name in models[0]
        if not name.endswith((".mask", ".present"))
    }
    index = torch.arange(len(data.y), device=CUDA)
    one_at_a_time = torch.stack(
        [
            correct_predictions(
                model, {k: v.detach() for k, v in m.items() if not k.endswith((".mask", ".present"))}, data, index
            )
            for m in models
        ]
    )
    assert torch.equal(cohort_correct_on_shared(model, stacked, data, index), one_at_a_time)
    own, valid = cohort_correct_on_own(model, stacked, data, [index, index[:10], index[5:]])
    assert torch.equal(own[0], one_at_a_time[0]) and torch.equal(own[1, :10], one_at_a_time[1, :10])
    assert int(valid.sum()) == len(index) + 10 + len(index) - 5


def driver(out: Path, *args: str, env: dict | None = None, launcher: list[str] | None = None) -> subprocess.Popen:
    command = [
        *(launcher or [sys.executable]),
        str(REPO / "tests" / "support" / "round_driver.py"),
        str(out),
        "--device",
        "cuda",
        "--rounds",
        "3",
        *args,
    ]
    return subprocess.Popen(
        command,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def assert_same_state(left: dict, right: dict) -> None:
    for (path, a), (_, b) in zip(device_leaves(left), device_leaves(right)):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=path)


def test_a_killed_run_resumes_on_cuda(tmp_path):
    finished(driver(tmp_path / "whole.pt"))
    killed = driver(tmp_path / "resumed.pt", "--checkpoint", str(tmp_path / "ck.pt"), "--hang-after", "2")
    assert "checkpointed 2" in lines_until(killed, "checkpointed 2")
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    finished(driver(tmp_path / "resumed.pt", "--checkpoint", str(tmp_path / "ck.pt")))
    assert_same_state(*(torch.load(tmp_path / name, weights_only=False) for name in ("whole.pt", "resumed.pt")))


TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]


def test_two_processes_share_one_gpu_over_gloo_with_one_process_numbers(tmp_path):
    """The ranks gather their clients onto the server state's device (the sequential path's losses are
    summed there too): what crashed when they went to a CPU loss's device."""
    finished(driver(tmp_path / "one.pt"))
    finished(driver(tmp_path / "two.pt", env={DIST_BACKEND: "gloo"}, launcher=TORCHRUN))
    assert_same_state(*(torch.load(tmp_path / name, weights_only=False) for name in ("one.pt", "two.pt")))


@pytest.mark.skipif(gpus() < 2, reason="NCCL needs a GPU per process: fewer than 2 here")
def test_two_processes_over_nccl_give_one_process_numbers(tmp_path):
    finished(driver(tmp_path / "one.pt"))
    finished(driver(tmp_path / "two.pt", env={DIST_BACKEND: "nccl"}, launcher=TORCHRUN))
    assert_same_state(*(torch.load(tmp_path / name, weights_only=False) for name in ("one.pt", "two.pt")))


def test_more_nccl_processes_than_gpus_is_one_line(monkeypatch):
    monkeypatch.delenv(DIST_BACKEND, raising=False)
    monkeypatch.delenv(DEVICE, raising=False)
    with pytest.raises(UserError) as raised:
        launch.fit_launch(f"--nproc-per-node {gpus() + 1}", 64, "some_run", RuntimeOptions.from_environment())
    assert "\n" not in str(raised.value) and "FEDFORGET_DIST_BACKEND=gloo" in str(raised.value)


DETERMINISTIC = """
import torch, sys
from pipeline.models import build_model
name, shape = sys.argv[2], tuple(int(side) for side in sys.argv[3].split("x"))
model = build_model(name, shape, 3, 0).cuda()
x = torch.randn(4, shape[2], shape[0], shape[1], device="cuda")
if sys.argv[1] == "strict":
    torch.use_deterministic_algorithms(True)
else:
    from pipeline import distributed
    distributed.use_deterministic_kernels()
try:
    model(x).sum().backward()
    print("trained")
except RuntimeError as error:
    print("stopped:", str(error).splitlines()[0])
"""


@pytest.mark.parametrize(
    "name, shape", [("resnet_shallow_small", "16x16x3"), ("resnet18", "32x32x3"), ("densenet121", "28x28x1")]
)
def test_deterministic_kernels_train_adaptive_pooling_models(name, shape):
    """In fresh processes: the flags are global, and cuBLAS reads its workspace setting at start. The
    strict setting is recorded (a warning in the log), not asserted: which torch versions have a
    deterministic CUDA backward for these models' global pooling varies (torch 2.11 on an H200 trained
    them under it)."""

    def outcome(mode: str) -> str:
        result = subprocess.run(
            [sys.executable, "-c", DETERMINISTIC, mode, name, shape],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
        )
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout.strip().splitlines()[-1]

    assert outcome("warn_only") == "trained"
    strict = outcome("strict")
    assert strict == "trained" or "adaptive_avg_pool2d_backward_cuda" in strict, strict
    warnings.warn(f"{name}: torch {torch.__version__} strict deterministic setting: {strict}")


@pytest.mark.parametrize("mode", ["on", "cudagraphs"])
def test_a_compiled_round_on_cuda_agrees_with_the_eager_round_in_float64(mode):
    # dropout masks drawn on the device (keyed, the same eager or compiled) and a momentum buffer
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        eager, eager_losses = round_on(
            CUDA, "dropout_cnn", "fedavg", {}, True, rounds=2, dtype=torch.float64, levers=Levers(compile="off")
        )
        torch._dynamo.reset()
        counters.clear()
        compiled, compiled_losses = round_on(
            CUDA, "dropout_cnn", "fedavg", {}, True, rounds=2, dtype=torch.float64, levers=Levers(compile=mode)
        )
        graphs = counters["stats"]["unique_graphs"]
    finally:
        torch.set_default_dtype(previous)
        torch._dynamo.reset()
    assert graphs >= 1, "nothing was compiled"
    assert compiled_losses == pytest.approx(eager_losses, rel=1e-9)
    theirs = dict(device_leaves(eager))
    ours = dict(device_leaves(compiled))
    assert ours.keys() == theirs.keys()
    for path, value in ours.items():
        torch.testing.assert_close(value, theirs[path], rtol=1e-9, atol=1e-12, msg=path)


def test_a_compiled_round_on_cuda_makes_no_host_sync_once_compiled():
    # mode `on`: CUDA graphs' first replays record the graphs, which may wait on the device
    compiled = Levers(compile="on")
    found: list = []
    try:
        round_on(CUDA, "dropout_cnn", "fedavg", {}, True, levers=compiled)  # compiles
        with syncs_in_training(found):
            round_on(CUDA, "dropout_cnn", "fedavg", {}, True, levers=compiled)  # the same graphs, guards passed
    finally:
        torch._dynamo.reset()
    assert not found, found[:5]


@pytest.mark.parametrize(
    "setup, vectorized",
    [("batch_norm", False), ("dropout_cnn", True)],
    ids=["adam-sequential", "sgd-momentum-vectorized"],
)
def test_the_foreach_optimizer_on_cuda_gives_its_loops_bits(setup, vectorized):
    # in float32, bit for bit: the multi-tensor kernels do the loop's arithmetic, its division by a
    # scalar included (a multiplication by the reciprocal on CUDA, pipeline.optimizers.divide_by_scalar_)
    loop, loop_losses = round_on(CUDA, setup, "fedavg", {}, vectorized, rounds=2, levers=Levers(foreach=False))
    multi, multi_losses = round_on(CUDA, setup, "fedavg", {}, vectorized, rounds=2, levers=Levers(foreach=True))
    assert multi_losses == loop_losses
    theirs = dict(device_leaves(loop))
    ours = dict(device_leaves(multi))
    assert ours.keys() == theirs.keys()
    for path, value in ours.items():
        assert torch.equal(value, theirs[path]), path
