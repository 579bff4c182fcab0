"""A run monitored on its clients' validation data (TCE's `evaluate_on: validation`) is also evaluated on
the test set at its last 5 evaluated rounds, and the summary's `test_set_accuracy_mean` is their mean, so
that its claims read a mean over rounds like every other run's; a run monitored on the test set records
nothing extra."""

from __future__ import annotations

import json

import pytest

from pipeline.training import TEST_SET_EVALUATIONS

pytestmark = pytest.mark.e2e

RUN = {
    "partition": "dirichlet",
    "model": "mlp_200",
    "rounds": 12,
    "eval_every": 2,
    "client_fraction": 0.5,
    "local_epochs": 1,
    "batch_size": 16,
    "lr": 0.05,
    "seeds": [0],
    "algorithm": {"name": "fedavg"},
}
PARAMS = {
    "profile": "default",
    "datasets": {"mnist": {"train_size": 600, "test_size": 100}},
    "partitions": {
        "dirichlet": {
            "dataset": "mnist",
            "scheme": "dirichlet",
            "clients": 6,
            "alpha": 1.0,
            "equal_size": True,
            "val_fraction": 0.2,
            "seed": 0,
        }
    },
    "runs": {"on_validation": {**RUN, "evaluate_on": "validation"}, "on_test": RUN},
}


@pytest.fixture(scope="module")
def repo(pipeline_repo):
    repo = pipeline_repo(PARAMS, build=("partition@dirichlet", "resolve"))
    repo.train_every_run()
    return repo


def metrics(repo, run: str) -> dict:
    return json.loads((repo.root / "reports" / "runs" / run / "seed0" / "metrics.json").read_text())


def test_a_validation_run_is_evaluated_on_the_test_set_at_its_last_five_evaluated_rounds(repo):
    assert TEST_SET_EVALUATIONS == 5
    assert sorted(repo.curve("on_validation", "test_accuracy")) == [2, 4, 6, 8, 10, 12]  # the validation curve
    on_test_set = repo.curve("on_validation", "test_set_accuracy")
    assert sorted(on_test_set) == [4, 6, 8, 10, 12]
    summary = metrics(repo, "on_validation")
    # The mean by hand over the logged curve; the last model's accuracy is the last round's evaluation.
    assert summary["test_set_accuracy_mean"] == pytest.approx(sum(on_test_set.values()) / 5, abs=1e-12)
    assert summary["final_test_accuracy"] == pytest.approx(on_test_set[12], abs=1e-12)
    # The test set has 100 samples: every value is a whole number of them.
    assert all(abs(v * 100 - round(v * 100)) < 1e-9 for v in on_test_set.values())


def test_a_run_on_the_test_set_records_no_second_test_curve(repo):
    assert repo.curve("on_test", "test_set_accuracy") == {}
    summary = metrics(repo, "on_test")
    assert "test_set_accuracy_mean" not in summary and "final_test_accuracy" not in summary
