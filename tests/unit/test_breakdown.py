"""benchmarks.breakdown's split of a profile into phases, on a hand-built cProfile table (the measurement
itself is a benchmark run by hand: benchmarks/results/breakdown.md)."""

from __future__ import annotations

import pytest

from benchmarks.breakdown import ORDER, inclusive, phases

# pstats' table: function -> (primitive calls, calls, own seconds, inclusive seconds, {caller: edge}), an
# edge being (primitive calls, calls, own seconds, inclusive seconds) of the calls from that caller.
TRAIN = ("/x/pipeline/training.py", 1, "train_seed")
ROUND = ("/x/pipeline/rounds.py", 1, "run_round")
HOOK = ("/x/pipeline/algorithms/fedcurv.py", 1, "upload")
FISHER = ("/x/pipeline/fisher.py", 1, "client_fisher")
FISHER_INNER = ("/x/pipeline/fisher.py", 9, "squares")
EVALUATE = ("/x/pipeline/metrics.py", 1, "evaluate")
SAVE = ("/x/pipeline/results.py", 1, "save_checkpoint")
SAVE_INNER = ("/x/pipeline/results.py", 9, "write")
WRITE_SEED = ("/x/pipeline/outputs.py", 1, "write_seed")
SAVE_MODEL = ("/x/pipeline/results.py", 5, "save_torch")


def edge(seconds: float) -> tuple:
    return (1, 1, 0.0, seconds)


STATS = {
    TRAIN: (1, 1, 1.0, 100.0, {}),
    ROUND: (10, 10, 5.0, 80.0, {TRAIN: edge(80.0)}),
    HOOK: (10, 10, 1.0, 30.0, {ROUND: edge(30.0)}),
    FISHER: (10, 10, 2.0, 25.0, {HOOK: edge(25.0)}),
    FISHER_INNER: (10, 10, 23.0, 23.0, {FISHER: edge(23.0)}),  # inside the module: not counted again
    EVALUATE: (10, 10, 6.0, 6.0, {TRAIN: edge(6.0)}),
    SAVE: (5, 5, 1.0, 4.0, {TRAIN: edge(4.0)}),
    SAVE_INNER: (5, 5, 3.0, 3.0, {SAVE: edge(3.0)}),
    # The seed's outputs save its last model through results.py: output, not a checkpoint.
    WRITE_SEED: (1, 1, 1.0, 3.0, {TRAIN: edge(3.0)}),
    SAVE_MODEL: (1, 1, 2.0, 2.0, {WRITE_SEED: edge(2.0)}),
}


def test_a_module_counts_only_the_calls_into_it_from_outside():
    assert inclusive(STATS, lambda key: key[0].endswith("pipeline/fisher.py")) == 25.0
    assert inclusive(STATS, lambda key: key[0].endswith("pipeline/results.py")) == 6.0


def test_the_phases_add_up_to_the_profiled_seconds():
    split = phases(STATS, 100.0)
    assert split["Fisher"] == 25.0
    assert split["local training and aggregation"] == 80.0 - 25.0
    assert split["evaluation"] == 6.0
    assert split["checkpoints and kept result"] == 4.0
    assert split["outputs"] == 3.0  # its model save included, and not counted as a checkpoint
    assert split["data"] == 0.0 and split["forgetting probes"] == 0.0
    assert split["other"] == 100.0 - 25.0 - 55.0 - 6.0 - 4.0 - 3.0
    assert set(split) == set(ORDER) - {"start-up"}


def test_phases_that_claim_more_than_the_profile_are_refused():
    with pytest.raises(ValueError, match="more than"):
        phases(STATS, 50.0)
