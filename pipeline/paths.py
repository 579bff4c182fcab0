"""Where the pipeline's files live, relative to the repository's root (the stages' working directory):
the one home of every path a stage reads or writes, so that no layer imports another for a path.
No pipeline imports: every module may import it."""

from __future__ import annotations

from pathlib import Path

PARAMS_FILE = Path("params.yaml")  # every setting
GRID_FILE = Path("grid.yaml")  # the ids dvc.yaml's stages iterate over (pipeline.profile)
PREPARED_DIR = Path("data/prepared")  # <dataset>.npz (DVC's cache)
DATASET_RECORDS = Path("reports/datasets")  # <dataset>.json: the prepared file's sha256 and shapes (git)
PARTITIONS_DIR = Path("data/partitions")  # <partition>/clients.npz (DVC's cache)
PARTITION_RECORDS = Path("reports/partitions")  # <partition>/meta.json, label_counts.json, label_mix.png (git)
RESOLVED_DIR = Path("resolved")  # <run>.json: a run's settings under the active profile (git)
FINGERPRINT_DIR = Path("fingerprint")  # engine.json, algorithms/<name>.json (git)
RUNS_DIR = Path("reports/runs")  # <run>/seed<s>/: each seed's metrics, curves, settings, timing, probes (git)
MODELS_DIR = Path("data/models")  # <run>-seed<s>.pt: each seed's last model (written, not tracked)
REPORTS_DIR = Path("reports")  # the papers' tables and figures, the claims ledger (git)

# Inside a seed folder (pipeline.outputs writes it, pipeline.report reads it). Few files and folders a seed:
# each is an entry in git's index and an object `dvc exp run` writes (pipeline/outputs.py says more).
PLOTTED_CURVES = {  # the curves dvc.yaml plots, each its own `step` and value file
    "test_accuracy": Path("test_accuracy.tsv"),
    "forgettable/cohort_total": Path("forgetting/cohort_total.tsv"),
}
CURVES_FILE = Path("curves.tsv")  # every other curve: a `curve`, `step`, `value` row per point
PROBES_FILE = Path("forgetting/rounds.json")  # every probed round's record, keyed by the round
