"""Download stage: one dataset -> data/prepared/<name>.npz in the prepared-dataset format.

    python -m pipeline.download NAME

With FEDFORGET_DATA_MIRROR set, `<mirror>/<name>.npz` is validated and copied; otherwise the dataset is
downloaded with its source's own downloader (checksums verified) and converted by `pipeline.sources`.
The prepared file gets a record reports/datasets/<name>.json (in git) with its SHA-256, so a later stage
refuses a file that was truncated or changed after it was written. The specs and loaders the training
engine uses are in pipeline/inputs.py.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from pipeline.config import load_checked_params
from pipeline.errors import UserError, exit_on_user_error
from pipeline.inputs import (DATASETS, DatasetSpec, dataset_record_path, dataset_spec, prepared_path, read_npz,
                             validate_arrays)
from pipeline.io import save_npz, sha256_file, write_json

RAW_DIR = Path("data/raw")
MIRROR_ENV = "FEDFORGET_DATA_MIRROR"


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


def write_prepared(name: str, arrays: dict) -> None:
    """data/prepared/<name>.npz (DVC's cache) and its record reports/datasets/<name>.json (git): the
    checksum the loaders verify, and what the train stages depend on."""
    path = prepared_path(name)
    save_npz(path, **arrays)
    write_json(dataset_record_path(name), {
        "name": name,
        "sha256": sha256_file(path),
        "shapes": {key: list(value.shape) for key, value in sorted(arrays.items())},
    })


@exit_on_user_error
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help=f"one of: {', '.join(DATASETS)}")
    args = parser.parse_args(argv)
    # Validated like every stage's params (grid.yaml aside: this stage does not depend on it).
    overrides = load_checked_params(grid_path=None)["datasets"].get(args.name) or {}
    arrays = prepare(args.name, overrides, os.environ.get(MIRROR_ENV) or None)
    write_prepared(args.name, arrays)
    print(f"{prepared_path(args.name)}: {arrays['x_train'].shape[0]} train, {arrays['x_test'].shape[0]} test")


if __name__ == "__main__":
    main()
