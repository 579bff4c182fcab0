"""The FedWAvg paper (Hong et al.): Tables 1-8, Figures 2-3, per-client forgettable curves and its claims.

Runs are placed by their settings, not their names. A run of paper `fedwavg`:
- with `example_events` is a Table 1 cell: its dataset, centralised when its partition has one client;
- on a cluster partition, by its paper round count (the `rounds` the paper profile trains): 100 =
  Tables 2-3 (FedAvg; 2:8 is Table 2, 4:6 Table 3), 200 = Tables 4-5 (its dataset and clusters, its
  method = algorithm, FedWAvg by α, FedProx at the tables' μ; other μ = the μ grid), 1000 = Tables 6-8
  and Figures 2-3 (by algorithm; `freeze: classifier` = Figure 3's frozen run).
Clients are named as the paper's tables name them, in partition order: the clusters in `cluster_sizes`
order, the smallest (minority) first.

Rounds the paper prints are read from the experiment its table comes from, at the same fraction of that
experiment (`experiment_round`): Tables 2-3 are a 100-round experiment (section 3.3: "Training proceeds
normally as FedAvg would as in Section 3.1, except iterating 100 rounds instead"); Tables 6-8 are the
second experiment's 500 rounds (section 5: "Batch size is increased to 128 and communication round is
500"), not the 1,000 rounds of Figures 2-3 (section 6: "we executed a 1000 round training with the same
setup as the second experiment"). One run stands in for both of the latter: in the paper profile it trains
1,000 rounds and holds the 500-round experiment as its first 500 (the identity); a shorter run compresses
the experiment (the default profile's 20 rounds: the paper's round 200 of 500 is our round 8).

"Top" and "Average" (Tables 4-5) are not defined in the paper. Its discussion ("the parity between top
performance and average performance", read against its oscillating 1000-round curves) fits: Top = the best
test accuracy over all evaluated rounds, Average = the mean test accuracy over all evaluated rounds; both
per seed, in percent, on the test samples of the classes the clusters hold (`evaluate_on: test_seen_classes`).

A forgettable share (a client's forgettable examples over its samples) swings with period 2 under
FedWAvg's aggregation (our runs: the minority at 91-99 % on odd rounds, 37-71 % on even ones; the paper
describes the mechanism: "In the next round, this will be amended only to be broken again in the upcoming
round"). A table prints one round, as the paper does.

Claims are decided over the readings docs/claims-spec.md (section 5 and its amendments A5, A8, A9) declares
for them, committed before the results they read: the paper's round mapped to ours alone, a whole period of
the see-saw (SHARE_PERIOD rounds) ending there, a longer window; the paper's threshold and its neighbours;
the paper's own reading marked primary (★). A reading of several comparisons corrects them by Holm before
combining them (report/readings.py); a claim is held or failed only when every measured reading says so.
Each claim carries the setting its runs trained beside the paper's (ReportContext.setting), and the claims
on the long runs say that their E was chosen after a look at their verdicts (spec section 6).
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

from pipeline.paths import PLOTTED_CURVES
from pipeline.report.common import (
    NOT_RUN,
    Claim,
    ReportContext,
    RunResult,
    SeededRun,
    accuracy_cell,
    claim_of_readings,
    fmt_stat,
    plot_curves,
    pyplot,
    save_figure,
    scaled_note,
    seed_range,
    seeds_note,
    shift,
    write_table,
)
from pipeline.report.fedwavg_table1_criteria import Regime, regimes
from pipeline.report.readings import PRETTY, Reading, not_measured, reading, setting_of, with_holm
from pipeline.report.seeds import (
    FAILED,
    HELD,
    INCONCLUSIVE,
    Comparison,
    PerSeed,
    compare,
    has_value,
    mean_sd,
    window_mean,
)
from pipeline.runs import changed_scalings

PAPER = "fedwavg"
WHO = "a FedWAvg run"  # for the error when a run's partition is not in params.yaml
TABLE1_DATASETS = ("mnist", "fashion_mnist", "svhn", "cifar10")
TABLE45_METHODS = (
    "fedavg",
    "fedprox",
    "scaffold",
    "fednova",
    "fedwavg_alpha0.1",
    "fedwavg_alpha0.2",
    "fedwavg_alpha0.3",
)
LABELS = {
    "fedavg": "FedAvg",
    "fedprox": "FedProx",
    "scaffold": "SCAFFOLD",
    "fednova": "FedNova",
    "fedwavg_alpha0.1": "FedWAvg (α = 0.1)",
    "fedwavg_alpha0.2": "FedWAvg (α = 0.2)",
    "fedwavg_alpha0.3": "FedWAvg (α = 0.3)",
    "fedwavg": "FedWAvg",
    "fedwavg_frozen": "FedWAvg, classifier frozen",
}
TABLE_MU = 0.1  # FedProx's μ in Tables 4-8: the paper gives none; chosen by the μ grid (params.yaml, table_mu_grid.md)
CLUSTERS = {(2, 7): "2:7", (2, 3, 4): "2:3:4"}
# Tables 4-5's weakest method at 2:3:4, one claim per dataset (claims 43-44, table-derived): (dataset, its table).
SCAFFOLD_WEAKEST = (("cifar10", "table5_cifar10"), ("svhn", "table4_svhn"))
DATASET_TABLE = {"svhn": "table4_svhn", "cifar10": "table5_cifar10"}
LONG_TABLES = {"fedavg": "table6_fedavg", "fedprox": "table7_fedprox", "fedwavg": "table8_fedwavg"}
# Tables 2-3, FedAvg on two clusterings, each with the claim it supports (the minority's examples stay
# forgettable) and the paper's numbers that claim cites: (table, clusters, claim id, cited).
CLUSTER_TABLES = (
    (
        "table2",
        (2, 8),
        "t2_minority_forgotten",
        "[004:L96] 'FedAvg highly favors the majority cluster'; [004:L98] 'While they achieve near zero "
        "forgettable examples, the minority clients have almost no advance.' Table 2, round 100: minority "
        "1197 / 1129 of 1,200, majority 0-5",
    ),
    (
        "table3",
        (4, 6),
        "t3_minority_forgotten",
        "[004:L98] 'The records show that the overall tendency of learning is almost the same as the 2-to-8 "
        "situation in Table 2.' Table 3, round 100: minority 1114-1130 of 1,200, majority 0-1",
    ),
)
# The experiments the count tables come from, by their length in rounds (quotes in the module docstring).
TABLES_2_3_ROUNDS = 100
TABLES_6_8_ROUNDS = 500
# FedWAvg's forgettable shares alternate round by round (issue 37's observation: period 2); a share is read
# over one whole period. Fixed from that observation, never tuned against a verdict.
SHARE_PERIOD = 2
# The claims' thresholds, read from the paper's words (stated in claims.md through each claim's text).
GAP = 50.0  # "nearly all" vs "near zero": the minority's forgettable share above the majority's by 50 points
GAP_STRICT = 60.0  # claims 40-41's R4: the nearest stricter threshold (40 is excluded: '45 % vs 5 %' is not it)
# "in half": a share at most 0.6 of the one it is set against (the paper: FedWAvg's 527 / 1193 = 0.44 from round
# 100 to 200); merely lower is not a halving. R4 reads the literal half.
HALF = 0.6
HALF_LITERAL = 0.5
# "around 20% better" (section 6), read as points of Average accuracy: the paper's own figures next to it are
# levels (FedWAvg "around 70%", FedAvg "around 50%": 20 points apart; relative, 70 / 50 would be 40 %
# better). "Around 20" = what rounds to 20 at the precision it is stated at (the nearest 10 points): 15 to
# 25. The claim is that FedWAvg is better by that much, so the lower end decides it; an advantage above 25
# does not contradict the paper's point and is reported, not failed.
AROUND_BETTER = 20.0
AROUND_LOWEST = 15.0
AROUND_HIGHEST = 25.0
RELATIVE = 1.15  # claim 47's R3: "20 % better" read relatively, its lower end (the paper's own 70 vs 50 is 1.4)
FREEZE_LIMIT = 10.0  # "the difference is less than 10%": points of accuracy
CURVE_LABEL = "test accuracy on the clusters' classes"  # evaluate_on: test_seen_classes


# ---------------------------------------------------------------- where a run sits


def paper_rounds(run: SeededRun) -> int:
    return int(run.paper_value("rounds"))


def clusters_of(run: SeededRun) -> tuple[int, ...] | None:
    sizes = run.partition_settings(WHO).get("cluster_sizes")
    return tuple(sizes) if sizes else None


def clusters_label(clusters: tuple[int, ...]) -> str:
    return ":".join(map(str, clusters))


def method_of(run: SeededRun) -> str:
    algorithm = run.settings["algorithm"]
    if algorithm["name"] == "fedwavg":
        return (
            "fedwavg_frozen" if run.settings.get("freeze") == "classifier" else f"fedwavg_alpha{algorithm['alpha']:g}"
        )
    return algorithm["name"]


def experiment_round(paper_round: int, experiment_rounds: int, run_rounds: int) -> int:
    """Our round for the paper's round `paper_round` of its `experiment_rounds`-round experiment, in a run of
    `run_rounds` rounds. A run at least as long holds the experiment as its first rounds (same setup; nothing
    in the training depends on the total), so the round is the paper's; a shorter run compresses the
    experiment, and the round sits at the same fraction of it (never before round 1)."""
    if run_rounds >= experiment_rounds:
        return paper_round
    return max(1, round(paper_round * run_rounds / experiment_rounds))


def our_round(run: SeededRun, paper_round: int, experiment_rounds: int) -> int:
    return experiment_round(paper_round, experiment_rounds, int(run.settings["rounds"]))


def mapping_text(run: SeededRun, paper_round: int, experiment_rounds: int) -> str:
    """How a claim's round was mapped, for its evidence."""
    return (
        f"round {our_round(run, paper_round, experiment_rounds)} of ours (of {run.settings['rounds']}) = the "
        f"paper's round {paper_round} of its {experiment_rounds}-round experiment"
    )


def table1_runs(runs: dict) -> dict:
    """(dataset, "centralised" | "federated") -> run."""
    placed = {}
    for run in runs.values():
        if run.settings.get("example_events"):
            clients = run.partition_settings(WHO).get("clients")
            placed[(run.settings["dataset"], "centralised" if clients == 1 else "federated")] = run
    return placed


def cluster_runs(runs: dict, rounds: int) -> list[SeededRun]:
    return [
        r
        for r in runs.values()
        if not r.settings.get("example_events") and clusters_of(r) and paper_rounds(r) == rounds
    ]


def table45_runs(runs: dict) -> dict:
    """(dataset, clusters label, method) -> run, FedProx at the tables' μ; and the μ grid (CIFAR-10, 2:7):
    μ -> run."""
    placed, grid = {}, {}
    for run in cluster_runs(runs, 200):
        method = method_of(run)
        if method == "fedprox":
            if run.settings["dataset"] == "cifar10" and clusters_of(run) == (2, 7):
                grid[run.settings["algorithm"]["mu"]] = run
            if not math.isclose(run.settings["algorithm"]["mu"], TABLE_MU):
                continue
        placed[(run.settings["dataset"], CLUSTERS.get(clusters_of(run), "?"), method)] = run
    return placed, grid


def long_runs(runs: dict) -> dict:
    """method (fedavg, fedprox, fedwavg, fedwavg_frozen) -> the 1000-round run."""
    placed = {}
    for run in cluster_runs(runs, 1000):
        method = method_of(run)
        placed["fedwavg" if method.startswith("fedwavg_alpha") else method] = run
    return placed


# ---------------------------------------------------------------- per-client forgettable counts


def read_forgettable(result: RunResult) -> dict[int, dict[int, int]]:
    """round -> client -> forgettable count, from the seed's forgetting/forgettable.tsv ({} if none)."""
    path = result.folder / "forgetting" / "forgettable.tsv" if result.folder else None
    if path is None or not path.is_file():
        return {}
    counts: dict[int, dict[int, int]] = {}
    with path.open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            counts.setdefault(int(row["round"]), {})[int(row["client"])] = int(row["forgettable"])
    return counts


def client_size(run: SeededRun) -> int:
    return int(run.partition_settings(WHO)["samples_per_client"])


def shares_at(run: SeededRun, round_: int) -> list[list[float] | None]:
    """Per seed: each client's forgettable share (count / its samples) at our round `round_` (a table cell)."""
    size = client_size(run)
    shares = []
    for result in run.results:
        counts = read_forgettable(result).get(round_)
        shares.append(None if counts is None else [counts.get(k, 0) / size for k in range(sum(clusters_of(run)))])
    return shares


def group_clients(clusters: tuple[int, ...], minority: bool) -> range:
    """The minority's clients (the first cluster) or the majority's (the last)."""
    return range(clusters[0]) if minority else range(sum(clusters) - clusters[-1], sum(clusters))


def group_share_of_round(counts: dict[int, int], clusters: tuple[int, ...], size: int, minority: bool) -> float:
    """The mean forgettable share (percent of a client's `size` samples) of the minority or the majority in
    one round's per-client counts."""
    picked = group_clients(clusters, minority)
    return 100.0 * sum(counts.get(k, 0) for k in picked) / (size * len(picked))


def group_share_over_period(
    counts_by_round: dict[int, dict[int, int]],
    clusters: tuple[int, ...],
    size: int,
    minority: bool,
    at: int,
    width: int = SHARE_PERIOD,
) -> float | None:
    """A group's forgettable share (percent) averaged over the `width` rounds ending at round `at` (one whole
    period of the see-saw); None if a round of that period was not counted."""
    rounds = sorted(counts_by_round)
    shares = [group_share_of_round(counts_by_round[r], clusters, size, minority) for r in rounds]
    return window_mean(rounds, shares, at, width)


def group_shares(run: SeededRun, at: int, minority: bool, width: int = SHARE_PERIOD) -> PerSeed:
    """Per seed (carrying the seeds): the group's share over the whole period ending at our round `at`."""
    return run.per_seed(
        [
            group_share_over_period(read_forgettable(result), clusters_of(run), client_size(run), minority, at, width)
            for result in run.results
        ]
    )


def period_text(at: int, width: int = SHARE_PERIOD) -> str:
    return (
        f"shares read over a whole period, rounds {at - width + 1}-{at} (the share swings with period "
        f"{width} under FedWAvg's aggregation; every method is read alike)"
    )


def file_is_prefix(short: Path, long: Path) -> bool:
    """The short file's lines are the long file's first lines, byte for byte (both must exist)."""
    if not (short.is_file() and long.is_file()):
        return False
    short_lines = short.read_bytes().splitlines()
    return bool(short_lines) and long.read_bytes().splitlines()[: len(short_lines)] == short_lines


PREFIX_FILES = (str(PLOTTED_CURVES["test_accuracy"]), "forgetting/forgettable.tsv")


def prefix_seeds(short: SeededRun, long: SeededRun) -> list[int]:
    """The seeds on which the short run's accuracy curve and forgettable counts are the long run's first
    rounds, byte for byte: the same training, stopped earlier."""
    longer = {result.seed: result.folder for result in long.results if result.folder}
    return [
        r.seed
        for r in short.results
        if r.folder
        and r.seed in longer
        and all(file_is_prefix(r.folder / name, longer[r.seed] / name) for name in PREFIX_FILES)
    ]


def same_training_note(short: SeededRun | None, long: SeededRun | None) -> str:
    """Tables 2 and 6 (2:8, FedAvg) come from two experiments in the paper; say whether ours are two."""
    experiments = (
        "the paper prints the same round-100 row in Tables 2 and 6 while its text describes two "
        "experiments (B = 64, E = 5, 100 rounds; B = 128, E = 10, 500 rounds)"
    )
    if short is None or long is None:
        return experiments
    shared = prefix_seeds(short, long)
    if shared and shared == short.seeds:
        return (
            f"{experiments}; in this profile they are one training: {short.key} is the first "
            f"{short.settings['rounds']} rounds of {long.key} byte for byte (test accuracy and forgettable "
            f"counts, seed(s) {', '.join(map(str, shared))}), the two sharing every setting but the round "
            "count, so Tables 2 and 6 read the same run here; each table maps the paper's rounds by its own "
            f"experiment, so the paper's round 100 is our round {our_round(short, 100, TABLES_2_3_ROUNDS)} in "
            f"Table 2 and {our_round(long, 100, TABLES_6_8_ROUNDS)} in Table 6"
        )
    return f"{experiments}; our two runs are two trainings too ({short.key}, {long.key})"


def count_table(
    name: str,
    title: str,
    run: SeededRun | None,
    published: dict,
    clients: list[str],
    out_dir: Path,
    results: dict,
    experiment_rounds: int,
    extra_notes: list[str] = (),
) -> None:
    """A per-client count table with the paper's rows and columns: ours (percent of the client's samples,
    mean over seeds) beside the paper's (percent of its 1,200)."""
    rows = []
    for paper_round, printed in published["rounds"].items():
        if run is None:
            rows.append([f"{paper_round}", NOT_RUN] + [f"— / {100 * p / 1200:.0f}" for p in printed])
            continue
        ours = our_round(run, int(paper_round), experiment_rounds)
        per_seed = [s for s in shares_at(run, ours) if s is not None]
        cells = []
        for k, p in enumerate(printed):
            mean = mean_sd([s[k] for s in per_seed])[0]
            cells.append(f"{'—' if mean is None else f'{100 * mean:.0f}'} / {100 * p / 1200:.0f}")
        rows.append([f"{paper_round}", f"{ours} (n={len(per_seed)})"] + cells)
    notes = [
        f"cells: ours / the paper's, forgettable examples as a percent of the client's training samples "
        f"(ours: {client_size(run) if run else '—'} per client, mean over seeds; the paper's: of 1,200)",
        "forgettable = a client's training samples its local model classifies right before aggregation and "
        "the new global model wrong (section 3.1), counted after every round",
        f"our round = the paper's round of its {experiment_rounds}-round experiment at the same fraction of "
        f"our run ({run.settings['rounds'] if run else '—'} rounds; the identity when our run is at least "
        f"{experiment_rounds} rounds long)",
        f"a cell is the one round, as the paper prints it; the claims read it at that round and over longer "
        f"windows, a whole period of the see-saw ({SHARE_PERIOD} rounds: the share swings round by round under "
        "FedWAvg) among them, each a declared reading (claims.md)",
        seeds_note(results),
        *extra_notes,
    ] + scaled_note(results)
    if run is not None and changed_scalings(run.scaled):
        notes.append(
            "the stand-in, and the criteria that chose it before its verdicts were read: the comment "
            "above the run in params.yaml; docs/papers/fedwavg.md"
        )
    write_table(out_dir, name, title, ["paper round", "our round"] + clients, rows, notes)


# ---------------------------------------------------------------- Table 1


def events(run: SeededRun | None, kind: str) -> PerSeed:
    """Per seed: centralised = events over presentations; federated = forgettable examples summed."""
    if run is None:
        return PerSeed()
    if kind == "centralised":
        return run.per_seed([r.example_events for r in run.results])
    return run.per_seed([r.forgettable_total for r in run.results])


def ratios(placed: dict, dataset: str) -> PerSeed:
    """Per seed that both runs have: federated / centralised events, a ratio (×). The paper's 'Increase (%)'
    row is this ratio × 100 (80,437 / 4,044 = 19.89 prints as 1989), not an increase."""
    cen, fed = placed.get((dataset, "centralised")), placed.get((dataset, "federated"))
    if cen is None or fed is None:
        return PerSeed()
    central, federated = events(cen, "centralised").by_seed(), events(fed, "federated").by_seed()
    seeds = sorted(set(central) & set(federated))
    return PerSeed(
        [
            federated[s] / central[s] if has_value(central[s]) and central[s] and has_value(federated[s]) else None
            for s in seeds
        ],
        seeds,
    )


def published_ratio(published: dict, dataset: str) -> float:
    """The paper's ratio as printed in its 'Increase (%)' row (÷ 100)."""
    return published["table1"]["increase_percent"][dataset] / 100.0


def table1(context: ReportContext, runs: dict) -> dict:
    published, out_dir = context.published, context.out_dir
    placed = table1_runs(runs)
    rows = []
    for kind in ("centralised", "federated"):
        row = [kind]
        for dataset in TABLE1_DATASETS:
            ours = events(placed.get((dataset, kind)), kind)
            row.append(f"{fmt_stat(ours, 0) if ours else NOT_RUN} / {published['table1'][kind][dataset]:,}")
        rows.append(row)
    rows.append(
        ["federated / centralised (×)"]
        + [
            f"{fmt_stat(ratios(placed, d), 2) if ratios(placed, d) else NOT_RUN} / ×{published_ratio(published, d):.2f}"
            for d in TABLE1_DATASETS
        ]
    )
    used = {run.key: run for run in placed.values()}
    counts = published["table1"]
    notes = [
        "cells: ours / the paper's (DenseNet-121, centralised 200 epochs, federated 40 rounds × 5 epochs, "
        "5 IID clients)",
        "centralised: example-forgetting events over every presentation (an example right at one "
        "presentation and wrong at its next, Toneva et al.); federated: forgettable examples (local model "
        "right before aggregation, new global model wrong), summed over clients and rounds",
        f"federated / centralised is a ratio: the paper's 'Increase (%)' row ("
        f"{', '.join(str(counts['increase_percent'][d]) for d in TABLE1_DATASETS)}) is this ratio × 100 "
        f"(MNIST: {counts['federated']['mnist']:,} / {counts['centralised']['mnist']:,} = "
        f"×{counts['federated']['mnist'] / counts['centralised']['mnist']:.2f}, printed "
        f"{counts['increase_percent']['mnist']} %), not an increase, which would be 100 less; the paper "
        "prints 427 for FMNIST where its text and counts give 472 (×4.72)",
        seeds_note(used),
    ] + scaled_note(used)
    setting = table1_setting(context, placed)
    if setting:
        notes.append(f"trained (ours, beside the paper's): {setting}")
    checked = standin_regimes(placed)
    notes += regime_notes(checked)
    ran = {d for d, _ in placed}
    header = [table1_header(d, ran, checked) for d in TABLE1_DATASETS]
    write_table(
        out_dir,
        "table1",
        "FedWAvg Table 1: example-forgetting events, centralised vs federated",
        ["", *header],
        rows,
        notes,
    )
    return placed


def table1_header(dataset: str, ran: set[str], checked: dict[str, Regime]) -> str:
    if dataset not in ran:
        return f"{PRETTY[dataset]} (not run{': not in the mirror' if dataset == 'svhn' else ''})"
    if dataset in checked and not checked[dataset].met:
        return f"{PRETTY[dataset]} (outside the paper's regime: {checked[dataset].missed_names()})"
    return PRETTY[dataset]


def standin_regimes(placed: dict) -> dict[str, Regime]:
    """Each dataset's pair against the stand-in criteria (A11), where its runs are scaled stand-ins; {} where
    they train the paper's setting, which needs no stand-in test."""
    pairs = table1_pairs(placed)
    if not any(changed_scalings(placed[(d, kind)].scaled) for d in pairs for kind in ("centralised", "federated")):
        return {}
    return regimes(placed, pairs)


def regime_notes(checked: dict[str, Regime]) -> list[str]:
    if not checked:
        return []
    first = (
        "stand-in criteria (docs/papers/fedwavg-table1-criteria.md, written by a reader blind to these results "
        "before the report first read them, A11): C1 equal exposure, C2 training data learned, C3 fair model, "
        "C4 enough events; a dataset that misses one is outside the paper's regime and decides no claim"
    )
    return [first] + [
        f"{PRETTY[d]}: " + ("every criterion met" if r.met else f"missed {r.missed_text()}") for d, r in checked.items()
    ]


# ---------------------------------------------------------------- Tables 4-5


def top_average(run: SeededRun | None, first: int = 1) -> tuple[PerSeed, PerSeed]:
    """Per seed: Top (best) and Average (mean over evaluated rounds) test accuracy in percent, over the rounds
    from `first` on; None for a diverged seed."""
    if run is None:
        return PerSeed(), PerSeed()
    tops, averages = [], []
    for result in run.results:
        curve = [a for r, a in zip(result.rounds, result.accuracy) if r >= first and has_value(a)]
        if result.diverged or not curve:
            tops.append(None)
            averages.append(None)
        else:
            tops.append(100.0 * max(curve))
            averages.append(100.0 * sum(curve) / len(curve))
    diverged = [result.diverged for result in run.results]  # a diverged seed's accuracy: its worst outcome
    return run.per_seed(tops, diverged, "higher"), run.per_seed(averages, diverged, "higher")


def top_average_gap(run: SeededRun, first: int = 1) -> PerSeed:
    """Per seed: Top − Average (points) over the rounds from `first` on, the paper's measure of oscillation ("a
    larger disparity between top accuracy and average accuracy"); None for a diverged seed."""
    tops, averages = top_average(run, first)
    return run.per_seed([t - a if has_value(t) and has_value(a) else None for t, a in zip(tops, averages)])


def table45(context: ReportContext, runs: dict) -> tuple[dict, dict]:
    published, out_dir = context.published, context.out_dir
    placed, grid = table45_runs(runs)
    for dataset, name in DATASET_TABLE.items():
        printed = published[name]
        rows = []
        for method in TABLE45_METHODS:
            row = [LABELS[method]]
            for index, label in enumerate(("2:7 Top", "2:7 Average", "2:3:4 Top", "2:3:4 Average")):
                clusters = label.split()[0]
                top, average = top_average(placed.get((dataset, clusters, method)))
                ours = top if label.endswith("Top") else average
                row.append(f"{accuracy_cell(ours, 1) if ours else NOT_RUN} / {printed[method][index]:.2f}")
            rows.append(row)
        used = {r.key: r for (d, _, _), r in placed.items() if d == dataset}
        notes = (
            [
                "cells: ours / the paper's, test accuracy (%) on the classes the clusters hold, 9 clients",
                "Top = the best accuracy over every evaluated round, Average = the mean over every evaluated "
                "round (the paper does not define them; see the module docstring of pipeline/report/fedwavg.py)",
                f"FedProx at μ = {TABLE_MU:g} (not given in the paper; the μ grid: table_mu_grid.md)",
                "FedNova with Adam clients normalises by ‖a‖₁ = τ (pipeline/algorithms/fednova.py): on these "
                "equal-sized clients every τ is the same, so it takes FedAvg's step (up to rounding)",
                seeds_note(used) if used else "no runs in this profile",
            ]
            + scaled_note(used)
            + trained_note(context, used.values())
        )
        dataset_name = PRETTY[dataset] + (
            "" if used else " (not run" + (": not in the mirror)" if dataset == "svhn" else ")")
        )
        write_table(
            out_dir,
            name,
            f"FedWAvg Table {4 if dataset == 'svhn' else 5}: {dataset_name}, Top and Average accuracy",
            ["method", "2:7 Top", "2:7 Average", "2:3:4 Top", "2:3:4 Average"],
            rows,
            notes,
        )
    rows = []
    best, (shared, shared_tops) = grid_best(grid), grid_shared_tops(grid)
    for mu, run in sorted(grid.items()):
        top, average = top_average(run)
        shared_top = f"{shared_tops[mu]:.1f}" if mu in shared_tops else "-"
        rows.append(
            [
                f"{mu:g}" + (" (best)" if mu in best else ""),
                run.key,
                accuracy_cell(top, 1),
                shared_top,
                accuracy_cell(average, 1),
            ]
        )
    if not best:
        choice = f"the tables use μ = {TABLE_MU:g}"
    elif TABLE_MU in best:
        choice = f"the tables use μ = {TABLE_MU:g}, the grid's best Top"
    else:
        choice = (
            f"the tables use μ = {TABLE_MU:g}, but the grid's best Top is μ = "
            f"{', '.join(f'{mu:g}' for mu in best)}: pipeline/report/fedwavg.py's TABLE_MU and the "
            "FedProx runs' mu in params.yaml choose it"
        )
    write_table(
        out_dir,
        "table_mu_grid",
        "FedProx's μ (not given in the paper): the grid on CIFAR-10, 2:7",
        ["μ", "run", "Top", f"Top, {seeds_words(shared)}", "Average"],
        rows,
        [
            choice,
            "best = the highest Top, the tables' headline, as the mean over the seeds every μ ran "
            f"({seeds_words(shared)}; ties: every tied μ)",
            seeds_note(grid and {r.key: r for r in grid.values()}),
        ]
        + trained_note(context, grid.values()),
    )
    return placed, grid


def grid_best(grid: dict) -> list:
    """The μs of the grid whose Top accuracy is the highest, rounded as the table shows it: the mean over the
    seeds every μ ran (grid_shared_tops), so that a μ trained on more seeds (the tables' own FedProx run)
    is compared on the same draws as the others, not on others."""
    _, means = grid_shared_tops(grid)
    return [mu for mu, top in sorted(means.items()) if top == max(means.values())] if means else []


def grid_shared_tops(grid: dict) -> tuple[list[int], dict]:
    """(the seeds for which every μ has a Top, μ -> its Top (%) averaged over them, rounded to the table's
    0.1). A diverged seed, or a run with none, is left out rather than averaged over fewer draws."""
    tops = {mu: top_average(run)[0].by_seed() for mu, run in grid.items()}
    with_values = [{seed for seed, top in by_seed.items() if has_value(top)} for by_seed in tops.values()]
    shared = sorted(set.intersection(*with_values)) if with_values else []
    if not shared:
        return [], {}
    return shared, {mu: round(sum(by_seed[s] for s in shared) / len(shared), 1) for mu, by_seed in tops.items()}


def seeds_words(seeds: list[int]) -> str:
    """'seeds 0-2' / 'seeds 0, 2' / 'seed 0' / 'no seed they share'."""
    if not seeds:
        return "no seed they share"
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    return f"seeds {seed_range(seeds)}"


# ---------------------------------------------------------------- figures


def figures(runs: dict, out_dir: Path) -> dict:
    placed = long_runs(runs)
    series = [(LABELS[m], placed[m]) for m in ("fedwavg", "fedavg", "fedprox") if m in placed]
    plot_curves(
        out_dir / "figure2.png",
        "FedWAvg Figure 2: test accuracy, 2:8 clusters",
        series,
        [],
        ylim=(0.0, 1.0),
        ylabel=CURVE_LABEL,
    )
    series = [(LABELS[m], placed[m]) for m in ("fedwavg_frozen", "fedwavg") if m in placed]
    plot_curves(
        out_dir / "figure3.png",
        "FedWAvg Figure 3: with the classifier frozen",
        series,
        [],
        ylim=(0.0, 1.0),
        ylabel=CURVE_LABEL,
    )
    plot_forgettable(out_dir / "forgettable_curves.png", placed)
    return placed


def plot_forgettable(path: Path, placed: dict) -> None:
    """Per run of Figures 2-3, the minority's and the majority's mean forgettable share over rounds (each
    round alone: the figure shows the see-saw the claims average over)."""
    methods = [m for m in ("fedavg", "fedprox", "fedwavg", "fedwavg_frozen") if m in placed]
    fig, axes = pyplot().subplots(
        1, max(1, len(methods)), figsize=(4 * max(1, len(methods)), 3.4), sharey=True, squeeze=False
    )
    for ax, method in zip(axes[0], methods):
        run = placed[method]
        by_seed = [
            read_forgettable(result) for result in run.results
        ]  # each file once (1,000 rounds in the paper profile)
        rounds = sorted(set.intersection(*[set(counts) for counts in by_seed])) if by_seed else []
        for minority, style in ((True, "-"), (False, "--")):
            means = [
                mean_sd(
                    [
                        group_share_of_round(counts[r], clusters_of(run), client_size(run), minority)
                        for counts in by_seed
                    ]
                )[0]
                for r in rounds
            ]
            ax.plot(rounds, means, style, label=("minority" if minority else "majority") + f" (n={run.n})")
        ax.set_title(LABELS[method], fontsize="medium")
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    axes[0][0].set_ylabel("forgettable examples (% of a client's)")
    fig.tight_layout()
    save_figure(fig, path)


# ---------------------------------------------------------------- claims: what a reading measures


def percent_curve(result: RunResult) -> dict[int, float]:
    """{round: test accuracy in percent} over a seed's evaluated rounds that have a value."""
    return {int(r): 100.0 * a for r, a in zip(result.rounds, result.accuracy) if has_value(a)}


def curve_measure(run: SeededRun, measure, accuracy: bool = True) -> PerSeed:
    """Per seed: measure(its percent curve), None where the measure has none. A diverged seed has none: for an
    accuracy (`accuracy`) that is its run's worst outcome, for a measure of the curve's shape it is unknown."""
    values = [None if result.diverged else measure(percent_curve(result)) for result in run.results]
    if accuracy:
        return run.per_seed(values, [result.diverged for result in run.results], "higher")
    return run.per_seed(values)


def span(curve: dict[int, float], first: int, last: int) -> list[float] | None:
    """The curve's values at rounds first..last, None if a round of them has none."""
    values = [curve.get(r) for r in range(first, last + 1)]
    return values if values and all(v is not None for v in values) else None


def mean_of(values: list[float] | None) -> float | None:
    return None if not values else sum(values) / len(values)


def window_accuracy(run: SeededRun, first: int, last: int) -> PerSeed:
    """Per seed: W(first–last), the mean test accuracy (%) over rounds first..last."""
    return curve_measure(run, lambda curve: mean_of(span(curve, first, last)))


def top2(run: SeededRun) -> PerSeed:
    """Per seed: TOP2, the best mean of two consecutive rounds, max over r of (a_(r-1) + a_r) / 2 (%)."""

    def best(curve):
        pairs = [(curve[r - 1] + curve[r]) / 2 for r in curve if r - 1 in curve]
        return max(pairs) if pairs else None

    return curve_measure(run, best)


def amplitude(curve: dict[int, float], r: int) -> float | None:
    """amp_r = |a_r − (a_(r−1) + a_(r+1)) / 2| (points): the swing about the local trend; None without both
    neighbours."""
    if not all(k in curve for k in (r - 1, r, r + 1)):
        return None
    return abs(curve[r] - (curve[r - 1] + curve[r + 1]) / 2)


def mean_amplitude(run: SeededRun, first: int, last: int) -> PerSeed:
    """Per seed: the mean amp_r over rounds first..last (None if a round of them has none)."""

    def mean(curve):
        values = [amplitude(curve, r) for r in range(first, last + 1)]
        return mean_of(values) if all(v is not None for v in values) else None

    return curve_measure(run, mean, accuracy=False)


def mean_step(run: SeededRun, first: int, last: int) -> PerSeed:
    """Per seed: the mean |a_r − a_(r−1)| over rounds r = first..last (points)."""

    def mean(curve):
        values = [
            abs(curve[r] - curve[r - 1]) if r in curve and r - 1 in curve else None for r in range(first, last + 1)
        ]
        return mean_of(values) if all(v is not None for v in values) else None

    return curve_measure(run, mean, accuracy=False)


def halves(rounds: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The rounds whose amp_r exists (2..n−1), split at n/2: 2..n/2 and n/2+1..n−1 (20 rounds: 2-10, 11-19)."""
    return (2, rounds // 2), (rounds // 2 + 1, rounds - 1)


def thirds(rounds: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The first and last thirds of the rounds whose amp_r exists (20 rounds: 2-7 and 14-19)."""
    third = rounds // 3
    return (2, third + 1), (rounds - third, rounds - 1)


def late_window(rounds: int, fraction: float) -> tuple[int, int]:
    """The rounds after `fraction` of the run (20 rounds, 0.8: 17-20), the paper's round 800 of 1,000 mapped; at
    least the last round."""
    return min(rounds, int(round(rounds * fraction)) + 1), rounds


def rounds_text(window: tuple[int, int]) -> str:
    return f"{window[0]}-{window[1]}"


def scaled(values: PerSeed, factor: float) -> PerSeed:
    """Each value × factor (> 0: the measure keeps its direction), seeds kept."""
    return values.map(lambda v: factor * v)


def difference(run: SeededRun, first: PerSeed, second: PerSeed) -> PerSeed:
    """Per seed of one run: first − second (None where either has none: unknown)."""
    return run.per_seed([a - b if has_value(a) and has_value(b) else None for a, b in zip(first, second)])


def group_gap(run: SeededRun, at: int, width: int) -> PerSeed:
    """Per seed: gap = share_min − share_maj (points), each over the `width` rounds ending at our round `at`."""
    return difference(run, group_shares(run, at, True, width), group_shares(run, at, False, width))


# ---------------------------------------------------------------- claims: how they are made


def not_run(
    claim_id: str,
    text: str,
    published: str,
    what: str,
    setting: str = "",
    declared: tuple[str, ...] = (),
    why: str = "not in this profile",
) -> Claim:
    """A claim this profile cannot decide (yet), naming what is missing and the readings declared for it."""
    readings = [not_measured(name, what, primary=index == 0) for index, name in enumerate(declared)]
    return Claim(PAPER, claim_id, text, NOT_RUN, f"{why}: {what}", published, readings=readings, setting=setting)


def absent(what: str) -> Comparison:
    """A comparison a claim needs whose runs this profile does not have: undecided, and no number of seeds
    decides it here."""
    return Comparison(INCONCLUSIVE, f"{what}: not run", 0, 0, undecidable=f"{what} not run in this profile")


def labelled(name: str, items: list[tuple[str, Comparison]], prefix: str = "", primary: bool = False) -> Reading:
    """A reading of the labelled comparisons (Holm within it when there are several), its evidence each one's
    label, its verdict and reason after the correction."""
    comparisons = [c for _, c in items]
    adjusted = with_holm(comparisons)
    parts = [f"{label}: {c.status} ({c.reason})" for (label, _), c in zip(items, adjusted)]
    return reading(name, comparisons, "; ".join(([prefix] if prefix else []) + parts), primary)


def decided(
    context: ReportContext,
    claim_id: str,
    text: str,
    published: str,
    readings: list[Reading],
    keys: list[str],
    unit: str,
    caveat: str = "",
    setting: str | None = None,
    one_failure_fails: bool = True,
) -> Claim:
    """The claim over its declared readings (claim_of_readings), with the setting its runs trained and a
    caveat that holds for every reading."""
    made = claim_of_readings(
        PAPER,
        claim_id,
        text,
        published,
        readings,
        context.setting(*keys) if setting is None else setting,
        unit,
        one_failure_fails,
    )
    if caveat:
        made.evidence += f" — **caveat**: {caveat}"
    return made


def pct(values) -> str:
    return fmt_stat(values, 1)


def ratios_printed(counts: dict) -> str:
    """The paper's federated / centralised ratio per dataset, from its Table 1 counts."""
    return ", ".join(f"{d} ×{counts['federated'][d] / counts['centralised'][d]:.1f}" for d in TABLE1_DATASETS)


# The long runs' E (5) was picked after their claims' verdicts at E = 5 and at the paper's E = 10 had been read
# (params.yaml above `fedwavg_long`; docs/claims-spec.md section 6): a selection look every claim on them states.
E_CHOSEN = (
    "E chosen after a look at these claims' verdicts: the long runs' E = 5 was picked after their verdicts "
    "at E = 5 and at the paper's E = 10 had been read (params.yaml above `fedwavg_long`; "
    "docs/claims-spec.md section 6), a selection look"
)


def short_runs_caveat(run: SeededRun) -> str:
    """A9: the oscillation's course over the paper's 1,000 rounds read on our much shorter runs."""
    return (
        f"our {run.settings['rounds']} rounds stand for the paper's 1,000 (A9): the amplitude's course over "
        "1,000 rounds is read on a run that short; a longer run (60-100 rounds, or gpu_day) would be closer"
    )


# ---------------------------------------------------------------- claims: Table 1

TABLE1_MARGIN = (
    "not measured: the train stage does not count margin increases, the paper's second kind of "
    "centralised forgetting event ([004:L67] 'or if the new margin error is larger than the "
    "previous'), which could only raise the centralised side (A5)"
)
# Table 1's datasets the mirror holds (SVHN is not in it: its runs are paper profile only and have no data here):
# claim 38 waits for each of their pairs, and reads SVHN's too where it has results.
TABLE1_MIRRORED = ("mnist", "fashion_mnist", "cifar10")


def table1_pairs(placed: dict) -> list[str]:
    return [d for d in TABLE1_DATASETS if (d, "centralised") in placed and (d, "federated") in placed]


def table1_setting(context: ReportContext, placed: dict) -> str:
    """Table 1's setting: the datasets trained (and the mirror's copy where it is one), then what the centralised
    and the federated runs scaled, beside the paper's; SVHN named as not run."""
    datasets = table1_pairs(placed)
    if not datasets:
        return ""
    settings = {key: setting_of([run], context.dataset_records) for key, run in placed.items() if key[0] in datasets}
    parts = ["datasets: " + ", ".join(settings[(d, "federated")].dataset_words() for d in datasets)]
    for kind in ("centralised", "federated"):
        changed = list(
            dict.fromkeys(f"{ours} (paper: {theirs})" for d in datasets for ours, theirs in settings[(d, kind)].changed)
        )
        parts.append(f"{kind}: " + (", ".join(changed) if changed else "the paper's settings"))
    unrun = [PRETTY[d] for d in TABLE1_DATASETS if d not in datasets]
    if unrun:
        parts.append(f"{', '.join(unrun)} not run" + (" (not in the mirror)" if unrun == ["SVHN"] else ""))
    return "; ".join(parts)


def increase_claim(context: ReportContext, placed: dict) -> Claim:
    """Claim 38: federated above centralised events on each dataset run, all-of with Holm (R1★); the margin
    clause (R2) not measured."""
    counts = context.published["table1"]
    claim_id = "t1_increase"
    text = (
        "Example-forgetting events increase from centralised to federated learning, on every dataset of Table 1 "
        "(read on each dataset the setting names)"
    )
    published = (
        f"[004:L69] Table 1, federated / centralised events: {ratios_printed(counts)} (the paper's "
        f"'Increase (%)' row, {', '.join(str(counts['increase_percent'][d]) for d in TABLE1_DATASETS)}, is "
        "this ratio × 100; it prints 427 for FMNIST where its counts give 472)"
    )
    declared = ("R1 the counts as implemented", "R2 with the margin clause")
    datasets = table1_pairs(placed)
    setting = table1_setting(context, placed)
    waiting = [d for d in TABLE1_MIRRORED if d not in datasets]
    if waiting:
        done = [PRETTY[d] for d in datasets]
        return not_run(
            claim_id,
            text,
            published,
            "Table 1's pair on "
            + ", ".join(f"{PRETTY[d]} (fedwavg_t1_{d}_centralised / _federated)" for d in waiting)
            + (
                f"; the claim reads every dataset the mirror holds at once (those with results: "
                f"{', '.join(done)}; see Table 1)"
                if done
                else ""
            ),
            setting,
            declared,
            why="not trained yet" if done else "not in this profile or not trained yet",
        )
    checked = standin_regimes(placed)
    outside = [d for d in datasets if d in checked and not checked[d].met]
    inside = [d for d in datasets if d not in outside]
    left_out = "; ".join(f"{PRETTY[d]} outside the paper's regime ({checked[d].missed_text()})" for d in outside)
    if not inside:
        return not_run(
            claim_id, text, published, left_out, setting, declared, why="no stand-in in the paper's regime (A11)"
        )
    items = []
    for dataset in inside:
        federated = events(placed[(dataset, "federated")], "federated")
        centralised = events(placed[(dataset, "centralised")], "centralised")
        items.append(
            (
                f"{PRETTY[dataset]} federated {fmt_stat(federated, 0)} vs centralised "
                f"{fmt_stat(centralised, 0)} events",
                compare(federated, centralised),
            )
        )
    unrun = [PRETTY[d] for d in TABLE1_DATASETS if d not in datasets]
    prefix = (
        (
            f"all of the {len(inside)} datasets run in the paper's regime, Holm over {len(inside)}"
            if len(inside) > 1
            else f"the one dataset run in the paper's regime, {PRETTY[inside[0]]}"
        )
        + (f" ({', '.join(unrun)} not run: not in the mirror)" if unrun else "")
        + (f"; left out: {left_out}" if left_out else "")
    )
    readings = [labelled(declared[0], items, prefix, primary=True), not_measured(declared[1], TABLE1_MARGIN)]
    if readings[0].status == HELD and outside:
        # A11: held on the datasets in the regime while one the profile runs was left out is a partial result,
        # not a verdict (SVHN, never in the mirror, is outside the claim's 'datasets run' as before).
        partial = f"partial, not a verdict: {readings[0].evidence}"
        return not_run(claim_id, text, published, partial, setting, declared, why="held on part of Table 1 only")
    keys = [placed[(d, kind)].key for d in inside for kind in ("federated", "centralised")]
    return decided(context, claim_id, text, published, readings, keys, "events", setting=setting)


def mnist_most_claim(context: ReportContext, placed: dict) -> Claim:
    """Claim 39: the ratio largest on MNIST, against every other dataset (SVHN included): never decidable
    without SVHN; a partial result is shown, not decided."""
    claim_id = "t1_mnist_most"
    text = "The federated / centralised ratio of Table 1 is largest on MNIST"
    published = (
        f"[004:L69] 'In particular, there was a huge difference in MNIST.' Table 1: "
        f"{ratios_printed(context.published['table1'])}"
    )
    declared = ("R1 the ratio", "R2 the ratio with the margin clause")
    setting = table1_setting(context, placed)
    checked = standin_regimes(placed)
    outside = [d for d in checked if not checked[d].met]
    usable = {d: ratios(placed, d) for d in TABLE1_DATASETS if ratios(placed, d) and d not in outside}
    mnist = usable.pop("mnist", None)
    others = usable
    if not mnist or len(others) < len(TABLE1_DATASETS) - 1:
        missing = [PRETTY[d] for d in TABLE1_DATASETS if not ratios(placed, d)]
        partial = "; ".join(f"{PRETTY[d]} ×{fmt_stat(v, 2)}" for d, v in ({"mnist": mnist} | others).items() if v)
        why = "; ".join(
            (
                [
                    f"{', '.join(missing)} not run"
                    + (" (SVHN is not in the mirror: never decidable here)" if "SVHN" in missing else "")
                ]
                if missing
                else []
            )
            + [f"{PRETTY[d]} outside the paper's regime (A11: {checked[d].missed_names()})" for d in outside]
            + ([f"partial, not a verdict: federated / centralised {partial}"] if partial else [])
        )
        return not_run(claim_id, text, published, why, setting, declared)
    items = [
        (f"MNIST ×{fmt_stat(mnist, 2)} vs {PRETTY[d]} ×{fmt_stat(v, 2)}", compare(mnist, v)) for d, v in others.items()
    ]
    readings = [
        labelled(declared[0], items, f"Holm over {len(items)}", primary=True),
        not_measured(declared[1], TABLE1_MARGIN),
    ]
    keys = [run.key for run in placed.values()]
    return decided(context, claim_id, text, published, readings, keys, "× (ratio)", setting=setting)


# ---------------------------------------------------------------- claims: Tables 2-3


def contrast_readings(run: SeededRun) -> list[Reading]:
    """Claims 40-41's readings: the gap (minority share − majority share) above 50 points at the paper's round
    100 (R1★), over the see-saw's period ending there (R2), over the paper's rows 50-100 (R3), above 60 (R4)."""
    last, middle = our_round(run, 100, TABLES_2_3_ROUNDS), our_round(run, 50, TABLES_2_3_ROUNDS)
    plans = (
        (f"R1 AT({last}) > {GAP:.0f}", last, 1, GAP, f"at round {last} alone (the paper's round 100)"),
        (
            f"R2 W({last - SHARE_PERIOD + 1}–{last}) > {GAP:.0f}",
            last,
            SHARE_PERIOD,
            GAP,
            f"over the see-saw's period, rounds {last - SHARE_PERIOD + 1}-{last}",
        ),
        (
            f"R3 W({middle}–{last}) > {GAP:.0f}",
            last,
            last - middle + 1,
            GAP,
            f"over rounds {middle}-{last} (the paper's rows 50-100)",
        ),
        (f"R4 AT({last}) > {GAP_STRICT:.0f}", last, 1, GAP_STRICT, f"at round {last} alone"),
    )
    readings = []
    for number, (name, at, width, margin, where) in enumerate(plans):
        minority, majority = group_shares(run, at, True, width), group_shares(run, at, False, width)
        comparison = compare(minority, shift(majority, margin))
        readings.append(
            reading(
                name,
                [comparison],
                f"{where}: minority {pct(minority)} %, majority {pct(majority)} % of their examples, "
                f"gap {pct(difference(run, minority, majority))} points against {margin:.0f}; "
                f"{comparison.reason}",
                primary=number == 0,
            )
        )
    return readings


CONTRAST_READINGS = (
    "R1 AT(round 100) > 50",
    "R2 W(the period ending at round 100) > 50",
    "R3 W(rounds 50-100) > 50",
    "R4 AT(round 100) > 60",
)


def contrast_claim(
    context: ReportContext, claim_id: str, run: SeededRun | None, clusters: tuple[int, ...], table: str, published: str
) -> Claim:
    label = clusters_label(clusters)
    text = (
        f"Under FedAvg at {label} ({table}) the minority clients keep nearly all their examples forgettable "
        "while the majority's fall near zero (read as the minority's forgettable share above the majority's by "
        f"more than {GAP:.0f} points; R4: {GAP_STRICT:.0f})"
    )
    if run is None:
        return not_run(claim_id, text, published, f"the FedAvg run on {label}", declared=CONTRAST_READINGS)
    mapping = mapping_text(run, 100, TABLES_2_3_ROUNDS)
    made = decided(context, claim_id, text, published, contrast_readings(run), [run.key], "points (share)")
    made.evidence = f"{mapping}; {made.evidence}"
    return made


def published_gap(table: dict, clusters: tuple[int, ...], paper_round: int = 100, size: int = 1200) -> float:
    """The paper's gap (points) in a Table 2-3 row: the minority's mean share minus the majority's."""
    counts = dict(enumerate(table["rounds"][paper_round]))
    return group_share_of_round(counts, clusters, size, True) - group_share_of_round(counts, clusters, size, False)


NO_BETTER_READINGS = (
    "R1 AT(round 100), d = 5",
    "R2 AT(round 100), d = 10",
    "R3 W(the period ending at round 100), d = 5",
    "R4 the minority's share, AT(round 100), d = 5",
)


def no_better_claim(context: ReportContext, balanced: SeededRun | None, skewed: SeededRun | None) -> Claim:
    """N8: at 4:6 the gap is no smaller than at 2:8 (gap(4:6) at least gap(2:8) − d), paired by seed."""
    claim_id = "t3_no_better_than_t2"
    published_tables = context.published
    g46, g28 = published_gap(published_tables["table3"], (4, 6)), published_gap(published_tables["table2"], (2, 8))
    text = (
        "More balanced clusters do not mitigate FedAvg's favouring of the majority: the gap between the minority's "
        "and the majority's forgettable shares at 4:6 (Table 3) is at least the 2:8 gap (Table 2) less d points "
        "(gap(4:6) ≥ gap(2:8) − d; d = 5, R2: 10)"
    )
    published = (
        f"[004:L98] 'It is easily assumable that such a tendency would be mitigated once the clusters are "
        f"more balanced. However, the following result begs to differ.' Tables 2-3, round 100: gap "
        f"{g46:.1f} (4:6) vs {g28:.1f} (2:8) points ({g46 - g28:+.1f})"
    )
    if balanced is None or skewed is None:
        missing = [label for label, run in (("4:6", balanced), ("2:8", skewed)) if run is None]
        return not_run(
            claim_id, text, published, f"the FedAvg run on {', '.join(missing)}", declared=NO_BETTER_READINGS
        )
    last = our_round(balanced, 100, TABLES_2_3_ROUNDS)
    if our_round(skewed, 100, TABLES_2_3_ROUNDS) != last:
        return not_run(claim_id, text, published, "the 4:6 and 2:8 runs differ in length", declared=NO_BETTER_READINGS)
    plans = (
        (f"R1 AT({last}), d = 5", 1, 5.0, True),
        (f"R2 AT({last}), d = 10", 1, 10.0, True),
        (f"R3 W({last - SHARE_PERIOD + 1}–{last}), d = 5", SHARE_PERIOD, 5.0, True),
        (f"R4 minority share AT({last}), d = 5", 1, 5.0, False),
    )
    readings = []
    for number, (name, width, margin, gap) in enumerate(plans):
        mine, theirs = (
            (group_gap(run, last, width) if gap else group_shares(run, last, True, width)) for run in (balanced, skewed)
        )
        comparison = compare(shift(mine, margin), theirs)
        what = "gap" if gap else "minority share"
        readings.append(
            reading(
                name,
                [comparison],
                f"{what} at 4:6 {pct(mine)} vs 2:8 {pct(theirs)} points, 4:6 + {margin:g} against 2:8: "
                f"{comparison.reason}",
                primary=number == 0,
            )
        )
    return decided(
        context,
        claim_id,
        text,
        published,
        readings,
        [balanced.key, skewed.key],
        "points (share)",
        caveat=f"{mapping_text(balanced, 100, TABLES_2_3_ROUNDS)}; paired on the seeds both runs share "
        "(A8: seeds 0-2, no new 2:8 seeds)",
    )


# ---------------------------------------------------------------- claims: Tables 4-5

PREVIOUS = ("fedavg", "fedprox", "scaffold", "fednova")  # "previous methods" [004:L170]
ALPHAS = ("fedwavg_alpha0.1", "fedwavg_alpha0.2", "fedwavg_alpha0.3")
BEST_TOP_READINGS = ("R1 TOP, α = 0.3", "R2 TOP, FedWAvg at its best α per clustering", "R3 TOP2, α = 0.3")


def table45_keys(placed: dict, dataset: str = "cifar10") -> list[str]:
    """The keys of a dataset's Tables 4-5 runs, FedWAvg α = 0.3 first (the setting is the first's)."""
    runs = [
        run
        for (d, _, method), run in sorted(placed.items(), key=lambda kv: kv[0][2] != "fedwavg_alpha0.3")
        if d == dataset
    ]
    return [run.key for run in runs]


def against_previous(placed: dict, measure, mine_of: dict[str, str]) -> list[tuple[str, Comparison]]:
    """FedWAvg (at `mine_of[clusters]`) against each previous method's `measure`, at both clusterings: the
    labelled comparisons (an absent method's is undecided) and each side's numbers."""
    items = []
    for clusters in ("2:7", "2:3:4"):
        method = mine_of[clusters]
        mine = measure(placed[("cifar10", clusters, method)])
        for other in PREVIOUS:
            run = placed.get(("cifar10", clusters, other))
            if run is None:
                items.append(
                    (f"{clusters} {LABELS[method]} vs {LABELS[other]}", absent(f"{LABELS[other]} at {clusters}"))
                )
                continue
            theirs = measure(run)
            items.append(
                (
                    f"{clusters} {LABELS[method]} {accuracy_cell(mine, 1)} vs {LABELS[other]} "
                    f"{accuracy_cell(theirs, 1)}",
                    compare(mine, theirs),
                )
            )
    return items


def top_of(run: SeededRun) -> PerSeed:
    return top_average(run)[0]


def best_top_claim(context: ReportContext, placed: dict) -> Claim:
    """Claim 42: FedWAvg above the previous methods (not its other α) at both CIFAR-10 clusterings."""
    claim_id = "t5_best_top"
    text = (
        "FedWAvg achieves higher accuracy than the previous methods (FedAvg, FedProx, SCAFFOLD, FedNova) in both "
        "environments, 2:7 and 2:3:4 (Table 5's Top)"
    )
    table = context.published["table5_cifar10"]
    published = (
        "[004:L170] 'FedWAvg achieves higher accuracy than previous methods for both environment.' Table 5 Top: "
        + "; ".join(
            f"{c}: α = 0.3 {table['fedwavg_alpha0.3'][i]:.2f}, best previous {max(table[m][i] for m in PREVIOUS):.2f}"
            for i, c in ((0, "2:7"), (2, "2:3:4"))
        )
    )
    if not all(("cifar10", c, "fedwavg_alpha0.3") in placed for c in ("2:7", "2:3:4")):
        return not_run(
            claim_id, text, published, "FedWAvg (α = 0.3) on CIFAR-10 at 2:7 and 2:3:4", declared=BEST_TOP_READINGS
        )
    items = against_previous(placed, top_of, {"2:7": "fedwavg_alpha0.3", "2:3:4": "fedwavg_alpha0.3"})
    readings = [labelled(BEST_TOP_READINGS[0], items, f"Holm over {len(items)}", primary=True)]
    best = {}
    for clusters in ("2:7", "2:3:4"):
        means = {
            m: mean_sd(top_of(placed[("cifar10", clusters, m)]))[0]
            for m in ALPHAS
            if ("cifar10", clusters, m) in placed
        }
        best[clusters] = max(
            (m for m in means if means[m] is not None), key=lambda m: means[m], default="fedwavg_alpha0.3"
        )
    items = against_previous(placed, top_of, best)
    readings.append(
        labelled(
            BEST_TOP_READINGS[1],
            items,
            "best α by the mean Top over seeds: "
            + ", ".join(f"{c} {LABELS[m]}" for c, m in best.items())
            + f"; Holm over {len(items)}",
        )
    )
    items = against_previous(placed, top2, {"2:7": "fedwavg_alpha0.3", "2:3:4": "fedwavg_alpha0.3"})
    readings.append(
        labelled(BEST_TOP_READINGS[2], items, f"TOP2 = the best mean of two consecutive rounds; Holm over {len(items)}")
    )
    return decided(
        context,
        claim_id,
        text,
        published,
        readings,
        table45_keys(placed),
        "points",
        caveat="the comparison set is the previous methods alone, as [004:L170] says, not FedWAvg's other α",
    )


SCAFFOLD_READINGS = ("R1 TOP", "R2 ALL")


def scaffold_weakest_claim(context: ReportContext, placed: dict, dataset: str, table: str, column: int) -> Claim:
    """Claims 43-44 (table-derived): every other method of the dataset's 2:3:4 table above SCAFFOLD."""
    claim_id = f"t45_scaffold_weakest_{dataset}"
    name = PRETTY[dataset]
    where = f"{name} (the paper's Table 4; not run here: not in the mirror)" if dataset == "svhn" else name
    text = (
        f"SCAFFOLD is the weakest method on {where} at 2:3:4 (table-derived: the paper's text has no sentence "
        "that says it; its table does)"
    )
    printed = context.published[table]
    published = (
        f"no sentence in the text: table-derived. {'Table 4' if dataset == 'svhn' else 'Table 5'} 2:3:4 Top: "
        f"SCAFFOLD {printed['scaffold'][column]:.2f}, the lowest (next "
        f"{min(v[column] for m, v in printed.items() if m not in ('columns', 'scaffold')):.2f})"
    )
    scaffold = placed.get((dataset, "2:3:4", "scaffold"))
    if scaffold is None:
        why = f"the {name} 2:3:4 runs" + (" (SVHN is not in the mirror)" if dataset == "svhn" else "")
        return not_run(claim_id, text, published, why, declared=SCAFFOLD_READINGS)
    readings = []
    for number, (name_, pick) in enumerate(zip(SCAFFOLD_READINGS, (0, 1))):
        weakest = top_average(scaffold)[pick]
        items = [
            (
                f"{LABELS[m]} {accuracy_cell(top_average(run)[pick], 1)} vs SCAFFOLD {accuracy_cell(weakest, 1)}",
                compare(top_average(run)[pick], weakest),
            )
            for m in TABLE45_METHODS
            if m != "scaffold" and (run := placed.get((dataset, "2:3:4", m)))
        ]
        readings.append(labelled(name_, items, f"Holm over {len(items)}", primary=number == 0))
    keys = [run.key for (d, c, _), run in placed.items() if d == dataset and c == "2:3:4"]
    return decided(context, claim_id, text, published, readings, sorted(keys), "points")


ALPHA_READINGS = ("R1 TOP", "R2 ALL")
# N9's "within d": half the paper's smallest spreads across α in Table 5 (3.8 points of 2:7 Average, 4.4 of
# 2:3:4 Top), rounded down.
ALPHA_WITHIN = 2.0


def alpha_reading(name: str, values: dict[tuple[str, str], PerSeed], primary: bool) -> Reading:
    """N9's reading: held when some α pair (per clustering, 6 pairs, Holm over 6) is separated either way;
    failed when every pair is within ALPHA_WITHIN points (both 'apart by more than d' comparisons of every pair
    separated against it, Holm over 12); inconclusive otherwise."""
    separation, within = [], []
    for clusters in ("2:7", "2:3:4"):
        for low, high in ((0, 1), (0, 2), (1, 2)):
            a, b = values[(clusters, ALPHAS[low])], values[(clusters, ALPHAS[high])]
            first, second = (a, b) if (mean_sd(a)[0] or 0) >= (mean_sd(b)[0] or 0) else (b, a)
            label = f"{clusters} {LABELS[ALPHAS[low]]} {pct(a)} vs {LABELS[ALPHAS[high]]} {pct(b)}"
            separation.append((label, compare(first, second)))
            within += [compare(a, shift(b, ALPHA_WITHIN)), compare(b, shift(a, ALPHA_WITHIN))]
    apart = with_holm([c for _, c in separation])
    parts = [
        f"{label}: {'separated' if c.status != INCONCLUSIVE else 'not separated'} ({c.reason})"
        for (label, _), c in zip(separation, apart)
    ]
    near = with_holm(within)
    if any(c.status != INCONCLUSIVE for c in apart):
        deciding = min((c for c in apart if c.status != INCONCLUSIVE), key=lambda c: c.p)
        return reading(name, [deciding], "held: a pair is separated; " + "; ".join(parts), primary, status=HELD)
    if all(c.status == FAILED for c in near):
        weakest = max(near, key=lambda c: c.p)
        return reading(
            name,
            [weakest],
            f"failed: every pair within {ALPHA_WITHIN:g} points (each 'apart by more "
            f"than {ALPHA_WITHIN:g}' separated against, Holm over {len(near)}; the weakest: "
            f"{weakest.reason}); " + "; ".join(parts),
            primary,
            status=FAILED,
        )
    shown = sum(c.status == FAILED for c in near)
    return reading(
        name,
        [c for _, c in separation],
        f"inconclusive: no pair separated, and {shown} of the {len(near)} 'apart by more than "
        f"{ALPHA_WITHIN:g}' comparisons separated against (all {len(near)} would fail it); " + "; ".join(parts),
        primary,
        status=INCONCLUSIVE,
    )


def alpha_sensitive_claim(context: ReportContext, placed: dict) -> Claim:
    """N9: FedWAvg's accuracy depends on α (Table 5's three α at both clusterings)."""
    claim_id = "fedwavg_alpha_sensitive"
    text = (
        "FedWAvg's performance is sensitive to its α hyperparameter (some of α = 0.1 / 0.2 / 0.3 separated at a "
        f"clustering: held; every pair within {ALPHA_WITHIN:g} points: failed)"
    )
    table = context.published["table5_cifar10"]
    columns = table["columns"]
    published = (
        "[004:L170] 'Still, FedWAvg performance is sensitive to the alpha hyperparameter.' [004:L230] 'the "
        "performance is highly sensitive to the update ratio hyperparameter'. Table 5 across α = 0.1 / 0.2 / "
        "0.3: "
        + "; ".join(
            f"{column} {' / '.join(f'{table[m][i]:.2f}' for m in ALPHAS)} (spread "
            f"{max(table[m][i] for m in ALPHAS) - min(table[m][i] for m in ALPHAS):.1f})"
            for i, column in enumerate(columns)
        )
    )
    if not all(("cifar10", c, m) in placed for c in ("2:7", "2:3:4") for m in ALPHAS):
        return not_run(
            claim_id, text, published, "FedWAvg at every α on CIFAR-10 at 2:7 and 2:3:4", declared=ALPHA_READINGS
        )
    readings = [
        alpha_reading(
            name,
            {(c, m): top_average(placed[("cifar10", c, m)])[pick] for c in ("2:7", "2:3:4") for m in ALPHAS},
            number == 0,
        )
        for number, (name, pick) in enumerate(zip(ALPHA_READINGS, (0, 1)))
    ]
    keys = [placed[("cifar10", c, m)].key for c in ("2:7", "2:3:4") for m in reversed(ALPHAS)]
    return decided(context, claim_id, text, published, readings, keys, "points", one_failure_fails=False)


# ---------------------------------------------------------------- claims: the long runs (Tables 6-8, Figures 2-3)

LONG = ("fedwavg", "fedavg", "fedprox")
HALVING_READINGS = (
    "R1 within each method, at the printed rounds, 0.6",
    "R2 within each method, over periods, 0.6",
    "R3 across methods, over the period",
    "R4 within each method, at the printed rounds, 0.5",
)


def halving_claim(context: ReportContext, placed: dict) -> Claim:
    """Claim 45: FedWAvg's minority share at round 200 at most `factor` of its round 100, FedAvg's and FedProx's
    above that of their own (R1★, R2, R4); R3 FedWAvg at most 0.6 of the others' at round 200."""
    claim_id = "t8_halves"
    text = (
        "FedAvg and FedProx show nearly no reduction of the minority's forgettable examples while FedWAvg has them "
        f"in half by round 200 of the {TABLES_6_8_ROUNDS}-round experiment (read as: FedWAvg's minority share at "
        f"round 200 at most {HALF:g} of its round-100 share, FedAvg's and FedProx's above {HALF:g} of theirs)"
    )
    t = context.published
    published = "[004:L196] Tables 6-8, minority at rounds 100 → 200 of 1,200: " + "; ".join(
        f"{LABELS[m]} {' / '.join(map(str, t[LONG_TABLES[m]]['rounds'][100][:2]))} → "
        f"{' / '.join(map(str, t[LONG_TABLES[m]]['rounds'][200][:2]))} "
        f"(×{sum(t[LONG_TABLES[m]]['rounds'][200][:2]) / sum(t[LONG_TABLES[m]]['rounds'][100][:2]):.2f})"
        for m in LONG
    )
    if not all(m in placed for m in LONG):
        return not_run(claim_id, text, published, "a 2:8 long run", declared=HALVING_READINGS)
    late, early = (our_round(placed["fedwavg"], r, TABLES_6_8_ROUNDS) for r in (200, 100))

    def within_methods(width: int, factor: float) -> list[tuple[str, Comparison]]:
        items = []
        for method in LONG:
            now, before = (group_shares(placed[method], at, True, width) for at in (late, early))
            bound = scaled(before, factor)
            kind = "at most" if method == "fedwavg" else "above"
            items.append(
                (
                    f"{LABELS[method]} {pct(now)} % vs {kind} {factor:g} × {pct(before)} % = {pct(bound)} %",
                    compare(now, bound, "lower" if method == "fedwavg" else "higher"),
                )
            )
        return items

    where_one = f"rounds {late} vs {early} alone (the paper's 200 and 100 of {TABLES_6_8_ROUNDS})"
    where_period = (
        f"W({late - SHARE_PERIOD + 1}–{late}) vs W({early - SHARE_PERIOD + 1}–{early}), whole periods of the see-saw"
    )
    across = []
    wavg = group_shares(placed["fedwavg"], late, True)
    for method in ("fedavg", "fedprox"):
        bound = scaled(group_shares(placed[method], late, True), HALF)
        across.append(
            (f"FedWAvg {pct(wavg)} % vs {HALF:g} × {LABELS[method]} = {pct(bound)} %", compare(wavg, bound, "lower"))
        )
    readings = [
        labelled(
            f"R1 AT({late}) vs AT({early}), {HALF:g}",
            within_methods(1, HALF),
            f"{where_one}; Holm over 3",
            primary=True,
        ),
        labelled(
            f"R2 W({late - SHARE_PERIOD + 1}–{late}) vs W({early - SHARE_PERIOD + 1}–{early}), {HALF:g}",
            within_methods(SHARE_PERIOD, HALF),
            f"{where_period}; Holm over 3",
        ),
        labelled(
            f"R3 across methods, W({late - SHARE_PERIOD + 1}–{late}), {HALF:g}",
            across,
            f"{period_text(late)}; Holm over 2",
        ),
        labelled(
            f"R4 AT({late}) vs AT({early}), {HALF_LITERAL:g}",
            within_methods(1, HALF_LITERAL),
            f"{where_one}, the literal 'half'; Holm over 3",
        ),
    ]
    return decided(
        context,
        claim_id,
        text,
        published,
        readings,
        [placed[m].key for m in LONG],
        "points (share)",
        caveat=f"{mapping_text(placed['fedwavg'], 200, TABLES_6_8_ROUNDS)}; {E_CHOSEN}",
        setting=experiment_setting(context.setting(*[placed[m].key for m in LONG]), TABLES_6_8_ROUNDS),
    )


OSCILLATION_READINGS = (
    "R1 TOP − ALL, long runs",
    "R2 TOP − ALL, Tables 4-5 runs",
    "R3 TOP − ALL, long runs, second half",
)


def oscillation_claim(context: ReportContext, placed: dict, table45_placed: dict) -> Claim:
    """Claim 46: FedWAvg's Top − Average larger than the previous methods'."""
    claim_id = "fig2_oscillates"
    text = (
        "FedWAvg's oscillation makes the gap between its top and average accuracy larger than the previous "
        "methods' (per seed, Top − Average in points: Top = the best accuracy over the evaluated rounds, Average "
        "= their mean)"
    )
    published = (
        "[004:L241] 'The oscillation of FedWAvg results in a larger disparity between top accuracy and "
        "average accuracy than previous methods.' Table 5 2:3:4 Top − Average: α = 0.3 23.6 vs FedAvg 8.4, "
        "FedProx 7.0, SCAFFOLD 3.9, FedNova 8.6"
    )
    if not all(m in placed for m in LONG):
        return not_run(claim_id, text, published, "a 2:8 long run", declared=OSCILLATION_READINGS)
    rounds = int(placed["fedwavg"].settings["rounds"])
    second = halves(rounds)[1][0]

    def long_items(first: int) -> list[tuple[str, Comparison]]:
        gaps = {m: top_average_gap(placed[m], first) for m in LONG}
        return [
            (f"FedWAvg {pct(gaps['fedwavg'])} vs {LABELS[m]} {pct(gaps[m])} points", compare(gaps["fedwavg"], gaps[m]))
            for m in ("fedavg", "fedprox")
        ]

    readings = [labelled(OSCILLATION_READINGS[0], long_items(1), f"rounds 1-{rounds}; Holm over 2", primary=True)]
    tables_run = all(("cifar10", c, "fedwavg_alpha0.3") in table45_placed for c in ("2:7", "2:3:4"))
    if tables_run:
        items = against_previous(
            table45_placed, top_average_gap, {"2:7": "fedwavg_alpha0.3", "2:3:4": "fedwavg_alpha0.3"}
        )
        readings.append(labelled(OSCILLATION_READINGS[1], items, f"Holm over {len(items)}"))
    else:
        readings.append(
            not_measured(
                OSCILLATION_READINGS[1], "the Tables 4-5 runs (α = 0.3 at 2:7 and 2:3:4) are not in this profile"
            )
        )
    readings.append(
        labelled(
            f"R3 TOP − ALL, long runs, rounds {second}-{rounds}",
            long_items(second),
            f"rounds {second}-{rounds} ([004:L236] 'the mid and end performances'); Holm over 2",
        )
    )
    keys = [placed[m].key for m in LONG]
    setting = context.setting(*keys)
    if tables_run:
        setting += f"; R2 (Tables 4-5): {context.setting(*table45_keys(table45_placed))}"
    return decided(context, claim_id, text, published, readings, keys, "points", caveat=E_CHOSEN, setting=setting)


BETTER_READINGS = ("R1 ALL + 15", "R2 W(second half) + 15", "R3 ALL ≥ 1.15 ×")


def around_better_claim(context: ReportContext, placed: dict) -> Claim:
    """Claim 47: FedWAvg's Average at least AROUND_LOWEST points above FedAvg's and FedProx's (R1★), over the
    second half (R2), or at least 1.15 × theirs (R3, relative)."""
    claim_id = "fig2_better"
    text = (
        f"FedWAvg's general performance is around {AROUND_BETTER:.0f} % better than FedAvg's and FedProx's "
        f"(read as at least {AROUND_LOWEST:.0f} percentage points above each, the lower end of what rounds to "
        f"{AROUND_BETTER:.0f} at the nearest 10; R3 relative: at least {RELATIVE:g} × each)"
    )
    published = (
        "[004:L236] 'the general performance of FedWAvg is around 20% better than the other two methods. While "
        "FedAvg's performance swings around 50% and FedProx's performance is stuck between 50 and 60%, "
        "FedWAvg's performance is around 70% and higher'"
    )
    if not all(m in placed for m in LONG):
        return not_run(claim_id, text, published, "a 2:8 long run", declared=BETTER_READINGS)
    rounds = int(placed["fedwavg"].settings["rounds"])
    second = halves(rounds)[1][0]
    averages = {m: top_average(placed[m])[1] for m in LONG}
    window = {m: window_accuracy(placed[m], second, rounds) for m in LONG}

    def points_items(values: dict) -> list[tuple[str, Comparison]]:
        return [
            (
                f"FedWAvg {pct(values['fedwavg'])} % vs {LABELS[m]} {pct(values[m])} % + {AROUND_LOWEST:.0f} "
                f"(FedWAvg − {LABELS[m]} = {advantage(values['fedwavg'], values[m])})",
                compare(values["fedwavg"], shift(values[m], AROUND_LOWEST)),
            )
            for m in ("fedavg", "fedprox")
        ]

    relative = [
        (
            f"FedWAvg {pct(averages['fedwavg'])} % vs {RELATIVE:g} × {LABELS[m]} "
            f"{pct(scaled(averages[m], RELATIVE))} %",
            compare(averages["fedwavg"], scaled(averages[m], RELATIVE)),
        )
        for m in ("fedavg", "fedprox")
    ]
    readings = [
        labelled(BETTER_READINGS[0], points_items(averages), f"ALL = rounds 1-{rounds}; Holm over 2", primary=True),
        labelled(
            f"R2 W({second}–{rounds}) + {AROUND_LOWEST:.0f}",
            points_items(window),
            f"the mid and end, rounds {second}-{rounds}; Holm over 2",
        ),
        labelled(BETTER_READINGS[2], relative, f"the literal '{AROUND_BETTER:.0f} % better', relative; Holm over 2"),
    ]
    return decided(
        context,
        claim_id,
        text,
        published,
        readings,
        [placed[m].key for m in LONG],
        "points",
        caveat=f"an advantage above {AROUND_HIGHEST:.0f} points is reported, not failed; {E_CHOSEN}",
    )


def advantage(mine: PerSeed, theirs: PerSeed) -> str:
    a, b = mean_sd(mine)[0], mean_sd(theirs)[0]
    if a is None or b is None:
        return "—"
    return f"{a - b:+.1f} points" + (f", above {AROUND_HIGHEST:.0f}" if a - b > AROUND_HIGHEST else "")


FREEZE_READINGS = ("R1 W(after 800 of 1,000)", "R2 W(after 700 of 1,000)", "R3 W(after 900 of 1,000)")


def freeze_claim(context: ReportContext, placed: dict) -> Claim:
    """Claim 48: frozen above not frozen by less than FREEZE_LIMIT points, late in the run: after the paper's
    round 800 (R1★), 700 (R2), 900 (R3), each of two comparisons (helps; by less than the limit), Holm over 2."""
    claim_id = "fig3_freeze"
    text = (
        f"Freezing the classifier helps FedWAvg, by less than {FREEZE_LIMIT:g} points, once the curves are past "
        "the paper's round 700-800 of 1,000"
    )
    published = (
        "[004:L245] 'there is an increasing trend with the classifier frozen (blue). However, the difference "
        "is less than 10% ... It requires more than 700 rounds to see a distinguishable difference and 800 "
        "rounds to see a significant difference.'"
    )
    if not all(m in placed for m in ("fedwavg", "fedwavg_frozen")):
        return not_run(claim_id, text, published, "the frozen run", declared=FREEZE_READINGS)
    rounds = int(placed["fedwavg"].settings["rounds"])
    readings = []
    for number, fraction in enumerate((0.8, 0.7, 0.9)):
        first, last = late_window(rounds, fraction)
        frozen, plain = (window_accuracy(placed[m], first, last) for m in ("fedwavg_frozen", "fedwavg"))
        items = [
            (f"helps: frozen {pct(frozen)} % vs not {pct(plain)} %", compare(frozen, plain)),
            (
                f"by less than {FREEZE_LIMIT:g}: not + {FREEZE_LIMIT:g} vs frozen",
                compare(shift(plain, FREEZE_LIMIT), frozen),
            ),
        ]
        readings.append(
            labelled(
                f"R{number + 1} W({first}–{last})",
                items,
                f"rounds {first}-{last}, after the paper's round {fraction * 1000:.0f} of 1,000; Holm over 2",
                primary=number == 0,
            )
        )
    return decided(
        context,
        claim_id,
        text,
        published,
        readings,
        [placed["fedwavg_frozen"].key, placed["fedwavg"].key],
        "points",
        caveat=E_CHOSEN,
    )


AMPLITUDE_READINGS = ("R1 amp, halves", "R2 amp, thirds", "R3 mean |a_r − a_(r−1)|, halves")


def amplitude_falls_claim(context: ReportContext, placed: dict) -> Claim:
    """N10: FedWAvg's mean amp early above late, per seed (paired within the run)."""
    claim_id = "fedwavg_amplitude_falls"
    text = (
        "FedWAvg's global model fluctuates greatly every round at first and the amplitude decreases over time "
        "(per seed, the mean swing about the local trend early above late)"
    )
    published = (
        "[004:L232] 'In the beginning, the global model fluctuates greatly every round. Over time, the "
        "amplitude decreases.' (Figure 2, 1,000 rounds)"
    )
    run = placed.get("fedwavg")
    if run is None:
        return not_run(claim_id, text, published, "the FedWAvg 2:8 long run", declared=AMPLITUDE_READINGS)
    rounds = int(run.settings["rounds"])
    readings = []
    plans = (
        (AMPLITUDE_READINGS[0], halves(rounds), mean_amplitude, "amp_r = |a_r − (a_(r−1) + a_(r+1)) / 2|"),
        (AMPLITUDE_READINGS[1], thirds(rounds), mean_amplitude, "amp_r = |a_r − (a_(r−1) + a_(r+1)) / 2|"),
        (AMPLITUDE_READINGS[2], ((2, rounds // 2), (rounds // 2 + 1, rounds)), mean_step, "|a_r − a_(r−1)|"),
    )
    for number, (name, (early, late), measure, what) in enumerate(plans):
        before, after = measure(run, *early), measure(run, *late)
        comparison = compare(before, after)
        readings.append(
            reading(
                f"{name}: {rounds_text(early)} vs {rounds_text(late)}",
                [comparison],
                f"{what}, mean over rounds {rounds_text(early)}: {pct(before)} points vs "
                f"{rounds_text(late)}: {pct(after)}; {comparison.reason}",
                primary=number == 0,
            )
        )
    return decided(
        context,
        claim_id,
        text,
        published,
        readings,
        [run.key],
        "points",
        caveat=f"{short_runs_caveat(run)}; {E_CHOSEN}",
    )


OTHERS_READINGS = ("R1 halves, ρ = 0.5", "R2 halves, ρ = 0.75", "R3 thirds, ρ = 0.5")


def others_oscillate_claim(context: ReportContext, placed: dict) -> Claim:
    """N11: (a) early, FedAvg's and FedProx's amp below FedWAvg's; (b) late, each at least ρ × FedWAvg's. Holm
    over the 4."""
    claim_id = "fedwavg_others_oscillate_too"
    text = (
        "FedAvg and FedProx are more stable than FedWAvg early on, but their mid and end performances oscillate "
        "just as FedWAvg's (early: their amplitude below FedWAvg's; late: at least ρ × FedWAvg's)"
    )
    published = (
        "[004:L234] 'Compared to FedWAvg, although the early trends are more stable,' [004:L236] 'the mid and "
        "end performances oscillate just as FedWAvg.' [004:L241] 'Moreover, the patterns in FedAvg and FedProx "
        "present that there will be fluctuations regardless.'"
    )
    if not all(m in placed for m in LONG):
        return not_run(claim_id, text, published, "a 2:8 long run", declared=OTHERS_READINGS)
    rounds = int(placed["fedwavg"].settings["rounds"])
    readings = []
    for number, (name, (early, late), rho) in enumerate(
        (
            (OTHERS_READINGS[0], halves(rounds), 0.5),
            (OTHERS_READINGS[1], halves(rounds), 0.75),
            (OTHERS_READINGS[2], thirds(rounds), 0.5),
        )
    ):
        before = {m: mean_amplitude(placed[m], *early) for m in LONG}
        after = {m: mean_amplitude(placed[m], *late) for m in LONG}
        items = [
            (
                f"early ({rounds_text(early)}): {LABELS[m]} {pct(before[m])} below FedWAvg {pct(before['fedwavg'])}",
                compare(before["fedwavg"], before[m]),
            )
            for m in ("fedavg", "fedprox")
        ]
        items += [
            (
                f"late ({rounds_text(late)}): {LABELS[m]} {pct(after[m])} at least {rho:g} × FedWAvg "
                f"{pct(after['fedwavg'])}",
                compare(after[m], scaled(after["fedwavg"], rho)),
            )
            for m in ("fedavg", "fedprox")
        ]
        readings.append(
            labelled(
                name,
                items,
                "amp_r = |a_r − (a_(r−1) + a_(r+1)) / 2|, mean over the rounds; Holm over 4",
                primary=number == 0,
            )
        )
    return decided(
        context,
        claim_id,
        text,
        published,
        readings,
        [placed[m].key for m in LONG],
        "points",
        caveat=f"{short_runs_caveat(placed['fedwavg'])}; {E_CHOSEN}",
    )


# ---------------------------------------------------------------- claims: in the ledger's order


def claims(
    context: ReportContext, table1_placed: dict, by_clusters: dict, table45_placed: dict, long_placed: dict
) -> list[Claim]:
    """The paper's claims in the ledger's order (docs/claims-spec.md section 5), each on the runs its table or
    figure placed."""
    found = [increase_claim(context, table1_placed), mnist_most_claim(context, table1_placed)]
    found += [
        contrast_claim(context, claim_id, by_clusters.get(clusters), clusters, f"Table {table[5]}", cited)
        for table, clusters, claim_id, cited in CLUSTER_TABLES
    ]
    found += [no_better_claim(context, by_clusters.get((4, 6)), by_clusters.get((2, 8)))]
    found += [best_top_claim(context, table45_placed)]
    found += [scaffold_weakest_claim(context, table45_placed, dataset, table, 2) for dataset, table in SCAFFOLD_WEAKEST]
    found += [
        halving_claim(context, long_placed),
        oscillation_claim(context, long_placed, table45_placed),
        around_better_claim(context, long_placed),
        freeze_claim(context, long_placed),
    ]
    found += [
        alpha_sensitive_claim(context, table45_placed),
        amplitude_falls_claim(context, long_placed),
        others_oscillate_claim(context, long_placed),
    ]
    return found


# ---------------------------------------------------------------- the report


def claims_of(context: ReportContext) -> list[Claim]:
    """The claims alone, nothing written (report/confirmation.py builds them again on a confirmatory sample):
    the same placements the tables and figures make."""
    runs = context.runs_of(PAPER)
    by_clusters = {clusters_of(r): r for r in cluster_runs(runs, 100) if method_of(r) == "fedavg"}
    return claims(context, table1_runs(runs), by_clusters, table45_runs(runs)[0], long_runs(runs))


def trained_note(context: ReportContext, runs, experiment_rounds: int | None = None) -> list[str]:
    """A table's note naming what its runs trained beside the paper's (readings.Setting.cell), one per distinct
    setting; `experiment_rounds`: the paper's experiment the table comes from, where it is not the run's."""
    cells = list(
        dict.fromkeys(
            experiment_setting(context.setting(run.key), experiment_rounds) for run in runs if run is not None
        )
    )
    return [f"trained (ours, beside the paper's): {cell}" for cell in cells if cell]


def experiment_setting(setting: str, experiment_rounds: int | None) -> str:
    """The setting with the paper's rounds of the experiment read (Tables 6-8: the 500-round one) in place of the
    run's own (the long runs stand for Figures 2-3's 1,000 rounds too)."""
    if not experiment_rounds:
        return setting
    return re.sub(
        r"(\d+) rounds \(paper: (\d+) rounds\)",
        lambda m: (
            f"{m[1]} rounds (paper: {experiment_rounds} rounds in Tables 6-8's experiment, {m[2]} in Figures 2-3)"
            if int(m[2]) != experiment_rounds
            else m[0]
        ),
        setting,
    )


def sample_note(context: ReportContext, claim_id: str) -> list[str]:
    """Where a confirmatory sample of fresh seeds decides the table's claim: the table shows the run's own seeds,
    the sample's are in sample_<claim>.md (their verdict may differ from what these rows suggest)."""
    sampling = sorted(
        key
        for key, run in context.results.items()
        if claim_id in ((run.settings.get("confirms") or {}).get("claims") or [])
    )
    if not sampling:
        return []
    return [
        f"{claim_id} is decided on the confirmatory sample {', '.join(sampling)} (fresh seeds), not on these rows: "
        f"its seeds are in sample_{claim_id}.md"
    ]


def build(context: ReportContext) -> list[Claim]:
    out_dir, published = context.out_dir, context.published
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = context.runs_of(PAPER)
    table1_placed = table1(context, runs)
    by_clusters = {clusters_of(r): r for r in cluster_runs(runs, 100) if method_of(r) == "fedavg"}
    table45_placed, _ = table45(context, runs)
    long_placed = figures(runs, out_dir)
    # Tables 2 and 6 (2:8, FedAvg): the paper's two experiments; say whether ours are two trainings.
    same_training = same_training_note(by_clusters.get((2, 8)), long_placed.get("fedavg"))
    for name, clusters, claim_id, _ in CLUSTER_TABLES:
        run = by_clusters.get(clusters)
        sampled = sample_note(context, claim_id)
        count_table(
            name,
            f"FedWAvg Table {name[5]}: forgettable examples per client, FedAvg, {clusters_label(clusters)}",
            run,
            published[name],
            published[name]["clients"],
            out_dir,
            {run.key: run} if run else {},
            TABLES_2_3_ROUNDS,
            ([same_training] if name == "table2" else []) + trained_note(context, [run]) + sampled,
        )
    for method, name in LONG_TABLES.items():
        run = long_placed.get(method)
        count_table(
            name,
            f"FedWAvg Table {name[5]}: forgettable examples per client, {LABELS[method]}, 2:8",
            run,
            published[name],
            published["table2"]["clients"],
            out_dir,
            {run.key: run} if run else {},
            TABLES_6_8_ROUNDS,
            ([same_training] if name == "table6_fedavg" else []) + trained_note(context, [run], TABLES_6_8_ROUNDS),
        )
    return claims(context, table1_placed, by_clusters, table45_placed, long_placed)
