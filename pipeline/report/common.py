"""What every paper's report needs: the runs' results over their seeds, tables with published numbers
beside ours, figures, and claims decided on our numbers by the one rule of seeds.py.

Layout read (written by the train stage, pipeline/outputs.py): reports/runs/<run>/seed<s>/ holds
metrics.json, settings.json (with "seed"), timing.json, the plotted curves in their files
(paths.PLOTTED_CURVES) and every other curve in curves.tsv.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from pipeline.errors import UserError
from pipeline.io import atomic_path, write_text
from pipeline.paths import CURVES_FILE, PLOTTED_CURVES
from pipeline.report.readings import READING_DEPENDENT, Reading, claim_p, reading, setting_of, verdict
from pipeline.report.seeds import (
    K_LAST,
    Comparison,
    PerSeed,
    claim_power,
    compare,
    deciding_tests,
    has_value,
    last_k_mean,
    mean_sd,
    rounds_to_target_moving,
)
from pipeline.runs import changed_scalings

NC = "NC"  # never reached the target (or diverged), as the papers write it
NOT_RUN = "not run"
NO_DIFF = "—"  # our setting is not the paper's: no difference is computed
SEED_FOLDER = re.compile(r"^seed(\d+)$")


# ---------------------------------------------------------------- one seed of one run


@dataclass
class RunResult:
    """One seed of one run: what the train stage writes to reports/runs/<run>/seed<s>/."""

    key: str  # the run
    seed: int
    settings: dict
    summary: dict
    rounds: list[int]
    accuracy: list[float]
    timing: dict = field(default_factory=dict)
    folder: Path | None = None  # where the train stage wrote it (None: built in memory), for its other files

    @property
    def diverged(self) -> bool:
        return self.summary.get("status") == "diverged"

    @property
    def seconds(self) -> float | None:
        return self.timing.get("seconds_total")

    @property
    def example_events(self) -> int | None:
        """Example-forgetting events over the seed's presentations (FedWAvg Table 1's centralised count)."""
        return (self.summary.get("example_events") or {}).get("forgetting_events")

    @property
    def forgettable_total(self) -> int | None:
        """Forgettable examples summed over the probed clients and rounds (FedWAvg Table 1's federated count)."""
        return self.summary.get("forgettable_total")

    def rounds_to(self, target: float):
        """Rounds to reach `target`, or None (shown as NC) if the run never reached it. Taken from the
        run's summary when the run tracked that target, else from its accuracy curve."""
        from pipeline.metrics import rounds_to_accuracy

        if any(abs(t - target) < 1e-12 for t in self.settings.get("targets", [])):
            return self.summary.get("rounds_to_accuracy", {}).get(f"{target:g}")
        return rounds_to_accuracy(self.rounds, self.accuracy, target)

    def logged_curve(self, name: str) -> dict[int, float]:
        """The seed's logged curve `name` ({round: value}); {} where it logged none or was built in memory."""
        if self.folder is None:
            return {}
        return dict(zip(*read_curve(self.folder, name)))

    def paper_value(self, key: str):
        """A setting as the paper has it (before the default profile scaled it)."""
        scaled = self.settings.get("scaled") or {}
        return scaled[key]["paper"] if key in scaled else self.settings.get(key)

    def curve_until(self, at: int | None) -> list[float] | None:
        """The accuracy curve up to and including round `at` (None: all of it); None if the seed never
        evaluated round `at`."""
        if at is None:
            return list(self.accuracy)
        if at not in self.rounds:
            return None
        return list(self.accuracy[: self.rounds.index(at) + 1])

    def diverged_by(self, at: int | None) -> bool:
        """The seed diverged at or before round `at` (None: at all): its curve up to `at` is cut short or holds
        a value that is not a number."""
        if not self.diverged:
            return False
        curve = self.curve_until(at)
        return curve is None or not all(has_value(v) for v in curve)

    def accuracy_mean(self, at: int | None = None, k: int = K_LAST) -> float | None:
        """Mean test accuracy (fraction) over the last `k` evaluated rounds up to round `at` (None: the
        seed's last round); None if the seed diverged or never got to round `at`."""
        curve = None if self.diverged else self.curve_until(at)
        return last_k_mean(curve, k) if curve else None


# ---------------------------------------------------------------- a run over its seeds


@dataclass
class SeededRun:
    """A run over the seeds that have results: per-seed values for tables and claims."""

    run: str
    results: list[RunResult]  # sorted by seed
    wanted: list[int] | None = None  # the seeds the grid asks for (None: whatever is on disk)
    partition: dict | None = None  # its partition's settings in params.yaml (None: not there)
    paper_partition: dict | None = None  # the paper's partition's, where the profile put another in its place

    @property
    def key(self) -> str:
        return self.run

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.results]

    @property
    def n(self) -> int:
        return len(self.results)

    @property
    def settings(self) -> dict:
        return self.results[0].settings

    @property
    def paper(self) -> str | None:
        return self.settings.get("paper") or None

    @property
    def scaled(self) -> dict:
        return self.settings.get("scaled") or {}

    @property
    def missing_seeds(self) -> list[int]:
        """Seeds the grid asks for that have no results yet."""
        return sorted(set(self.wanted or []) - set(self.seeds))

    @property
    def diverged_count(self) -> int:
        return sum(r.diverged for r in self.results)

    @property
    def diverged(self) -> bool:
        """Any seed diverged (a table then shows NC)."""
        return self.diverged_count > 0

    @property
    def last_round(self) -> int | None:
        """The furthest round any seed evaluated."""
        lasts = [r.rounds[-1] for r in self.results if r.rounds]
        return max(lasts) if lasts else None

    def paper_value(self, key: str):
        return self.results[0].paper_value(key)

    @property
    def paper_dataset(self) -> str:
        """The dataset the run stands for: its paper's, where the profile put a stand-in in its place (TCE's
        default profile trains Fashion-MNIST for CIFAR-10)."""
        return (self.paper_partition or {}).get("dataset") or self.settings["dataset"]

    def partition_settings(self, who: str) -> dict:
        """Its partition's settings as params.yaml has them (the report stage depends on `partitions`);
        `who` names the run kind that asked, for the error."""
        if self.partition is None:
            raise UserError(
                f"params.yaml: partition {self.settings.get('partition')!r}, which {who} names, is not under partitions"
            )
        return self.partition

    def per_seed(self, values: list, worst: list | None = None, better: str | None = None) -> PerSeed:
        """Values in this run's seed order, carrying the seeds (so that comparisons pair by seed); `worst`
        marks the seeds whose missing value is the run's worst outcome, `better` the way the measure is
        better (`PerSeed`)."""
        return PerSeed(values, self.seeds, worst, better)

    def rounds_to(self, target: float, diverged_as_nc: bool = False) -> PerSeed:
        """Per seed: rounds to `target`, the paper's reading (the first round at or above it; None: never
        reached, the worst outcome; with diverged_as_nc, also a diverged seed)."""
        values = [None if diverged_as_nc and r.diverged else r.rounds_to(target) for r in self.results]
        return self.per_seed(values, [True] * len(values), "lower")

    def rounds_to_moving(self, target: float, k: int = K_LAST) -> PerSeed:
        """Per seed: the first round at which the mean of its last `k` evaluated rounds reaches `target`
        (None: never, or diverged before: either is the worst outcome; a window holding a diverged round has
        no mean)."""
        values = [rounds_to_target_moving(r.rounds, r.accuracy, target, k) for r in self.results]
        return self.per_seed(values, [True] * len(values), "lower")

    def accuracy_means(self, at: int | None = None, k: int = K_LAST, percent: bool = True) -> PerSeed:
        """Per seed: the mean accuracy over its last `k` evaluated rounds up to `at` (k = 1: the accuracy
        after that round); None for a diverged seed (the worst outcome when it diverged by round `at`) or
        one that never got to round `at` (unknown)."""
        scale = 100.0 if percent else 1.0
        return self.per_seed(
            [None if (v := r.accuracy_mean(at, k)) is None else scale * v for r in self.results],
            [r.diverged_by(at) for r in self.results],
            "higher",
        )

    def final_accuracies(self) -> PerSeed:
        """Per seed: the summary's final accuracy (fraction); None for a diverged seed (the worst outcome)."""
        return self.per_seed(
            [None if r.diverged else r.summary.get("final_accuracy") for r in self.results],
            [r.diverged for r in self.results],
            "higher",
        )

    def matches_paper(self, algorithm: dict | None = None) -> bool:
        """The run's settings are the paper's: nothing scaled, and the algorithm's hyperparameters named
        in `algorithm` (e.g. {"mu": 1e-5}) are the paper's values."""
        if changed_scalings(self.scaled):
            return False
        ours = self.settings.get("algorithm") or {}
        for name, value in (algorithm or {}).items():
            if not isinstance(ours.get(name), (int, float)) or not math.isclose(ours[name], value, rel_tol=1e-9):
                return False
        return True


def curve_path(folder: Path, name: str) -> Path:
    """Where the train stage writes a plotted curve `name` (PLOTTED_CURVES)."""
    return folder / PLOTTED_CURVES[name]


def read_curve(folder: Path, name: str) -> tuple[list[int], list[float]]:
    """A seed's curve `name` as (rounds, values), from its own file if plotted, else from curves.tsv;
    ([], []) where the seed logged none."""
    if name in PLOTTED_CURVES:  # DVCLive names the column by the curve's last path part
        return read_tsv_column(curve_path(folder, name), name.rsplit("/", 1)[-1])
    path = folder / CURVES_FILE
    if not path.is_file():
        return [], []
    with open(path) as handle:
        rows = [row for row in csv.DictReader(handle, delimiter="\t") if row.get("curve") == name]
    return parse_curve(path, rows, "value")


def read_tsv_column(path: Path, column: str) -> tuple[list[int], list[float]]:
    if not path.is_file():
        return [], []
    with open(path) as handle:
        return parse_curve(path, list(csv.DictReader(handle, delimiter="\t")), column)


def parse_curve(path: Path, rows: list[dict], column: str) -> tuple[list[int], list[float]]:
    try:
        return [int(r["step"]) for r in rows], [float(r[column]) for r in rows]
    except (KeyError, TypeError, ValueError) as error:
        raise UserError(
            f"{path}: not a curve of `step` and `{column}` ({type(error).__name__}: {error}); retrain "
            "its run or restore the file from git"
        ) from None


def read_json(path: Path):
    """A results file the report reads, refused in one line when it is cut short or not JSON."""
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UserError(
            f"{path}: not readable JSON ({error}); retrain its run (`dvc repro -f train@<run>`) or restore it from git"
        ) from None


def read_seed(folder: Path, run: str, seed: int) -> RunResult | None:
    """One seed's results from `folder` (None if it has no metrics.json yet)."""
    if not (folder / "metrics.json").is_file():
        return None
    settings = read_json(folder / "settings.json") if (folder / "settings.json").is_file() else None
    metrics = read_json(folder / "metrics.json")
    if not isinstance(settings, dict) or not isinstance(metrics, dict) or "status" not in metrics:
        raise UserError(
            f"{folder}: its settings.json or metrics.json is missing or holds no results; retrain its "
            f"run (`dvc repro -f train@{run}`) or restore the folder from git"
        )
    rounds, accuracy = read_curve(folder, "test_accuracy")
    timing = read_json(folder / "timing.json") if (folder / "timing.json").is_file() else {}
    return RunResult(run, seed, settings, metrics, rounds, accuracy, timing, folder)


def seeds_on_disk(run: str, runs_dir: Path) -> list[int]:
    folder = runs_dir / run
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if p.is_dir() and (m := SEED_FOLDER.match(p.name)))


def load_results(runs, runs_dir: Path, partitions: Mapping[str, dict] | None = None) -> dict[str, SeededRun]:
    """The results of the runs that exist under `runs_dir`, grouped by run: {run: SeededRun}, each with its
    partition's settings from `partitions` (params.yaml's).

    `runs` maps each run to the seeds it lists (report.__main__.wanted_seeds: exactly those seeds, the
    others named missing), or is an iterable of run names (every seed<s>/ folder found). Runs or seeds without
    results (not trained yet, outside the active profile) are absent.
    """
    wanted: dict[str, list[int] | None] = {}
    if isinstance(runs, dict):
        wanted = {run: [int(seed) for seed in seeds] for run, seeds in runs.items()}
    else:
        wanted = {run: None for run in runs}
    found = {}
    for run, seeds in wanted.items():
        present = sorted(set(seeds)) if seeds is not None else seeds_on_disk(run, runs_dir)
        results = [r for s in present if (r := read_seed(runs_dir / run / f"seed{s}", run, s)) is not None]
        lacking = sorted(set(present) - {r.seed for r in results})
        if results and lacking:  # a run with results lacks some of its seeds: a comparison would silently lose them
            raise UserError(
                f"{runs_dir / run}: no results for seed{'s' * (len(lacking) > 1)} "
                f"{', '.join(map(str, lacking))}, which the run lists (resolved/{run}.json); retrain it "
                f"(`dvc repro -f train@{run}`) or restore its folder from git"
            )
        if results:
            used, paper = results[0].settings.get("partition", ""), results[0].paper_value("partition")
            found[run] = SeededRun(
                run,
                results,
                sorted(set(seeds)) if seeds is not None else None,
                (partitions or {}).get(used),
                (partitions or {}).get(paper) if paper != used else None,
            )
    return found


# ---------------------------------------------------------------- what a paper's report reads


# ---------------------------------------------------------------- what trained a seed (report/provenance.py counts it)

NOT_RECORDED = "not recorded"


def cpu_identity(device: dict) -> tuple:
    """What decides a CPU's float32 bits here, from a timing.json's "device": the processor, its kernels
    (AVX2 or AVX-512) and the threads a process used. `python -m pipeline.verify` compares seeds by it;
    the ledger names it (cpu_kind)."""
    return (device.get("type"), device.get("name"), device.get("cpu_capability"), device.get("threads"))


def cpu_kind(timing: dict) -> str:
    """'AMD EPYC, AVX512, 1 thread' from a seed's timing.json; NOT_RECORDED for seeds trained before
    timing.json named its machine. A GPU seed is named by its device."""
    kind, name, capability, threads = cpu_identity(timing.get("device") or {})
    if not name:
        return NOT_RECORDED
    if (kind or "cpu") != "cpu":
        return f"{name} ({kind})"
    parts = [name, capability or "kernels not recorded"]
    if threads is not None:
        parts.append(f"{threads} thread{'s' if threads != 1 else ''}")
    return ", ".join(parts)


def mixed_cpu_note(runs: Iterable) -> str:
    """Which CPU kind trained which of `runs`, for a claim's setting cell (its comparisons then pair seeds
    whose bits come from different CPUs); the empty string where every seed came from one kind."""
    by_kind: dict[str, list[str]] = {}
    for run in runs:
        for kind in sorted({cpu_kind(seed.timing) for seed in run.results}):
            by_kind.setdefault(kind, []).append(run.key)
    if len(by_kind) < 2:
        return ""
    parts = [f"{kind} ({', '.join(sorted(keys))})" for kind, keys in sorted(by_kind.items())]
    return f"; trained on {len(by_kind)} CPU kinds: " + "; ".join(parts)


@dataclass(frozen=True)
class ReportContext:
    """Everything a paper's `build(context)` reads, and where it writes: no report module reads the working
    directory, a module-level path or a cache, so a test builds a report from a context of its own. These
    are the report stage's inputs (dvc.yaml): params.yaml's `profile` here and its `partitions` on each run
    (load_results), reports/runs as the results (each seed knowing its folder), and for TCE's Figure 4
    grid.yaml's partitions and their records."""

    profile: str
    results: Mapping[str, SeededRun]  # every run with results, of every paper
    published: dict  # this paper's numbers in published.yaml
    out_dir: Path  # this paper's report folder
    partition_records: Path  # reports/partitions: each partition's label_counts.json
    built_partitions: frozenset[str]  # the partitions the profile builds (grid.yaml)
    # the confirmatory samples the profile plans, trained or not: {sample run: its `confirms`} (params.yaml)
    samples: Mapping[str, dict] = field(default_factory=dict)
    dataset_records: Path | None = None  # reports/datasets: which copy of each dataset the runs read

    def setting(self, *keys: str) -> str:
        """The setting of the claim on runs `keys` (the first that has results), beside the paper's."""
        runs = [self.results[k] for k in keys if k in self.results]
        return setting_of(runs, self.dataset_records).cell() + mixed_cpu_note(runs) if runs else ""

    def runs_of(self, paper: str) -> dict[str, SeededRun]:
        """The paper's runs. A confirmatory sample (a run with `confirms`) is one only where it stands in for
        the run it confirms, under that run's key (report/confirmation.py): tables and the other claims never
        read its seeds."""
        return {
            key: run
            for key, run in self.results.items()
            if run.paper == paper and (not run.settings.get("confirms") or key != run.key)
        }


# ---------------------------------------------------------------- cells


def seed_range(seeds: list[int]) -> str:
    """'8-31' for three or more consecutive seeds, else the seeds listed ('0, 2')."""
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def fmt(value, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NC
    if isinstance(value, str):
        return value
    return f"{value:.{digits}f}" if digits else f"{value:g}"


def fmt_stat(values: list, digits: int = 2) -> str:
    """mean ± sd (n=...) of per-seed values that all exist; one seed: value (n=1)."""
    mean, sd, n = mean_sd(values)
    if n == 0:
        return NC
    if digits == 0 and n == 1:
        text = f"{mean:g}"
    else:
        places = digits if digits else 1
        text = f"{mean:.{places}f}" + (f" ± {sd:.{places}f}" if sd is not None else "")
    return f"{text} (n={n})"


def accuracy_cell(values: list, digits: int = 2, why: str = "diverged") -> str:
    """Per-seed accuracies: mean ± sd (n); NC when any seed has no value (with how many, and `why`)."""
    if not values:
        return NOT_RUN
    missing = sum(not has_value(v) for v in values)
    if missing:
        return NC if len(values) == 1 else f"{NC} ({missing} of {len(values)} {why})"
    return fmt_stat(values, digits)


def rounds_cell(values: list) -> str:
    """Per-seed rounds to a target: mean ± sd (n); NC when no seed reached it; when only some did,
    how many did not and the others' mean."""
    if not values:
        return NOT_RUN
    missing = sum(not has_value(v) for v in values)
    if missing == len(values):
        return NC if len(values) == 1 else f"{NC} (n={len(values)})"
    if missing:
        return f"{NC} on {missing} of {len(values)} (others {fmt_stat(values, 0)})"
    return fmt_stat(values, 0)


def diff_cell(values: list, paper, matches: bool, digits: int = 2) -> str:
    """mean of ours − paper, only where our setting is the paper's (else NO_DIFF); NC if a seed has no value."""
    if not matches:
        return NO_DIFF
    if paper is None or not values or not all(has_value(v) for v in values):
        return NC if paper is not None and values else ""
    mean, _, n = mean_sd(values)
    difference = mean - paper
    if digits == 0:
        return f"{difference:g}" if n == 1 else f"{difference:.1f}"
    return f"{difference:.{digits}f}"


def markdown_row(cells) -> str:
    """A markdown table row; a `|` inside a cell is escaped so that it stays in its cell."""
    return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"


def write_table(out_dir: Path, name: str, title: str, header: list[str], rows: list[list], notes: list[str]) -> None:
    """`name`.md (a titled markdown table with notes) and `name`.csv (the same cells)."""
    cells = [[fmt(c) if not isinstance(c, str) else c for c in row] for row in rows]
    lines = [f"# {title}", "", markdown_row(header), "|" + "---|" * len(header)]
    lines += [markdown_row(row) for row in cells]
    lines += [""] + [f"- {note}" for note in notes]
    write_text(out_dir / f"{name}.md", "\n".join(lines) + "\n")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(cells)
    write_text(out_dir / f"{name}.csv", buffer.getvalue())


def seeds_note(results: dict[str, SeededRun]) -> str:
    """How many seeds the table's runs have (n in every cell)."""
    counts: dict[int, int] = {}
    for run in results.values():
        counts[run.n] = counts.get(run.n, 0) + 1
    spread = ", ".join(f"{runs} run(s) with {n} seed(s)" for n, runs in sorted(counts.items())) or "no runs"
    return (
        f"ours = mean ± sd over a run's seeds (sample sd; n = seeds, no sd with one seed): {spread}; "
        "claims are decided across seeds in claims.md"
    )


def accuracy_note() -> str:
    return (
        f"accuracy = each seed's mean over its last k = {K_LAST} evaluated rounds (up to the column's round), "
        "then mean ± sd over seeds; 'last round' = the accuracy after that round alone, mean ± sd over seeds "
        "(the non-IID curves swing by 10+ points between rounds)"
    )


INPUT_SCALING_WORDS = {
    "standardize": "standardised per channel (training-set mean and sd)",
    "unit": "pixels scaled to [0, 1]",
}


def input_scaling_note(results: dict[str, SeededRun], why: str) -> str:
    """How the runs scaled their inputs, per dataset (from their settings), and why for this paper."""
    by_dataset: dict[str, set] = {}
    for r in results.values():
        by_dataset.setdefault(r.settings.get("dataset", "?"), set()).add(r.settings.get("input_scaling", "standardize"))
    text = (
        "; ".join(
            f"{dataset}: " + " / ".join(INPUT_SCALING_WORDS.get(u, u) for u in sorted(used))
            for dataset, used in sorted(by_dataset.items())
        )
        or "no runs"
    )
    return f"inputs: {text} ({why})"


def scaled_note(results: dict[str, SeededRun]) -> list[str]:
    """One line per distinct scaling, naming the keys the default profile changed and their values."""
    seen = {}
    for result in results.values():
        scaled = changed_scalings(result.scaled)
        if scaled:
            text = ", ".join(f"{k} {v['paper']} -> {v['used']}" for k, v in sorted(scaled.items()))
            seen.setdefault(text, []).append(result.key)
    return [f"scaled (default profile) for {len(keys)} run(s): {text}" for text, keys in seen.items()]


# ---------------------------------------------------------------- claims


@dataclass
class Claim:
    paper: str
    id: str
    text: str
    status: str  # held | failed | reading-dependent | inconclusive | not run
    evidence: str
    published: str = ""
    seeds: str = ""  # the n of each side, e.g. "3 vs 3"
    comparisons: list[Comparison] = field(default_factory=list)  # what decided it (tests, power)
    unit: str = ""  # of the compared values, for the power line ("rounds", "points")
    one_failure_fails: bool = True  # its comparisons are combined by `combine` (see claim_power)
    sample: str = ""  # "" or, where a confirmatory sample decided it, which (report/confirmation.py)
    readings: list[Reading] = field(default_factory=list)  # its declared readings, decided (report/readings.py)
    setting: str = ""  # what its runs trained, beside the paper's (readings.Setting.cell)
    looks: str = ""  # the looks it has had (report/looks.yaml)

    @property
    def test(self) -> str:
        """Which test decided the claim's comparisons (paired t, Welch t, or — for none), and on which sample."""
        comparisons = [c for r in self.readings for c in r.comparisons] or self.comparisons
        return deciding_tests(comparisons) + (f" ({self.sample})" if self.sample else "")

    @property
    def p(self) -> float | None:
        """The claim's p for the ledger's correction (readings.claim_p); a claim without readings: the p of
        its comparisons' verdict."""
        if self.readings:
            return claim_p(self.readings)
        return claim_p([reading("", self.comparisons)]) if self.comparisons else None

    @property
    def power(self) -> str:
        """For an undecided claim: what would decide it (claim_power); "" otherwise. After a confirmatory
        sample it is said, not planned: there is no second one (docs/methodology.md)."""
        if self.status not in ("inconclusive", READING_DEPENDENT):
            return ""
        undecided = [r for r in self.readings if r.status == "inconclusive"]
        if self.status == READING_DEPENDENT and not undecided:
            # every reading decided, and they disagree: more seeds would not settle which reading is meant
            return "every reading decided; they disagree, which more seeds would not settle"
        comparisons = sorted(undecided, key=lambda r: not r.primary)[0].comparisons if undecided else self.comparisons
        if not comparisons:
            return "no comparison to measure (see our numbers)" if self.status == "inconclusive" else ""
        line = (
            claim_power(comparisons, self.unit, self.one_failure_fails) or "no comparison to measure (see our numbers)"
        )
        return f"after its confirmatory sample, which stays its last: {line}" if self.sample else line


def claim_of_readings(
    paper: str,
    claim_id: str,
    text: str,
    published: str,
    readings: list[Reading],
    setting: str = "",
    unit: str = "",
    one_failure_fails: bool = True,
) -> Claim:
    """A claim decided over its declared readings (readings.verdict): its evidence each reading's, the paper's
    own first; its seeds and comparisons the paper's reading's."""
    ordered = sorted(readings, key=lambda r: not r.primary)
    main = ordered[0]
    evidence = " — ".join(f"**{r.label}**: {r.status}; {r.evidence}" for r in ordered)
    # the seeds of the paper's reading, or of the first reading measured where the paper's is not measured
    measured = [r for r in ordered if r.comparisons]
    seeds = comparisons_seeds(measured[0].comparisons) if measured else ""
    return Claim(
        paper,
        claim_id,
        text,
        verdict(readings),
        evidence,
        published,
        seeds,
        list(main.comparisons),
        unit,
        one_failure_fails,
        readings=list(readings),
        setting=setting,
    )


def not_run_claim(paper: str, claim_id: str, text: str, published: str, results: dict, keys) -> Claim | None:
    """A "not run" claim naming the runs absent from `results`, or None when all are there."""
    missing = [k for k in keys if k not in results]
    if missing:
        return Claim(paper, claim_id, text, NOT_RUN, f"runs not in this profile: {', '.join(missing)}", published)
    return None


def comparison_claim(
    paper: str,
    claim_id: str,
    text: str,
    published: str,
    first: str,
    second: str,
    first_values: list,
    second_values: list,
    better: str,
    cell,
    what: str = "",
    margin: float = 0.0,
    unit: str = "",
) -> Claim:
    """A claim decided by the rule on two runs' per-seed values (`margin` shifts the first side up)."""
    shifted = shift(first_values, margin)
    comparison = compare(shifted, second_values, better)
    evidence = f"{first}: {cell(first_values)}, {second}: {cell(second_values)}{what}; {comparison.reason}"
    return Claim(paper, claim_id, text, comparison.status, evidence, published, comparison.seeds, [comparison], unit)


def shift(values, margin: float):
    """Each value + margin (None and NaN stay), keeping the seeds of a PerSeed."""
    if isinstance(values, PerSeed):
        return values.map(lambda v: v + margin)
    return [v + margin if has_value(v) else v for v in values]


def fewer_rounds_claim(paper, claim_id, text, published, results, first, second, target) -> Claim:
    """Claim: run `first` reaches `target` in fewer rounds than run `second`, decided over seeds on the
    K_LAST-round moving mean (a seed whose moving mean never reaches it has no value); the paper's first
    crossing is shown beside it."""
    absent = not_run_claim(paper, claim_id, text, published, results, (first, second))
    if absent:
        return absent
    claim = comparison_claim(
        paper,
        claim_id,
        text,
        published,
        first,
        second,
        results[first].rounds_to_moving(target),
        results[second].rounds_to_moving(target),
        "lower",
        rounds_cell,
        f" rounds to {target:.0%} ({K_LAST}-round moving mean)",
        unit="rounds",
    )
    claim.evidence += (
        f"; first crossing (the paper's reading): {first} {rounds_cell(results[first].rounds_to(target))}, "
        f"{second} {rounds_cell(results[second].rounds_to(target))}"
    )
    return claim


def comparisons_seeds(comparisons: list[Comparison]) -> str:
    """The n of each side of several comparisons, once if they agree."""
    texts = list(dict.fromkeys(c.seeds for c in comparisons))
    return texts[0] if len(texts) == 1 else "; ".join(texts)


# ---------------------------------------------------------------- figures


def algorithm_label(settings: dict) -> str:
    """λ or μ of a run as its settings have them ("" when the algorithm has none)."""
    algorithm = settings.get("algorithm") or {}
    if algorithm.get("name") == "fedprox" and "mu" in algorithm:
        return f"μ = {algorithm['mu']:g}"
    if algorithm.get("name") == "fedcurv" and "lambda" in algorithm:
        return f"λ = {algorithm['lambda']:g}"
    if algorithm.get("name") == "importance" and algorithm.get("penalty") != "none" and "lambda" in algorithm:
        return f"λ = {algorithm['lambda']:g}"
    return ""


def seeds_label(run: SeededRun) -> str:
    text = f"n={run.n}"
    if run.diverged_count:
        text += f", {run.diverged_count} of {run.n} diverged" if run.n > 1 else ", diverged"
    return f" ({text})"


def mean_curve(run: SeededRun) -> tuple[list[int], list[float], list[float], list[float]]:
    """rounds, mean, min and max accuracy over the seeds that have a finite value at each round."""
    by_round: dict[int, list[float]] = {}
    for result in run.results:
        for r, a in zip(result.rounds, result.accuracy):
            if has_value(a):
                by_round.setdefault(r, []).append(a)
    rounds = sorted(by_round)
    return (
        rounds,
        [sum(by_round[r]) / len(by_round[r]) for r in rounds],
        [min(by_round[r]) for r in rounds],
        [max(by_round[r]) for r in rounds],
    )


def pyplot():
    """matplotlib.pyplot on the Agg backend: the report draws into files, never a window, and imports
    matplotlib only when it draws (the rest of the pipeline need not load it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: Path, dpi: int = 100) -> None:
    """`fig` as a PNG at `path`, written atomically, then closed. Agg's PNG holds no timestamp (its only
    metadata is matplotlib's version), so an unchanged figure rebuilds byte for byte and a rebuilt report
    leaves git clean."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format="png")
    pyplot().close(fig)


def plot_curves(
    path: Path,
    title: str,
    series: list[tuple[str, SeededRun]],
    targets: list[float],
    ylim: tuple[float, float] = (0.5, 1.0),
    ylabel: str = "test accuracy",
) -> None:
    """One mean curve per run over its seeds, shaded between the seeds' min and max; legends say n."""
    save_figure(curves_figure(title, series, targets, ylim, ylabel), path)


def curves_figure(
    title: str, series: list[tuple[str, SeededRun]], targets: list[float], ylim: tuple[float, float], ylabel: str
):
    """plot_curves' figure, not yet saved."""
    fig, ax = pyplot().subplots(figsize=(6, 4))
    styles = ["-", "--", ":", "-."]  # identical curves (FedProx with a tiny mu) stay visible
    for number, (label, run) in enumerate(series):
        rounds, mean, low, high = mean_curve(run)
        (line,) = ax.plot(rounds, mean, styles[number % len(styles)], linewidth=1.4, label=label + seeds_label(run))
        if run.n > 1 and rounds:
            ax.fill_between(rounds, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
    for target in targets:
        ax.axhline(target, color="grey", linewidth=0.6, linestyle=":")
    ax.set_xlabel("round")
    # The seeds' note on a line of its own: beside a long label ("test accuracy on the clusters'
    # classes") it ran off the figure's edge.
    ax.set_ylabel(ylabel + ("\n(mean over seeds, band: min–max)" if any(r.n > 1 for _, r in series) else ""))
    ax.set_ylim(*ylim)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return fig
