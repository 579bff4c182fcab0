"""pipeline/partition_sizes.py: the sizes `config --check` computes before any data exists agree with what
the real partitioner builds, at the boundaries where a partition stops being buildable."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pipeline.config import load_params
from pipeline.partition_sizes import (
    TRAIN_CLASS_COUNTS,
    TrainingSplit,
    dropped_samples_warning,
    large_batch_warning,
    partition_sizes,
    training_split,
)
from pipeline.partitioners import PartitionError, make_partition

REPO = Path(__file__).resolve().parents[2]
COUNTS = (59, 67, 60, 61, 58, 54, 59, 63, 59, 59)  # MNIST's class counts / 100: uneven, 599 samples
N = sum(COUNTS)


def labels_with_counts(counts, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(len(counts)), counts)).astype(np.int64)


def built(settings: dict, labels: np.ndarray):
    """What the partition stage makes of these settings: (train sizes, samples left out) or its error."""
    try:
        result = make_partition(settings, labels)
    except PartitionError as error:
        return str(error)
    held = sum(len(p) for p in result["train"]) + sum(len(p) for p in result["val"])
    return tuple(len(p) for p in result["train"]), len(labels) - held


def computed(settings: dict, split: TrainingSplit):
    try:
        sizes = partition_sizes(settings, split)
    except PartitionError as error:
        return str(error)
    return sizes.train_sizes, sizes.dropped


def mnist_like(scheme: str, **settings) -> dict:
    return {"dataset": "mnist", "scheme": scheme, "seed": 3, **settings}


# Each case sits on one side of a boundary; its neighbour in the list on the other.
BOUNDARY_CASES = [
    mnist_like("iid", clients=N),
    mnist_like("iid", clients=N + 1),
    mnist_like("iid", clients=7, val_fraction=0.9),
    # one sample each: round(0.5) is 0 (kept), round(0.9) is 1 (nothing left to train on)
    mnist_like("iid", clients=N, val_fraction=0.5),
    mnist_like("iid", clients=N, val_fraction=0.9),
    mnist_like("iid", clients=N // 2, val_fraction=0.5),
    mnist_like("shards", clients=10, shards_per_client=2),  # the largest one-label block size
    mnist_like("shards", clients=12, shards_per_client=2, shard_size=20),  # all 24 one-label blocks of 20
    mnist_like("shards", clients=13, shards_per_client=2, shard_size=20),  # two blocks short
    mnist_like("shards", clients=7, shards_per_client=2, shard_size=30, val_fraction=0.1),  # all 14 of 30
    mnist_like("shards", clients=N // 2, shards_per_client=2),  # blocks of one sample
    mnist_like("shards", clients=N // 2 + 1, shards_per_client=2),  # not even that
    mnist_like("shards", clients=10, shards_per_client=3, shard_size=19, shard_cut="sorted"),  # 570 of 599
    mnist_like("shards", clients=10, shards_per_client=3, shard_size=20, shard_cut="sorted"),  # 600 > 599
    mnist_like("shards", clients=7, shards_per_client=2, shard_cut="sorted"),
    mnist_like("dirichlet", clients=9, alpha=0.5, equal_size=True, val_fraction=0.1),
    mnist_like("dirichlet", clients=40, alpha=0.05),  # some clients drawn empty
    mnist_like("dirichlet", clients=5, alpha=1.0, val_fraction=0.2),
    mnist_like("clusters", cluster_sizes=[2, 3], classes_per_cluster=5, samples_per_client=50),
    mnist_like("clusters", cluster_sizes=[1] * 6, classes_per_cluster=2, samples_per_client=5),  # 12 > 10 classes
    mnist_like("clusters", cluster_sizes=[1] * 5, classes_per_cluster=2, samples_per_client=5),
    mnist_like("clusters", cluster_sizes=[2, 1], cluster_classes=[[0], [1, 2]], samples_per_client=29),  # 58 of 59
    mnist_like("clusters", cluster_sizes=[2, 1], cluster_classes=[[0], [1, 2]], samples_per_client=30),  # 60 > 59
    mnist_like("clusters", cluster_sizes=[2, 1], cluster_classes=[[0], [1], [2]], samples_per_client=5),
    mnist_like("clusters", cluster_sizes=[2, 1], cluster_classes=[[0], [10]], samples_per_client=5),
    mnist_like("clusters", cluster_sizes=[4], classes_per_cluster=3, samples_per_client=40, val_fraction=0.5),
]


@pytest.mark.parametrize("index", range(len(BOUNDARY_CASES)))
def test_with_known_class_counts_the_check_agrees_exactly_with_the_partitioner(index):
    settings = BOUNDARY_CASES[index]
    stage = built(settings, labels_with_counts(COUNTS))
    check = computed(settings, TrainingSplit(N, 10, COUNTS))
    if isinstance(stage, str) or isinstance(check, str):
        assert check == stage  # both refuse, with the same message
    else:
        assert check[0] == stage[0]  # every client's training samples
        assert check[1] in (None, stage[1])  # samples left out, where the arithmetic decides them


def test_the_boundary_cases_cover_both_sides():
    outcomes = [computed(s, TrainingSplit(N, 10, COUNTS)) for s in BOUNDARY_CASES]
    refused = [o for o in outcomes if isinstance(o, str)]
    assert 8 <= len(refused) <= len(outcomes) - 8, refused
    for key in (
        "clients:",
        "shard_size:",
        "val_fraction:",
        "classes_per_cluster:",
        "samples_per_client:",
        "cluster_classes:",
    ):
        assert any(o.startswith(key) for o in refused), key


@pytest.mark.parametrize("mix", range(6))
def test_with_a_subset_the_check_refuses_only_what_surely_fails(mix):
    """`datasets.<name>.train_size` leaves the class mix unknown: whatever it is, a refused partition fails
    at the stage too, and a size the check gives is the one built."""
    rng = np.random.default_rng(mix)
    labels = rng.integers(0, 10, size=120) if mix % 2 else np.repeat(np.arange(10), rng.multinomial(120, [0.1] * 10))
    split = TrainingSplit(len(labels), 10, None)
    cases = [
        mnist_like("shards", clients=c, shards_per_client=2, shard_size=s, shard_cut=cut)
        for c in (5, 6, 7, 12, 61)
        for s in (None, 5, 10)
        for cut in ("one_label", "sorted")
    ]
    cases += [
        mnist_like("clusters", cluster_sizes=[2, 2], classes_per_cluster=2, samples_per_client=k)
        for k in (5, 12, 30, 31)
    ]
    cases += [mnist_like("iid", clients=c, val_fraction=0.5) for c in (40, 60, 61, 120, 121)]
    cases += [mnist_like("dirichlet", clients=c, alpha=0.3) for c in (10, 121)]
    for settings in [{k: v for k, v in s.items() if v is not None} for s in cases]:
        stage, check = built(settings, labels), computed(settings, split)
        if isinstance(check, str):
            assert isinstance(stage, str), (settings, check)
        elif not isinstance(stage, str) and check[0] is not None:
            assert check[0] == stage[0], settings


def test_the_full_datasets_class_counts_are_the_prepared_data_s():
    checked = 0
    for name, counts in TRAIN_CLASS_COUNTS.items():
        path = REPO / "data" / "prepared" / f"{name}.npz"
        if path.is_file():
            with np.load(path) as data:
                assert tuple(np.bincount(data["y_train"], minlength=len(counts))) == counts, name
            checked += 1
    if not checked:
        pytest.skip("no prepared dataset here (they come from `dvc pull` or the download stage)")


def test_the_real_partitions_sizes_are_those_their_records_hold():
    """Every partition of params.yaml that has been built: the computed sizes are its meta.json's."""
    params = load_params(REPO / "params.yaml")
    compared = 0
    for name, settings in params["partitions"].items():
        split = training_split(settings["dataset"], params["datasets"].get(settings["dataset"]))
        for records in (REPO / "reports" / "partitions", REPO / "data" / "partitions"):
            meta_path = records / name / "meta.json"
            if split is None or not meta_path.is_file():
                continue
            meta = json.loads(meta_path.read_text())
            if meta["settings"] == settings:  # a record of other settings is stale, not a counterexample
                assert list(partition_sizes(settings, split).train_sizes) == meta["train_sizes"], name
                compared += 1
    if not compared:
        pytest.skip("no partition built here")


def test_a_subset_has_no_known_class_counts_and_femnist_no_known_size():
    assert training_split("mnist", {}).class_counts == TRAIN_CLASS_COUNTS["mnist"]
    assert training_split("mnist", {"train_size": 600}) == TrainingSplit(600, 10, None)
    assert training_split("femnist", {}) is None


def test_shards_that_leave_data_out_say_how_much():
    settings = mnist_like("shards", clients=96, shards_per_client=2, shard_size=100)
    sizes = partition_sizes(settings, training_split("mnist", {}))
    assert sizes.dropped == 60000 - 96 * 2 * 100
    line = dropped_samples_warning("partitions.p", settings, 60000, 60000 - sizes.dropped)
    assert line == (
        "partitions.p: the shards hold 19200 of dataset mnist's 60000 training samples; 40800 (68.0%) "
        "are left out (shard_size and the class counts decide how many)"
    )
    assert dropped_samples_warning("partitions.p", settings, 60000, 60000) is None
    assert dropped_samples_warning("partitions.p", mnist_like("iid", clients=7), 60000, 59997) is None


def test_a_batch_above_some_clients_data_is_a_warning_naming_them():
    line = large_batch_warning("runs.r.batch_size", 50, "p", (60, 40, 30, 40))
    assert line == (
        "runs.r.batch_size: 50 is more than the 30..40 training samples of 3 of the 4 clients of "
        "partition p; those train full-batch (one step an epoch)"
    )
    assert large_batch_warning("runs.r.batch_size", 30, "p", (60, 40, 30, 40)) is None
