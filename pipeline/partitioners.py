"""The partitioners: how a dataset's training samples are dealt to clients, as pure functions of (labels,
the partition's settings, a seeded generator), so that the same inputs give the same clients.

`make_partition` builds one named partition from its settings (params.yaml's partitions.<name>,
validated by pipeline.config); the partition stage (pipeline/partition.py) writes what it gives, and
pipeline/partition_sizes.py follows its arithmetic to check settings before any data is downloaded.
"""

from __future__ import annotations

import numpy as np

from pipeline.errors import UserError


class PartitionError(UserError):
    """Settings the data cannot satisfy. The message starts at the offending key; the caller prefixes
    the partition's path (`partitions.<name>.`), which only it knows."""


def partition_iid(labels: np.ndarray, clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Equal random split; the remainder of N / clients samples is left out so sizes are equal."""
    size = len(labels) // clients
    order = rng.permutation(len(labels))
    return [np.sort(order[k * size : (k + 1) * size]) for k in range(clients)]


def one_label_blocks(labels: np.ndarray, block_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Cut each class (shuffled) into as many whole blocks of `block_size` as it holds."""
    blocks = []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        blocks += [members[i * block_size : (i + 1) * block_size] for i in range(len(members) // block_size)]
    return blocks


def largest_block_size(labels: np.ndarray, blocks_needed: int) -> int:
    """The largest block size at which the classes still yield `blocks_needed` one-label blocks."""
    counts = np.bincount(labels)
    counts = counts[counts > 0]
    size = len(labels) // blocks_needed
    while size > 0 and (counts // size).sum() < blocks_needed:
        size -= 1
    return size


def sorted_blocks(labels: np.ndarray, block_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """McMahan et al.'s cut: sort by label (random order within a label), cut into consecutive blocks;
    a block may straddle two labels."""
    order = np.lexsort((rng.permutation(len(labels)), labels))
    return [order[i * block_size : (i + 1) * block_size] for i in range(len(labels) // block_size)]


def partition_shards(
    labels: np.ndarray,
    clients: int,
    shards_per_client: int,
    shard_size: int | None,
    rng: np.random.Generator,
    cut: str = "one_label",
) -> list[np.ndarray]:
    """Pathological non-IID: every client gets `shards_per_client` blocks dealt at random.

    cut="one_label" (FedCurv: "blocks of homogeneous labels"): blocks never straddle two labels; with
    `shard_size` unset it is the largest size that still gives clients × shards_per_client blocks.
    cut="sorted" (McMahan et al. 2017): the label-sorted data cut into consecutive blocks of
    `shard_size`. Surplus blocks and class tails are discarded, chosen at random, as FedCurv does
    ("discarding a small amount of data").
    """
    needed = clients * shards_per_client
    size = shard_size or (largest_block_size(labels, needed) if cut == "one_label" else len(labels) // needed)
    if size > 0:
        blocks = one_label_blocks(labels, size, rng) if cut == "one_label" else sorted_blocks(labels, size, rng)
    else:
        blocks = []
    if len(blocks) < needed:
        kind = "one-label " if cut == "one_label" else ""
        raise PartitionError(
            f"shard_size: {clients} clients x {shards_per_client} shards of {size} samples need {needed} "
            f"{kind}blocks, but the data yields only {len(blocks)}; lower clients, shards_per_client or "
            "shard_size" + (", or use shard_cut: sorted" if cut == "one_label" else "")
        )
    chosen = rng.permutation(len(blocks))[:needed]
    return [np.sort(np.concatenate([blocks[b] for b in chosen[k::clients]])) for k in range(clients)]


def equal_size_counts(
    proportions: np.ndarray, size: int, available: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Class counts summing to `size`, drawn from `proportions`, never above what each class has left."""
    counts = np.zeros_like(available)
    while counts.sum() < size:
        room = available - counts
        weights = proportions * (room > 0)
        if weights.sum() == 0:  # the client's classes are used up: fall back to what is left
            weights = (room > 0).astype(float)
        draw = rng.multinomial(size - counts.sum(), weights / weights.sum())
        counts += np.minimum(draw, room)
    return counts


def partition_dirichlet(
    labels: np.ndarray, clients: int, alpha: float, equal_size: bool, rng: np.random.Generator
) -> list[np.ndarray]:
    """Label skew from Dir(alpha) (Hsu et al. 2019; TCE).

    equal_size=False: each class is split across clients by proportions drawn from Dir(alpha) per class.
    equal_size=True: each client draws its class mix from Dir(alpha) and fills exactly N // clients
    samples from what is left of each class (TCE: "equally sized non-iid partitions").
    """
    classes = int(labels.max()) + 1
    pools = [rng.permutation(np.flatnonzero(labels == c)) for c in range(classes)]
    if not equal_size:
        parts = [[] for _ in range(clients)]
        for pool in pools:
            cuts = (np.cumsum(rng.dirichlet(np.full(clients, alpha))) * len(pool)).astype(int)[:-1]
            for k, piece in enumerate(np.split(pool, cuts)):
                parts[k].append(piece)
        return [np.sort(np.concatenate(p)) for p in parts]
    size = len(labels) // clients
    used = np.zeros(classes, dtype=np.int64)
    available = np.array([len(p) for p in pools])
    # Hsu et al.: q ~ Dir(alpha * p), p the global class mix. Scaled by the number of classes so that a
    # balanced dataset gets exactly Dir(alpha, ..., alpha) (integer arithmetic: the factor is exactly 1.0);
    # centring on p keeps a large alpha close to the global mix when the classes are uneven.
    present = available > 0
    concentration = alpha * (available[present] * int(present.sum()) / len(labels))
    result = []
    for _ in range(clients):
        proportions = np.zeros(classes)
        proportions[present] = rng.dirichlet(concentration)
        counts = equal_size_counts(proportions, size, available - used, rng)
        result.append(np.sort(np.concatenate([pools[c][used[c] : used[c] + counts[c]] for c in range(classes)])))
        used += counts
    return result


def choose_cluster_classes(
    classes: int,
    cluster_sizes: list[int],
    classes_per_cluster: int,
    cluster_classes: list[list[int]] | None,
    rng: np.random.Generator,
) -> list[list[int]]:
    if cluster_classes is not None:
        flat = [c for group in cluster_classes for c in group]
        if len(cluster_classes) != len(cluster_sizes):
            raise PartitionError(
                f"cluster_classes: {len(cluster_classes)} groups for "
                f"{len(cluster_sizes)} clusters; give one group per cluster"
            )
        if len(set(flat)) != len(flat):
            raise PartitionError(
                f"cluster_classes: {cluster_classes} overlap; each class may belong to one cluster only"
            )
        if min(flat) < 0 or max(flat) >= classes:
            raise PartitionError(f"cluster_classes: {cluster_classes} has classes outside 0..{classes - 1}")
        return [sorted(group) for group in cluster_classes]
    if classes_per_cluster * len(cluster_sizes) > classes:
        raise PartitionError(
            f"classes_per_cluster: {classes_per_cluster} classes x {len(cluster_sizes)} clusters exceeds "
            f"the dataset's {classes} classes; clusters need disjoint classes"
        )
    picked = rng.permutation(classes)[: classes_per_cluster * len(cluster_sizes)]
    return [sorted(picked[i :: len(cluster_sizes)].tolist()) for i in range(len(cluster_sizes))]


def partition_clusters(
    labels: np.ndarray,
    cluster_sizes: list[int],
    classes_per_cluster: int,
    samples_per_client: int,
    rng: np.random.Generator,
    cluster_classes: list[list[int]] | None = None,
) -> tuple[list[np.ndarray], list[list[int]]]:
    """Cluster-level label imbalance (FedWAvg): clusters own disjoint classes; each client draws
    `samples_per_client` samples without overlap, uniformly from its cluster's classes."""
    groups = choose_cluster_classes(int(labels.max()) + 1, cluster_sizes, classes_per_cluster, cluster_classes, rng)
    result = []
    for size, group in zip(cluster_sizes, groups):
        pool = rng.permutation(np.flatnonzero(np.isin(labels, group)))
        if size * samples_per_client > len(pool):
            raise PartitionError(
                f"samples_per_client: {size} clients x {samples_per_client} samples exceed the "
                f"{len(pool)} samples of classes {group}; lower samples_per_client"
            )
        result += [np.sort(pool[k * samples_per_client : (k + 1) * samples_per_client]) for k in range(size)]
    return result, groups


def partition_natural(writers: np.ndarray, max_clients: int | None) -> list[np.ndarray]:
    """One client per writer (FEMNIST), in writer-id order, optionally only the first `max_clients`."""
    ids = np.unique(writers)
    if max_clients is not None:
        ids = ids[:max_clients]
    return [np.flatnonzero(writers == w) for w in ids]


def split_validation(indices: np.ndarray, val_fraction: float, rng: np.random.Generator):
    """Hold out round(val_fraction * n) of a client's samples (TCE: 10 %) as its validation set."""
    shuffled = rng.permutation(indices)
    n_val = int(round(val_fraction * len(indices)))
    return np.sort(shuffled[n_val:]), np.sort(shuffled[:n_val])


# ---------------------------------------------------------------- one partition from its settings


def make_partition(settings: dict, labels: np.ndarray, writers: np.ndarray | None = None) -> dict:
    """All client index arrays of one partition, from its params (validated by pipeline.config)."""
    rng = np.random.default_rng(settings["seed"])
    scheme = settings["scheme"]
    clients = settings.get("clients")
    if clients is not None and clients > len(labels):
        raise PartitionError(f"clients: {clients} clients but only {len(labels)} samples; allowed: 1..{len(labels)}")
    extra = {}
    if scheme == "iid":
        parts = partition_iid(labels, clients, rng)
    elif scheme == "shards":
        parts = partition_shards(
            labels,
            clients,
            settings["shards_per_client"],
            settings.get("shard_size"),
            rng,
            settings.get("shard_cut", "one_label"),
        )
    elif scheme == "dirichlet":
        parts = partition_dirichlet(labels, clients, settings["alpha"], settings.get("equal_size", False), rng)
    elif scheme == "clusters":
        parts, groups = partition_clusters(
            labels,
            settings["cluster_sizes"],
            settings.get("classes_per_cluster", 2),
            settings["samples_per_client"],
            rng,
            settings.get("cluster_classes"),
        )
        extra["cluster_classes"] = groups
        extra["client_cluster"] = [i for i, size in enumerate(settings["cluster_sizes"]) for _ in range(size)]
    elif scheme == "natural":
        if writers is None:
            raise PartitionError("scheme: natural needs a dataset with writer ids (femnist)")
        parts = partition_natural(writers, settings.get("max_clients"))
    else:
        raise PartitionError(f"scheme: unknown partitioner {scheme!r}")
    if any(len(p) == 0 for p in parts):
        raise PartitionError(f"clients: some of the {len(parts)} clients would get no samples; lower clients")
    val_fraction = settings.get("val_fraction", 0.0)
    val_parts = [np.zeros(0, dtype=np.int64)] * len(parts)
    if val_fraction > 0:
        pairs = [split_validation(p, val_fraction, rng) for p in parts]
        parts, val_parts = [p for p, _ in pairs], [v for _, v in pairs]
        if any(len(p) == 0 for p in parts):
            raise PartitionError(
                f"val_fraction: {val_fraction} leaves some clients no training samples; lower val_fraction or clients"
            )
    return {"train": parts, "val": val_parts, **extra}
