"""The FedWAvg paper (Hong et al.): Tables 1-8, Figures 2-3, per-client forgettable curves and its claims.

Runs are placed by their settings, not their names. A run of paper `fedwavg`:
- with `example_events` is a Table 1 cell: its dataset, centralised when its partition has one client;
- on a cluster partition, by its paper round count (the `rounds` the paper profile trains): 100 =
  Tables 2-3 (FedAvg; 2:8 is Table 2, 4:6 Table 3), 200 = Tables 4-5 (its dataset and clusters, its
  method = algorithm, FedWAvg by α, FedProx at the tables' μ; other μ = the μ grid), 1000 = Tables 6-8
  and Figures 2-3 (by algorithm; `freeze: classifier` = Figure 3's frozen run).
Rounds the paper prints are read at the same fraction of our run: our round = paper round × our rounds /
the run's paper rounds (the identity in the paper profile). Clients are named as the paper's tables name
them, in partition order: the clusters in `cluster_sizes` order, the smallest (minority) first.

"Top" and "Average" (Tables 4-5) are not defined in the paper. Its discussion ("the parity between top
performance and average performance", read against its oscillating 1000-round curves) fits: Top = the best
test accuracy over all evaluated rounds, Average = the mean test accuracy over all evaluated rounds; both
per seed, in percent, on the test samples of the classes the clusters hold (`evaluate_on: test_seen_classes`).
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

from pipeline.io import atomic_path
from pipeline.report.common import (NOT_RUN, Claim, SeededRun, accuracy_cell, fmt_stat, partition_settings,
                                    plot_curves, scaled_note, seeds_note, write_table)
from pipeline.report.seeds import FAILED, HELD, INCONCLUSIVE, best_of, combine, compare, has_value, mean_sd

PAPER = "fedwavg"
RUNS_DIR = Path("reports/runs")
TABLE1_DATASETS = ("mnist", "fashion_mnist", "svhn", "cifar10")
TABLE45_METHODS = ("fedavg", "fedprox", "scaffold", "fednova", "fedwavg_alpha0.1", "fedwavg_alpha0.2",
                   "fedwavg_alpha0.3")
LABELS = {"fedavg": "FedAvg", "fedprox": "FedProx", "scaffold": "SCAFFOLD", "fednova": "FedNova",
          "fedwavg_alpha0.1": "FedWAvg (α = 0.1)", "fedwavg_alpha0.2": "FedWAvg (α = 0.2)",
          "fedwavg_alpha0.3": "FedWAvg (α = 0.3)", "fedwavg": "FedWAvg", "fedwavg_frozen": "FedWAvg, classifier frozen"}
TABLE_MU = 0.1  # FedProx's μ in Tables 4-8: the paper gives none; chosen by the μ grid (params.yaml, table_mu_grid.md)
CLUSTERS = {(2, 7): "2:7", (2, 3, 4): "2:3:4"}
DATASET_TABLE = {"svhn": "table4_svhn", "cifar10": "table5_cifar10"}
LONG_TABLES = {"fedavg": "table6_fedavg", "fedprox": "table7_fedprox", "fedwavg": "table8_fedwavg"}
# The claims' thresholds, read from the paper's words (stated in claims.md through each claim's text).
GAP = 0.5  # "nearly all" vs "near zero": the minority's forgettable share above the majority's by 50 points
# "roughly halves": FedWAvg's minority share at most 0.6 of FedAvg's and FedProx's (the paper: 527 / 1169 =
# 0.45 and 514 / 1164 = 0.44 at round 200); merely lower is not a halving.
HALF = 0.6
FREEZE_LIMIT = 10.0  # "the difference is less than 10%": points of accuracy
CURVE_LABEL = "test accuracy on the clusters' classes"  # evaluate_on: test_seen_classes
LATE = 0.3  # Figure 3's difference shows "after 700 rounds" of 1,000: the claim compares the last 30 %


# ---------------------------------------------------------------- where a run sits

def paper_rounds(run: SeededRun) -> int:
    return int(run.paper_value("rounds"))


def clusters_of(run: SeededRun) -> tuple[int, ...] | None:
    sizes = partition_settings(run.settings["partition"], "a FedWAvg run").get("cluster_sizes")
    return tuple(sizes) if sizes else None


def method_of(run: SeededRun) -> str:
    algorithm = run.settings["algorithm"]
    if algorithm["name"] == "fedwavg":
        return "fedwavg_frozen" if run.settings.get("freeze") == "classifier" else f"fedwavg_alpha{algorithm['alpha']:g}"
    return algorithm["name"]


def our_round(run: SeededRun, paper_round: int) -> int:
    """The paper's round `paper_round` at the same fraction of our run (the identity when not scaled)."""
    return max(1, round(paper_round * run.settings["rounds"] / paper_rounds(run)))


def table1_runs(runs: dict) -> dict:
    """(dataset, "centralised" | "federated") -> run."""
    placed = {}
    for run in runs.values():
        if run.settings.get("example_events"):
            clients = partition_settings(run.settings["partition"], "a FedWAvg run").get("clients")
            placed[(run.settings["dataset"], "centralised" if clients == 1 else "federated")] = run
    return placed


def cluster_runs(runs: dict, rounds: int) -> list[SeededRun]:
    return [r for r in runs.values() if not r.settings.get("example_events") and clusters_of(r) and paper_rounds(r) == rounds]


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

def read_forgettable(run: SeededRun, seed: int) -> dict[int, dict[int, int]]:
    """round -> client -> forgettable count, from the seed's forgetting/forgettable.tsv ({} if none)."""
    path = RUNS_DIR / run.key / f"seed{seed}" / "forgetting" / "forgettable.tsv"
    if not path.is_file():
        return {}
    counts: dict[int, dict[int, int]] = {}
    with path.open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            counts.setdefault(int(row["round"]), {})[int(row["client"])] = int(row["forgettable"])
    return counts


def client_size(run: SeededRun) -> int:
    return int(partition_settings(run.settings["partition"], "a FedWAvg run")["samples_per_client"])


def shares_at(run: SeededRun, round_: int) -> list[list[float] | None]:
    """Per seed: each client's forgettable share (count / its samples) at our round `round_`."""
    size = client_size(run)
    shares = []
    for seed in run.seeds:
        counts = read_forgettable(run, seed).get(round_)
        shares.append(None if counts is None else [counts.get(k, 0) / size for k in range(sum(clusters_of(run)))])
    return shares


def group_share(run: SeededRun, round_: int, minority: bool) -> list[float | None]:
    """Per seed: the mean forgettable share of the minority (first cluster) or the majority (last)."""
    sizes = clusters_of(run)
    picked = range(sizes[0]) if minority else range(sum(sizes) - sizes[-1], sum(sizes))
    return [None if s is None else sum(s[k] for k in picked) / len(picked) for s in shares_at(run, round_)]


def count_table(name: str, title: str, run: SeededRun | None, published: dict, clients: list[str], out_dir: Path,
                results: dict) -> None:
    """A per-client count table with the paper's rows and columns: ours (percent of the client's samples,
    mean over seeds) beside the paper's (percent of its 1,200)."""
    rows = []
    for paper_round, printed in published["rounds"].items():
        if run is None:
            rows.append([f"{paper_round}", NOT_RUN] + [f"— / {100 * p / 1200:.0f}" for p in printed])
            continue
        ours = our_round(run, int(paper_round))
        per_seed = [s for s in shares_at(run, ours) if s is not None]
        cells = []
        for k, p in enumerate(printed):
            mean = mean_sd([s[k] for s in per_seed])[0]
            cells.append(f"{'—' if mean is None else f'{100 * mean:.0f}'} / {100 * p / 1200:.0f}")
        rows.append([f"{paper_round}", f"{ours} (n={len(per_seed)})"] + cells)
    notes = [f"cells: ours / the paper's, forgettable examples as a percent of the client's training samples "
             f"(ours: {client_size(run) if run else '—'} per client, mean over seeds; the paper's: of 1,200)",
             "forgettable = a client's training samples its local model classifies right before aggregation and "
             "the new global model wrong (section 3.1), counted after every round",
             "our round = the paper's round at the same fraction of our run (the identity in the paper profile)",
             seeds_note(results)] + scaled_note(results)
    if name in ("table2", "table6_fedavg"):
        notes.append("the paper prints the same round-100 row in Tables 2 and 6 (B = 64, 100 rounds vs B = 128, "
                     "500 rounds); its text describes two experiments, and so do our runs")
    write_table(out_dir, name, title, ["paper round", "our round"] + clients, rows, notes)


# ---------------------------------------------------------------- Table 1

def events(run: SeededRun | None, kind: str) -> list:
    """Per seed: centralised = events over presentations; federated = forgettable examples summed."""
    if run is None:
        return []
    if kind == "centralised":
        return [(r.summary.get("example_events") or {}).get("forgetting_events") for r in run.results]
    return [r.summary.get("forgettable_total") for r in run.results]


def increases(placed: dict, dataset: str) -> list:
    """Per seed (paired by seed number): federated / centralised × 100, the paper's 'Increase (%)'."""
    cen, fed = placed.get((dataset, "centralised")), placed.get((dataset, "federated"))
    if cen is None or fed is None:
        return []
    by_seed = dict(zip(cen.seeds, events(cen, "centralised")))
    values = []
    for seed, federated in zip(fed.seeds, events(fed, "federated")):
        central = by_seed.get(seed)
        values.append(100.0 * federated / central if has_value(central) and central and has_value(federated) else None)
    return values


def table1(runs: dict, published: dict, out_dir: Path) -> dict:
    placed = table1_runs(runs)
    rows = []
    for kind in ("centralised", "federated"):
        row = [kind]
        for dataset in TABLE1_DATASETS:
            ours = events(placed.get((dataset, kind)), kind)
            row.append(f"{fmt_stat(ours, 0) if ours else NOT_RUN} / {published['table1'][kind][dataset]:,}")
        rows.append(row)
    rows.append(["increase (%)"] + [f"{fmt_stat(increases(placed, d), 1) if increases(placed, d) else NOT_RUN} / "
                                    f"{published['table1']['increase_percent'][d]}" for d in TABLE1_DATASETS])
    used = {run.key: run for run in placed.values()}
    notes = ["cells: ours / the paper's (DenseNet-121, centralised 200 epochs, federated 40 rounds × 5 epochs, "
             "5 IID clients)",
             "centralised: example-forgetting events over every presentation (an example right at one "
             "presentation and wrong at its next, Toneva et al.); federated: forgettable examples (local model "
             "right before aggregation, new global model wrong), summed over clients and rounds",
             "increase = federated / centralised × 100, as the paper computes it (its 1989, 472, 166, 271); the "
             "paper prints 427 for FMNIST where its text and counts give 472",
             seeds_note(used)] + scaled_note(used)
    write_table(out_dir, "table1", "FedWAvg Table 1: example-forgetting events, centralised vs federated",
                ["", *TABLE1_DATASETS], rows, notes)
    return placed


# ---------------------------------------------------------------- Tables 4-5

def top_average(run: SeededRun | None) -> tuple[list, list]:
    """Per seed: Top (best) and Average (mean over evaluated rounds) test accuracy in percent; None for a
    diverged seed."""
    if run is None:
        return [], []
    tops, averages = [], []
    for result in run.results:
        curve = [a for a in result.accuracy if has_value(a)]
        if result.diverged or not curve:
            tops.append(None)
            averages.append(None)
        else:
            tops.append(100.0 * max(curve))
            averages.append(100.0 * sum(curve) / len(curve))
    return tops, averages


def table45(runs: dict, published: dict, out_dir: Path) -> tuple[dict, dict]:
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
        notes = ["cells: ours / the paper's, test accuracy (%) on the classes the clusters hold, 9 clients",
                 "Top = the best accuracy over every evaluated round, Average = the mean over every evaluated "
                 "round (the paper does not define them; see the module docstring of pipeline/report/fedwavg.py)",
                 f"FedProx at μ = {TABLE_MU:g} (not given in the paper; the μ grid: table_mu_grid.md)",
                 "FedNova with Adam clients normalises by ‖a‖₁ = τ (pipeline/algorithms/fednova.py): on these "
                 "equal-sized clients every τ is the same, so it takes FedAvg's step (up to rounding)",
                 seeds_note(used) if used else "no runs in this profile"] + scaled_note(used)
        dataset_name = "SVHN" if dataset == "svhn" else "CIFAR-10"
        write_table(out_dir, name, f"FedWAvg Table {4 if dataset == 'svhn' else 5}: {dataset_name}, Top and "
                    "Average accuracy", ["method", "2:7 Top", "2:7 Average", "2:3:4 Top", "2:3:4 Average"], rows, notes)
    rows = []
    best = grid_best(grid)
    for mu, run in sorted(grid.items()):
        top, average = top_average(run)
        rows.append([f"{mu:g}" + (" (best)" if mu in best else ""), run.key, accuracy_cell(top, 1),
                     accuracy_cell(average, 1)])
    if not best:
        choice = f"the tables use μ = {TABLE_MU:g}"
    elif TABLE_MU in best:
        choice = f"the tables use μ = {TABLE_MU:g}, the grid's best Top (mean over seeds)"
    else:
        choice = (f"the tables use μ = {TABLE_MU:g}, but the grid's best Top is μ = "
                  f"{', '.join(f'{mu:g}' for mu in best)}: pipeline/report/fedwavg.py's TABLE_MU and the "
                  "FedProx runs' mu in params.yaml choose it")
    write_table(out_dir, "table_mu_grid", "FedProx's μ (not given in the paper): the grid on CIFAR-10, 2:7",
                ["μ", "run", "Top", "Average"], rows,
                [choice, "best = the highest Top, the tables' headline (ties: every tied μ)",
                 seeds_note(grid and {r.key: r for r in grid.values()})])
    return placed, grid


def grid_best(grid: dict) -> list:
    """The μs of the grid whose Top accuracy (mean over seeds) is the highest, rounded as the table shows it."""
    tops = {}
    for mu, run in grid.items():
        values = [v for v in top_average(run)[0] if has_value(v)]
        if values:
            tops[mu] = round(sum(values) / len(values), 1)
    return [mu for mu, top in sorted(tops.items()) if top == max(tops.values())] if tops else []


def late_average(run: SeededRun) -> list:
    """Per seed: the mean test accuracy (%) over the evaluated rounds in the last LATE of the run."""
    start = run.settings["rounds"] * (1 - LATE)
    values = []
    for result in run.results:
        late = [a for r, a in zip(result.rounds, result.accuracy) if r > start and has_value(a)]
        values.append(None if result.diverged or not late else 100.0 * sum(late) / len(late))
    return values


# ---------------------------------------------------------------- figures

def oscillation(run: SeededRun | None) -> list:
    """Per seed: the mean absolute change of test accuracy between consecutive evaluated rounds (points)."""
    if run is None:
        return []
    values = []
    for result in run.results:
        curve = [a for a in result.accuracy if has_value(a)]
        values.append(None if result.diverged or len(curve) < 2 else
                      100.0 * sum(abs(b - a) for a, b in zip(curve, curve[1:])) / (len(curve) - 1))
    return values


def figures(runs: dict, out_dir: Path) -> dict:
    placed = long_runs(runs)
    series = [(LABELS[m], placed[m]) for m in ("fedwavg", "fedavg", "fedprox") if m in placed]
    plot_curves(out_dir / "figure2.png", "FedWAvg Figure 2: test accuracy, 2:8 clusters", series, [], ylim=(0.0, 1.0),
                ylabel=CURVE_LABEL)
    series = [(LABELS[m], placed[m]) for m in ("fedwavg_frozen", "fedwavg") if m in placed]
    plot_curves(out_dir / "figure3.png", "FedWAvg Figure 3: with the classifier frozen", series, [], ylim=(0.0, 1.0),
                ylabel=CURVE_LABEL)
    plot_forgettable(out_dir / "forgettable_curves.png", placed)
    return placed


def plot_forgettable(path: Path, placed: dict) -> None:
    """Per run of Figures 2-3, the minority's and the majority's mean forgettable share over rounds."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = [m for m in ("fedavg", "fedprox", "fedwavg", "fedwavg_frozen") if m in placed]
    fig, axes = plt.subplots(1, max(1, len(methods)), figsize=(4 * max(1, len(methods)), 3.4), sharey=True,
                             squeeze=False)
    for ax, method in zip(axes[0], methods):
        run = placed[method]
        rounds = sorted(set.intersection(*[set(read_forgettable(run, s)) for s in run.seeds]) if run.seeds else set())
        for minority, style in ((True, "-"), (False, "--")):
            means = [mean_sd(group_share(run, r, minority))[0] for r in rounds]
            ax.plot(rounds, [100 * m if m is not None else math.nan for m in means], style,
                    label=("minority" if minority else "majority") + f" (n={run.n})")
        ax.set_title(LABELS[method], fontsize="medium")
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    axes[0][0].set_ylabel("forgettable examples (% of a client's)")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


# ---------------------------------------------------------------- claims

def claim(claim_id: str, text: str, published: str, status: str, evidence: str, seeds: str = "") -> Claim:
    return Claim(PAPER, claim_id, text, status, evidence, published, seeds)


def not_run(claim_id: str, text: str, published: str, what: str) -> Claim:
    return claim(claim_id, text, published, NOT_RUN, f"not in this profile: {what}")


def table1_claims(placed: dict) -> list[Claim]:
    text = "Example-forgetting events increase from centralised to federated learning on every dataset"
    published = "Table 1: +1989 % MNIST, 472 % FMNIST, 166 % SVHN, 271 % CIFAR-10 (federated / centralised)"
    comparisons, evidence, missing = [], [], []
    for dataset in TABLE1_DATASETS:
        cen, fed = placed.get((dataset, "centralised")), placed.get((dataset, "federated"))
        if cen is None or fed is None:
            missing.append(dataset)
            continue
        comparison = compare(events(fed, "federated"), events(cen, "centralised"))
        comparisons.append(comparison)
        evidence.append(f"{dataset}: {fmt_stat(events(fed, 'federated'), 0)} vs {fmt_stat(events(cen, 'centralised'), 0)} "
                        f"({comparison.status}: {comparison.reason})")
    claims = []
    if not comparisons:
        claims.append(not_run("t1_increase", text, published, "no Table 1 pair"))
    else:
        status = combine(c.status for c in comparisons) if not missing else (
            FAILED if any(c.status == FAILED for c in comparisons) else INCONCLUSIVE)
        note = f"; not run: {', '.join(missing)}" if missing else ""
        claims.append(claim("t1_increase", text, published, status, "; ".join(evidence) + note,
                            "; ".join(dict.fromkeys(c.seeds for c in comparisons))))
    text = "The increase is largest on MNIST"
    published = "Table 1: 1989 % on MNIST against 472 / 166 / 271 %"
    others = {d: increases(placed, d) for d in TABLE1_DATASETS if d != "mnist" and increases(placed, d)}
    if not increases(placed, "mnist") or len(others) < 3:
        absent = [d for d in TABLE1_DATASETS if not increases(placed, d)]
        claims.append(not_run("t1_mnist_most", text, published, ", ".join(absent)))
    else:
        status, comparisons = best_of(increases(placed, "mnist"), others)
        claims.append(claim("t1_mnist_most", text, published, status,
                            "; ".join(f"MNIST {fmt_stat(increases(placed, 'mnist'), 0)} vs {d} {fmt_stat(v, 0)} "
                                      f"({comparisons[d].reason})" for d, v in others.items())))
    return claims


def contrast_claim(claim_id: str, run: SeededRun | None, paper_round: int, label: str, published: str) -> Claim:
    text = (f"Under FedAvg ({label}) the minority clients keep nearly all their examples forgettable while the "
            f"majority's fall near zero (minority share above the majority's by more than {100 * GAP:.0f} points)")
    if run is None:
        return not_run(claim_id, text, published, f"the FedAvg run on {label}")
    ours = our_round(run, paper_round)
    minority, majority = group_share(run, ours, True), group_share(run, ours, False)
    comparison = compare(minority, [m + GAP if has_value(m) else m for m in majority])
    return claim(claim_id, text, published, comparison.status,
                 f"round {ours} (the paper's {paper_round}): minority {fmt_stat([100 * m for m in minority if has_value(m)], 0)} %, "
                 f"majority {fmt_stat([100 * m for m in majority if has_value(m)], 0)} % of their examples; {comparison.reason}",
                 comparison.seeds)


def long_claims(placed: dict) -> list[Claim]:
    claims = []
    text = ("FedWAvg roughly halves the minority's forgettable examples by round 200 while FedAvg and FedProx do "
            f"not (minority share at round 200 at most {HALF:g} of each one's)")
    published = "Tables 6-8 at round 200: FedWAvg 527 / 514 of 1,200; FedAvg 1169 / 1164; FedProx 1170 / 1172"
    if not all(m in placed for m in ("fedwavg", "fedavg", "fedprox")):
        claims.append(not_run("t8_halves", text, published, "a 2:8 long run"))
    else:
        ours = our_round(placed["fedwavg"], 200)
        # each method's minority share at the paper's round 200, as percent per seed (None: no value)
        shares = {m: [100 * v if has_value(v) else None for v in group_share(placed[m], our_round(placed[m], 200), True)]
                  for m in ("fedwavg", "fedavg", "fedprox")}
        bounds = {m: [HALF * v if v is not None else None for v in shares[m]] for m in ("fedavg", "fedprox")}
        comparisons = {m: compare(shares["fedwavg"], bounds[m], "lower") for m in bounds}

        def present(values):
            return [v for v in values if v is not None]
        evidence = [f"round {ours} (the paper's 200): FedWAvg {fmt_stat(present(shares['fedwavg']), 0)} %"]
        evidence += [f"{LABELS[m]} {fmt_stat(present(shares[m]), 0)} %, × {HALF:g} = {fmt_stat(present(bounds[m]), 0)} % "
                     f"({c.reason})" for m, c in comparisons.items()]
        claims.append(claim("t8_halves", text, published, combine(c.status for c in comparisons.values()),
                            "; ".join(evidence), "; ".join(dict.fromkeys(c.seeds for c in comparisons.values()))))
    text = "FedWAvg's accuracy curve oscillates more than FedAvg's (mean change between consecutive rounds)"
    published = "section 6 and Figure 2: FedWAvg's disparity between top and average is larger"
    if not all(m in placed for m in ("fedwavg", "fedavg")):
        claims.append(not_run("fig2_oscillates", text, published, "a 2:8 long run"))
    else:
        first, second = oscillation(placed["fedwavg"]), oscillation(placed["fedavg"])
        comparison = compare(first, second)
        claims.append(claim("fig2_oscillates", text, published, comparison.status,
                            f"FedWAvg {fmt_stat(first, 2)} vs FedAvg {fmt_stat(second, 2)} points per round; "
                            f"{comparison.reason}", comparison.seeds))
    text = "FedWAvg's general performance is above FedAvg's and FedProx's (Average accuracy over the rounds)"
    published = "section 6: FedWAvg around 70 % and higher, FedAvg around 50 %, FedProx 50-60 %"
    if not all(m in placed for m in ("fedwavg", "fedavg", "fedprox")):
        claims.append(not_run("fig2_better", text, published, "a 2:8 long run"))
    else:
        mine = top_average(placed["fedwavg"])[1]
        comparisons = {m: compare(mine, top_average(placed[m])[1]) for m in ("fedavg", "fedprox")}
        claims.append(claim("fig2_better", text, published, combine(c.status for c in comparisons.values()),
                            f"FedWAvg {fmt_stat(mine, 1)} %; " + "; ".join(
                                f"{LABELS[m]} {fmt_stat(top_average(placed[m])[1], 1)} % ({c.reason})"
                                for m, c in comparisons.items()),
                            "; ".join(dict.fromkeys(c.seeds for c in comparisons.values()))))
    text = (f"Freezing the classifier helps FedWAvg, by less than {FREEZE_LIMIT:g} points (mean accuracy over "
            f"the last {LATE:.0%} of the rounds)")
    published = ("Figure 3: an increasing trend with the classifier frozen, distinguishable after 700 of 1,000 "
                 "rounds, the difference less than 10 %")
    if not all(m in placed for m in ("fedwavg", "fedwavg_frozen")):
        claims.append(not_run("fig3_freeze", text, published, "the frozen run"))
    else:
        frozen, plain = late_average(placed["fedwavg_frozen"]), late_average(placed["fedwavg"])
        helps = compare(frozen, plain)
        small = compare([v + FREEZE_LIMIT if has_value(v) else v for v in plain], frozen)
        claims.append(claim("fig3_freeze", text, published, combine([helps.status, small.status]),
                            f"frozen {fmt_stat(frozen, 1)} % vs not {fmt_stat(plain, 1)} %; helps: {helps.reason}; "
                            f"by less than {FREEZE_LIMIT:g}: {small.reason}", helps.seeds))
    return claims


def table45_claims(placed: dict) -> list[Claim]:
    claims = []
    text = "FedWAvg (α = 0.3) has the best Top accuracy on CIFAR-10, at 2:7 and at 2:3:4"
    published = "Table 5: 80.83 (2:7) and 75.27 (2:3:4), every other method lower"
    cells = {c: {m: top_average(placed.get(("cifar10", c, m)))[0] for m in TABLE45_METHODS} for c in ("2:7", "2:3:4")}
    if not all(cells[c]["fedwavg_alpha0.3"] for c in cells):
        claims.append(not_run("t5_best_top", text, published, "a CIFAR-10 Tables 4-5 run"))
    else:
        statuses, evidence, seeds = [], [], []
        for clusters, values in cells.items():
            others = {LABELS[m]: v for m, v in values.items() if m != "fedwavg_alpha0.3" and v}
            if not others:
                statuses.append(INCONCLUSIVE)
                evidence.append(f"{clusters}: α = 0.3 {accuracy_cell(values['fedwavg_alpha0.3'], 1)}, no other method run")
                continue
            status, comparisons = best_of(values["fedwavg_alpha0.3"], others)
            statuses.append(status)
            seeds += [c.seeds for c in comparisons.values()]
            best_other = max(others, key=lambda m: mean_sd(others[m])[0] or -1)
            evidence.append(f"{clusters}: α = 0.3 {accuracy_cell(values['fedwavg_alpha0.3'], 1)}, best other "
                            f"{best_other} {accuracy_cell(others[best_other], 1)} ({status})")
        claims.append(claim("t5_best_top", text, published, combine(statuses), "; ".join(evidence),
                            "; ".join(dict.fromkeys(seeds))))
    for dataset, table in (("cifar10", "Table 5: 31.03 Top"), ("svhn", "Table 4: 19.01 Top")):
        text = f"SCAFFOLD is the weakest method on {'CIFAR-10' if dataset == 'cifar10' else 'SVHN'} 2:3:4 (Top accuracy)"
        values = {m: top_average(placed.get((dataset, "2:3:4", m)))[0] for m in TABLE45_METHODS}
        if not values["scaffold"]:
            claims.append(not_run(f"t45_scaffold_weakest_{dataset}", text, table, f"the {dataset} 2:3:4 runs"))
            continue
        comparisons = {m: compare(v, values["scaffold"]) for m, v in values.items() if m != "scaffold" and v}
        claims.append(claim(f"t45_scaffold_weakest_{dataset}", text, table,
                            combine(c.status for c in comparisons.values()),
                            f"SCAFFOLD {accuracy_cell(values['scaffold'], 1)}; " + "; ".join(
                                f"{LABELS[m]} {accuracy_cell(values[m], 1)} ({c.status})" for m, c in comparisons.items()),
                            "; ".join(dict.fromkeys(c.seeds for c in comparisons.values()))))
    return claims


# ---------------------------------------------------------------- the report

def build(results: dict, published: dict, out_dir: Path, profile: str) -> list[Claim]:
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = {k: v for k, v in results.items() if v.paper == PAPER}
    table1_placed = table1(runs, published, out_dir)
    by_clusters = {clusters_of(r): r for r in cluster_runs(runs, 100) if method_of(r) == "fedavg"}
    for name, clusters, title in (("table2", (2, 8), "FedWAvg Table 2: forgettable examples per client, FedAvg, 2:8"),
                                  ("table3", (4, 6), "FedWAvg Table 3: forgettable examples per client, FedAvg, 4:6")):
        run = by_clusters.get(clusters)
        count_table(name, title, run, published[name], published[name]["clients"], out_dir,
                    {run.key: run} if run else {})
    table45_placed, _ = table45(runs, published, out_dir)
    long_placed = figures(runs, out_dir)
    for method, name in LONG_TABLES.items():
        run = long_placed.get(method)
        count_table(name, f"FedWAvg Table {name[5]}: forgettable examples per client, {LABELS[method]}, 2:8",
                    run, published[name], published["table2"]["clients"], out_dir, {run.key: run} if run else {})
    claims = table1_claims(table1_placed)
    claims += [contrast_claim("t2_minority_forgotten", by_clusters.get((2, 8)), 100, "2:8",
                              "Table 2, round 100: minority 1197 / 1129 of 1,200, majority 0-5"),
               contrast_claim("t3_minority_forgotten", by_clusters.get((4, 6)), 100, "4:6",
                              "Table 3, round 100: minority 1114-1130 of 1,200, majority 0-1")]
    claims += table45_claims(table45_placed)
    claims += long_claims(long_placed)
    return claims
