"""python -m pipeline.report: rebuild every paper's report from reports/runs/ and write the index."""
from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from pathlib import Path

import yaml

from pipeline.config import load_checked_params, read_yaml
from pipeline.errors import exit_on_user_error
from pipeline.inputs import read_resolved
from pipeline.io import write_json, write_text
from pipeline.papers import PAPERS, TITLES
from pipeline.paths import GRID_FILE, PARTITION_RECORDS, REPORTS_DIR, RUNS_DIR
from pipeline.report.common import NC, ReportContext, SeededRun, accuracy_cell, fmt, fmt_stat, load_results
from pipeline.report.confirmation import build_with_confirmations
from pipeline.report.seeds import K_LAST, RULE, has_value, mean_sd

PUBLISHED = Path(__file__).with_name("published.yaml")


def report_module(paper: str):
    """pipeline/report/<paper>.py, which builds the paper's folder: found by the paper's name, so that the
    list of papers is pipeline/papers.py's alone."""
    return importlib.import_module(f"{__package__}.{paper}")


def decided_share(claims: list) -> tuple[int, int]:
    """(decided, run): claims held or failed, out of the claims this profile runs (not 'not run')."""
    run = [c for c in claims if c.status != "not run"]
    return sum(c.status in ("held", "failed") for c in run), len(run)


# The ledger of the default profile when the verdicts issue (37) was filed, 2026-11-25, commit 47cf22b0
# (`git show 47cf22b0:reports/claims.md`): what the current totals are set beside.
BASELINE = {"date": "2026-11-25", "commit": "47cf22b0",
            "totals": {"held": 8, "failed": 3, "inconclusive": 23, "not run": 13}}


def claims_markdown(claims: list, profile: str) -> str:
    lines = ["# Claims ledger", "", f"Profile: **{profile}**. Each claim a paper makes, checked on our numbers: "
             "held, failed, inconclusive (our seeds do not separate the two sides) or not run (with why).", "",
             "## The rule", "", RULE, "",
             "| paper | claim | published | seeds (n) | test | status | our numbers | power (undecided) |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {c.paper} | {c.text} | {c.published} | {c.seeds} | {c.test} | **{c.status}** | {c.evidence} | "
              f"{c.power} |" for c in claims]
    counts = {s: sum(c.status == s for c in claims) for s in ("held", "failed", "inconclusive", "not run")}
    decided, run = decided_share(claims)
    lines += ["", "Totals: " + ", ".join(f"{n} {s}" for s, n in counts.items())
              + f"; decided: {decided} of the {run} claims this profile runs"
              + (f" ({decided / run:.0%})" if run else "")]
    if profile == "default":
        before = BASELINE["totals"]
        lines += ["", f"Before the verdict work ({BASELINE['date']}, commit {BASELINE['commit']}): "
                  + ", ".join(f"{n} {s}" for s, n in before.items())
                  + f"; decided: {before['held'] + before['failed']} of the {sum(before.values()) - before['not run']} "
                    "claims it ran"]
    return "\n".join(lines) + "\n"


def seeds_cell(run: SeededRun) -> str:
    text = f"{run.n} ({', '.join(map(str, run.seeds))})"
    if run.missing_seeds:
        text = (f"{run.n} of {len(run.wanted)} ({', '.join(map(str, run.seeds))}; no results yet for "
                f"{', '.join(map(str, run.missing_seeds))})")
    return text


def status_cell(run: SeededRun) -> str:
    if not run.diverged_count:
        return "ok"
    return "diverged" if run.n == 1 else f"{run.diverged_count} of {run.n} diverged"


def rounds_completed(run: SeededRun) -> str:
    counts = sorted({r.summary.get("rounds_completed") for r in run.results}, key=lambda c: (c is None, c or 0))
    return "–".join(str(c) for c in (counts if len(counts) == 1 else (counts[0], counts[-1])))


def seconds_total(run: SeededRun):
    seconds = [r.seconds for r in run.results]
    return None if any(s is None for s in seconds) else sum(seconds)


def seeds_section(results: dict[str, SeededRun]) -> list[str]:
    """Which runs have how many seeds (and which listed seeds have no results yet)."""
    groups: dict[tuple, list[str]] = {}
    for key, run in sorted(results.items()):
        groups.setdefault(tuple(run.seeds), []).append(key)
    lines = ["## Seeds", "", "Claims need at least 2 seeds a side to be decided (claims.md states the rule); "
             "a run with one seed leaves every claim on it inconclusive.", ""]
    for seeds, keys in sorted(groups.items(), key=lambda item: (-len(item[0]), item[0])):
        lines.append(f"- {len(seeds)} seed{'s' if len(seeds) != 1 else ''} ({', '.join(map(str, seeds))}), "
                     f"{len(keys)} run(s): {', '.join(keys)}")
    missing = [f"{key} (seed {', '.join(map(str, run.missing_seeds))})" for key, run in sorted(results.items())
               if run.missing_seeds]
    if missing:
        lines.append(f"- listed but without results yet: {', '.join(missing)}")
    return lines + [""]


def probe_stat(values: list, digits: int = 3) -> str:
    present = [v for v in values if v is not None]
    return fmt_stat(present, digits) if present else "—"


def forgetting_section(results: dict[str, SeededRun]) -> list[str]:
    """The runs with forgetting probes: headline numbers over seeds and links to seed 0's figures."""
    probed = {key: run for key, run in sorted(results.items())
              if any("mean_local_forgetting" in r.summary or "forgettable_total" in r.summary for r in run.results)}
    if not probed:
        return []
    lines = ["## Forgetting probes", "",
             "Local client forgetting F_k = mean over the other cohort clients' local models i of "
             "Acc_k(w_t^i) − Acc_k(w_{t−1}) on client k's held-out data (TCE, section 2; heatmaps: difference, "
             "post, prior, F_k); worst client / sd = the new global model's accuracy over every client's "
             "held-out data at the last probe round; forgettable = training samples a client's local model "
             "got right and the new global model wrong, summed over clients and probed rounds. Mean ± sd over "
             "seeds; figures of seed 0. Probe cost = the probes' seconds over the rest of a probed round's.", "",
             "| run | seeds | mean F_k by round | worst client | client sd | forgettable | probe cost | figures |",
             "|---|---|---|---|---|---|---|---|"]
    for key, run in probed.items():
        by_round: dict[str, list] = {}
        for r in run.results:
            for name, value in r.summary.get("mean_local_forgetting", {}).items():
                by_round.setdefault(name, []).append(value)
        rounds = "; ".join(f"{name.removeprefix('round_')}: {probe_stat(values)}"
                           for name, values in sorted(by_round.items(), key=lambda item: int(item[0][6:])))
        worst = probe_stat([r.summary.get("worst_client_accuracy") for r in run.results])
        spread = probe_stat([r.summary.get("client_accuracy_sd") for r in run.results])
        forgettable = probe_stat([r.summary.get("forgettable_total") for r in run.results], 0)
        cost = probe_stat([r.timing.get("probe_fraction_of_probed_rounds") for r in run.results])
        folder = REPORTS_DIR / "runs" / key / f"seed{run.seeds[0]}" / "forgetting"
        figures = [f"[{path.stem.replace('round_', 'round ')}](runs/{key}/seed{run.seeds[0]}/forgetting/{path.name})"
                   for path in sorted(folder.glob("*.png"), key=figure_order)] if folder.is_dir() else []
        lines.append(f"| {key} | {run.n} | {rounds or '—'} | {worst} | {spread} | {forgettable} | {cost} | "
                     f"{', '.join(figures) or '—'} |")
    return lines + [""]


def example_events_section(results: dict[str, SeededRun]) -> list[str]:
    """The runs that count example-forgetting events over presentations (`example_events`)."""
    counted = {key: run for key, run in sorted(results.items())
               if any("example_events" in r.summary for r in run.results)}
    if not counted:
        return []
    lines = ["## Example-forgetting events", "",
             "Toneva et al.'s events over every local presentation of a training example (right at one, "
             "wrong at its next; scored by the training forward pass before its step), with the examples "
             "forgotten at least once, unforgettable (learned, never forgotten) and never learned; for a "
             "federated run also its forgettable examples (FedWAvg's federated events: local model right "
             "before aggregation, new global model wrong), summed over clients and rounds. The counts cover the "
             "clients that trained at least once (every client when C = 1); a centralised run is one client "
             "holding all data (trained in one round, as FedWAvg's centralised runs are, its optimiser state is never reset). Mean ± sd over seeds.",
             "", "| run | seeds | clients | rounds × E, C | presentation events | forgotten | unforgettable | "
                 "never learned | forgettable (federated) |", "|---|---|---|---|---|---|---|---|---|"]
    for key, run in counted.items():
        settings = run.settings
        counts = [events_stat(run, name) for name in ("forgetting_events", "forgotten_examples",
                                                      "unforgettable_examples", "never_learned_examples")]
        forgettable = probe_stat([r.summary.get("forgettable_total") for r in run.results], 0)
        clients = run.results[0].summary.get("example_events", {}).get("clients", "—")
        lines.append(f"| {key} | {run.n} | {clients} | "
                     f"{settings['rounds']} × {settings['local_epochs']}, C = {settings['client_fraction']:g} | "
                     f"{' | '.join(counts)} | {forgettable} |")
    return lines + [""]


def events_stat(run: SeededRun, name: str) -> str:
    return probe_stat([r.summary.get("example_events", {}).get(name) for r in run.results], 0)


def figure_order(path: Path) -> tuple:
    """round_1, round_30, round_60, then forgettable."""
    stem = path.stem
    return (0, int(stem[6:])) if stem.startswith("round_") and stem[6:].isdigit() else (1, 0)


def index_markdown(profile: str, results: dict[str, SeededRun], built: list[tuple[str, str, Path]]) -> str:
    lines = ["# Reports", "", f"Built by `dvc repro` from the **{profile}** profile "
             f"({'the papers’ published settings' if profile == 'paper' else 'scaled to a laptop CPU; each table says what was scaled'}).",
             "", "- [claims.md](claims.md): every claim of every paper, held / failed / inconclusive / not run, "
             "decided across seeds by one rule", ""]
    for name, title, folder in built:
        lines.append(f"## {title}")
        for path in sorted(folder.iterdir()):
            if path.suffix in (".md", ".png"):
                lines.append(f"- [{path.name}]({name}/{path.name})")
        lines.append("")
    lines += seeds_section(results)
    lines += forgetting_section(results)
    lines += example_events_section(results)
    lines += ["## Runs", "",
              f"Accuracies as fractions, mean ± sd over the run's seeds; final = after the last round, last {K_LAST} = "
              f"each seed's mean over its last {K_LAST} evaluated rounds; {NC} (k of n diverged) when any seed "
              "diverged; on the test set, or (marked) on the union of the clients' validation sets for runs with "
              "`evaluate_on: validation` (TCE's; their test-set accuracy is in reports/tce), or on the "
              "test samples of the classes the clients hold (`test_seen_classes`, FedWAvg's). Seconds: all "
              "seeds together. Runs of no paper (a researcher's own) are listed like any other.",
              "", f"| run | paper | seeds | status | final accuracy | last {K_LAST} accuracy | rounds | seconds |",
              "|---|---|---|---|---|---|---|---|"]
    for key, run in sorted(results.items()):
        where = {"validation": " (validation)", "test_seen_classes": " (seen classes)"}.get(
            run.settings.get("evaluate_on"), "")
        lines.append(f"| {key} | {run.paper or '—'} | {seeds_cell(run)} | {status_cell(run)} | "
                     f"{accuracy_cell(run.final_accuracies(), 4)}{where} | "
                     f"{accuracy_cell(run.accuracy_means(percent=False), 4)}{where} | {rounds_completed(run)} | "
                     f"{fmt(seconds_total(run), 1)} |")
    return "\n".join(lines) + "\n"


def run_headline(run: SeededRun) -> dict:
    """Two numbers per run for `dvc exp show` / `dvc metrics diff`, means over its seeds: `final`, the
    last model's accuracy (test set; TCE's `final_test_accuracy`), and `curve_mean`, the mean over every
    evaluated round of the accuracy curve, which moves when a change shifts the curve but not its end.
    None where a seed diverged."""
    finals, curves = [], []
    for result in run.results:
        if result.diverged:
            return {"final": None, "curve_mean": None}
        finals.append(result.summary.get("final_test_accuracy", result.summary.get("final_accuracy")))
        curves.append(sum(result.accuracy) / len(result.accuracy) if result.accuracy else None)
    def mean(values):
        return round(mean_sd(values)[0], 6) if values and all(has_value(v) for v in values) else None
    return {"final": mean(finals), "curve_mean": mean(curves)}


def headline(results: dict[str, SeededRun], claims: list) -> dict:
    """reports/summary.json: per paper, the claims' totals and each run's two headline numbers."""
    summary: dict = {}
    for key, run in sorted(results.items()):
        summary.setdefault(run.paper or "other", {}).setdefault("runs", {})[key] = run_headline(run)
    for claim in claims:
        totals = summary.setdefault(claim.paper, {}).setdefault("claims", {})
        totals[claim.status.replace(" ", "_")] = totals.get(claim.status.replace(" ", "_"), 0) + 1
    return summary


def replace_folder(new: Path, old: Path) -> None:
    """`old` becomes `new` (a folder on the same file system), the previous one removed."""
    if old.exists():
        shutil.rmtree(old)
    os.replace(new, old)


def wanted_seeds(grid: dict) -> dict[str, list[int]]:
    """The profile's runs and the seeds each lists (its resolved settings)."""
    return {run: list(read_resolved(run)["seeds"]) for run in grid["runs"]}


def planned_samples(params: dict, grid: dict) -> dict[str, dict]:
    """The profile's confirmatory samples, trained or not: {run: its `confirms`}."""
    in_profile = set(grid.get("runs", ()))
    return {key: run["confirms"] for key, run in (params.get("runs") or {}).items()
            if run.get("confirms") and key in in_profile}


@exit_on_user_error
def main() -> None:
    params = load_checked_params()
    profile = params["profile"]
    grid = read_yaml(GRID_FILE)["grid"]
    results = load_results(wanted_seeds(grid), RUNS_DIR, params.get("partitions") or {})
    published = yaml.safe_load(PUBLISHED.read_text())
    claims, built = [], []
    # Each paper's folder is built in a staging folder and swapped in only when every paper built: a
    # report that fails (the stage's outs are `persist`, so DVC deletes nothing first) leaves the last
    # good reports in place, and a figure no longer drawn does not linger.
    with tempfile.TemporaryDirectory(prefix=".staging.", dir=REPORTS_DIR) as staging:
        for name in PAPERS:
            claims += build_with_confirmations(report_module(name), ReportContext(
                profile, results, published[name], Path(staging) / name, PARTITION_RECORDS,
                frozenset(grid["partitions"]), planned_samples(params, grid)))
            built.append((name, TITLES[name], REPORTS_DIR / name))
        for name in PAPERS:
            replace_folder(Path(staging) / name, REPORTS_DIR / name)
    write_text(REPORTS_DIR / "claims.md", claims_markdown(claims, profile))
    statuses = [c.status for c in claims]
    write_json(REPORTS_DIR / "claims.json", {
        "held": statuses.count("held"), "failed": statuses.count("failed"),
        "inconclusive": statuses.count("inconclusive"), "not_run": statuses.count("not run"),
        "decided_share": round(decided_share(claims)[0] / max(1, decided_share(claims)[1]), 4),
        "claims": {name: {c.id: c.status for c in claims if c.paper == name} for name in PAPERS}})
    write_json(REPORTS_DIR / "summary.json", headline(results, claims))
    write_text(REPORTS_DIR / "README.md", index_markdown(profile, results, built))
    print(f"reports: {len(results)} runs, claims " + ", ".join(f"{s}: {statuses.count(s)}" for s in sorted(set(statuses))))


if __name__ == "__main__":
    main()
