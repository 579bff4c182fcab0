"""A seed folder's curve files: the plotted curves in DVCLive's layout, every other curve in curves.tsv,
every probed round in forgetting/rounds.json; checked against the text written out by hand, and read back
through the report's reader. And the one-off migration from the old layout gives the same bytes."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from pipeline.outputs import write_curves, write_probes
from pipeline.report.common import read_curve

REPO = Path(__file__).resolve().parents[2]

TABLE = {
    "test_accuracy": [(1, 0.5), (2, 0.625)],
    "train_loss": [(1, 2.25), (2, 1.5)],
    "bytes_up": [(1, 4096), (2, 4096)],
    "forgettable/cohort_total": [(2, 7)],
    "forgetting/worst_client_accuracy": [(2, 0.125)],
}


def test_plotted_curves_keep_their_own_file_and_the_rest_share_curves_tsv_in_name_order(tmp_path):
    write_curves(tmp_path, TABLE)
    assert (tmp_path / "test_accuracy.tsv").read_text() == "step\ttest_accuracy\n1\t0.5\n2\t0.625\n"
    assert (tmp_path / "forgetting" / "cohort_total.tsv").read_text() == "step\tcohort_total\n2\t7\n"
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "curves.tsv",
        "forgetting",
        "forgetting/cohort_total.tsv",
        "test_accuracy.tsv",
    ]
    assert (tmp_path / "curves.tsv").read_text() == (
        "curve\tstep\tvalue\n"
        "bytes_up\t1\t4096\nbytes_up\t2\t4096\n"
        "forgetting/worst_client_accuracy\t2\t0.125\n"
        "train_loss\t1\t2.25\ntrain_loss\t2\t1.5\n"
    )
    # The report reads each back as (rounds, values), wherever it lives; a curve never logged is empty.
    assert read_curve(tmp_path, "train_loss") == ([1, 2], [2.25, 1.5])
    assert read_curve(tmp_path, "test_accuracy") == ([1, 2], [0.5, 0.625])
    assert read_curve(tmp_path, "forgettable/cohort_total") == ([2], [7.0])
    assert read_curve(tmp_path, "test_set_accuracy") == ([], [])


def test_no_other_curve_no_curves_file(tmp_path):
    write_curves(tmp_path, {"test_accuracy": [(1, 0.5)]})
    assert not (tmp_path / "curves.tsv").exists()
    assert read_curve(tmp_path, "train_loss") == ([], [])


def test_every_probed_round_in_one_rounds_json(tmp_path):
    probes = {
        "has_validation": True,
        "rounds": {
            20: {"round": 20, "clients": [3, 1], "F": [0.25, math.nan]},
            3: {"round": 3, "clients": [1, 2], "F": [0.5, 0.0]},
        },
    }
    write_probes(tmp_path, "run-seed0", probes, figures=False)
    assert sorted(p.name for p in (tmp_path / "forgetting").iterdir()) == ["rounds.json"]
    data = json.loads((tmp_path / "forgetting" / "rounds.json").read_text())
    assert data == {
        "20": {"round": 20, "clients": [3, 1], "F": [0.25, None], "held_out": "validation split"},
        "3": {"round": 3, "clients": [1, 2], "F": [0.5, 0.0], "held_out": "validation split"},
    }


def old_layout_seed(folder: Path) -> None:
    """A seed folder as the train stage wrote it up to 94956abe: one file per curve in DVCLive's folders,
    one per probed round."""
    metrics = folder / "plots" / "metrics"
    (metrics / "forgettable").mkdir(parents=True)
    (metrics / "forgetting").mkdir()
    (folder / "forgetting").mkdir()
    (folder / "metrics.json").write_text("{}\n")
    (metrics / "test_accuracy.tsv").write_text("step\ttest_accuracy\n1\t0.5\n2\t0.625\n")
    (metrics / "train_loss.tsv").write_text("step\ttrain_loss\n1\t2.25\n2\t1.5\n")
    (metrics / "bytes_up.tsv").write_text("step\tbytes_up\n1\t4096\n2\t4096\n")
    (metrics / "forgettable" / "cohort_total.tsv").write_text("step\tcohort_total\n2\t7\n")
    (metrics / "forgetting" / "worst_client_accuracy.tsv").write_text("step\tworst_client_accuracy\n2\t0.125\n")
    for round_, f in ((3, "[0.5, 0.0]"), (20, "[0.25, null]")):
        record = f'{{"F": {f}, "held_out": "training samples (no validation split)", "round": {round_}}}'
        (folder / "forgetting" / f"round_{round_}.json").write_text(record + "\n")


def test_migration_gives_the_bytes_todays_writers_give(tmp_path):
    old, new = tmp_path / "old" / "seed0", tmp_path / "new"
    old_layout_seed(old)
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "migrate_seed_layout.py"), str(tmp_path / "old")],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1 of 1 seed folders rewritten to today's layout"
    write_curves(new, TABLE)
    records = {3: {"F": [0.5, 0.0], "round": 3}, 20: {"F": [0.25, math.nan], "round": 20}}
    write_probes(new, "run-seed0", {"rounds": records}, figures=False)
    migrated = {p.relative_to(old).as_posix(): p.read_bytes() for p in old.rglob("*") if p.is_file()}
    written = {p.relative_to(new).as_posix(): p.read_bytes() for p in new.rglob("*") if p.is_file()}
    assert migrated.pop("metrics.json") == b"{}\n"
    assert migrated == written
    assert not (old / "plots").exists()  # emptied folders go too


def test_migration_from_the_interim_layout_moves_the_plotted_curves(tmp_path):
    """2d979079's layout: curves.tsv and rounds.json as today, the plotted curves still in plots/metrics/."""
    folder = tmp_path / "seed0"
    (folder / "plots" / "metrics" / "forgettable").mkdir(parents=True)
    (folder / "forgetting").mkdir()
    (folder / "metrics.json").write_text("{}\n")
    (folder / "curves.tsv").write_text("curve\tstep\tvalue\ntrain_loss\t1\t2.25\n")
    (folder / "forgetting" / "rounds.json").write_text('{"3": {"F": [0.5]}}\n')
    (folder / "plots" / "metrics" / "test_accuracy.tsv").write_text("step\ttest_accuracy\n1\t0.5\n")
    (folder / "plots" / "metrics" / "forgettable" / "cohort_total.tsv").write_text("step\tcohort_total\n2\t7\n")
    before = {p.name: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "migrate_seed_layout.py"), str(folder)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    after = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert after == {
        "metrics.json": before["metrics.json"],
        "curves.tsv": before["curves.tsv"],
        "forgetting/rounds.json": before["rounds.json"],
        "test_accuracy.tsv": before["test_accuracy.tsv"],
        "forgetting/cohort_total.tsv": before["cohort_total.tsv"],
    }
    assert not (folder / "plots").exists()
