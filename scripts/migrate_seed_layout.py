"""Rewrite seed folders from the layouts before 2026-12-07's "few files a seed" to today's, in place.

Before (up to 94956abe): every curve in its own DVCLive-style plots/metrics/<name>.tsv and every probed
round in its own forgetting/round_<t>.json; then (2d979079) the curves but the plotted two in curves.tsv and
the rounds in forgetting/rounds.json, the plotted two still under plots/metrics/. Today (pipeline/outputs.py):
curves.tsv and forgetting/rounds.json as then, and the plotted curves at pipeline.paths.PLOTTED_CURVES
(test_accuracy.tsv, forgetting/cohort_total.tsv), no plots/ folder. Nothing is recomputed: each value's text
is carried over as it was written and today's writers (outputs.curves_table_text, probe_files.write_probes)
lay it out, so a migrated folder is the bytes the train stage writes today from the same result (checked by
retraining a sample on one CPU with the old and the new code: docs/measurements.md).

    python scripts/migrate_seed_layout.py reports/runs          # every seed folder under it
    python scripts/migrate_seed_layout.py reports/runs/<run>/seed0

Folders already in today's layout are left as they are.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

from pipeline.outputs import curves_table_text
from pipeline.paths import CURVES_FILE, PLOTTED_CURVES, PROBES_FILE
from pipeline.probe_files import write_probes

OLD_CURVES_DIR = Path("plots/metrics")  # DVCLive's folder, where every curve had its own file


def old_curves(folder: Path) -> dict[str, Path]:
    """The seed's curve files still in DVCLive's folder, by curve name."""
    metrics = folder / OLD_CURVES_DIR
    found = {path.relative_to(metrics).with_suffix("").as_posix(): path for path in metrics.rglob("*.tsv")}
    return dict(sorted(found.items()))


def curve_rows(path: Path, name: str) -> list[tuple[str, str]]:
    """A DVCLive-layout curve's (step, value) cells, as text."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t"))
    if rows[0] != ["step", name.rsplit("/", 1)[-1]] or any(len(row) != 2 for row in rows[1:]):
        raise SystemExit(f"{path}: not a curve of `step` and `{name}`; left the folder as it was")
    return [(step, value) for step, value in rows[1:]]


def migrate(folder: Path) -> bool:
    """Rewrite one seed folder; False if it had nothing in an old layout."""
    curves = old_curves(folder)
    probe_paths = sorted((folder / "forgetting").glob("round_*.json"))
    if not curves and not probe_paths:
        return False
    folded = {name: path for name, path in curves.items() if name not in PLOTTED_CURVES}
    if (folded and (folder / CURVES_FILE).exists()) or (probe_paths and (folder / PROBES_FILE).exists()):
        raise SystemExit(f"{folder}: holds two layouts at once; restore it from git and run again")
    table = {name: curve_rows(path, name) for name, path in folded.items()}
    records = {int(path.stem.removeprefix("round_")): json.loads(path.read_text()) for path in probe_paths}
    if table:
        (folder / CURVES_FILE).write_text(curves_table_text(table))
    if records:
        write_probes(folder / PROBES_FILE, records)
    for name, path in curves.items():
        if name in PLOTTED_CURVES:  # the same bytes, in today's place
            (folder / PLOTTED_CURVES[name]).parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, folder / PLOTTED_CURVES[name])
        else:
            path.unlink()
    for path in probe_paths:
        path.unlink()
    for directory in [*sorted((folder / "plots").rglob("*"), reverse=True), folder / "plots"]:
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()
    return True


def seed_folders(root: Path) -> list[Path]:
    if (root / "metrics.json").is_file():
        return [root]
    return sorted(path.parent for path in root.rglob("metrics.json") if path.parent.name.startswith("seed"))


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python scripts/migrate_seed_layout.py <reports/runs or a seed folder>", file=sys.stderr)
        return 2
    folders = seed_folders(Path(argv[0]))
    changed = sum(migrate(folder) for folder in folders)
    print(f"{changed} of {len(folders)} seed folders rewritten to today's layout")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
