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
from pipeline.errors import UserError, exit_on_user_error, refuse_disk_errors
from pipeline.inputs import (
    DATASETS,
    DatasetSpec,
    dataset_record_path,
    dataset_spec,
    prepared_path,
    read_npz,
    validate_arrays,
)
from pipeline.io import save_npz, sha256_file, write_json

RAW_DIR = Path("data/raw")
MIRROR_ENV = "FEDFORGET_DATA_MIRROR"

# The copies this project's development machines prepare from ../shared/datasets (keyed by the prepared
# file's sha256), and how each differs from the dataset the papers used (../shared/datasets/README.md).
# A record whose copy is a stand-in says so, and so does every report on it.
KNOWN_COPIES = {
    "66d0d104da5f673ffd964f5e79fbea287da49358726afa6094ef081059bc78c1": (
        "MNIST, byte-identical to the official idx files",
        False,
    ),
    "59ce0a95d40827e776532a62c05a5cc8aae946dd51eda741f784d5e76c3ab451": (
        "Fashion-MNIST, from the official gz files",
        False,
    ),
    "c069ea35a03b9124f7e77c7739208112a53d662fc3985b051c75c6d98bdb8922": (
        "CIFAR-10, a JPEG (quality ~75) copy of its 60,000 images, not the original pixels",
        True,
    ),
    "cbc5f4c226156fb7ef0c06ff9b30271f5337fb02105fab173a1a5cfb800f90a7": (
        "CIFAR-100, the original pixels re-split 500/100 per class (seed 0), not the official split; no coarse labels",
        True,
    ),
    "cd545131317e77d05c540e1006c344c183faa47d2b7bd50b93966c92100438da": (
        "FEMNIST, a 300-writer subset of LEAF's 5 % non-IID sample (41,432 train + 4,755 test), not the "
        "full 3,597-writer FEMNIST",
        True,
    ),
}


def from_mirror(name: str, mirror: Path, spec: DatasetSpec) -> dict:
    path = mirror / f"{name}.npz"
    if not path.is_file():  # what is allowed, too, not only what is missing (issue 54)
        where, what = (
            (mirror, "no such folder")
            if not mirror.exists()
            else (mirror, "a file, not a folder")
            if not mirror.is_dir()
            else (path, "file not found")
        )
        raise UserError(
            f"{where} ({MIRROR_ENV}): {what}; expected a folder holding {name}.npz, or {MIRROR_ENV} "
            "unset to download it"
        )
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


def provenance(sha256: str, mirror: str | None) -> dict:
    """Where a prepared file came from and, for a copy this project knows, how it differs from the dataset
    the papers used (`stand_in`: it does)."""
    copy, stand_in = KNOWN_COPIES.get(sha256, (None, None))
    record = {"source": "mirror" if mirror else "download"}
    if copy is not None:
        record.update({"copy": copy, "stand_in": stand_in})
    elif mirror:
        record.update({"copy": "an unknown mirror copy (not one ../shared/datasets makes)", "stand_in": None})
    else:
        record.update({"copy": "downloaded from the dataset's own source", "stand_in": False})
    return record


def write_prepared(name: str, arrays: dict, mirror: str | None = None) -> None:
    """data/prepared/<name>.npz (DVC's cache) and its record reports/datasets/<name>.json (git): the
    checksum the loaders verify (what the train stages depend on), the shapes, and which copy it is."""
    path = prepared_path(name)
    save_npz(path, **arrays)
    sha256 = sha256_file(path)
    write_json(
        dataset_record_path(name),
        {
            "name": name,
            "sha256": sha256,
            "shapes": {key: list(value.shape) for key, value in sorted(arrays.items())},
            **provenance(sha256, mirror),
        },
    )


@exit_on_user_error
@refuse_disk_errors
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help=f"one of: {', '.join(DATASETS)}")
    args = parser.parse_args(argv)
    # Validated like every stage's params (grid.yaml aside: this stage does not depend on it).
    overrides = load_checked_params(grid_path=None)["datasets"].get(args.name) or {}
    mirror = os.environ.get(MIRROR_ENV) or None
    arrays = prepare(args.name, overrides, mirror)
    write_prepared(args.name, arrays, mirror)
    print(f"{prepared_path(args.name)}: {arrays['x_train'].shape[0]} train, {arrays['x_test'].shape[0]} test")


if __name__ == "__main__":
    main()
