"""FEDFORGET_COMPILE (pipeline.cohort.compiled): the training step compiled by torch.compile, a speed lever for
GPUs measured by the device benchmark. On this CPU (inductor's C++ backend): a compiled round agrees with the
eager round in float64 on both paths, with the models that carry what compiling could lose (dropout masks
as inputs, BatchNorm's running statistics updated in place, TCE's logit mask, SCAFFOLD's tracker); later rounds
reuse the first round's graphs; off is the default and a bad value is one line.

Compiling costs seconds per model and path here, so the cases are few (each compiles once; the float64 rounds
run on 8x8 images)."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from pipeline.cohort import Levers
from support.device_cases import SETUPS, device_leaves, round_on

CPU = torch.device("cpu")


@pytest.fixture
def float64():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


@pytest.fixture(autouse=True)
def fresh_compile_cache():
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


COMPILED_CASES = [
    ("dropout_cnn", "fedavg", True),
    ("dropout_cnn", "scaffold", False),
    ("batch_norm", "fedavg", True),
    ("batch_norm", "fedavg", False),
    ("augmented_gn", "fedavg", True),
]


@pytest.mark.parametrize(
    "setup, name, vectorized",
    COMPILED_CASES,
    ids=[f"{s}-{n}-{'vectorized' if v else 'sequential'}" for s, n, v in COMPILED_CASES],
)
def test_a_compiled_round_agrees_with_the_eager_round_in_float64(monkeypatch, float64, setup, name, vectorized):
    # crop-and-flip runs before the step, outside what is compiled, and in float32 only (as in test_gpu.py)
    monkeypatch.setitem(SETUPS, setup, (*SETUPS[setup][:2], {**SETUPS[setup][2], "augment": "none"}))

    def two_rounds(compile_mode: str):
        return round_on(
            CPU, setup, name, {}, vectorized, rounds=2, dtype=torch.float64, levers=Levers(compile=compile_mode)
        )

    eager_state, eager_losses = two_rounds("off")
    compiled_state, compiled_losses = two_rounds("on")
    assert counters["stats"]["unique_graphs"] >= 1, "nothing was compiled"
    assert compiled_losses == pytest.approx(eager_losses, rel=1e-10)
    theirs = dict(device_leaves(eager_state))
    for path, value in device_leaves(compiled_state):
        if value.dtype.is_floating_point:
            # atol: a convolution's bias before BatchNorm has a zero gradient up to rounding (~1e-17), and
            # Adam divides it by eps = 1e-8, so the two rounds' float64 rounding shows there at ~1e-10 (measured:
            # 6.8e-11); what compiling could lose (masks, statistics, a tracker) would show at ~1e-2
            torch.testing.assert_close(value, theirs[path], rtol=1e-9, atol=1e-9, msg=path)
        else:
            assert torch.equal(value, theirs[path]), path


@pytest.mark.parametrize(
    "setup, vectorized", [("dropout_cnn", True), ("batch_norm", False)], ids=["vectorized", "sequential"]
)
def test_later_rounds_reuse_the_first_rounds_graphs(monkeypatch, setup, vectorized):
    # Each round builds its step from a new closure; the graphs compiled in round 1 serve rounds 2-4 (on the
    # sequential path, clients' short last batches of other sizes compile graphs of their own, once)
    on = Levers(compile="on")
    round_on(CPU, setup, "fedavg", {}, vectorized, rounds=1, levers=on)
    after_one = counters["stats"]["unique_graphs"]
    round_on(CPU, setup, "fedavg", {}, vectorized, rounds=3, levers=on)  # a new run (a new model), three rounds
    assert after_one >= 1
    assert counters["stats"]["unique_graphs"] == after_one


def test_the_speed_levers_are_recorded_with_the_seeds_timing():
    from pipeline.options import RuntimeOptions

    recorded = RuntimeOptions.from_environment(
        {"FEDFORGET_COMPILE": "cudagraphs", "FEDFORGET_FOREACH": "on"}
    ).speed_record()
    assert (recorded["compile"], recorded["foreach_optimizer"]) == ("cudagraphs", "on")
    recorded = RuntimeOptions.from_environment({}).speed_record()
    assert (recorded["compile"], recorded["foreach_optimizer"], recorded["threads"]) == ("off", "off", 1)


def test_setups_cover_what_compiling_could_lose():
    # the cases above name these setups for what they carry; a changed setup would silently test less
    assert SETUPS["dropout_cnn"][0] == "cnn_mnist"
    assert SETUPS["batch_norm"][2].get("example_events") and SETUPS["batch_norm"][2].get("optimizer") == "adam"
    assert SETUPS["augmented_gn"][2].get("loss") == "tce" and SETUPS["augmented_gn"][2].get("norm") == "group"
