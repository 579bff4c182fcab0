"""What a partition's settings give, known before any data is downloaded: each client's number of
training samples, and how many samples no client gets.

`python -m pipeline.config --check` uses it to refuse a partition the partition stage could not build
(more clients than samples, more classes than the dataset has, shards or samples_per_client beyond the
data, a val_fraction that leaves a client nothing) and to warn of shards that leave data out and of a
batch size above a client's data. It follows pipeline/partitioners.py's arithmetic step by step, calling
the partitioner's own helpers where the arithmetic is theirs and raising the same messages, so that what
it passes the stage builds and what it refuses the stage refuses (tests/test_partition_sizes.py builds
the boundary cases with the real partitioner). It is not training code: a change here retrains nothing.

The partitioners depend on the labels only through each class's count (they shuffle index lists whose
lengths are those counts), so the counts give the sizes exactly. They are known for the full datasets
(TRAIN_CLASS_COUNTS). Of a subset (`datasets.<name>.train_size`) only the total is known; a check that
needs the class counts then falls back to a bound that holds for any class mix, so it refuses only what
surely fails.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.inputs import dataset_spec
from pipeline.partitioners import PartitionError, choose_cluster_classes, largest_block_size, partition_dirichlet

# Each class's training samples in the full datasets, as the sources give them (SVHN's digit 0 is class 0).
TRAIN_CLASS_COUNTS = {
    "mnist": (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949),
    "fashion_mnist": (6000,) * 10,
    "cifar10": (5000,) * 10,
    "cifar100": (500,) * 100,
    "svhn": (4948, 13861, 10585, 8497, 7458, 6882, 5727, 5595, 5045, 4659),
}


@dataclass(frozen=True)
class TrainingSplit:
    """What is known of a dataset's training split before it is downloaded."""

    samples: int
    classes: int
    class_counts: tuple[int, ...] | None  # None: a subset, whose class mix only its data tells


@dataclass(frozen=True)
class PartitionSizes:
    train_sizes: tuple[int, ...] | None  # each client's, after the validation split; None: a draw decides
    dropped: int | None  # samples no client gets, where the arithmetic decides it; None: unknown


def training_split(dataset: str, overrides: dict | None) -> TrainingSplit | None:
    """None where even the size is unknown before download (FEMNIST's varies with the source)."""
    spec = dataset_spec(dataset, overrides)
    if spec.train_size is None:
        return None
    counts = TRAIN_CLASS_COUNTS.get(dataset)
    return TrainingSplit(
        spec.train_size, spec.classes, counts if counts is not None and sum(counts) == spec.train_size else None
    )


def stand_in_labels(counts: tuple[int, ...]) -> np.ndarray:
    """Labels with the class counts of the real ones: all the partitioners' arithmetic sees of them."""
    return np.repeat(np.arange(len(counts)), counts).astype(np.int64)


def partition_sizes(settings: dict, split: TrainingSplit) -> PartitionSizes:
    """The sizes `make_partition` gives these (schema-checked) settings, in its order of checks; raises
    the PartitionError it would raise."""
    clients = settings.get("clients")
    if clients is not None and clients > split.samples:
        raise PartitionError(
            f"clients: {clients} clients but only {split.samples} samples; allowed: 1..{split.samples}"
        )
    sizes, dropped = SCHEME_SIZES[settings["scheme"]](settings, split)
    if sizes is not None and 0 in sizes:
        raise PartitionError(f"clients: some of the {len(sizes)} clients would get no samples; lower clients")
    return PartitionSizes(after_validation(sizes, settings.get("val_fraction", 0.0)), dropped)


def iid_sizes(settings: dict, split: TrainingSplit):
    clients = settings["clients"]
    return (split.samples // clients,) * clients, split.samples % clients


def shards_sizes(settings: dict, split: TrainingSplit):
    """partition_shards: clients x shards_per_client blocks of one size, the rest of the data left out."""
    clients, per_client = settings["clients"], settings["shards_per_client"]
    needed, cut, size = clients * per_client, settings.get("shard_cut", "one_label"), settings.get("shard_size")
    if cut == "sorted":
        size = size or split.samples // needed
        blocks = split.samples // size if size > 0 else 0
    elif split.class_counts is not None:
        size = size or largest_block_size(stand_in_labels(split.class_counts), needed)
        blocks = int(sum(count // size for count in split.class_counts)) if size > 0 else 0
    elif size is None:  # a subset, the block size left to the partitioner: the class counts decide it
        if needed <= split.samples:
            return None, None
        size = blocks = 0  # largest_block_size finds none
    elif split.samples // size < needed:  # a subset: at most samples // size blocks, whatever the class mix
        raise PartitionError(
            f"shard_size: {clients} clients x {per_client} shards of {size} samples need {needed} one-label "
            f"blocks, but {split.samples} samples yield at most {split.samples // size}; lower clients, "
            "shards_per_client or shard_size, or use shard_cut: sorted"
        )
    else:
        blocks = needed  # the bound allows them; whether the stage finds them all, the class mix decides
    if blocks < needed:
        kind = "one-label " if cut == "one_label" else ""
        raise PartitionError(
            f"shard_size: {clients} clients x {per_client} shards of {size} samples need {needed} "
            f"{kind}blocks, but the data yields only {blocks}; lower clients, shards_per_client or "
            "shard_size" + (", or use shard_cut: sorted" if cut == "one_label" else "")
        )
    return (per_client * size,) * clients, split.samples - needed * size


def dirichlet_sizes(settings: dict, split: TrainingSplit):
    clients = settings["clients"]
    if settings.get("equal_size", False):
        return (split.samples // clients,) * clients, split.samples % clients
    if split.class_counts is None:
        return None, 0  # each class is cut by a Dirichlet draw over its own samples
    # The sizes are the draw's: make it, as the stage does, first thing from the partition's seed.
    parts = partition_dirichlet(
        stand_in_labels(split.class_counts), clients, settings["alpha"], False, np.random.default_rng(settings["seed"])
    )
    return tuple(len(part) for part in parts), 0


def clusters_sizes(settings: dict, split: TrainingSplit):
    """partition_clusters: each cluster's clients draw samples_per_client from its classes' samples."""
    cluster_sizes, per_client = settings["cluster_sizes"], settings["samples_per_client"]
    # The stage's first draw from the partition's seed picks the classes; the same call picks the same.
    groups = choose_cluster_classes(
        split.classes,
        cluster_sizes,
        settings.get("classes_per_cluster", 2),
        settings.get("cluster_classes"),
        np.random.default_rng(settings["seed"]),
    )
    if split.class_counts is not None:
        for size, group in zip(cluster_sizes, groups):
            pool = sum(split.class_counts[c] for c in group)
            if size * per_client > pool:
                raise PartitionError(
                    f"samples_per_client: {size} clients x {per_client} samples exceed the "
                    f"{pool} samples of classes {group}; lower samples_per_client"
                )
    elif sum(cluster_sizes) * per_client > split.samples:  # the clusters' classes are disjoint
        raise PartitionError(
            f"samples_per_client: {sum(cluster_sizes)} clients x {per_client} samples exceed the dataset's "
            f"{split.samples} samples; lower samples_per_client"
        )
    return (per_client,) * sum(cluster_sizes), None


def natural_sizes(settings: dict, split: TrainingSplit):
    return None, None  # one client per writer: the writers decide


SCHEME_SIZES = {
    "iid": iid_sizes,
    "shards": shards_sizes,
    "dirichlet": dirichlet_sizes,
    "clusters": clusters_sizes,
    "natural": natural_sizes,
}


def after_validation(sizes: tuple[int, ...] | None, val_fraction: float) -> tuple[int, ...] | None:
    """split_validation's arithmetic: round(val_fraction * n) of each client's n samples are held out."""
    if sizes is None or not val_fraction:
        return sizes
    train = tuple(n - round(val_fraction * n) for n in sizes)
    if 0 in train:
        raise PartitionError(
            f"val_fraction: {val_fraction} leaves some clients no training samples; lower val_fraction or clients"
        )
    return train


# ---------------------------------------------------------------- warnings: allowed, but said


def dropped_samples_warning(path: str, settings: dict, samples: int, held: int) -> str | None:
    """Shards leave out what their blocks do not cover (class tails, surplus blocks; 40,800 of MNIST's
    60,000 at 96 x 2 shards of 100): allowed, and the papers do it, but never without a word. Equal-size
    schemes (iid, dirichlet with equal_size) leave out fewer samples than they have clients, and clusters
    draw a sample by design: those are not reported."""
    if settings.get("scheme") != "shards" or held >= samples:
        return None
    return (
        f"{path}: the shards hold {held} of dataset {settings['dataset']}'s {samples} training samples; "
        f"{samples - held} ({(samples - held) / samples:.1%}) are left out (shard_size and the class "
        "counts decide how many)"
    )


def large_batch_warning(path: str, batch_size: int, partition: str, train_sizes: tuple[int, ...]) -> str | None:
    """A batch above a client's training samples is that client's whole data: full-batch local steps, one an
    epoch. Allowed (full-batch is FedAvg's B = infinity), but said, since it changes what E epochs mean."""
    smaller = [n for n in train_sizes if n < batch_size]
    if not smaller:
        return None
    return (
        f"{path}: {batch_size} is more than the {min(smaller)}"
        f"{'' if len(set(smaller)) == 1 else f'..{max(smaller)}'} training samples of {len(smaller)} of the "
        f"{len(train_sizes)} clients of partition {partition}; those train full-batch (one step an epoch)"
    )
