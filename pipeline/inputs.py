"""What a train stage reads, and the only code of the download, partition and resolve stages' files
the training engine runs: the dataset specs, the prepared-data and partition loaders, a run's resolved
settings. Its own module so that the engine's fingerprint (pipeline/fingerprint.py) covers these
loaders and not those stages' validation, download or partitioning code: a new message or option
there retrains nothing, while a change here (a loader decides what a run trains on) retrains all.

Where things live: the big arrays in DVC's cache under data/ (git-ignored), and their small records in
git under reports/ (a checksum per file), which is what the train stages depend on, so that a fresh
clone without the cache is up to date (docs/architecture.md).
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.errors import UserError
from pipeline.io import sha256_file
from pipeline.paths import DATASET_RECORDS, PARTITION_RECORDS, PARTITIONS_DIR, PREPARED_DIR, RESOLVED_DIR

# ---------------------------------------------------------------- datasets


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    image_shape: tuple[int, int, int]  # H, W, C
    classes: int
    train_size: int | None  # None: varies with the source (FEMNIST)
    test_size: int | None
    has_writers: bool = False


DATASETS = {
    spec.name: spec
    for spec in [
        DatasetSpec("mnist", (28, 28, 1), 10, 60000, 10000),
        DatasetSpec("fashion_mnist", (28, 28, 1), 10, 60000, 10000),
        DatasetSpec("cifar10", (32, 32, 3), 10, 50000, 10000),
        DatasetSpec("cifar100", (32, 32, 3), 100, 50000, 10000),
        DatasetSpec("svhn", (32, 32, 3), 10, 73257, 26032),
        DatasetSpec("femnist", (28, 28, 1), 62, None, None, has_writers=True),
    ]
}


def dataset_spec(name: str, overrides: dict | None = None) -> DatasetSpec:
    """The spec of a known dataset; params may override the sizes (to use a subset, as tests do)."""
    if name not in DATASETS:
        raise UserError(f"datasets.{name}: unknown dataset; allowed: {', '.join(DATASETS)}")
    spec = DATASETS[name]
    overrides = overrides or {}
    return DatasetSpec(
        spec.name,
        spec.image_shape,
        spec.classes,
        overrides.get("train_size", spec.train_size),
        overrides.get("test_size", spec.test_size),
        spec.has_writers,
    )


def validate_arrays(arrays: dict, spec: DatasetSpec, source: str) -> None:
    """Refuse anything that breaks the prepared-dataset contract, naming `source` and the problem."""
    required = ["x_train", "y_train", "x_test", "y_test"]
    if spec.has_writers:
        required += ["writer_train", "writer_test"]
    missing = [key for key in required if key not in arrays]
    if missing:
        raise UserError(f"{source}: missing key(s) {', '.join(missing)}; required: {', '.join(required)}")
    for split, expected_size in (("train", spec.train_size), ("test", spec.test_size)):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.dtype != np.uint8:
            raise UserError(f"{source}: x_{split} has dtype {x.dtype}; expected uint8")
        if y.dtype != np.int64:
            raise UserError(f"{source}: y_{split} has dtype {y.dtype}; expected int64")
        if x.ndim != 4 or tuple(x.shape[1:]) != spec.image_shape:
            raise UserError(
                f"{source}: x_{split} has shape {tuple(x.shape)}; expected N x {' x '.join(map(str, spec.image_shape))}"
            )
        if y.shape != (x.shape[0],):
            raise UserError(
                f"{source}: y_{split} has shape {tuple(y.shape)}; expected ({x.shape[0]},) to match x_{split}"
            )
        if expected_size is not None and x.shape[0] != expected_size:
            raise UserError(f"{source}: {split} split has {x.shape[0]} samples; expected {expected_size}")
        if y.size and (y.min() < 0 or y.max() >= spec.classes):
            raise UserError(f"{source}: y_{split} has labels in [{y.min()}, {y.max()}]; expected 0..{spec.classes - 1}")
        if spec.has_writers:
            writers = arrays[f"writer_{split}"]
            if writers.dtype != np.int64 or writers.shape != y.shape:
                raise UserError(f"{source}: writer_{split} must be int64 of shape ({y.shape[0]},)")


def read_npz(path: Path, source: str | None = None) -> dict:
    """Load every array of an .npz, turning a missing or unreadable file into a one-line error."""
    source = source or str(path)
    if not path.is_file():
        raise UserError(f"{source}: file not found")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise UserError(f"{source}: not a readable .npz file ({type(error).__name__}: {error})") from None


def prepared_path(name: str) -> Path:
    return PREPARED_DIR / f"{name}.npz"


def dataset_record_path(name: str) -> Path:
    return DATASET_RECORDS / f"{name}.json"


def load_prepared_with_sha256(name: str, overrides: dict | None = None) -> tuple[dict, str]:
    """data/prepared/<name>.npz's arrays, checked against the checksum recorded when it was written, and
    that checksum: a caller keying a cache by the data need not hash the file again (0.35 s for CIFAR-10)."""
    path, record = prepared_path(name), dataset_record_path(name)
    if not path.is_file() or not record.is_file():
        raise UserError(f"{path}: not prepared yet; run `dvc repro download@{name}` (or `dvc pull`)")
    recorded = json.loads(record.read_text())["sha256"]
    if sha256_file(path) != recorded:
        raise UserError(
            f"{path}: checksum differs from the one recorded in {record} "
            f"(truncated, changed, or from another commit); rerun `dvc repro -f download@{name}`"
        )
    arrays = read_npz(path)
    validate_arrays(arrays, dataset_spec(name, overrides), str(path))
    return arrays, recorded


# ---------------------------------------------------------------- partitions


def unpack(flat: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    return [flat[offsets[k] : offsets[k + 1]] for k in range(len(offsets) - 1)]


def partition_meta(name: str) -> dict:
    """A partition's record (reports/partitions/<name>/meta.json): its settings, sizes and checksums."""
    meta_path = PARTITION_RECORDS / name / "meta.json"
    if not meta_path.is_file():
        raise UserError(f"{meta_path}: partition not built yet; run `dvc repro partition@{name}`")
    return json.loads(meta_path.read_text())


def load_partition(name: str, dataset_sha256: str | None = None) -> dict:
    """Client index lists of a written partition, refusing a corrupt file or one built from other data."""
    meta = partition_meta(name)
    clients = PARTITIONS_DIR / name / "clients.npz"
    if not clients.is_file():
        raise UserError(f"{clients}: not built yet; run `dvc repro partition@{name}` (or `dvc pull`)")
    if sha256_file(clients) != meta["clients_sha256"]:
        raise UserError(
            f"{clients}: checksum differs from {PARTITION_RECORDS / name / 'meta.json'} (truncated, "
            f"changed, or from another commit); rerun `dvc repro -f partition@{name}`"
        )
    if dataset_sha256 is not None and meta["prepared_sha256"] != dataset_sha256:
        raise UserError(
            f"{PARTITIONS_DIR / name}: built from another version of dataset {meta['dataset']}; "
            f"rerun `dvc repro partition@{name}`"
        )
    arrays = read_npz(clients)
    return {
        "meta": meta,
        "train": unpack(arrays["train_indices"], arrays["train_offsets"]),
        "val": unpack(arrays["val_indices"], arrays["val_offsets"]),
    }


# ---------------------------------------------------------------- a run's resolved settings


def resolved_path(run: str) -> Path:
    return RESOLVED_DIR / f"{run}.json"


def read_resolved(run: str) -> dict:
    path = resolved_path(run)
    if not path.is_file():
        raise UserError(f"{path}: not written yet; run `dvc repro resolve` (or `python -m pipeline.resolve`)")
    return json.loads(path.read_text())


def settings_hash(settings: dict, extra: dict | None = None) -> str:
    """A short hash of everything that determines a run's numbers (checkpoints are keyed by it)."""
    payload = {k: v for k, v in settings.items() if k not in ("note", "checkpoint_every", "seeds")}
    text = json.dumps({"settings": payload, "extra": extra or {}}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
