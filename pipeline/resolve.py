"""Resolve stage: params.yaml -> resolved/<run>.json, the settings of every run of the active profile.

    python -m pipeline.resolve

A run's settings are resolved by pipeline/runs.py (defaults filled in, the profile's scalings applied);
this stage writes them where the train stages read them (pipeline/inputs.py's read_resolved).
"""
from __future__ import annotations

import argparse

from pipeline.config import derive_grid, load_checked_params
from pipeline.errors import exit_on_user_error
from pipeline.inputs import RESOLVED_DIR
from pipeline.io import atomic_dir, write_json
from pipeline.runs import resolve_run


def write_resolved(params: dict, runs: list[str]) -> None:
    """resolved/<run>.json for every run of the profile: the settings its train stages read.

    A train stage depends on its run's file, not on params.yaml: a change to one run (`dvc exp run -S
    runs.X.lr=...`) rewrites only X's file, and the seed list is left out of it, so adding a seed
    retrains only that seed (its new stage) while the others' file stays byte-identical. The same holds
    for a seed list under `scaled` (more seeds in the default profile than in the paper's)."""
    with atomic_dir(RESOLVED_DIR) as folder:
        for run in runs:
            write_json(folder / f"{run}.json", settings_without_seeds(resolve_run(params, run)))


def settings_without_seeds(settings: dict) -> dict:
    """A run's resolved settings without what differs between its seeds' stages: the seed list (also as
    a scaled key) and the free-text note."""
    kept = {k: v for k, v in settings.items() if k not in ("seeds", "note")}
    kept["scaled"] = {k: v for k, v in settings["scaled"].items() if k != "seeds"}
    return kept


@exit_on_user_error
def main(argv=None) -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    params = load_checked_params()
    runs = derive_grid(params)["run_ids"]
    write_resolved(params, runs)
    print(f"resolved {len(runs)} runs -> {RESOLVED_DIR}/")


if __name__ == "__main__":
    main()
