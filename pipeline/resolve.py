"""Resolve stage: params.yaml -> resolved/<run>.json, the settings of every run of the active profile.

    python -m pipeline.resolve

A run's settings are resolved by pipeline/runs.py (defaults filled in, the profile's scalings applied);
this stage writes them where the train stages read them (pipeline/inputs.py's read_resolved).
"""

from __future__ import annotations

import argparse

from pipeline.config import derive_grid, load_checked_params
from pipeline.errors import exit_on_user_error, refuse_disk_errors, writing_into
from pipeline.inputs import RESOLVED_DIR
from pipeline.io import atomic_dir, write_json
from pipeline.runs import resolve_run


def write_resolved(params: dict, runs: list[str]) -> None:
    """resolved/<run>.json for every run of the profile: the settings its train stage reads, seeds
    included. A train stage depends on its run's file, not on params.yaml: a change to one run (`dvc exp
    run -S runs.X.lr=...`, or another seed list) rewrites only X's file and retrains X alone."""
    with atomic_dir(RESOLVED_DIR) as folder:
        for run in runs:
            write_json(folder / f"{run}.json", without_note(resolve_run(params, run)))


def without_note(settings: dict) -> dict:
    """A run's resolved settings without its free-text note, which changes no number."""
    return {k: v for k, v in settings.items() if k != "note"}


@exit_on_user_error
@refuse_disk_errors
def main(argv=None) -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    params = load_checked_params()
    runs = list(derive_grid(params)["runs"])
    with writing_into(RESOLVED_DIR):
        write_resolved(params, runs)
    print(f"resolved {len(runs)} runs -> {RESOLVED_DIR}/")


if __name__ == "__main__":
    main()
