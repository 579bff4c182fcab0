"""Download stage: one dataset -> data/prepared/<name>.npz in the prepared-dataset format.

    python -m pipeline.datasets NAME

With FEDFORGET_DATA_MIRROR set, `<mirror>/<name>.npz` is validated and copied; otherwise the dataset is
downloaded with its source's own downloader (checksums verified) and converted by `pipeline.sources`.
The prepared file gets a sidecar `<name>.json` with its SHA-256, so a later stage refuses a file that
was truncated or changed after it was written.
"""
from __future__ import annotations

import argparse
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.errors import UserError, exit_on_user_error
from pipeline.io import save_npz, sha256_file, write_json

PREPARED_DIR = Path("data/prepared")
RAW_DIR = Path("data/raw")
MIRROR_ENV = "FEDFORGET_DATA_MIRROR"


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
        spec.name, spec.image_shape, spec.classes,
        overrides.get("train_size", spec.train_size), overrides.get("test_size", spec.test_size),
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
            raise UserError(f"{source}: x_{split} has shape {tuple(x.shape)}; "
                            f"expected N x {' x '.join(map(str, spec.image_shape))}")
        if y.shape != (x.shape[0],):
            raise UserError(f"{source}: y_{split} has shape {tuple(y.shape)}; expected ({x.shape[0]},) "
                            f"to match x_{split}")
        if expected_size is not None and x.shape[0] != expected_size:
            raise UserError(f"{source}: {split} split has {x.shape[0]} samples; expected {expected_size}")
        if y.size and (y.min() < 0 or y.max() >= spec.classes):
            raise UserError(f"{source}: y_{split} has labels in [{y.min()}, {y.max()}]; "
                            f"expected 0..{spec.classes - 1}")
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


def from_mirror(name: str, mirror: Path, spec: DatasetSpec) -> dict:
    path = mirror / f"{name}.npz"
    arrays = read_npz(path, f"{path} ({MIRROR_ENV})")
    validate_arrays(arrays, spec, str(path))
    return arrays


def from_source(name: str, spec: DatasetSpec) -> dict:
    from pipeline import sources  # torchvision is imported only when really downloading

    try:
        arrays = sources.fetch(name, RAW_DIR / name)
    except sources.SourceError as error:
        raise UserError(str(error)) from None
    validate_arrays(arrays, spec, f"{name} (downloaded)")
    return arrays


def prepare(name: str, overrides: dict | None = None, mirror: str | None = None) -> dict:
    """The prepared arrays for `name`, from the mirror when one is given, else from the source."""
    spec = dataset_spec(name, overrides)
    if mirror:
        return from_mirror(name, Path(mirror), spec)
    return from_source(name, spec)


def prepared_path(name: str) -> Path:
    return PREPARED_DIR / f"{name}.npz"


def write_prepared(name: str, arrays: dict) -> None:
    path = prepared_path(name)
    save_npz(path, **arrays)
    write_json(path.with_suffix(".json"), {
        "name": name,
        "sha256": sha256_file(path),
        "shapes": {key: list(value.shape) for key, value in sorted(arrays.items())},
    })


def load_prepared(name: str, overrides: dict | None = None) -> dict:
    """Read data/prepared/<name>.npz, checked against the checksum recorded when it was written."""
    return load_prepared_with_sha256(name, overrides)[0]


def load_prepared_with_sha256(name: str, overrides: dict | None = None) -> tuple[dict, str]:
    """`load_prepared` and the file's checksum, which it has just verified: a caller keying a cache by the
    data need not hash the file again (0.35 s for CIFAR-10)."""
    path = prepared_path(name)
    sidecar = path.with_suffix(".json")
    if not path.is_file() or not sidecar.is_file():
        raise UserError(f"{path}: not prepared yet; run `dvc repro download@{name}`")
    import json

    recorded = json.loads(sidecar.read_text())["sha256"]
    if sha256_file(path) != recorded:
        raise UserError(f"{path}: checksum differs from the one recorded in {sidecar} "
                        f"(truncated or changed); rerun `dvc repro -f download@{name}`")
    arrays = read_npz(path)
    validate_arrays(arrays, dataset_spec(name, overrides), str(path))
    return arrays, recorded


@exit_on_user_error
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help=f"one of: {', '.join(DATASETS)}")
    args = parser.parse_args(argv)
    from pipeline.config import load_checked_params

    # Validated like every stage's params (grid.yaml aside: this stage does not depend on it).
    overrides = load_checked_params(grid_path=None)["datasets"].get(args.name) or {}
    arrays = prepare(args.name, overrides, os.environ.get(MIRROR_ENV) or None)
    write_prepared(args.name, arrays)
    print(f"{prepared_path(args.name)}: {arrays['x_train'].shape[0]} train, {arrays['x_test'].shape[0]} test")


if __name__ == "__main__":
    main()
