"""An algorithm's aggregation can log per-round quantities ("round_log"): Importance's weighted-average
aggregation logs how far its per-element weights are from FedAvg's sample-size weights, as curves of the
run; the state keeps nothing of it, and a FedAvg run logs no such curve."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e

RUN = {
    "partition": "iid",
    "model": "mlp_200",
    "rounds": 4,
    "eval_every": 1,
    "client_fraction": 0.5,
    "local_epochs": 1,
    "batch_size": 16,
    "lr": 0.05,
    "seeds": [0],
    "input_scaling": "unit",
    "algorithm": {"name": "fedavg"},
}
WEIGHTED = {
    **RUN,
    "algorithm": {"name": "importance", "lambda": 0.0, "penalty": "none", "aggregation": "importance", "gamma": 0.9},
}
PARAMS = {
    "profile": "default",
    "datasets": {"mnist": {"train_size": 600, "test_size": 100}},
    "partitions": {"iid": {"dataset": "mnist", "scheme": "iid", "clients": 6, "seed": 0}},
    "runs": {"weighted": WEIGHTED, "fedavg": RUN},
}
CURVES = ("aggregation_importance_weight_deviation", "aggregation_importance_weight_moved_share")


@pytest.fixture(scope="module")
def repo(pipeline_repo):
    repo = pipeline_repo(PARAMS, build=("partition@iid", "resolve"))
    repo.train_every_run()
    return repo


def test_the_weighted_average_logs_its_weight_spread_every_round(repo):
    deviation, moved = (repo.curve("weighted", name) for name in CURVES)
    assert sorted(deviation) == sorted(moved) == [1, 2, 3, 4]
    assert all(0 <= share <= 1 for share in moved.values())
    # Round 1's uploads are each client's own Fisher; from round 2 each is 90 % the global one
    # (γ = 0.9), so the weights sit closer to the sample-size weights (the report's point).
    assert deviation[1] > 0
    assert all(deviation[r] < deviation[1] for r in (2, 3, 4))


def test_fedavg_logs_no_aggregation_curve(repo):
    assert all(repo.curve("fedavg", name) == {} for name in CURVES)
