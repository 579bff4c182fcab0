"""python -m pipeline.report: rebuild every paper's report from reports/runs/ and write the index."""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import tempfile
from pathlib import Path

import yaml

from pipeline.config import load_checked_params, read_yaml
from pipeline.errors import UserError, exit_on_user_error
from pipeline.inputs import read_resolved
from pipeline.io import write_json, write_text
from pipeline.papers import PAPERS, TITLES
from pipeline.paths import DATASET_RECORDS, GRID_FILE, PARTITION_RECORDS, REPORTS_DIR, RUNS_DIR
from pipeline.report.common import (
    NC,
    ReportContext,
    SeededRun,
    accuracy_cell,
    fmt,
    fmt_stat,
    load_results,
    markdown_row,
)
from pipeline.report.confirmation import build_with_confirmations, sample_problems
from pipeline.report.provenance import provenance_counts, provenance_section, trained_by_line
from pipeline.report.readings import PRETTY, READING_DEPENDENT, ledger_holm, readings_cell
from pipeline.report.seeds import K_LAST, RULE, has_value, mean_sd

PUBLISHED = Path(__file__).with_name("published.yaml")


def report_module(paper: str):
    """pipeline/report/<paper>.py, which builds the paper's folder: found by the paper's name, so that the
    list of papers is pipeline/papers.py's alone."""
    return importlib.import_module(f"{__package__}.{paper}")


STATUSES = ("held", "failed", READING_DEPENDENT, "inconclusive", "not run")


def decided_share(claims: list) -> tuple[int, int]:
    """(decided, run): claims held or failed, out of the claims this profile runs (not 'not run')."""
    run = [c for c in claims if c.status != "not run"]
    return sum(c.status in ("held", "failed") for c in run), len(run)


def counts(statuses: list[str]) -> dict[str, int]:
    return {s: statuses.count(s) for s in STATUSES}


def totals_line(claims: list, corrected: dict) -> str:
    """The ledger's headline: the counts raw and after Holm across the ledger, of how many claims."""
    raw = counts([c.status for c in claims])
    after = counts([corrected[c.id][1] if c.id in corrected else c.status for c in claims])
    decided, run = decided_share(claims)
    decided_after = after["held"] + after["failed"]

    def words(found):
        return ", ".join(f"{n} {s}" for s, n in found.items())

    return (
        f"**Totals ({len(claims)} claims, {run} run in this profile)**: {words(raw)}; decided {decided} of {run}"
        f"{f' ({decided / run:.0%})' if run else ''}. **After Holm across the ledger** (α = 0.05 over the "
        f"{sum(1 for c in claims if c.id in corrected and corrected[c.id][0] is not None)} claims with a p-value): "
        f"{words(after)}; decided {decided_after} of {run}."
    )


# The ledger of the default profile when the verdicts issue (37) was filed, 2026-11-25, commit 47cf22b0
# (`git show 47cf22b0:reports/claims.md`), and before the declared readings (issue 51), 2026-11-27, commit
# 364b4f7b: what the current totals are set beside.
BASELINES = (
    {"date": "2026-11-25", "commit": "47cf22b0", "totals": {"held": 8, "failed": 3, "inconclusive": 23, "not run": 13}},
    {
        "date": "2026-11-27",
        "commit": "364b4f7b",
        "totals": {"held": 17, "failed": 11, "inconclusive": 6, "not run": 14},
    },
)

LEDGER_RULE = (
    "Each claim is decided over its **declared readings** (docs/claims-spec.md, committed before the results it "
    "reads: the paper's round mapped to ours, a window, the whole period; the paper's threshold and its "
    "neighbours; the paper's own reading, marked ★, and ours): **held** or **failed** only when every reading "
    "gives that verdict, **inconclusive** when none decides, **reading-dependent** otherwise (the readings column "
    "gives each). A reading of several comparisons corrects them by Holm before combining them; across the "
    "ledger, Holm over the claims' p-values gives the second count of the headline and the `after Holm` column. "
    "`setting` says what the claim's runs trained beside the paper's (every verdict of this profile is on a "
    "stand-in where it says so); `looks` how many times the claim had been read before the verdict shown and "
    "what each gave (pipeline/report/looks.yaml; 'unplanned' where a seed step or sample came in the same commit "
    "as its results)."
)


def looks_cell(claim_id: str, looks: dict) -> str:
    entries = looks.get(claim_id) or []
    if not entries:
        return "none before this one"
    parts = [
        f"{e.get('what', e.get('kind'))}: {e.get('verdict')}" + (" (unplanned)" if e.get("planned") is False else "")
        for e in entries
    ]
    return f"{len(entries)} before this one: " + "; ".join(parts)


def claims_markdown(
    claims: list, profile: str, corrected: dict | None = None, looks: dict | None = None, trained_by: str = ""
) -> str:
    """reports/claims.md; `trained_by`: the line naming the CPU kinds, commits and code under the seeds."""
    corrected = corrected if corrected is not None else ledger_holm(claims)
    looks = looks or {}
    lines = [
        "# Claims ledger",
        "",
        f"Profile: **{profile}**. Each claim a paper makes, checked on our numbers: "
        "held, failed, reading-dependent, inconclusive (our seeds do not separate the two sides) or not run "
        "(with why).",
        "",
        totals_line(claims, corrected),
        "",
        *([trained_by, ""] if trained_by else []),
        "## The rule",
        "",
        RULE,
        "",
        LEDGER_RULE,
        "",
        "| paper | claim | setting (ours, the paper's) | published | seeds (n) | test | status | after Holm | "
        "readings | looks | our numbers | power (undecided) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in claims:
        p, after = corrected.get(c.id, (None, c.status))
        holm = after + (f" (p = {p:.3g})" if p is not None else "")
        lines.append(
            markdown_row(
                [
                    c.paper,
                    c.text,
                    c.setting or "—",
                    c.published,
                    c.seeds,
                    c.test,
                    f"**{c.status}**",
                    holm,
                    readings_cell(c.readings) or "—",
                    looks_cell(c.id, looks) if c.status != "not run" else "—",
                    c.evidence,
                    c.power,
                ]
            )
        )
    if profile == "default":
        lines += [""] + [
            f"Before ({b['date']}, commit {b['commit']}): "
            + ", ".join(f"{n} {s}" for s, n in b["totals"].items())
            + f"; decided {b['totals']['held'] + b['totals']['failed']} of "
            f"{sum(b['totals'].values()) - b['totals']['not run']}"
            for b in BASELINES
        ]
    return "\n".join(lines) + "\n"


def seeds_cell(run: SeededRun) -> str:
    text = f"{run.n} ({', '.join(map(str, run.seeds))})"
    if run.missing_seeds:
        text = (
            f"{run.n} of {len(run.wanted)} ({', '.join(map(str, run.seeds))}; no results yet for "
            f"{', '.join(map(str, run.missing_seeds))})"
        )
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


def seeds_section(results: dict[str, SeededRun], wanted: dict[str, list[int]] | None = None) -> list[str]:
    """Which runs have how many seeds (and which listed seeds have no results yet: also those of a run
    in `wanted`, the profile's runs and their seeds, that has none at all, which would otherwise go
    unmentioned; issue 54)."""
    groups: dict[tuple, list[str]] = {}
    for key, run in sorted(results.items()):
        groups.setdefault(tuple(run.seeds), []).append(key)
    lines = [
        "## Seeds",
        "",
        "Claims need at least 2 seeds a side to be decided (claims.md states the rule); "
        "a run with one seed leaves every claim on it inconclusive.",
        "",
    ]
    for seeds, keys in sorted(groups.items(), key=lambda item: (-len(item[0]), item[0])):
        lines.append(
            f"- {len(seeds)} seed{'s' if len(seeds) != 1 else ''} ({', '.join(map(str, seeds))}), "
            f"{len(keys)} run(s): {', '.join(keys)}"
        )
    lacking = {key: run.missing_seeds for key, run in results.items() if run.missing_seeds}
    lacking.update({key: sorted(seeds) for key, seeds in (wanted or {}).items() if key not in results})
    missing = [f"{key} (seed {', '.join(map(str, seeds))})" for key, seeds in sorted(lacking.items())]
    if missing:
        lines.append(f"- listed but without results yet: {', '.join(missing)}")
    return lines + [""]


def probe_stat(values: list, digits: int = 3) -> str:
    present = [v for v in values if v is not None]
    return fmt_stat(present, digits) if present else "—"


def forgetting_section(results: dict[str, SeededRun]) -> list[str]:
    """The runs with forgetting probes: headline numbers over seeds and links to seed 0's figures."""
    probed = {
        key: run
        for key, run in sorted(results.items())
        if any("mean_local_forgetting" in r.summary or "forgettable_total" in r.summary for r in run.results)
    }
    if not probed:
        return []
    lines = [
        "## Forgetting probes",
        "",
        "Local client forgetting F_k = mean over the other cohort clients' local models i of "
        "Acc_k(w_t^i) − Acc_k(w_{t−1}) on client k's held-out data (TCE, section 2; heatmaps: difference, "
        "post, prior, F_k); worst client / sd = the new global model's accuracy over every client's "
        "held-out data at the last probe round; forgettable = training samples a client's local model "
        "got right and the new global model wrong, summed over clients and probed rounds. Mean ± sd over "
        "seeds; figures of seed 0. Probe cost = the probes' seconds over the rest of a probed round's.",
        "",
        "| run | trained on | seeds | mean F_k by round | worst client | client sd | forgettable | probe cost | figures |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, run in probed.items():
        by_round: dict[str, list] = {}
        for r in run.results:
            for name, value in r.summary.get("mean_local_forgetting", {}).items():
                by_round.setdefault(name, []).append(value)
        rounds = "; ".join(
            f"{name.removeprefix('round_')}: {probe_stat(values)}"
            for name, values in sorted(by_round.items(), key=lambda item: int(item[0][6:]))
        )
        worst = probe_stat([r.summary.get("worst_client_accuracy") for r in run.results])
        spread = probe_stat([r.summary.get("client_accuracy_sd") for r in run.results])
        forgettable = probe_stat([r.forgettable_total for r in run.results], 0)
        cost = probe_stat([r.timing.get("probe_fraction_of_probed_rounds") for r in run.results])
        folder = REPORTS_DIR / "runs" / key / f"seed{run.seeds[0]}" / "forgetting"
        figures = (
            [
                f"[{path.stem.replace('round_', 'round ')}](runs/{key}/seed{run.seeds[0]}/forgetting/{path.name})"
                for path in sorted(folder.glob("*.png"), key=figure_order)
            ]
            if folder.is_dir()
            else []
        )
        lines.append(
            f"| {key} | {trained_on(run)} | {run.n} | {rounds or '—'} | {worst} | {spread} | {forgettable} | {cost} | "
            f"{', '.join(figures) or '—'} |"
        )
    return lines + [""]


def example_events_section(results: dict[str, SeededRun]) -> list[str]:
    """The runs that count example-forgetting events over presentations (`example_events`)."""
    counted = {
        key: run for key, run in sorted(results.items()) if any("example_events" in r.summary for r in run.results)
    }
    if not counted:
        return []
    lines = [
        "## Example-forgetting events",
        "",
        "Toneva et al.'s events over every local presentation of a training example (right at one, "
        "wrong at its next; scored by the training forward pass before its step), with the examples "
        "forgotten at least once, unforgettable (learned, never forgotten) and never learned; for a "
        "federated run also its forgettable examples (FedWAvg's federated events: local model right "
        "before aggregation, new global model wrong), summed over clients and rounds. The counts cover the "
        "clients that trained at least once (every client when C = 1); a centralised run is one client "
        "holding all data (trained in one round, as FedWAvg's centralised runs are, its optimiser state is never reset). Mean ± sd over seeds.",
        "",
        "| run | trained on | seeds | clients | rounds × E, C | presentation events | forgotten | unforgettable | "
        "never learned | forgettable (federated) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, run in counted.items():
        settings = run.settings
        counts = [
            events_stat(run, name)
            for name in ("forgetting_events", "forgotten_examples", "unforgettable_examples", "never_learned_examples")
        ]
        forgettable = probe_stat([r.forgettable_total for r in run.results], 0)
        clients = run.results[0].summary.get("example_events", {}).get("clients", "—")
        lines.append(
            f"| {key} | {trained_on(run)} | {run.n} | {clients} | "
            f"{settings['rounds']} × {settings['local_epochs']}, C = {settings['client_fraction']:g} | "
            f"{' | '.join(counts)} | {forgettable} |"
        )
    return lines + [""]


def trained_on(run: SeededRun) -> str:
    """The dataset a run trained, and the paper's where the profile put a stand-in in its place: a run's key
    ("tce_cifar10_…") names the paper's experiment, not always its data."""
    dataset = run.settings.get("dataset")
    if not dataset:
        return "—"
    data = PRETTY.get(dataset, dataset)
    if run.paper_dataset != dataset:
        data += f" (for {PRETTY.get(run.paper_dataset, run.paper_dataset)})"
    return data


def events_stat(run: SeededRun, name: str) -> str:
    return probe_stat([r.summary.get("example_events", {}).get(name) for r in run.results], 0)


def figure_order(path: Path) -> tuple:
    """round_1, round_30, round_60, then forgettable."""
    stem = path.stem
    return (0, int(stem[6:])) if stem.startswith("round_") and stem[6:].isdigit() else (1, 0)


def index_markdown(
    profile: str,
    results: dict[str, SeededRun],
    built: list[tuple[str, str, Path]],
    wanted: dict[str, list[int]] | None = None,
) -> str:
    lines = [
        "# Reports",
        "",
        f"Built by `dvc repro` from the **{profile}** profile "
        f"({'the papers’ published settings' if profile == 'paper' else 'scaled to a laptop CPU; each table says what was scaled'}).",
        "",
        "- [claims.md](claims.md): every claim of every paper, held / failed / reading-dependent / "
        "inconclusive / not run, each reading decided across seeds by one rule, raw and after Holm",
        "",
    ]
    for name, title, folder in built:
        lines.append(f"## {title}")
        for path in sorted(folder.iterdir()):
            if path.suffix in (".md", ".png"):
                lines.append(f"- [{path.name}]({name}/{path.name})")
        lines.append("")
    lines += seeds_section(results, wanted)
    lines += forgetting_section(results)
    lines += example_events_section(results)
    lines += provenance_section(results)
    lines += [
        "## Runs",
        "",
        f"Accuracies as fractions, mean ± sd over the run's seeds; final = after the last round, last {K_LAST} = "
        f"each seed's mean over its last {K_LAST} evaluated rounds; {NC} (k of n diverged) when any seed "
        "diverged; on the test set, or (marked) on the union of the clients' validation sets for runs with "
        "`evaluate_on: validation` (TCE's; their test-set accuracy is in reports/tce), or on the "
        "test samples of the classes the clients hold (`test_seen_classes`, FedWAvg's). Seconds: all "
        "seeds together. Runs of no paper (a researcher's own) are listed like any other.",
        "",
        f"| run | paper | trained on | seeds | status | final accuracy | last {K_LAST} accuracy | rounds | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, run in sorted(results.items()):
        where = {"validation": " (validation)", "test_seen_classes": " (seen classes)"}.get(
            run.settings.get("evaluate_on"), ""
        )
        lines.append(
            f"| {key} | {run.paper or '—'} | {trained_on(run)} | {seeds_cell(run)} | {status_cell(run)} | "
            f"{accuracy_cell(run.final_accuracies(), 4)}{where} | "
            f"{accuracy_cell(run.accuracy_means(percent=False), 4)}{where} | {rounds_completed(run)} | "
            f"{fmt(seconds_total(run), 1)} |"
        )
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
    return {
        key: run["confirms"]
        for key, run in (params.get("runs") or {}).items()
        if run.get("confirms") and key in in_profile
    }


LOOKS = Path(__file__).with_name("looks.yaml")


def read_looks(path: Path = LOOKS) -> dict:
    """Each claim's looks before the verdict the ledger shows (report/looks.yaml)."""
    if not path.is_file():
        return {}
    return yaml.safe_load(path.read_text()) or {}


def claims_json(claims: list, corrected: dict, trained_by: dict | None = None) -> dict:
    """reports/claims.json (a DVC metrics file): the totals raw and after Holm, each claim's status and
    (`trained_by`) how many CPU kinds and commits trained the seeds."""
    raw = counts([c.status for c in claims])
    after = counts([corrected[c.id][1] if c.id in corrected else c.status for c in claims])
    decided, run = decided_share(claims)
    return {
        **{s.replace(" ", "_").replace("-", "_"): n for s, n in raw.items()},
        "after_holm": {s.replace(" ", "_").replace("-", "_"): n for s, n in after.items()},
        "decided_share": round(decided / max(1, run), 4),
        "claims": {name: {c.id: c.status for c in claims if c.paper == name} for name in PAPERS},
        **({"trained_by": trained_by} if trained_by is not None else {}),
    }


def build_papers(params: dict, grid: dict, results: dict, staging: Path) -> list:
    """Every paper's report built into `staging`/<paper>, and all their claims."""
    published = yaml.safe_load(PUBLISHED.read_text())
    claims: list = []
    for name in PAPERS:
        claims += build_with_confirmations(
            report_module(name),
            ReportContext(
                params["profile"],
                results,
                published[name],
                staging / name,
                PARTITION_RECORDS,
                frozenset(grid["partitions"]),
                planned_samples(params, grid),
                DATASET_RECORDS,
            ),
        )
    return claims


def ledger_statuses(runs_dir: Path = RUNS_DIR) -> dict[str, str]:
    """{claim id: verdict} on the results under `runs_dir`, nothing written (pipeline.verify)."""
    params = load_checked_params()
    grid = read_yaml(GRID_FILE)["grid"]
    results = load_results(wanted_seeds(grid), runs_dir, params.get("partitions") or {})
    with tempfile.TemporaryDirectory(prefix="fedforget-ledger-") as staging:
        return {c.id: c.status for c in build_papers(params, grid, results, Path(staging))}


def check_samples(params: dict) -> None:
    """Refuse a confirmatory sample that names a claim its paper's report does not make (one line each)."""
    problems = sample_problems(params)
    if problems:
        raise UserError("\n".join(problems))


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.report",
        description="Build reports/ from the runs' results: each paper's tables, figures and claims, and the ledger.",
    )
    parser.add_argument(
        "--check-samples",
        action="store_true",
        help="only check that every confirmatory "
        "sample in params.yaml names claims its paper's report makes (run before training one)",
    )
    args = parser.parse_args(argv)
    params = load_checked_params()
    check_samples(params)
    if args.check_samples:
        print("confirmatory samples: every claim they name is a claim of its paper's report")
        return
    profile = params["profile"]
    grid = read_yaml(GRID_FILE)["grid"]
    wanted = wanted_seeds(grid)
    results = load_results(wanted, RUNS_DIR, params.get("partitions") or {})
    # Each paper's folder is built in a staging folder and swapped in only when every paper built: a
    # report that fails (the stage's outs are `persist`, so DVC deletes nothing first) leaves the last
    # good reports in place, and a figure no longer drawn does not linger.
    try:
        with tempfile.TemporaryDirectory(prefix=".staging.", dir=REPORTS_DIR) as staging:
            claims = build_papers(params, grid, results, Path(staging))
            for name in PAPERS:
                replace_folder(Path(staging) / name, REPORTS_DIR / name)
        built = [(name, TITLES[name], REPORTS_DIR / name) for name in PAPERS]
        corrected = ledger_holm(claims)
        write_text(
            REPORTS_DIR / "claims.md",
            claims_markdown(claims, profile, corrected, read_looks(), trained_by_line(results)),
        )
        write_json(REPORTS_DIR / "claims.json", claims_json(claims, corrected, provenance_counts(results)))
        write_json(REPORTS_DIR / "summary.json", headline(results, claims))
        write_text(REPORTS_DIR / "README.md", index_markdown(profile, results, built, wanted))
    except OSError as error:  # a read-only or full reports/: one line, not a traceback (issue 54)
        raise UserError(
            f"{error.filename or REPORTS_DIR}: cannot be written ({error.strerror or error}); make "
            f"{REPORTS_DIR}/ writable or free space, then rerun"
        ) from None
    statuses = [c.status for c in claims]
    print(
        f"reports: {len(results)} runs, claims " + ", ".join(f"{s}: {statuses.count(s)}" for s in sorted(set(statuses)))
    )


if __name__ == "__main__":
    main()
