"""Partition stage: a prepared dataset -> the client index arrays of one named partition.

    python -m pipeline.partition NAME

writes data/partitions/<NAME>/clients.npz (DVC's cache: every client's train indices, and validation
indices when val_fraction > 0, as one concatenated array plus offsets) and its record in git,
reports/partitions/<NAME>/: meta.json (sizes, checksums: what the train stages depend on),
label_counts.json and label_mix.png (the label mix of a sample of clients, like TCE's Figure 4). The
clients are dealt by pipeline/partitioners.py, pure functions of (labels, the settings, a seeded
generator): the same inputs give byte-identical files. The loader the training engine uses is
pipeline/inputs.py's load_partition.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from pipeline.config import load_checked_params
from pipeline.errors import UserError, exit_on_user_error, refuse_disk_errors
from pipeline.inputs import PARTITION_RECORDS, PARTITIONS_DIR, dataset_spec, load_prepared_with_sha256
from pipeline.io import atomic_dir, save_npz, sha256_file, write_json
from pipeline.partition_sizes import dropped_samples_warning
from pipeline.partitioners import PartitionError, make_partition


def pack(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    flat = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    return flat, offsets


def label_counts(parts: list[np.ndarray], labels: np.ndarray, classes: int) -> list[list[int]]:
    return [np.bincount(labels[p], minlength=classes).tolist() for p in parts]


def plot_label_mix(counts: list[list[int]], title: str, path: Path, sample: int = 10, seed: int = 0) -> None:
    """Stacked bars of each class's share for a random sample of clients (TCE's Figure 4)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = np.asarray(counts, dtype=float)
    shown = np.sort(np.random.default_rng(seed).permutation(len(counts))[:sample])
    shares = counts[shown] / counts[shown].sum(axis=1, keepdims=True)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    left = np.zeros(len(shown))
    cmap = plt.get_cmap("tab20" if counts.shape[1] > 10 else "tab10")
    for c in range(counts.shape[1]):
        ax.barh(
            range(len(shown)),
            shares[:, c],
            left=left,
            color=cmap(c % cmap.N),
            label=str(c) if counts.shape[1] <= 20 else None,
        )
        left += shares[:, c]
    ax.set_yticks(range(len(shown)), [f"client {k}" for k in shown])
    ax.set_xlabel("share of the client's samples")
    ax.set_xlim(0, 1)
    ax.set_title(title)
    if counts.shape[1] <= 20:
        ax.legend(title="class", bbox_to_anchor=(1.01, 1), loc="upper left", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_partition(
    name: str,
    settings: dict,
    result: dict,
    labels: np.ndarray,
    classes: int,
    prepared_sha256: str,
    out_dir: Path,
    record_dir: Path,
) -> None:
    """clients.npz into `out_dir` (DVC's cache), and into `record_dir` (git) the partition's record:
    meta.json (with the checksums the train stages depend on), label_counts.json and label_mix.png."""
    train_flat, train_offsets = pack(result["train"])
    val_flat, val_offsets = pack(result["val"])
    with atomic_dir(out_dir) as tmp:
        save_npz(
            tmp / "clients.npz",
            train_indices=train_flat,
            train_offsets=train_offsets,
            val_indices=val_flat,
            val_offsets=val_offsets,
        )
        clients_sha256 = sha256_file(tmp / "clients.npz")
    with atomic_dir(record_dir) as tmp:
        counts = label_counts(result["train"], labels, classes)
        write_json(tmp / "label_counts.json", {"train": counts, "val": label_counts(result["val"], labels, classes)})
        meta = {
            "name": name,
            "dataset": settings["dataset"],
            "settings": settings,
            "clients": len(result["train"]),
            "prepared_sha256": prepared_sha256,
            "train_sizes": [len(p) for p in result["train"]],
            "val_sizes": [len(p) for p in result["val"]],
            "clients_sha256": clients_sha256,
        }
        meta.update({k: v for k, v in result.items() if k not in ("train", "val")})
        write_json(tmp / "meta.json", meta)
        plot_label_mix(counts, f"{name}: label mix of sampled clients", tmp / "label_mix.png")


@exit_on_user_error
@refuse_disk_errors
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="a key of `partitions` in params.yaml")
    args = parser.parse_args(argv)
    params = load_checked_params()
    if args.name not in params["partitions"]:
        raise UserError(f"partitions.{args.name}: no such partition; defined: {', '.join(params['partitions'])}")
    settings = params["partitions"][args.name]
    dataset = settings["dataset"]
    overrides = params.get("datasets", {}).get(dataset) or {}
    arrays, sha = load_prepared_with_sha256(dataset, overrides)
    try:
        result = make_partition(settings, arrays["y_train"], arrays.get("writer_train"))
    except PartitionError as error:
        raise UserError(f"partitions.{args.name}.{error}") from None
    write_partition(
        args.name,
        settings,
        result,
        arrays["y_train"],
        dataset_spec(dataset).classes,
        sha,
        PARTITIONS_DIR / args.name,
        PARTITION_RECORDS / args.name,
    )
    sizes = [len(p) for p in result["train"]]
    held = sum(sizes) + sum(len(p) for p in result["val"])
    warning = dropped_samples_warning(f"partitions.{args.name}", settings, len(arrays["y_train"]), held)
    if warning:  # the same line `config --check` prints, counted here from what was built
        print(f"warning: {warning}", file=sys.stderr)
    print(f"{PARTITIONS_DIR / args.name}: {len(sizes)} clients, {min(sizes)}..{max(sizes)} train samples each")


if __name__ == "__main__":
    main()
