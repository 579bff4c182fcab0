"""The engine on a GPU, checked on this CPU: every algorithm on both paths keeps a round's tensors on the
device and reads nothing back from it during the training steps (tests/support/device_standin.py stands in
for the GPU; tests/gpu/test_gpu.py runs the same on CUDA where there is one), and each crash path a review
found for CUDA stays fixed: SCAFFOLD's and RWalk's trackers meeting a CPU `active`, torchrun's gathered
results sent to a CPU loss's device, FedCurv's Σ F·θ² and empty evaluations made on the CPU, the
determinism advice that stopped AdaptiveAvgPool2d models, NCCL chosen for two processes on one GPU.
The numbers on the stand-in device are the CPU's, bit for bit: the stand-in computes with CPU kernels,
so any difference would be the engine doing something else on a device."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from unittest import mock

import pytest
import torch

import pipeline.rounds
from pipeline import distributed, launch, outputs
from pipeline.algorithms import get_algorithm, resolve_hyperparams
from pipeline.clientdata import ClientData
from pipeline.distributed import Ranks
from pipeline.errors import UserError
from pipeline.metrics import cohort_correct_on_own, cohort_correct_on_shared, correct_predictions
from pipeline.models import build_model
from pipeline.optimizers import Adam
from pipeline.options import DETERMINISTIC, DIST_BACKEND, RuntimeOptions
from pipeline.options import DEVICE as DEVICE_VARIABLE
from pipeline.rounds import initial_state, run_round
from support.algorithms import fedcurv
from support.device_cases import CASES, RWALK, SETUPS, SIZES, case_id, device_leaves
from support.device_standin import DEVICE, OnDevice, host_tensors, off_device, on_device, stand_in_device
from support.helpers import finished, lines_until
from support.synthetic import make_data, run_settings

REPO = Path(__file__).resolve().parents[2]


def cpu_data(shape) -> ClientData:
    return make_data(SIZES, shape=shape, classes=3, seed=1)


def data_on_stand_in(data: ClientData) -> ClientData:
    return ClientData(*on_device([data.x, data.y, data.clients, data.mean, data.std]), classes=data.classes)


def one_round(setup: str, name: str, hp: dict, vectorized: bool, on_stand_in: bool, epochs: int = 2):
    """(state after one round, its train loss, the stand-in's Recorder or None)."""
    model_name, shape, extra = SETUPS[setup]
    settings = run_settings(0, client_fraction=1.0, local_epochs=epochs, batch_size=4, **extra)
    hp = resolve_hyperparams({"name": name, **hp})
    algorithm = get_algorithm(name)

    def run(data, model, recorder=None):
        state = initial_state(model, algorithm, len(SIZES), hp)
        result = run_round(model, algorithm, hp, state, data, settings, 1, vectorized=vectorized, max_chunk=3)
        return result.state, result.train_loss, recorder

    model = build_model(model_name, shape, 3, 0, extra.get("norm"))
    if not on_stand_in:
        return run(cpu_data(shape), model)
    with stand_in_device() as recorder, training_marked(recorder):
        return run(data_on_stand_in(cpu_data(shape)), model.to(DEVICE), recorder)


def training_marked(recorder):
    """The cohort's training steps (train_vectorized / train_sequential) recorded as phase "training"."""
    import contextlib

    stack = contextlib.ExitStack()
    for name in ("train_vectorized", "train_sequential"):
        real = getattr(pipeline.rounds, name)

        def marked(*args, real=real, **kwargs):
            with recorder.during("training"):
                return real(*args, **kwargs)

        stack.enter_context(mock.patch.object(pipeline.rounds, name, marked))
    return stack


@functools.lru_cache(maxsize=None)
def stand_in_and_cpu(case, vectorized: bool):
    setup, name, hp_items = case
    hp = dict(hp_items)
    return one_round(setup, name, hp, vectorized, True), one_round(setup, name, hp, vectorized, False)


def frozen(case):
    setup, name, hp = case
    return setup, name, tuple(sorted(hp.items()))


# ---------------------------------------------------------------- every algorithm, both paths


@pytest.mark.parametrize("vectorized", [True, False], ids=["vectorized", "sequential"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_a_round_of_every_algorithm_stays_on_the_device_with_the_cpus_numbers(case, vectorized):
    (state, loss, recorder), (cpu_state, cpu_loss, _) = stand_in_and_cpu(frozen(case), vectorized)
    assert not recorder.mixes, "\n".join(map(str, recorder.mixes[:10]))
    on_host = [path for path, value in device_leaves(state) if not isinstance(value, OnDevice)]
    assert not on_host, f"server state tensors left on the CPU: {on_host}"
    assert loss == cpu_loss
    ours, theirs = dict(device_leaves(off_device(state))), dict(device_leaves(cpu_state))
    assert ours.keys() == theirs.keys()
    for path in theirs:
        assert torch.equal(ours[path], theirs[path]), path


@pytest.mark.parametrize("vectorized", [True, False], ids=["vectorized", "sequential"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_training_steps_read_nothing_back_from_the_device(case, vectorized):
    """The CPU stand-in for torch.cuda.set_sync_debug_mode: no .item(), bool(), float(), .tolist(), copy to
    the host or data-sized operation (boolean masks, nonzero, unique) inside train_vectorized or
    train_sequential, so a GPU never waits for itself between local steps."""
    (_, _, recorder), _ = stand_in_and_cpu(frozen(case), vectorized)
    in_training = [(what, where) for what, where, phase in recorder.syncs if phase == "training"]
    assert not in_training, Counter(in_training).most_common(10)


@pytest.mark.parametrize("vectorized", [True, False], ids=["vectorized", "sequential"])
@pytest.mark.parametrize(
    "setup, name", [("mlp_adam", "scaffold"), ("dropout_cnn", "fedcurv"), ("augmented_gn", "fedavg")]
)
def test_a_rounds_reads_from_the_device_do_not_grow_with_its_local_steps(setup, name, vectorized):
    """What a round reads back (the divergence check, the mean loss, the clients' indices for the
    schedule) is per round or per client: three times the local epochs, the same count."""
    counts = []
    for epochs in (1, 3):
        _, _, recorder = one_round(setup, name, {}, vectorized, True, epochs=epochs)
        counts.append(Counter(where for _, where, _ in recorder.syncs))
    assert counts[0] == counts[1]


# ---------------------------------------------------------------- the crash paths, one by one


def mixes_from(recorder, module: str) -> list:
    return [mix for mix in recorder.mixes if mix[1].startswith(module)]


def test_scaffold_gradient_mean_on_the_sequential_path_stays_on_the_gradients_device():
    """GradientMean.update reshaped the sequential path's CPU `torch.tensor(True)` into a [1, 1] mask and
    multiplied a GPU gradient by it: 'Tensor on device cpu is not on the expected device'."""
    _, _, recorder = one_round("mlp_adam", "scaffold", {}, False, True)
    assert not mixes_from(recorder, "algorithms/scaffold.py"), recorder.mixes[:3]
    assert not recorder.mixes


def test_rwalk_path_score_on_the_sequential_path_stays_on_the_gradients_device():
    """PathScore.update's first step selected with a CPU mask reshaped from `torch.tensor(True)`."""
    _, _, recorder = one_round("mlp_adam", "importance", RWALK, False, True)
    assert not mixes_from(recorder, "path_score.py"), recorder.mixes[:3]
    assert not recorder.mixes


def test_adam_counts_one_clients_steps_on_the_host_with_the_tensor_counts_bits():
    """The sequential path's Adam keeps its step count in a Python int (no copy to and from the device
    per parameter and step); its updates are the tensor count's, bit for bit, over many steps, with and
    without weight decay, in float32 and float64."""
    generator = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        for weight_decay in (0.0, 1e-3):
            host = {
                "w": torch.randn(6, 4, generator=generator, dtype=dtype),
                "b": torch.randn(4, generator=generator, dtype=dtype),
            }
            counted = {name: value.clone() for name, value in host.items()}
            optimizer, host_state, tensor_state = Adam(lr=1e-3, weight_decay=weight_decay), {}, {}
            for step in range(400):
                grads = {
                    name: torch.randn(value.shape, generator=generator, dtype=dtype) * 10.0 ** (step % 5 - 2)
                    for name, value in host.items()
                }
                taken = optimizer.step(host, grads, host_state, None, keep_steps=True)
                reference = optimizer.step(counted, grads, tensor_state, torch.tensor(True), keep_steps=True)
                for name in host:
                    assert torch.equal(host[name], counted[name]) and torch.equal(taken[name], reference[name])
            assert host_state["step"] == 400 and int(tensor_state["step"]) == 400


def test_torchrun_gathers_the_cohort_onto_the_server_states_device(monkeypatch):
    """gather_cohort sent everyone's results to `train_loss.device`: the CPU on the sequential path,
    while the server state is on the GPU."""
    seen = []

    def all_gather(ranks, mine, device, what):
        seen.append(device)
        return [distributed._to(mine, device)]

    monkeypatch.setattr(distributed, "all_gather", all_gather)
    model_name, shape, extra = SETUPS["mlp_sgd"]
    hp = resolve_hyperparams({"name": "fedavg"})
    with stand_in_device() as recorder:
        model = build_model(model_name, shape, 3, 0).to(DEVICE)
        algorithm = get_algorithm("fedavg")
        state = initial_state(model, algorithm, len(SIZES), hp)
        result = run_round(
            model,
            algorithm,
            hp,
            state,
            data_on_stand_in(cpu_data(shape)),
            run_settings(0, client_fraction=1.0, local_epochs=1, batch_size=4),
            1,
            vectorized=False,
            ranks=Ranks(0, 1, 0),
        )
    assert seen == [DEVICE]
    assert not recorder.mixes and not host_tensors(result.state)


def test_fedcurv_state_starts_on_the_models_device_and_in_its_dtype():
    """Σ F·θ² started as a CPU float32 zero whatever the model's device and dtype."""
    with stand_in_device():
        params = {"w": torch.zeros(3, 2, device=DEVICE, dtype=torch.float64)}
        state = fedcurv.init_state(params, 4, resolve_hyperparams({"name": "fedcurv"}))
    assert isinstance(state["w_total"], OnDevice) and state["w_total"].dtype == torch.float64


def test_an_empty_evaluation_answers_on_the_datas_device():
    """Evaluating no samples returned CPU tensors, which then met the device's in the probes."""
    model_name, shape, _ = SETUPS["mlp_sgd"]
    model = build_model(model_name, shape, 3, 0)
    with stand_in_device() as recorder:
        data = data_on_stand_in(cpu_data(shape))
        params = on_device({name: value.detach() for name, value in model.named_parameters()})
        stacked = {name: value.unsqueeze(0).repeat(2, *([1] * value.dim())) for name, value in params.items()}
        none = torch.zeros(0, dtype=torch.long, device=DEVICE)
        answers = [
            correct_predictions(model, params, data, none),
            cohort_correct_on_shared(model, stacked, data, none),
            *cohort_correct_on_own(model, stacked, data, [none, none]),
        ]
    assert all(isinstance(answer, OnDevice) for answer in answers), [type(a) for a in answers]
    assert [tuple(a.shape) for a in answers] == [(0,), (2, 0), (2, 0), (2, 0)] and not recorder.mixes


def test_deterministic_kernels_warn_rather_than_stop_adaptive_pooling(monkeypatch):
    """torch.use_deterministic_algorithms(True) makes the first backward pass of every AdaptiveAvgPool2d
    model (ResNet-18, the shallow ResNet, DenseNet) raise on CUDA; FEDFORGET_DETERMINISTIC sets it with
    warn_only, and the ranks' disagreement message no longer advises the strict setting. The variable is
    read once, by RuntimeOptions, and its bad value refused there, in one line, before anything runs."""
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
    )
    monkeypatch.setenv(DETERMINISTIC, "1")
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    try:
        distributed.apply_kernel_settings(RuntimeOptions.from_environment().deterministic)
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
        model = build_model("resnet_shallow_small", (16, 16, 3), 3, 0)
        model(torch.randn(2, 3, 16, 16)).sum().backward()  # runs (on a GPU: warns, does not raise)
        described = distributed.describe_device(torch.device("cpu"))
        assert described["deterministic_algorithms"] and described["deterministic_warn_only"]
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[2], before[3]
    monkeypatch.setenv(DETERMINISTIC, "yes")
    with pytest.raises(UserError, match="^FEDFORGET_DETERMINISTIC: 'yes' is not allowed; expected 0 or 1$"):
        RuntimeOptions.from_environment()
    monkeypatch.setattr(distributed, "all_gather", lambda ranks, mine, device, what: ["a", "b"])
    with pytest.raises(UserError) as raised:
        distributed.check_agreement(Ranks(0, 2, 0), {"params": {}}, 3, torch.device("cpu"))
    assert "FEDFORGET_DETERMINISTIC=1" in str(raised.value) and "use_deterministic_algorithms" not in str(raised.value)


def overrides() -> RuntimeOptions:
    """The runtime options as a train stage reads them: from the environment, once (pipeline.options)."""
    return RuntimeOptions.from_environment()


def test_the_backend_and_device_follow_their_overrides(monkeypatch):
    """NCCL was chosen whenever CUDA was visible: two processes on a one-GPU host could not start. The
    overrides are read once into RuntimeOptions (a bad value refused there, in one line) and passed down."""
    for name in (DIST_BACKEND, DEVICE_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    backend = overrides().dist_backend
    assert distributed.backend_for("cuda", backend) == "nccl" and distributed.backend_for("cpu", backend) == "gloo"
    monkeypatch.setenv(DIST_BACKEND, "gloo")
    assert distributed.backend_for("cuda", overrides().dist_backend) == "gloo"
    monkeypatch.setenv(DIST_BACKEND, "nccl")
    with pytest.raises(UserError, match="FEDFORGET_DIST_BACKEND: nccl needs ranks training on CUDA"):
        distributed.backend_for("cpu", overrides().dist_backend)
    monkeypatch.setenv(DIST_BACKEND, "mpi")
    with pytest.raises(UserError, match="FEDFORGET_DIST_BACKEND: 'mpi' is not allowed; expected one of gloo, nccl"):
        overrides()
    monkeypatch.delenv(DIST_BACKEND)
    monkeypatch.setenv(DEVICE_VARIABLE, "cpu")
    assert distributed.device_for(Ranks(1, 2, 1), overrides().device) == torch.device("cpu")
    monkeypatch.setenv(DEVICE_VARIABLE, "tpu")
    with pytest.raises(UserError, match="FEDFORGET_DEVICE: 'tpu' is not allowed; expected one of cpu, cuda"):
        overrides()
    assert distributed.processes_exceed_gpus(2, 2, "nccl") is None
    assert distributed.processes_exceed_gpus(3, 2, "gloo") is None


def test_two_processes_on_one_gpu_are_one_line_that_names_the_override(monkeypatch):
    """FEDFORGET_TORCHRUN asking NCCL for more processes than GPUs is refused before any worker starts,
    in one line that says what to do; with FEDFORGET_DIST_BACKEND=gloo the processes share the GPU."""
    for name in (DIST_BACKEND, DEVICE_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(UserError) as raised:
        launch.fit_launch("--nproc-per-node 2", 10, "some_run", overrides())
    message = str(raised.value)
    assert message == (
        "FEDFORGET_TORCHRUN: 2 processes on a node with 1 GPU: NCCL needs a GPU of its own for each; "
        "allowed: --nproc-per-node up to 1, or FEDFORGET_DIST_BACKEND=gloo to share them"
    )
    monkeypatch.setenv(DIST_BACKEND, "gloo")
    assert launch.fit_launch("--nproc-per-node 2", 10, "some_run", overrides()) == "--nproc-per-node 2"
    assert distributed.device_for(Ranks(1, 2, 1), overrides().device) == torch.device("cuda", 0)  # shared, round-robin


def test_timing_records_the_device_its_software_and_precision_flags():
    """timing.json's device: what training recorded of the device it trained on (SeedResult.device, from
    distributed.describe_device), with the runtime's speed levers beside it (RuntimeOptions.speed_record)."""
    from pipeline.training import SeedResult

    trained = SeedResult(
        None,
        [],
        "ok",
        [1.5, 2.0],
        [0.0, 0.5],
        {},
        {},  # type: ignore[arg-type]
        device=distributed.describe_device(distributed.device_for(None)),
    )
    recorded = outputs.timing(trained, RuntimeOptions().speed_record())["device"]
    assert recorded["type"] == "cpu" and recorded["name"] and recorded["torch"] == torch.__version__
    assert {
        "tf32_matmul",
        "tf32_cudnn",
        "float32_matmul_precision",
        "deterministic_algorithms",
        "deterministic_warn_only",
        "cudnn_deterministic",
        "cudnn_benchmark",
        "cpu_capability",
    } <= set(recorded)
    json.dumps(recorded)  # written as JSON


# ---------------------------------------------------------------- the driver the GPU tier runs


def driver(out: Path, *args: str, env: dict | None = None, launcher: list[str] | None = None) -> subprocess.Popen:
    command = [
        *(launcher or [sys.executable]),
        str(REPO / "tests" / "support" / "round_driver.py"),
        str(out),
        "--rounds",
        "3",
        *args,
    ]
    return subprocess.Popen(
        command,
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


@pytest.mark.e2e
def test_a_killed_run_resumes_from_its_checkpoint_to_the_same_state(tmp_path):
    """The GPU tier's resume check (tests/gpu/test_gpu.py), here on the CPU: killed after round 2's
    checkpoint, rerun, the final state is the uninterrupted run's, bit for bit."""
    finished(driver(tmp_path / "whole.pt", "--device", "cpu"))
    killed = driver(
        tmp_path / "resumed.pt", "--device", "cpu", "--checkpoint", str(tmp_path / "ck.pt"), "--hang-after", "2"
    )
    assert "checkpointed 2" in lines_until(killed, "checkpointed 2")
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    finished(driver(tmp_path / "resumed.pt", "--device", "cpu", "--checkpoint", str(tmp_path / "ck.pt")))
    whole, resumed = (torch.load(tmp_path / name, weights_only=False) for name in ("whole.pt", "resumed.pt"))
    assert distributed.state_digest(whole) == distributed.state_digest(resumed)
