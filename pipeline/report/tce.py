"""The TCE paper (Legate, Caccia & Belilovsky): Figures 1-7, appendix Tables 1-2 and its claims.

Runs are placed by their settings, not by their names: a run of paper `tce` is a point (dataset,
method, lr, alpha, C), the method being its loss and norm (FedAvg = cross-entropy, TCE = truncated
cross-entropy; GN / BN). alpha is read from the run's partition in params.yaml.
The main runs (those with forgetting probes) stand for Figures 1, 2 and 5-7 and for their own lr in
Table 1. Accuracy in the tables and claims is each seed's mean test accuracy over its last 5 evaluated
rounds (`test_set_accuracy_mean`; the paper's Table 1 reports the last model alone, `final_test_accuracy`,
which swings between seeds 4x as much); the curves are the union of the clients' validation sets, as
the paper monitors. A run is placed at the dataset it stands for (`SeededRun.paper_dataset`): the
default profile trains Fashion-MNIST in CIFAR-10's place, and every table and figure says so.
"""
from __future__ import annotations

import json
import math
import random
from pathlib import Path

from pipeline.errors import UserError
from pipeline.probe_files import draw_forgetting_row, read_probe
from pipeline.inputs import dataset_spec
from pipeline.report.common import (NC, NOT_RUN, Claim, ReportContext, SeededRun, accuracy_cell, comparisons_seeds,
                                    plot_curves, pyplot, save_figure, scaled_note, seeds_note, shift, write_table)
from pipeline.report.seeds import (FAILED, HELD, INCONCLUSIVE, Comparison, PerSeed, combine, compare, has_value,
                                   mean_sd)

PAPER = "tce"
METHODS = {("ce", "group"): "fedavg_gn", ("tce", "group"): "tce_gn", ("tce", "batch"): "tce_bn",
           ("ce", "batch"): "fedavg_bn"}
LABELS = {"fedavg_gn": "FedAvg (GN)", "tce_gn": "FedAvg + TCE (GN)", "tce_bn": "FedAvg + TCE (BN)",
          "fedavg_bn": "FedAvg (BN)"}
TABLE_METHODS = ("fedavg_gn", "tce_gn", "tce_bn")  # Table 1 has no FedAvg with BN
DATASETS = ("cifar10", "cifar100", "femnist")
BASE_ALPHA, BASE_C = 0.1, 0.1
# Figure 4's partitions (their records in reports/partitions, on which the report stage depends).
FIGURE4_PARTITIONS = {0.1: "cifar10_dirichlet_alpha01", 0.5: "cifar10_dirichlet_alpha05", 100.0: "cifar10_dirichlet_alpha100"}
# "NC" (the paper: "did not converge", no rule given): here, a seed that diverged (non-finite loss) or
# whose last model is within 1.5x chance on the test set.
CHANCE_FACTOR = 1.5
DATASET_NAMES = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100", "femnist": "FEMNIST", "fashion_mnist": "Fashion-MNIST"}


# ---------------------------------------------------------------- where a run sits

def method_of(settings: dict) -> str | None:
    return METHODS.get((settings.get("loss", "ce"), settings.get("norm") or "group"))


def point_of(run: SeededRun) -> tuple:
    """(dataset, method, lr, alpha, C) of a run; alpha None for a partition that is not Dirichlet
    (FEMNIST's writers), which counts as the base point."""
    s = run.settings
    alpha = run.partition_settings("a TCE run").get("alpha")
    return run.paper_dataset, method_of(s), float(s["lr"]), None if alpha is None else float(alpha), \
        float(s["client_fraction"])


def is_main(run: SeededRun) -> bool:
    return bool(run.settings.get("probe_rounds"))


def chance_floor(run: SeededRun) -> float:
    """The accuracy at or below which a last model counts as near chance (NC): CHANCE_FACTOR x 1/classes."""
    return CHANCE_FACTOR / dataset_spec(run.settings["dataset"]).classes


def accuracy_by_seed(run: SeededRun | None) -> dict:
    """seed -> its mean test accuracy over the last 5 evaluated rounds (the last model's, for results
    trained before the test set was evaluated there); None for an NC seed (diverged, or a last model
    near chance)."""
    if run is None:
        return {}
    floor = chance_floor(run)
    values = {}
    for result in run.results:
        last_model = result.summary.get("final_test_accuracy")
        value = result.summary.get("test_set_accuracy_mean", last_model)
        usable = has_value(value) and has_value(last_model) and not result.diverged and last_model > floor
        values[result.seed] = value if usable else None
    return values


def nc_seeds(run: SeededRun | None) -> set[int]:
    """The seeds whose accuracy is NC as their run's worst outcome: diverged, or a last model near chance
    (a seed without a summary accuracy for another reason is unknown, not NC)."""
    if run is None:
        return set()
    floor = chance_floor(run)
    return {r.seed for r in run.results
            if r.diverged or (has_value(last := r.summary.get("final_test_accuracy")) and last <= floor)}


def accuracy_values(run: SeededRun | None) -> PerSeed:
    """`accuracy_by_seed` in seed order (fractions), carrying the seeds so that claims pair them, and
    marking the NC seeds as their run's worst outcome (`seeds.PerSeed.worst`)."""
    return PerSeed.from_dict(accuracy_by_seed(run), nc_seeds(run), "higher")


def stand_ins(runs: dict) -> list[tuple[str, str]]:
    """(the dataset trained, the paper's it stands for), for runs that trained another dataset than the
    paper's (TCE's default profile: Fashion-MNIST for CIFAR-10)."""
    return sorted({(DATASET_NAMES.get(r.settings["dataset"], r.settings["dataset"]),
                    DATASET_NAMES.get(r.paper_dataset, r.paper_dataset))
                   for r in runs.values() if r.settings["dataset"] != r.paper_dataset})


def stand_in_words(runs: dict) -> str:
    """' (Fashion-MNIST standing in)', after the paper's dataset in a title, where a stand-in trained."""
    return "".join(f" ({used} standing in)" for used, _ in stand_ins(runs))


def cell(values: list) -> str:
    return accuracy_cell(values, 3, "diverged or near chance")


def main_lrs(runs: dict) -> dict:
    """(dataset, method) -> the lr of its main run (what the alpha and C sweeps use)."""
    return {point_of(r)[:2]: point_of(r)[2] for r in runs.values() if is_main(r)}


def find(runs: dict, dataset, method, lr=None, alpha=BASE_ALPHA, fraction=BASE_C, main_only=False) -> SeededRun | None:
    """The run at a point (lr None: the main run's); the main run first when a main and a grid run
    match. Two runs of the same kind at one point would make every cell ambiguous: an error."""
    def at_point(run):
        d, m, run_lr, run_alpha, run_fraction = point_of(run)
        alpha_matches = close(run_alpha, alpha) or (run_alpha is None and close(alpha, BASE_ALPHA))
        lr_matches = is_main(run) if lr is None else close(run_lr, lr)
        return (d, m) == (dataset, method) and alpha_matches and close(run_fraction, fraction) and lr_matches

    matches = sorted((r for r in runs.values() if (not main_only or is_main(r)) and at_point(r)),
                     key=lambda r: (not is_main(r), r.key))
    if len(matches) > 1 and is_main(matches[0]) == is_main(matches[1]):
        raise UserError(f"TCE report: runs {matches[0].key} and {matches[1].key} both sit at {dataset}, "
                        f"{LABELS[method]}, lr {lr if lr is not None else 'main'}, α {alpha:g}, C {fraction:g}; "
                        "give one of them another setting or paper")
    return matches[0] if matches else None


def close(a, b) -> bool:
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9)


# ---------------------------------------------------------------- Tables 1 and 2

def table1(runs: dict, published: dict, out_dir: Path, profile: str) -> dict:
    """Ours beside the published numbers, per dataset and lr; returns {(dataset, method): {lr: values}}."""
    rows, ours = table1_rows(runs, published)
    header = ["dataset", "client lr"] + [f"{LABELS[m]} {side}" for m in TABLE_METHODS for side in ("ours", "published")]
    write_table(out_dir, "table1", "TCE appendix Table 1: accuracy by client learning rate", header, rows,
                table1_notes(runs, profile))
    return ours


def table1_rows(runs: dict, published: dict) -> tuple[list[list[str]], dict]:
    """Table 1's rows, and ours by (dataset, method) and lr (what Table 2 and the claims read)."""
    paper_lrs = [float(x) for x in published["table1"]["lrs"]]
    ours: dict = {}
    rows = []
    for dataset in DATASETS:
        lrs = sorted(set(paper_lrs) | {point_of(r)[2] for r in runs.values() if point_of(r)[0] == dataset},
                     reverse=True)
        for lr in lrs:
            row = [dataset, f"{lr:g}"]
            for method in TABLE_METHODS:
                values = accuracy_values(find(runs, dataset, method, lr))
                if values:
                    ours.setdefault((dataset, method), {})[lr] = values
                printed = published["table1"][dataset][method]
                paper_cell = printed[paper_lrs.index(lr)] if lr in paper_lrs else "—"
                row += [cell(values), paper_cell]
            rows.append(row)
    return rows, ours


def table1_notes(runs: dict, profile: str) -> list[str]:
    notes = [f"profile: {profile}; accuracy = each seed's mean test accuracy over its last 5 evaluated rounds "
             "(fraction; the paper prints the last model's, one evaluation), mean ± sd over seeds "
             "(n = seeds); published: the paper's Table 1 as transcribed in pipeline/report/published.yaml",
             f"{NC}: a seed that diverged or whose last model is within {CHANCE_FACTOR}x chance (the paper says "
             "'did not converge' without a rule)",
             "a main run (the one with forgetting probes) stands for its own lr; the other lrs are the grid's runs",
             seeds_note(runs), *scaled_note(runs)]
    fedavg_bn = find(runs, "cifar10", "fedavg_bn", main_only=True)
    if fedavg_bn is not None:
        notes.append(f"FedAvg (BN), which the paper leaves out ('known to yield poor performance'), main run at "
                     f"lr {fedavg_bn.settings['lr']:g} on CIFAR-10: {cell(accuracy_values(fedavg_bn))}: claims.md reads "
                     "TCE (BN) against it too (its own claim), to tell the loss's effect from the norm's")
    if stand_ins(runs):
        notes.append(f"the cifar10 rows are trained on {' and '.join(u for u, _ in stand_ins(runs))} in its place: the "
                     "small CNN for 60 rounds of E = 1 where the paper trains ResNet-18 for 4,000 rounds of E = 3, "
                     "chosen so that FedAvg gets within reach of the same model's centralised accuracy "
                     "(docs/papers/tce.md); their accuracies are not comparable with the published ones, only "
                     "the comparisons between methods are")
    return notes


def within(means: dict, points: float) -> tuple[float | None, float | None, list]:
    """(best mean, its lr, lrs within `points` percentage points of it, best first)."""
    finite = {lr: m for lr, m in means.items() if m is not None}
    if not finite:
        return None, None, []
    best_lr = max(finite, key=finite.get)
    best = finite[best_lr]
    return best, best_lr, sorted((lr for lr, m in finite.items() if m >= best - points / 100), reverse=True)


def table2(ours: dict, published: dict, out_dir: Path) -> None:
    rows = []
    for dataset in DATASETS:
        for method in TABLE_METHODS:
            by_lr = ours.get((dataset, method), {})
            means = {lr: (mean_sd(v)[0] if all(has_value(x) for x in v) else None) for lr, v in by_lr.items()}
            best, best_lr, _ = within(means, 0)
            lists = [", ".join(f"{lr:g}" for lr in within(means, p)[2]) or "—" for p in (2, 3, 5)]
            printed = published["table2"][dataset][method]
            rows.append([dataset, LABELS[method],
                         f"{best:.3f} ({best_lr:g})" if best is not None else NOT_RUN, *lists,
                         f"{printed['best']} ({printed['best_lr'] or 'lr not printed'})",
                         *(", ".join(printed[f"within_{p}"]) for p in (2, 3, 5)),
                         str(len(by_lr))])
    header = ["dataset", "method", "ours best (lr)", "ours within 2", "ours within 3", "ours within 5",
              "published best (lr)", "published within 2", "published within 3", "published within 5", "lrs run"]
    notes = ["within x = the lrs whose mean accuracy is at least the best's minus x percentage points (the best "
             "included); ours over the lrs this profile ran (last column), each an NC-free mean over its seeds",
             "these lists read means only; the claim (claims.md) decides each lr over the seeds: in when its seeds + "
             "x points are separated above the best lr's by the rule, out when separated below, else open, and "
             "compares the methods' counts as ranges; it is made at the tolerances where the paper's CIFAR-10 "
             "lists show TCE (GN) ahead of FedAvg: "
             + ", ".join(f"{p} points" for p in table2_tolerances_where_tce_leads(published)),
             "published: the paper's Table 2 as printed (its own inconsistencies with Table 1 are listed in "
             "published.yaml)"]
    write_table(out_dir, "table2", "TCE appendix Table 2: the best lr and the lrs near it", header, rows, notes)


# ---------------------------------------------------------------- figures

def figure2(runs: dict, out_dir: Path) -> None:
    for dataset in ("cifar10", "cifar100"):
        series = [(LABELS[m], r) for m in LABELS if (r := find(runs, dataset, m, main_only=True)) is not None]
        if series:
            top = max((a for _, run in series for r in run.results for a in r.accuracy if has_value(a)), default=1.0)
            plot_curves(out_dir / f"figure2_{dataset}.png",
                        "\n".join(filter(None, [f"TCE Figure 2: {dataset}, α = 0.1, C = 0.1", stand_in_words(runs).strip(),
                                                 "(accuracy on the union of the clients' validation sets)"])), series, [], ylim=(0.0, min(1.0, math.ceil(top * 10 + 1) / 10)),
                        ylabel="validation accuracy")


def sweep(runs: dict, axis: str) -> dict:
    """method -> {alpha or C: run} for FedAvg (GN) and TCE (GN) on CIFAR-10 at the main run's lr."""
    lrs = main_lrs(runs)
    values = {point_of(r)[3 if axis == "alpha" else 4] for r in runs.values() if point_of(r)[0] == "cifar10"}
    points: dict = {}
    for method in ("fedavg_gn", "tce_gn"):
        lr = lrs.get(("cifar10", method))
        for x in sorted(v for v in values if v is not None):
            where = {"alpha": x} if axis == "alpha" else {"fraction": x}
            run = find(runs, "cifar10", method, lr, **where) if lr is not None else None
            if run is not None:
                points.setdefault(method, {})[x] = run
    return points


def plot_sweep(path: Path, points: dict, axis: str, title: str) -> None:
    fig, ax = pyplot().subplots(figsize=(6, 4))
    for method, by_x in sorted(points.items()):
        values = {x: accuracy_values(run) for x, run in by_x.items()}
        xs = sorted(x for x, v in values.items() if v and all(has_value(a) for a in v))
        stats = [mean_sd(values[x]) for x in xs]
        ax.errorbar(xs, [m for m, _, _ in stats], yerr=[sd or 0.0 for _, sd, _ in stats], marker="o", capsize=3,
                    label=LABELS[method])
    ax.set_xscale("log")
    ax.set_xlabel("Dirichlet α" if axis == "alpha" else "participation C")
    ax.set_ylabel("test accuracy, last 5 evaluated rounds (mean ± sd)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    save_figure(fig, path)


def figure3(runs: dict, out_dir: Path) -> dict:
    sweeps = {axis: sweep(runs, axis) for axis in ("alpha", "C")}
    rows = []
    for axis, points in sweeps.items():
        for x in sorted({x for by_x in points.values() for x in by_x}):
            first, second = points.get("tce_gn", {}).get(x), points.get("fedavg_gn", {}).get(x)
            rows.append([axis, f"{x:g}", cell(accuracy_values(second)), cell(accuracy_values(first)),
                         margin_cell(first, second)])
        if points:
            plot_sweep(out_dir / f"figure3{'a' if axis == 'alpha' else 'b'}.png", points, axis,
                       f"TCE Figure 3{'a' if axis == 'alpha' else 'b'}: CIFAR-10{stand_in_words(runs)},\n"
                       + ("C = 0.1" if axis == "alpha" else "α = 0.1"))
    write_table(out_dir, "figure3", f"TCE Figure 3: heterogeneity (α) and participation (C), CIFAR-10{stand_in_words(runs)}",
                ["axis", "value", "FedAvg (GN)", "FedAvg + TCE (GN)", "TCE − FedAvg"], rows,
                ["each seed's mean test accuracy over its last 5 evaluated rounds, mean ± sd over seeds; the margin pairs the two runs' seeds by "
                 "seed number (the seeds both have)",
                 "the paper: the margin is largest at α = 0.01, the two are very close from α = 0.5, and the gap "
                 "is largest when few clients take part (no values printed)"])
    return sweeps


def margins(first: SeededRun | None, second: SeededRun | None) -> PerSeed:
    """Per seed both runs have (paired by seed number): first − second; None where either is NC. The
    margins carry their seeds, so that a margin at one α is compared with one at another seed by seed."""
    a, b = accuracy_by_seed(first), accuracy_by_seed(second)
    seeds = sorted(set(a) & set(b))
    return PerSeed([a[s] - b[s] if has_value(a[s]) and has_value(b[s]) else None for s in seeds], seeds)


def margin_cell(first: SeededRun | None, second: SeededRun | None) -> str:
    return cell(margins(first, second)) if first is not None and second is not None else NOT_RUN


def figure4_mixes(built: set[str] | frozenset[str], records: Path) -> dict[float, list]:
    """Each α's class mix from its partition's record in git (`records`/<name>/label_counts.json, records
    being reports/partitions), for the Figure 4 partitions the profile builds. A built one whose record is
    missing is an error, not a figure drawn with a panel less."""
    mixes = {}
    for alpha, name in FIGURE4_PARTITIONS.items():
        if name not in built:
            continue
        path = records / name / "label_counts.json"
        if not path.is_file():
            raise UserError(f"{path}: missing, so TCE's Figure 4 cannot be drawn; run `dvc repro partition@{name}`")
        mixes[alpha] = json.loads(path.read_text())["train"]
    return mixes


def figure4(out_dir: Path, built: frozenset[str], records: Path) -> None:
    """The class mix of ten random clients for α = 0.1, 0.5 and 100 (training samples); none when the
    profile builds none of those partitions (a test grid)."""
    mixes = figure4_mixes(built, records)
    if not mixes:
        return
    fig, axes = pyplot().subplots(1, len(mixes), figsize=(5 * len(mixes), 4), squeeze=False)
    chosen = sorted(random.Random(0).sample(range(100), 10))
    for ax, (alpha, counts) in zip(axes[0], sorted(mixes.items())):
        bottom = [0] * len(chosen)
        for label in range(len(counts[0])):
            heights = [counts[c][label] for c in chosen]
            ax.bar([str(c) for c in chosen], heights, bottom=bottom, label=str(label))
            bottom = [b + h for b, h in zip(bottom, heights)]
        ax.set_title(f"α = {alpha:g}")
        ax.set_xlabel("client")
        ax.set_ylabel("training samples by class")
    axes[0][-1].legend(title="class", fontsize="x-small", bbox_to_anchor=(1.02, 1), loc="upper left")
    fig.suptitle("TCE Figure 4: the class mix of ten random clients (CIFAR-10, 100 clients)")
    fig.tight_layout()
    save_figure(fig, out_dir / "figure4.png")


def probe_figures(run: SeededRun) -> dict[str, int]:
    """Figure name -> probe round: 5 = the first, 6 = the middle, 1 = 70 % through (2,800 of 4,000), 7 = the last."""
    rounds = sorted(run.settings.get("probe_rounds", []))
    total = run.settings["rounds"]
    if not rounds:
        return {}
    nearest = lambda share: min(rounds, key=lambda r: abs(r - share * total))  # noqa: E731
    return {"figure5": rounds[0], "figure6": nearest(0.5), "figure1": nearest(0.7), "figure7": rounds[-1]}


def forgetting_figures(runs: dict, out_dir: Path) -> dict:
    """CE above TCE (GN, CIFAR-10, the first seed), difference / post / prior, at each probe round."""
    pair = {m: find(runs, "cifar10", m, main_only=True) for m in ("fedavg_gn", "tce_gn")}
    if any(r is None for r in pair.values()):
        return {}
    figures = probe_figures(pair["fedavg_gn"])
    for name, round_ in figures.items():
        records = {}
        for method, run in pair.items():
            folder = run.results[0].folder
            path = folder / "forgetting" / f"round_{round_}.json" if folder else None
            if path and path.is_file():
                records[method] = read_probe(path)
        if len(records) < 2:
            continue
        fig, axes = pyplot().subplots(2, 3, figsize=(17, 10))
        for row, method in enumerate(("fedavg_gn", "tce_gn")):
            draw_forgetting_row(fig, axes[row], records[method], f"{'CE' if method == 'fedavg_gn' else 'TCE'}: ")
        fig.suptitle(f"TCE {name.replace('figure', 'Figure ')}: local client forgetting after round {round_} of "
                     f"{pair['fedavg_gn'].settings['rounds']} (CIFAR-10{stand_in_words(runs)}, GN, seed {pair['fedavg_gn'].seeds[0]})")
        fig.tight_layout()
        save_figure(fig, out_dir / f"{name}_round{round_}.png", dpi=80)
    return figures


def forgetting_values(run: SeededRun | None, round_: int) -> PerSeed:
    """Per seed: the cohort's mean F_k after `round_` (the summary's mean of the probe's F, the one in
    forgetting/round_<t>.json; None: no probe that round). Seed s probes the same clients under CE and TCE
    (the cohort is drawn by seed and round), so the two methods pair by seed."""
    if run is None:
        return PerSeed()
    return run.per_seed([r.summary.get("mean_local_forgetting", {}).get(f"round_{round_}") for r in run.results])


def forgetting_table(runs: dict, figures: dict, out_dir: Path) -> None:
    rows = []
    for name, round_ in sorted(figures.items(), key=lambda item: item[1]):
        row = [name.replace("figure", "Figure "), str(round_)]
        for method in LABELS:
            row.append(cell(forgetting_values(find(runs, "cifar10", method, main_only=True), round_)))
        rows.append(row)
    write_table(out_dir, "forgetting", f"TCE Figures 1, 5-7: mean local client forgetting F_k (CIFAR-10{stand_in_words(runs)})",
                ["figure", "round", *LABELS.values()], rows,
                ["F_k = mean over the other probed clients' local models i of Acc_k(w_t^i) − Acc_k(w_{t−1}) on "
                 "client k's validation data, averaged over the 10 probed clients of the round; mean ± sd over "
                 "seeds; higher (less negative) = less forgetting", "heatmaps: figure<N>_round<t>.png (CE above, TCE below)"])


# ---------------------------------------------------------------- claims

# Claims compare accuracies in percentage points (the tables print fractions), so that an effect and a
# power line read as the paper's tolerances do ("within 2 points"). F_k is compared as it is printed.
ACCURACY_UNIT = "points"
FORGETTING_UNIT = "in F_k"
TABLE2_TOLERANCES = (2, 3, 5)  # Table 2's columns: lrs within 2, 3 and 5 points of the best

# The paper's own words the ledger cites (line numbers of its text, 002_717454cd1d7d3160.txt).
FEMNIST_GAIN = ("'We see a similar performance increase when using the FEMNIST dataset (Table 1) further "
                "supporting our claims.' (§3.2, L78)")
BN_PREMISE = ("'FedAvg+TCE is robust to the normalization layer unlike vanilla FL methods which typically do poorly "
              "when using BN' (§3.2, L78); Table 1's caption: 'results of FedAvg with BN are not included since this "
              "setting is known to yield poor performance [17]' (L184)")
OTHER_ROUNDS = "'the observation persists for other rounds as shown in the Appendix Sec A.3' (§3.1, L74)"
MEMBERSHIP_WORDS = {HELD: "in", FAILED: "out", INCONCLUSIVE: "open"}


def in_points(values) -> PerSeed:
    """Accuracies (fractions) as percentage points, keeping the seeds of a PerSeed."""
    return (values if isinstance(values, PerSeed) else PerSeed(values)).map(lambda v: 100.0 * v)


def published_best_value(published: dict, dataset: str, method: str) -> tuple[float, str, str]:
    """(value, lr, printed cell) of a column's best in the published Table 1 (NC cells left out)."""
    lrs, cells = published["table1"]["lrs"], published["table1"][dataset][method]
    return max((float(c.split()[0]), lr, c) for lr, c in zip(lrs, cells) if c != NC)


def published_best(published: dict, dataset: str, method: str) -> str:
    """"0.859 ± 0.004 (lr 0.03)": a column's best cell of the published Table 1."""
    _, lr, text = published_best_value(published, dataset, method)
    return f"{text} (lr {lr})"


def claims(runs: dict, published: dict, ours: dict, sweeps: dict) -> list[Claim]:
    out = []
    for dataset in ("cifar10", "cifar100"):
        out += [main_claim(runs, published, dataset, "tce_gn"), main_claim(runs, published, dataset, "tce_bn"),
                bn_claim(runs, published, dataset)]
    for method in ("tce_gn", "tce_bn"):
        out.append(femnist_claim(runs, published, method))
    out.append(forgetting_claim(runs))
    out.append(norms_claim(runs, published))
    out.append(every_lr_claim(runs))
    out.append(near_best_claim(ours, published))
    out.append(sweep_claim("alpha", sweeps["alpha"], 0.01, "TCE's margin over FedAvg is largest at α = 0.01 (Figure 3a)"))
    out.append(equal_at_claim(sweeps["alpha"], 100.0))
    out.append(sweep_claim("C", sweeps["C"], None, "TCE's margin over FedAvg is largest when the fewest clients "
                                                   "take part (Figure 3b)"))
    return out


# ---------------------------------------------------------------- claims: accuracy of one run against another

def run_label(run: SeededRun) -> str:
    return f"{LABELS[method_of(run.settings)]} lr {float(run.settings['lr']):g}"


def accuracy_words(run: SeededRun) -> str:
    """What the accuracy is: a mean over the last 5 evaluated rounds on the test set, and on which data."""
    dataset = run.settings["dataset"]
    where = (f", on {DATASET_NAMES.get(dataset, dataset)} standing in for "
             f"{DATASET_NAMES.get(run.paper_dataset, run.paper_dataset)}" if dataset != run.paper_dataset else "")
    return f"test accuracy, each seed's mean over its last 5 evaluated rounds of {run.settings.get('rounds', '?')}{where}"


def accuracy_claim(claim_id: str, text: str, published: str, first: SeededRun, second: SeededRun) -> Claim:
    """'first is more accurate than second' on the seeds' test accuracies (last-5 means), paired by seed when both
    ran the same seeds (seed s gives both the same initial model and client sampling)."""
    a, b = accuracy_values(first), accuracy_values(second)
    comparison = compare(in_points(a), in_points(b))
    evidence = (f"{run_label(first)}: {cell(a)}, {run_label(second)}: {cell(b)} ({accuracy_words(first)}); "
                f"{comparison.reason}")
    return Claim(PAPER, claim_id, text, comparison.status, evidence, published, comparison.seeds, [comparison],
                 ACCURACY_UNIT)


def main_claim(runs: dict, published: dict, dataset: str, method: str) -> Claim:
    claim_id = f"{method}_beats_fedavg_{dataset}"
    text = f"{LABELS[method]} is more accurate than FedAvg (GN), {dataset}, α = 0.1 (Table 1, Figure 2)"
    if method == "tce_bn":  # loss and norm both differ: the BN-vs-BN claim tells the loss's part
        text += "; loss and norm both differ, see TCE (BN) vs FedAvg (BN)"
    paper = (f"Table 1 best: {published_best(published, dataset, method)} vs FedAvg "
             f"{published_best(published, dataset, 'fedavg_gn')}")
    first, second = find(runs, dataset, method, main_only=True), find(runs, dataset, "fedavg_gn", main_only=True)
    if first is None or second is None:
        return Claim(PAPER, claim_id, text, NOT_RUN, f"main {dataset} runs not in this profile", paper)
    return accuracy_claim(claim_id, text, paper, first, second)


def bn_claim(runs: dict, published: dict, dataset: str) -> Claim:
    """TCE (BN) against FedAvg (BN): the paper's premise for leaving FedAvg (BN) out of Table 1. Beside TCE (BN)
    vs FedAvg (GN) it tells the loss's effect from the norm's."""
    claim_id = f"tce_bn_beats_fedavg_bn_{dataset}"
    text = (f"FedAvg + TCE (BN) is more accurate than FedAvg (BN), {dataset}, α = 0.1 (the paper's premise that "
            "vanilla FL does poorly with BN)")
    paper = (f"no FedAvg (BN) numbers: {BN_PREMISE}; TCE (BN) Table 1 best: "
             f"{published_best(published, dataset, 'tce_bn')}")
    first, second = find(runs, dataset, "tce_bn", main_only=True), find(runs, dataset, "fedavg_bn", main_only=True)
    if first is None or second is None:
        return Claim(PAPER, claim_id, text, NOT_RUN, f"main {dataset} BN runs not in this profile", paper)
    return accuracy_claim(claim_id, text, paper, first, second)


def femnist_published(published: dict, method: str) -> str:
    """Table 1's bests; where the TCE column tops out below FedAvg's, the paper's text claims the opposite."""
    paper = (f"Table 1 best: {published_best(published, 'femnist', method)} vs FedAvg "
             f"{published_best(published, 'femnist', 'fedavg_gn')}")
    tce_best, fedavg_best = (published_best_value(published, "femnist", m)[0] for m in (method, "fedavg_gn"))
    if tce_best < fedavg_best:
        paper += (f"; the paper contradicts itself: its Table 1 has {LABELS[method]} below FedAvg (GN) while its "
                  f"text says {FEMNIST_GAIN}")
    return paper


def femnist_claim(runs: dict, published: dict, method: str) -> Claim:
    """FEMNIST has no main runs: each method at the lr of its best mean in our grid."""
    claim_id = f"{method}_beats_fedavg_femnist"
    text = f"{LABELS[method]} is more accurate than FedAvg (GN) on FEMNIST, each at its best lr (Table 1)"
    paper = femnist_published(published, method)
    best = {m: best_run(runs, "femnist", m) for m in (method, "fedavg_gn")}
    if any(r is None for r in best.values()):
        return Claim(PAPER, claim_id, text, NOT_RUN, "FEMNIST runs not in this profile", paper)
    return accuracy_claim(claim_id, text, paper, best[method], best["fedavg_gn"])


def best_run(runs: dict, dataset: str, method: str) -> SeededRun | None:
    """The run of a method with the highest mean last-model accuracy over the lrs run (NC seeds: not a candidate)."""
    candidates = [r for r in runs.values() if point_of(r)[:2] == (dataset, method)
                  and all(has_value(v) for v in accuracy_values(r))]
    return max(candidates, key=lambda r: mean_sd(accuracy_values(r))[0], default=None)


def every_lr_claim(runs: dict) -> Claim:
    text = "Across all client learning rates TCE improves on FedAvg, with either norm (CIFAR-10, Table 1)"
    published = "Table 1 (the text, L80); the table itself has exceptions, e.g. lr 0.5 TCE GN 0.751 < 0.777"
    labelled = []
    for method in ("tce_gn", "tce_bn"):
        for run in runs.values():
            dataset, m, lr, alpha, fraction = point_of(run)
            if dataset == "cifar10" and m == method and close(alpha, BASE_ALPHA) and close(fraction, BASE_C):
                other = find(runs, "cifar10", "fedavg_gn", lr)
                if other is not None:
                    labelled.append((f"{LABELS[method]} lr {lr:g}",
                                     compare(in_points(accuracy_values(run)), in_points(accuracy_values(other)))))
    if not labelled:
        return Claim(PAPER, "tce_every_lr", text, NOT_RUN, "no lr with both methods in this profile", published)
    labelled.sort(key=lambda item: item[0])
    comparisons = [c for _, c in labelled]
    evidence = ("against FedAvg (GN) at the same lr: "
                + "; ".join(f"{label}: {c.status} ({c.reason})" for label, c in labelled))
    return Claim(PAPER, "tce_every_lr", text, combine(c.status for c in comparisons), evidence, published,
                 comparisons_seeds(comparisons), comparisons, ACCURACY_UNIT)


# ---------------------------------------------------------------- claims: within x points

def within_points(claim_id: str, text: str, published: str, labels: tuple[str, str], first, second,
                  points: float) -> Claim:
    """'first and second are within `points` of each other': each side, shifted up by `points`, is
    separated above the other (two comparisons, combined by the rule; paired when the seeds are shared)."""
    a, b = in_points(first), in_points(second)
    up, down = compare(shift(a, points), b), compare(shift(b, points), a)
    evidence = (f"{labels[0]}: {cell(first)}, {labels[1]}: {cell(second)}; {labels[0]} + {points:g} points above "
                f"{labels[1]}: {up.status} ({up.reason}); {labels[1]} + {points:g} points above {labels[0]}: "
                f"{down.status} ({down.reason})")
    return Claim(PAPER, claim_id, text, combine([up.status, down.status]), evidence, published,
                 comparisons_seeds([up, down]), [up, down], ACCURACY_UNIT)


def norms_claim(runs: dict, published: dict) -> Claim:
    text = "FedAvg + TCE with BatchNorm is within 2 points of TCE with GroupNorm (CIFAR-10, main runs)"
    published = (f"Table 1 best: {published_best(published, 'cifar10', 'tce_bn')} (BN) vs "
                 f"{published_best(published, 'cifar10', 'tce_gn')} (GN)")
    bn, gn = find(runs, "cifar10", "tce_bn", main_only=True), find(runs, "cifar10", "tce_gn", main_only=True)
    if bn is None or gn is None:
        return Claim(PAPER, "tce_bn_near_gn", text, NOT_RUN, "main CIFAR-10 TCE runs not in this profile", published)
    return within_points("tce_bn_near_gn", text, published, ("BN", "GN"), accuracy_values(bn), accuracy_values(gn), 2)


def equal_at_claim(points: dict, alpha: float) -> Claim:
    text = f"At α = {alpha:g} TCE and FedAvg are equal within noise: within 2 points of each other (Figure 3a)"
    published = "Figure 3a: 'very close' from α = 0.5 on, no numbers printed"
    first, second = points.get("tce_gn", {}).get(alpha), points.get("fedavg_gn", {}).get(alpha)
    if first is None or second is None:
        return Claim(PAPER, "tce_equal_at_high_alpha", text, NOT_RUN, f"α = {alpha:g} not run in this profile",
                     published)
    return within_points("tce_equal_at_high_alpha", text, published, ("TCE", "FedAvg"), accuracy_values(first),
                         accuracy_values(second), 2)


# ---------------------------------------------------------------- claims: lrs near the best (Table 2)
#
# "lr l is within x points of its method's best" is a statement about two lrs' accuracies, so it is
# decided by the rule like any other: l's per-seed accuracy + x points against the best lr's (paired by
# seed: one seed gives every lr the same initial model and client sampling). Held: l is in; failed: l is
# out (more than x below, separated); inconclusive: l is open. The best lr is the one with the highest
# mean, as the paper picks it from means of three runs, and is in by definition. A method's count is
# then a range: at least 1 + the lrs in, at most that + the open ones. "TCE has more" holds when TCE's
# fewest exceed FedAvg's most, fails when TCE's most do not exceed FedAvg's fewest (no outcome of the
# open lrs gives TCE more), and is open otherwise. Only lrs both methods ran are counted.

def table2_tolerances_where_tce_leads(published: dict, dataset: str = "cifar10") -> list[int]:
    """The tolerances at which the paper's Table 2 lists more lrs for TCE (GN) than for FedAvg: what it shows
    (CIFAR-10: a tie at 2 points, TCE ahead at 3 and 5)."""
    lists = published["table2"][dataset]
    return [p for p in TABLE2_TOLERANCES
            if len(lists["tce_gn"][f"within_{p}"]) > len(lists["fedavg_gn"][f"within_{p}"])]


def best_lr(by_lr: dict) -> float | None:
    """The lr with the highest mean over its seeds, among the lrs with no NC seed."""
    means = {lr: mean_sd(v)[0] for lr, v in by_lr.items() if v and all(has_value(x) for x in v)}
    return max(means, key=means.get) if means else None


def membership(values, best_values, points: float) -> Comparison:
    """Is an lr within `points` of the best? compare(lr + points, best): held = in, failed = out, else open."""
    return compare(shift(values, points), best_values)


def membership_as_decided(values, best_values, points: float) -> Comparison:
    """The same test asked in the direction the seeds point, so that held means decided (in or out) and an
    open one's effect is its distance from being decided: what the claim's test and power columns read."""
    verdict = membership(values, best_values, points)
    if verdict.status == HELD or (verdict.status == INCONCLUSIVE and (verdict.effect or 0.0) >= 0):
        return verdict
    return compare(best_values, shift(values, points))


def count_range(memberships: dict) -> tuple[int, int]:
    """(fewest, most) lrs within the tolerance: the best itself and those in; plus those open."""
    fewest = 1 + sum(c.status == HELD for c in memberships.values())
    return fewest, fewest + sum(c.status == INCONCLUSIVE for c in memberships.values())


def more_lrs_status(first: tuple[int, int], second: tuple[int, int]) -> str:
    """'first has more lrs near its best than second', on their (fewest, most) ranges."""
    if first[0] > second[1]:
        return HELD
    if first[1] <= second[0]:
        return FAILED
    return INCONCLUSIVE


def range_words(counts: tuple[int, int]) -> str:
    return str(counts[0]) if counts[0] == counts[1] else f"{counts[0]}–{counts[1]}"


def membership_words(memberships: dict) -> str:
    def why(c: Comparison) -> str:
        if c.test and c.p is not None:
            return f"{c.test} p = {c.p:.3g}"
        return f"n = {c.seeds}" if min(c.n_first, c.n_second) < 2 else c.reason
    words = [f"{lr:g} {MEMBERSHIP_WORDS[c.status]} ({why(c)})" for lr, c in memberships.items()]
    return ", ".join(words) or "no other lr"


def near_best_at(by_lr: dict, best: dict, points: int) -> tuple[str, list[Comparison], str]:
    """At one tolerance: (does TCE (GN) have more lrs within `points` of its best than FedAvg, the membership
    tests as decided (for the claim's test and power columns), the evidence's words)."""
    members = {m: {lr: membership(v, by_lr[m][best[m]], points) for lr, v in lrs.items() if lr != best[m]}
               for m, lrs in by_lr.items()}
    counts = {m: count_range(tests) for m, tests in members.items()}
    status = more_lrs_status(counts["tce_gn"], counts["fedavg_gn"])
    as_decided = [membership_as_decided(v, by_lr[m][best[m]], points)
                  for m, lrs in by_lr.items() for lr, v in lrs.items() if lr != best[m]]
    words = (f"within {points}: TCE {range_words(counts['tce_gn'])} vs FedAvg {range_words(counts['fedavg_gn'])} "
             f"of {len(by_lr['tce_gn'])} lrs, {status} (TCE {membership_words(members['tce_gn'])}; FedAvg "
             f"{membership_words(members['fedavg_gn'])})")
    return status, as_decided, words


def near_best_claim(ours: dict, published: dict) -> Claim:
    """TCE (GN) has more CIFAR-10 lrs within x points of its best than FedAvg (GN), at each x where the
    paper's Table 2 shows it (one claim: held when held at every such x)."""
    tolerances = table2_tolerances_where_tce_leads(published)
    text = (f"TCE (GN) has more client learning rates than FedAvg (GN) within "
            f"{' and within '.join(f'{p} points' for p in tolerances)} of its best (CIFAR-10, Table 2)")
    lists = published["table2"]["cifar10"]
    paper = "Table 2, lrs listed TCE (GN) vs FedAvg: " + ", ".join(
        f"within {p}: {len(lists['tce_gn'][f'within_{p}'])} vs {len(lists['fedavg_gn'][f'within_{p}'])}"
        for p in TABLE2_TOLERANCES) + " (claimed where TCE lists more)"
    methods = ("tce_gn", "fedavg_gn")
    lrs = sorted(set.intersection(*(set(ours.get(("cifar10", m), {})) for m in methods)), reverse=True)
    if len(lrs) < 2 or not tolerances:
        return Claim(PAPER, "tce_more_lrs_near_best", text, NOT_RUN,
                     "fewer than 2 lrs that both methods ran in this profile", paper)
    by_lr = {m: {lr: in_points(ours[("cifar10", m)][lr]) for lr in lrs} for m in methods}
    best = {m: best_lr(by_lr[m]) for m in methods}
    if any(b is None for b in best.values()):
        return Claim(PAPER, "tce_more_lrs_near_best", text, INCONCLUSIVE,
                     "a method has no lr without an NC seed: no best to measure from", paper)
    decided = [near_best_at(by_lr, best, points) for points in tolerances]
    statuses, parts = [status for status, _, _ in decided], [words for _, _, words in decided]
    comparisons = [c for _, tests, _ in decided for c in tests]
    evidence = (f"lrs both ran: {', '.join(f'{lr:g}' for lr in lrs)}; best (highest mean): TCE {best['tce_gn']:g}, "
                f"FedAvg {best['fedavg_gn']:g}; an lr is in when its seeds + x points are separated above the "
                "best's by the rule, out when separated below, else open (counts: fewest–most); "
                + "; ".join(parts))
    # Its comparisons are lr memberships (in or out), not sides of the claim: one decided does not fail it.
    return Claim(PAPER, "tce_more_lrs_near_best", text, combine(statuses), evidence, paper,
                 comparisons_seeds(comparisons), comparisons, ACCURACY_UNIT, one_failure_fails=False)


# ---------------------------------------------------------------- claims: forgetting

def probed_rounds(first: SeededRun, second: SeededRun) -> list[int]:
    """The probe rounds both runs have."""
    return sorted(set(first.settings.get("probe_rounds") or []) & set(second.settings.get("probe_rounds") or []))


def rounds_words(run: SeededRun, rounds: list[int]) -> str:
    """'1, 20, 28, 40 of 40 (the paper's 1, 2,000, 2,800, 4,000)': the rounds and those of the paper they stand for."""
    text = f"{', '.join(map(str, rounds))} of {run.settings.get('rounds', '?')}"
    ours, paper = list(run.settings.get("probe_rounds") or []), run.paper_value("probe_rounds")
    if paper and len(paper) == len(ours) and list(paper) != ours:
        stands_for = dict(zip(ours, paper))
        text += f" (the paper's {', '.join(f'{stands_for[r]:,}' for r in rounds)})"
    return text


def forgetting_cell(values) -> str:
    return accuracy_cell(values, 3, "without a probe")


def forgetting_claim(runs: dict) -> Claim:
    text = ("TCE reduces local client forgetting: F_k is higher (less negative) than with CE at every probed round "
            "(Figures 1, 5-7, GN, CIFAR-10)")
    published = f"Figures 5, 6, 1, 7 (rounds 1, 2,000, 2,800, 4,000): heatmaps, no numbers; {OTHER_ROUNDS}"
    first, second = find(runs, "cifar10", "tce_gn", main_only=True), find(runs, "cifar10", "fedavg_gn", main_only=True)
    if first is None or second is None:
        return Claim(PAPER, "tce_less_forgetting", text, NOT_RUN, "main CIFAR-10 GN runs not in this profile",
                     published)
    return forgetting_claim_of(first, second, text, published)


def forgetting_claim_of(tce_run: SeededRun, ce_run: SeededRun, text: str, published: str) -> Claim:
    """F_k higher with TCE at every probe round both runs have: one comparison a round (paired by seed: the
    same cohort is probed under both losses), combined by the rule."""
    rounds = probed_rounds(tce_run, ce_run)
    if not rounds:
        return Claim(PAPER, "tce_less_forgetting", text, NOT_RUN, "no probe round that both main runs have", published)
    text = f"{text}: rounds {rounds_words(tce_run, rounds)}"
    sides = {r: (forgetting_values(tce_run, r), forgetting_values(ce_run, r)) for r in rounds}
    comparisons = {r: compare(*sides[r]) for r in rounds}
    evidence = "mean F_k of the probed cohort; " + "; ".join(
        f"round {r}: TCE {forgetting_cell(sides[r][0])}, CE {forgetting_cell(sides[r][1])}, {c.status} ({c.reason})"
        for r, c in comparisons.items())
    return Claim(PAPER, "tce_less_forgetting", text, combine(c.status for c in comparisons.values()), evidence,
                 published, comparisons_seeds(list(comparisons.values())), list(comparisons.values()),
                 FORGETTING_UNIT)


# ---------------------------------------------------------------- claims: the sweeps (Figure 3)

def sweep_claim(axis: str, points: dict, at, text: str) -> Claim:
    """The TCE − FedAvg margin (seeds paired) at `at` (None: the smallest value) against every other value."""
    claim_id = f"tce_margin_{axis}"
    published = "Figure 3, no numbers printed"
    common = sorted(set(points.get("tce_gn", {})) & set(points.get("fedavg_gn", {})))
    if len(common) < 2:
        return Claim(PAPER, claim_id, text, NOT_RUN, f"fewer than two {axis} values with both methods", published)
    at = min(common) if at is None else at
    if not any(close(at, x) for x in common):
        return Claim(PAPER, claim_id, text, NOT_RUN, f"{axis} = {at:g} not run in this profile", published)
    margin = {x: margins(points["tce_gn"][x], points["fedavg_gn"][x]) for x in common}
    key = next(x for x in common if close(at, x))
    comparisons = {x: margin_comparison(margin[key], margin[x]) for x in common if x != key}
    evidence = f"margin at {axis} = {at:g}: {cell(margin[key])}; " + "; ".join(
        f"vs {x:g}: {cell(margin[x])}, {c.status} ({c.reason})" for x, c in comparisons.items())
    return Claim(PAPER, claim_id, text, combine(c.status for c in comparisons.values()), evidence, published,
                 comparisons_seeds(list(comparisons.values())), list(comparisons.values()), ACCURACY_UNIT)


def margin_comparison(first, second) -> Comparison:
    """compare() on two margins (in points, paired by seed); a margin with an NC seed on either method has
    no meaning (a FedAvg that did not converge is no small margin): inconclusive, said so."""
    if not all(has_value(v) for v in list(first) + list(second)):
        why = "a seed NC on one of the methods: no margin"
        return Comparison(INCONCLUSIVE, why, len(first), len(second), undecidable=why)
    return compare(in_points(first), in_points(second))


def tce_runs(context: ReportContext) -> dict:
    return {k: v for k, v in context.runs_of(PAPER).items() if method_of(v.settings) is not None}


def claims_of(context: ReportContext) -> list[Claim]:
    """The claims alone, nothing written (report/confirmation.py builds them again on a confirmatory sample)."""
    runs = tce_runs(context)
    return claims(runs, context.published, table1_rows(runs, context.published)[1],
                  {axis: sweep(runs, axis) for axis in ("alpha", "C")})


def build(context: ReportContext) -> list[Claim]:
    out_dir, published = context.out_dir, context.published
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = tce_runs(context)
    ours = table1(runs, published, out_dir, context.profile)
    table2(ours, published, out_dir)
    figure2(runs, out_dir)
    sweeps = figure3(runs, out_dir)
    figure4(out_dir, context.built_partitions, context.partition_records)
    figures = forgetting_figures(runs, out_dir)
    forgetting_table(runs, figures, out_dir)
    return claims(runs, published, ours, sweeps)
