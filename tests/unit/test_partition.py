"""The partitioners' defining properties, the partition files and their round trip, on tiny labels."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from pipeline import partition
from pipeline import partitioners as P
from pipeline.errors import UserError
from pipeline.inputs import PARTITION_RECORDS, PARTITIONS_DIR, load_partition, unpack
from pipeline.partitioners import PartitionError

# MNIST's class counts, divided by 10: uneven, as the real data is.
MNIST_COUNTS_10TH = [592, 674, 596, 613, 584, 542, 592, 627, 585, 595]


def labels_with_counts(counts, seed=0) -> np.ndarray:
    """A shuffled label vector holding counts[c] samples of class c."""
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(len(counts)), counts)).astype(np.int64)


def rng(seed=0) -> np.random.Generator:
    return np.random.default_rng(seed)


def assert_pairwise_disjoint(parts):
    flat = np.concatenate(parts)
    assert len(np.unique(flat)) == len(flat), "some index belongs to two clients (or twice to one)"


def class_counts(labels, part, classes=None):
    return np.bincount(labels[part], minlength=classes or int(labels.max()) + 1)


# ---------------------------------------------------------------- shards


def test_shards_one_label_each_client_holds_exactly_its_blocks_of_one_label_each():
    labels = labels_with_counts([130, 95, 160, 70, 101])
    size, per_client = 30, 3
    parts = P.partition_shards(labels, clients=5, shards_per_client=per_client, shard_size=size, rng=rng())
    assert len(parts) == 5
    for part in parts:
        assert len(part) == per_client * size
        counts = class_counts(labels, part)
        # Blocks are whole and one-label: every label appears a multiple of the block size times...
        assert np.all(counts % size == 0), counts
        # ...and those multiples add up to exactly shards_per_client blocks.
        assert (counts // size).sum() == per_client
    assert_pairwise_disjoint(parts)


def test_shards_fedcurv_96x2_on_uneven_class_counts():
    labels = labels_with_counts(MNIST_COUNTS_10TH)
    parts = P.partition_shards(labels, clients=96, shards_per_client=2, shard_size=None, rng=rng())
    assert len(parts) == 96
    size = P.largest_block_size(labels, 96 * 2)
    assert size > 0
    for part in parts:
        assert len(part) == 2 * size  # two equal blocks
        counts = class_counts(labels, part)
        assert np.all(counts % size == 0) and (counts // size).sum() == 2
    assert_pairwise_disjoint(parts)
    # "discarding a small amount of data": the largest block size keeps almost all of it.
    assert 96 * 2 * size > 0.9 * len(labels)


def test_shards_unset_size_picks_the_largest_feasible_block_size():
    labels = labels_with_counts([10, 7, 3])
    feasible = [s for s in range(1, len(labels) + 1) if (np.bincount(labels) // s).sum() >= 4]
    assert P.largest_block_size(labels, 4) == max(feasible) == 3
    for needed in (1, 2, 5, 9, 20, 21):
        counts = np.bincount(labels)
        size = P.largest_block_size(labels, needed)
        if size:
            assert (counts // size).sum() >= needed
        assert (counts // (size + 1)).sum() < needed
    # ... and partition_shards uses that size when shard_size is unset.
    parts = P.partition_shards(labels, clients=2, shards_per_client=2, shard_size=None, rng=rng())
    assert [len(p) for p in parts] == [6, 6]


def test_shards_sorted_cut_gives_contiguous_label_sorted_blocks():
    labels = labels_with_counts([25, 40, 35])  # 100 samples: class edges at 25 and 65
    size = 10
    blocks = P.sorted_blocks(labels, size, rng())
    assert len(blocks) == len(labels) // size
    assert all(len(b) == size for b in blocks)
    order = np.concatenate(blocks)
    assert sorted(order.tolist()) == list(range(len(labels)))
    assert np.all(np.diff(labels[order]) >= 0), "blocks are not cut from the label-sorted order"
    # Consecutive cut: block i holds exactly the labels of window i of the sorted labels.
    sorted_labels = np.sort(labels)
    for i, block in enumerate(blocks):
        np.testing.assert_array_equal(np.sort(labels[block]), sorted_labels[i * size : (i + 1) * size])


def test_shards_sorted_cut_clients_are_unions_of_sorted_windows():
    labels = labels_with_counts([25, 40, 35])
    size, per_client, clients = 10, 2, 5  # all 10 blocks dealt out, including the straddling ones
    parts = P.partition_shards(labels, clients, per_client, size, rng(), cut="sorted")
    sorted_labels = np.sort(labels)
    windows = [np.bincount(sorted_labels[i * size : (i + 1) * size], minlength=3) for i in range(10)]
    for part in parts:
        assert len(part) == per_client * size
        counts = class_counts(labels, part, 3)
        assert any(np.array_equal(windows[i] + windows[j], counts) for i, j in itertools.combinations(range(10), 2)), (
            counts
        )
    assert_pairwise_disjoint(parts)
    # Unlike the one-label cut, blocks straddle labels (25 and 65 are not multiples of 10).
    assert any(np.any(class_counts(labels, p, 3) % size) for p in parts)


def test_shards_that_cannot_be_satisfied_raise():
    labels = labels_with_counts([9, 9, 9])
    with pytest.raises(PartitionError, match=r"^shard_size: "):
        P.partition_shards(labels, clients=2, shards_per_client=2, shard_size=5, rng=rng())


# ---------------------------------------------------------------- iid


def test_iid_equal_sizes_and_disjoint():
    labels = labels_with_counts(MNIST_COUNTS_10TH)
    parts = P.partition_iid(labels, 7, rng())
    assert [len(p) for p in parts] == [len(labels) // 7] * 7
    assert_pairwise_disjoint(parts)


# ---------------------------------------------------------------- dirichlet


def test_dirichlet_equal_size_gives_exactly_equal_sizes_and_disjoint_clients():
    labels = labels_with_counts(MNIST_COUNTS_10TH)
    for alpha in (0.05, 0.5, 10.0):
        parts = P.partition_dirichlet(labels, 30, alpha, equal_size=True, rng=rng())
        assert [len(p) for p in parts] == [len(labels) // 30] * 30
        assert_pairwise_disjoint(parts)


def test_dirichlet_large_alpha_gives_every_client_the_global_mix():
    labels = labels_with_counts([c * 5 for c in (500, 700, 600, 550, 800, 450, 650, 620, 580, 540)])
    global_mix = np.bincount(labels) / len(labels)
    parts = P.partition_dirichlet(labels, 10, 1e4, equal_size=True, rng=rng())
    worst = max(np.abs(class_counts(labels, p, 10) / len(p) - global_mix).max() for p in parts)
    assert worst < 0.05


def test_dirichlet_tiny_alpha_makes_most_clients_one_class():
    labels = labels_with_counts([200] * 10)

    def top_share(parts):
        return np.array([class_counts(labels, p, 10).max() / len(p) for p in parts])

    skewed = top_share(P.partition_dirichlet(labels, 100, 1e-3, equal_size=True, rng=rng()))
    assert (skewed >= 0.9).mean() > 0.5
    mixed = top_share(P.partition_dirichlet(labels, 100, 1e4, equal_size=True, rng=rng()))
    assert (mixed >= 0.9).mean() == 0


def test_dirichlet_unequal_sizes_cover_every_sample_exactly_once():
    labels = labels_with_counts(MNIST_COUNTS_10TH)
    for alpha in (0.1, 1.0, 100.0):
        parts = P.partition_dirichlet(labels, 13, alpha, equal_size=False, rng=rng())
        assert len(parts) == 13
        np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(len(labels)))


# ---------------------------------------------------------------- clusters


def test_clusters_own_disjoint_classes_and_clients_draw_only_from_theirs():
    labels = labels_with_counts([300] * 10)
    sizes = [2, 3, 4]
    parts, groups = P.partition_clusters(labels, sizes, classes_per_cluster=2, samples_per_client=70, rng=rng())
    assert len(groups) == 3 and all(len(g) == 2 for g in groups)
    flat = [c for g in groups for c in g]
    assert len(set(flat)) == len(flat), "clusters share a class"
    cluster_of_client = [i for i, size in enumerate(sizes) for _ in range(size)]
    assert len(parts) == sum(sizes)
    for part, cluster in zip(parts, cluster_of_client):
        assert len(part) == 70
        assert set(labels[part].tolist()) <= set(groups[cluster])
    assert_pairwise_disjoint(parts)


def test_clusters_respect_explicit_cluster_classes():
    labels = labels_with_counts([100] * 6)
    parts, groups = P.partition_clusters(labels, [1, 2], 2, 40, rng(), cluster_classes=[[5, 0], [3, 4, 1]])
    assert groups == [[0, 5], [1, 3, 4]]
    assert set(labels[parts[0]].tolist()) <= {0, 5}
    assert all(set(labels[p].tolist()) <= {1, 3, 4} for p in parts[1:])


def test_clusters_overlapping_cluster_classes_raise():
    labels = labels_with_counts([100] * 6)
    with pytest.raises(PartitionError, match=r"^cluster_classes: .*overlap"):
        P.partition_clusters(labels, [1, 1], 2, 10, rng(), cluster_classes=[[0, 1], [1, 2]])


def test_clusters_needing_more_classes_than_the_dataset_has_raise():
    labels = labels_with_counts([100] * 6)
    with pytest.raises(PartitionError, match=r"^classes_per_cluster: "):
        P.partition_clusters(labels, [1, 1, 1, 1], classes_per_cluster=2, samples_per_client=10, rng=rng())


def test_clusters_with_too_few_samples_raise():
    labels = labels_with_counts([100] * 6)
    with pytest.raises(PartitionError, match=r"^samples_per_client: "):
        P.partition_clusters(labels, [3], classes_per_cluster=2, samples_per_client=70, rng=rng())


# ---------------------------------------------------------------- natural


def test_natural_one_client_per_writer():
    writers = np.array([7, 2, 7, 5, 2, 2, 9, 5, 7], dtype=np.int64)
    parts = P.partition_natural(writers, None)
    assert len(parts) == 4
    for writer, part in zip([2, 5, 7, 9], parts):
        np.testing.assert_array_equal(part, np.flatnonzero(writers == writer))


def test_natural_max_clients_keeps_the_first_writers():
    writers = np.array([7, 2, 7, 5, 2, 2, 9, 5, 7], dtype=np.int64)
    parts = P.partition_natural(writers, 2)
    assert [sorted(set(writers[p].tolist())) for p in parts] == [[2], [5]]


def test_natural_scheme_needs_writer_ids():
    with pytest.raises(PartitionError, match=r"^scheme: "):
        P.make_partition({"scheme": "natural", "seed": 0}, labels_with_counts([5, 5]), writers=None)


# ---------------------------------------------------------------- make_partition: validation split, errors


def test_val_fraction_splits_each_client_disjointly_with_rounded_size():
    labels = labels_with_counts(MNIST_COUNTS_10TH)
    settings = {"dataset": "mnist", "scheme": "dirichlet", "clients": 9, "alpha": 0.3, "seed": 4}
    whole = P.make_partition(settings, labels)
    split = P.make_partition({**settings, "val_fraction": 0.15}, labels)
    assert all(len(v) == 0 for v in whole["val"])
    for part, train, val in zip(whole["train"], split["train"], split["val"]):
        assert len(np.intersect1d(train, val)) == 0
        assert len(val) == round(0.15 * len(part)) and len(val) > 0
        # The split only divides the client's own samples.
        np.testing.assert_array_equal(np.sort(np.concatenate([train, val])), part)


def test_val_fraction_that_leaves_a_client_no_training_data_raises():
    labels = labels_with_counts([1, 1, 1])
    settings = {"dataset": "mnist", "scheme": "iid", "clients": 3, "seed": 0, "val_fraction": 0.9}
    with pytest.raises(PartitionError, match=r"^val_fraction: "):
        P.make_partition(settings, labels)


def test_more_clients_than_samples_raise():
    with pytest.raises(PartitionError, match=r"^clients: "):
        P.make_partition({"scheme": "iid", "clients": 11, "seed": 0}, labels_with_counts([5, 5]))


def test_unknown_scheme_raises():
    with pytest.raises(PartitionError, match=r"^scheme: "):
        P.make_partition({"scheme": "stripes", "clients": 2, "seed": 0}, labels_with_counts([5, 5]))


# ---------------------------------------------------------------- determinism

SCHEMES = {
    "iid": {"scheme": "iid", "clients": 6},
    "shards": {"scheme": "shards", "clients": 6, "shards_per_client": 2},
    "shards_sorted": {
        "scheme": "shards",
        "clients": 6,
        "shards_per_client": 2,
        "shard_size": 40,
        "shard_cut": "sorted",
    },
    "dirichlet": {"scheme": "dirichlet", "clients": 6, "alpha": 0.5, "equal_size": True},
    "dirichlet_unequal": {"scheme": "dirichlet", "clients": 6, "alpha": 0.5},
    "clusters": {"scheme": "clusters", "cluster_sizes": [2, 3], "samples_per_client": 50},
}


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_same_seed_gives_identical_arrays_and_another_seed_differs(name):
    labels = labels_with_counts(MNIST_COUNTS_10TH)
    settings = {"dataset": "mnist", "val_fraction": 0.1, **SCHEMES[name]}
    first = P.make_partition({**settings, "seed": 1}, labels)
    again = P.make_partition({**settings, "seed": 1}, labels)
    other = P.make_partition({**settings, "seed": 2}, labels)
    for key in ("train", "val"):
        assert len(first[key]) == len(again[key])
        assert all(np.array_equal(a, b) for a, b in zip(first[key], again[key]))
    assert not all(np.array_equal(a, b) for a, b in zip(first["train"], other["train"]))


PARTITION_FILES = ("clients.npz", "label_counts.json", "meta.json", "label_mix.png")


def written(root, name: str, file: str):
    """Where the partition stage puts one of its files: the arrays under data/ (DVC's cache), the record
    (meta, label counts, figure) under reports/ (git)."""
    return root / (PARTITIONS_DIR if file == "clients.npz" else PARTITION_RECORDS) / name / file


def write_example(root, labels, name="tiny", seed=3, prepared_sha="ab" * 32):
    settings = {
        "dataset": "mnist",
        "scheme": "dirichlet",
        "clients": 12,
        "alpha": 0.3,
        "equal_size": True,
        "val_fraction": 0.1,
        "seed": seed,
    }
    result = P.make_partition(settings, labels)
    partition.write_partition(
        name, settings, result, labels, 10, prepared_sha, root / PARTITIONS_DIR / name, root / PARTITION_RECORDS / name
    )
    return result


def test_write_partition_twice_gives_byte_identical_files(tmp_path):
    labels = labels_with_counts(MNIST_COUNTS_10TH)
    write_example(tmp_path / "a", labels)
    write_example(tmp_path / "b", labels)
    for name in PARTITION_FILES:
        first, second = (written(tmp_path / d, "tiny", name) for d in ("a", "b"))
        assert first.read_bytes() == second.read_bytes(), name
    # No temporary folder is left beside the outputs.
    for folder in (PARTITIONS_DIR, PARTITION_RECORDS):
        assert sorted(p.name for p in (tmp_path / "a" / folder).iterdir()) == ["tiny"]
    # The comparison can fail: another seed changes the files.
    write_example(tmp_path / "c", labels, seed=4)
    assert (
        written(tmp_path / "c", "tiny", "clients.npz").read_bytes()
        != written(tmp_path / "a", "tiny", "clients.npz").read_bytes()
    )


def test_written_label_counts_and_meta_describe_the_clients(tmp_path):
    labels = labels_with_counts(MNIST_COUNTS_10TH)
    result = write_example(tmp_path, labels)
    counts = json.loads(written(tmp_path, "tiny", "label_counts.json").read_text())
    assert counts["train"] == [np.bincount(labels[p], minlength=10).tolist() for p in result["train"]]
    meta = json.loads(written(tmp_path, "tiny", "meta.json").read_text())
    assert meta["clients"] == 12
    assert meta["train_sizes"] == [len(p) for p in result["train"]]
    assert meta["val_sizes"] == [len(p) for p in result["val"]]


# ---------------------------------------------------------------- pack/unpack, load_partition


def test_pack_unpack_round_trip():
    parts = [np.array([4, 1, 9]), np.array([], dtype=np.int64), np.array([0]), np.array([7, 3])]
    flat, offsets = partition.pack(parts)
    assert flat.dtype == np.int64 and offsets.dtype == np.int64
    np.testing.assert_array_equal(offsets, [0, 3, 3, 4, 6])
    back = unpack(flat, offsets)
    assert len(back) == len(parts)
    for a, b in zip(parts, back):
        np.testing.assert_array_equal(a, b)
    assert unpack(*partition.pack([])) == []


def test_load_partition_round_trip(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    labels = labels_with_counts(MNIST_COUNTS_10TH)
    result = write_example(tmp_path, labels, prepared_sha="cd" * 32)
    loaded = load_partition("tiny", dataset_sha256="cd" * 32)
    for key in ("train", "val"):
        assert len(loaded[key]) == len(result[key])
        assert all(np.array_equal(a, b) for a, b in zip(loaded[key], result[key]))
    assert loaded["meta"]["name"] == "tiny"


def test_load_partition_refuses_a_corrupted_clients_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_example(tmp_path, labels_with_counts(MNIST_COUNTS_10TH))
    path = PARTITIONS_DIR / "tiny" / "clients.npz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(UserError, match="checksum") as error:
        load_partition("tiny")
    assert str(path) in str(error.value)


def test_load_partition_refuses_a_partition_of_another_dataset_version(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_example(tmp_path, labels_with_counts(MNIST_COUNTS_10TH), prepared_sha="ab" * 32)
    with pytest.raises(UserError, match="another version") as error:
        load_partition("tiny", dataset_sha256="ef" * 32)
    assert str(PARTITIONS_DIR / "tiny") in str(error.value)


def test_load_partition_of_an_unbuilt_partition_names_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=r"partition@absent"):
        load_partition("absent")
