"""A trained seed's outputs, written from its result (pipeline.training.SeedResult) into
reports/runs/<run>/seed<s>/:

    metrics.json              the headline numbers (`summarize`, `forgetting_summary`)
    test_accuracy.tsv         the accuracy curve, one row per evaluated round (`step` and the value, as
                              DVCLive writes a curve): dvc.yaml plots it
    curves.tsv                every other curve, one row per (curve, round): `curve`, `step`, `value`
    settings.json             the resolved settings it trained with, and what the profile scaled
    timing.json               seconds per round, the probes' share, the device, the code and the commit
    forgetting/               the probes: rounds.json ({round: record}), forgettable.tsv, cohort_total.tsv
                              (the cohort's forgettable examples per probed round, plotted), and for the
                              run's first seed the figures (round_<t>.png, forgettable.png), the reports' ones

and the last model to data/models/<run>-seed<s>.pt (not a DVC output: `dvc repro -f` rebuilds it). The
folder is built aside and swapped in whole, so a failure leaves the last good one.

The curves and metrics are written here rather than through DVCLive, in its file layout, because a
DVCLive `Live` opens the DVC repository each time (0.4-0.6 s a seed here, measured) and the curves are
written once, at the end, from the history, where DVCLive's value is logging while training runs.

Few files and folders a seed, because every file under reports/runs/ is an entry in git's index, which
`dvc exp run` rewrites once per stage, and every file and folder an object it writes loose, whose count
sets off git's automatic gc inside the experiment (docs/commands.md): one file per curve and per probed
round in DVCLive's plots/metrics/ folders made 7,854 files and 2,591 folders, a gc in every experiment.
Only the curves `dvc plots` draws keep a file each (PLOTTED_CURVES).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import torch

from pipeline import probe_files
from pipeline.io import write_json, write_text
from pipeline.metrics import rounds_to_accuracy
from pipeline.paths import CURVES_FILE, MODELS_DIR, PLOTTED_CURVES, PROBES_FILE, RUNS_DIR
from pipeline.results import save_torch
from pipeline.training import AGGREGATION_LOG_PREFIX, SeedResult

CURVES = (
    "test_accuracy",
    "test_loss",
    "train_loss",
    "bytes_down",
    "bytes_up",
    "example_forgetting_events",
    "test_set_accuracy",
)


def run_dir(run: str, seed: int, runs_dir: Path = RUNS_DIR) -> Path:
    return runs_dir / run / f"seed{seed}"


def summarize(
    targets: Sequence[float], history: list[dict], status: str, final_test_accuracy: float | None = None
) -> dict:
    """The run's headline metrics, with the first round each of `targets` (accuracies) was reached.
    `final_test_accuracy`: the last model on the test set when the curves were evaluated on validation
    data (the TCE paper's Table 1 number)."""
    evaluated = [h for h in history if h.get("test_accuracy") is not None]
    rounds = [h["round"] for h in evaluated]
    accuracies = [h["test_accuracy"] for h in evaluated]
    summary = {
        "status": status,
        "diverged": int(status == "diverged"),
        "rounds_completed": len(history),
        "final_accuracy": accuracies[-1] if accuracies else None,
        "best_accuracy": max(accuracies) if accuracies else None,
        "bytes_down_total": sum(h["bytes_down"] for h in history),
        "bytes_up_total": sum(h["bytes_up"] for h in history),
    }
    reached = {}
    for target in targets:
        found = rounds_to_accuracy(rounds, accuracies, target)
        if found is not None:
            reached[f"{target:g}"] = found
    summary["rounds_to_accuracy"] = reached
    if final_test_accuracy is not None:
        summary["final_test_accuracy"] = final_test_accuracy
    on_test_set = [h["test_set_accuracy"] for h in history if h.get("test_set_accuracy") is not None]
    if on_test_set:
        summary["test_set_accuracy_mean"] = sum(on_test_set) / len(on_test_set)
    return summary


def forgetting_summary(probes: dict) -> dict:
    """The probes' headline numbers, for `dvc metrics diff`: mean F_k per probed round, the worst
    client's accuracy under the global model at the last probe, and all forgettable examples counted."""
    summary: dict = {}
    rounds = probes.get("rounds", {})
    if rounds:
        summary["mean_local_forgetting"] = {
            f"round_{r}": round(float(torch.nanmean(torch.as_tensor(rec["F"]))), 6)
            for r, rec in sorted(rounds.items())
            if len(rec["clients"]) > 1
        }
        last = rounds[max(rounds)]["global_accuracy_spread"]
        summary["worst_client_accuracy"] = round(float(last["min"]), 6)
        summary["client_accuracy_sd"] = round(float(last["sd"]), 6)
    if probes.get("forgettable"):
        summary["forgettable_total"] = int(sum(sum(c.values()) for c in probes["forgettable"].values()))
    if probes.get("presentations"):
        summary["example_events"] = probes["presentations"]
    return summary


def curves(history: list[dict], probes: dict) -> dict[str, list[tuple[int, object]]]:
    """Every curve as (round, value) rows: the history's (CURVES and the aggregation's logs, where a
    round has a value), the cohort's forgettable examples (total and its worst client) every
    `forgettable_every` rounds, the mean F_k and the worst client's global accuracy at each probe round."""
    table: dict[str, list[tuple[int, object]]] = {}
    for record in history:
        names = [*CURVES, *(name for name in record if name.startswith(AGGREGATION_LOG_PREFIX))]
        for name in names:
            if record.get(name) is not None:
                table.setdefault(name, []).append((record["round"], record[name]))
    for round_, per_client in sorted(probes.get("forgettable", {}).items()):
        table.setdefault("forgettable/cohort_total", []).append((round_, int(sum(per_client.values()))))
        table.setdefault("forgettable/client_max", []).append((round_, int(max(per_client.values()))))
    for round_, record in sorted(probes.get("rounds", {}).items()):
        if len(record["clients"]) > 1:
            table.setdefault("forgetting/mean_local_forgetting", []).append(
                (round_, float(torch.nanmean(torch.as_tensor(record["F"]))))
            )
        table.setdefault("forgetting/worst_client_accuracy", []).append(
            (round_, float(record["global_accuracy_spread"]["min"]))
        )
    return table


def curve_text(name: str, rows: list[tuple[int, object]]) -> str:
    """One curve as DVCLive writes it: a tab-separated `step` and value column (csv's formatting)."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    writer.writerow(["step", name.rsplit("/", 1)[-1]])
    writer.writerows(rows)
    return out.getvalue()


def curves_table_text(table: dict[str, list[tuple[int, object]]]) -> str:
    """Several curves in one tab-separated file: a `curve`, `step`, `value` row per point, the curves in
    name order (so the bytes do not depend on the order they were logged in), csv's formatting."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    writer.writerow(["curve", "step", "value"])
    for name in sorted(table):
        writer.writerows((name, step, value) for step, value in table[name])
    return out.getvalue()


def write_curves(folder: Path, table: dict[str, list[tuple[int, object]]]) -> None:
    """The plotted curves to their files (PLOTTED_CURVES), the rest to curves.tsv (none: no file)."""
    others = {name: rows for name, rows in table.items() if name not in PLOTTED_CURVES}
    for name, path in PLOTTED_CURVES.items():
        if name in table:
            write_text(folder / path, curve_text(name, table[name]))
    if others:
        write_text(folder / CURVES_FILE, curves_table_text(others))


def timing(result: SeedResult, speed: dict) -> dict:
    """Seconds per round (probes included) and the probes' own share, so their cost can be stated; the
    device it trained on (its name, software, precision and determinism flags), the runtime's speed levers,
    the code digest (pipeline.fingerprint.run_code_digest) and the commit it trained at: since seconds and,
    on a GPU, the last bits of the numbers depend on them. All of it from the training, so that outputs
    written again from a kept result are the same bytes."""
    seconds, probe_seconds = result.seconds, result.probe_seconds
    probed = [(s, p) for s, p in zip(seconds, probe_seconds) if p > 0]
    return {
        "seconds_total": round(sum(seconds), 3),
        "seconds_per_round": [round(s, 4) for s in seconds],
        "probe_seconds_total": round(sum(probe_seconds), 3),
        "probe_fraction_of_probed_rounds": (
            round(sum(p for _, p in probed) / sum(s - p for s, p in probed), 4) if probed else None
        ),
        "device": {**result.device, **speed},
        "code": result.code,
        "commit": result.commit,
    }


def write_probes(seed_folder: Path, key: str, probes: dict, figures: bool) -> None:
    """forgetting/rounds.json (every probed round's record, PROBES_FILE) and forgettable.tsv over rounds; with
    `figures`, their PNGs too, titled with the (run, seed)'s `key`."""
    folder = seed_folder / PROBES_FILE.parent
    folder.mkdir(parents=True, exist_ok=True)
    held_out = "validation split" if probes.get("has_validation") else "training samples (no validation split)"
    records = probes.get("rounds", {})
    if records:
        probe_files.write_probes(
            seed_folder / PROBES_FILE, {round_: {**record, "held_out": held_out} for round_, record in records.items()}
        )
    for round_, record in sorted(records.items()):
        if figures:
            probe_files.plot_forgetting_heatmaps(
                folder / f"round_{round_}.png", record, f"{key}: local client forgetting, round {round_}"
            )
    counts = probes.get("forgettable", {})
    if counts:
        lines = ["round\tclient\tforgettable"]
        lines += [f"{r}\t{c}\t{n}" for r, per_client in sorted(counts.items()) for c, n in sorted(per_client.items())]
        (folder / "forgettable.tsv").write_text("\n".join(lines) + "\n")
        if figures:
            rounds = sorted(counts)
            clients = sorted({c for per_client in counts.values() for c in per_client})
            probe_files.plot_forgettable_curves(
                folder / "forgettable.png",
                rounds,
                {c: [counts[r].get(c) for r in rounds] for c in clients},
                f"{key}: forgettable examples per client",
            )


def write_seed(
    result: SeedResult, speed: dict, figures: bool, runs_dir: Path = RUNS_DIR, models_dir: Path = MODELS_DIR
) -> dict:
    """All of a seed's outputs from its result, swapped in whole; returns its headline metrics."""
    settings = result.settings
    out_dir = run_dir(settings.run, settings.seed, runs_dir)
    tmp_dir = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(tmp_dir, ignore_errors=True)
    summary = {
        **summarize(settings.schedule.targets, result.history, result.status, result.final_test_accuracy),
        **forgetting_summary(result.probes),
    }
    history = result.history
    try:
        write_text(
            tmp_dir / "metrics.json",
            json.dumps({**summary, "step": history[-1]["round"] if history else 0}, indent=4) + "\n",
        )
        write_curves(tmp_dir, curves(history, result.probes))
        write_json(tmp_dir / "settings.json", settings.record)
        write_json(tmp_dir / "timing.json", timing(result, speed))
        write_probes(tmp_dir, settings.key, result.probes, figures)
        # The model before the swap: a model that cannot be written (a full disk) leaves the committed
        # folder as it was, not rewritten with a new timing.json (issue 54).
        save_torch(result.final, models_dir / f"{settings.key}.pt")
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)  # no half-written folder left beside the committed one
        raise
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp_dir, out_dir)
    return summary


def remove_other_seeds(run: str, seeds: Sequence[int], runs_dir: Path = RUNS_DIR) -> None:
    """The run folder's seed folders that are not among `seeds` (a seed taken out of the run's list)."""
    folder = runs_dir / run
    if not folder.is_dir():
        return
    wanted = {f"seed{seed}" for seed in seeds}
    for path in folder.iterdir():
        if path.is_dir() and path.name.startswith("seed") and path.name not in wanted:
            shutil.rmtree(path)
