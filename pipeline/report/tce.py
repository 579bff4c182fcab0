"""The TCE paper (Legate, Caccia & Belilovsky): Figures 1-7, appendix Tables 1-2 and its claims.

Runs are placed by their settings, not by their names: a run of paper `tce` is a point (dataset,
method, lr, alpha, C), the method being its loss and norm (FedAvg = cross-entropy, TCE = truncated
cross-entropy; GN / BN). alpha is read from the run's partition in params.yaml.
The main runs (those with forgetting probes) stand for Figures 1, 2 and 5-7 and for their own lr in
Table 1. Accuracy in the tables is each seed's mean test accuracy over its last 5 evaluated rounds
(`test_set_accuracy_mean`, "T5"); the claims read it as docs/claims-spec.md §4 declares: the last model on
the test set (`final_test_accuracy`, "LM", the paper's Table 1 and every accuracy claim's own reading),
T5, and for the CIFAR-10 accuracy claims the mean of the validation curve ("VAL", Figure 2's curve). The
curves are the union of the clients' validation sets, as the paper monitors. A run is placed at the
dataset it stands for (`SeededRun.paper_dataset`): the default profile trains Fashion-MNIST in CIFAR-10's
place and the mirror's 300-writer FEMNIST subset for FEMNIST, and every table, figure and claim says so.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from pathlib import Path

from pipeline.errors import UserError
from pipeline.inputs import dataset_spec
from pipeline.paths import PROBES_FILE
from pipeline.probe_files import draw_forgetting_row, read_probes
from pipeline.report.common import (
    NC,
    NOT_RUN,
    Claim,
    ReportContext,
    SeededRun,
    accuracy_cell,
    claim_of_readings,
    plot_curves,
    pyplot,
    save_figure,
    scaled_note,
    seeds_note,
    shift,
    write_table,
)
from pipeline.report.readings import Reading, not_measured, reading, setting_of, with_holm
from pipeline.report.seeds import FAILED, HELD, INCONCLUSIVE, Comparison, PerSeed, combine, compare, has_value, mean_sd

PAPER = "tce"
METHODS = {
    ("ce", "group"): "fedavg_gn",
    ("tce", "group"): "tce_gn",
    ("tce", "batch"): "tce_bn",
    ("ce", "batch"): "fedavg_bn",
}
LABELS = {
    "fedavg_gn": "FedAvg (GN)",
    "tce_gn": "FedAvg + TCE (GN)",
    "tce_bn": "FedAvg + TCE (BN)",
    "fedavg_bn": "FedAvg (BN)",
}
TABLE_METHODS = ("fedavg_gn", "tce_gn", "tce_bn")  # Table 1 has no FedAvg with BN
DATASETS = ("cifar10", "cifar100", "femnist")
BASE_ALPHA, BASE_C = 0.1, 0.1
# Figure 4's partitions (their records in reports/partitions, on which the report stage depends).
FIGURE4_PARTITIONS = {
    0.1: "cifar10_dirichlet_alpha01",
    0.5: "cifar10_dirichlet_alpha05",
    100.0: "cifar10_dirichlet_alpha100",
}
# "NC" (the paper: "did not converge", no rule given): here, a seed that diverged (non-finite loss) or
# whose last model is within 1.5x chance on the test set.
CHANCE_FACTOR = 1.5
DATASET_NAMES = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100", "femnist": "FEMNIST", "fashion_mnist": "Fashion-MNIST"}
# What the mirror's FEMNIST is (reports/datasets/femnist.json, pipeline/download.py): never called FEMNIST alone.
FEMNIST_SUBSET = "the mirror's 300-writer subset"


# ---------------------------------------------------------------- where a run sits


def method_of(settings: dict) -> str | None:
    return METHODS.get((settings.get("loss", "ce"), settings.get("norm") or "group"))


def point_of(run: SeededRun) -> tuple:
    """(dataset, method, lr, alpha, C) of a run; alpha None for a partition that is not Dirichlet
    (FEMNIST's writers), which counts as the base point."""
    s = run.settings
    alpha = run.partition_settings("a TCE run").get("alpha")
    return (
        run.paper_dataset,
        method_of(s),
        float(s["lr"]),
        None if alpha is None else float(alpha),
        float(s["client_fraction"]),
    )


def is_main(run: SeededRun) -> bool:
    return bool(run.settings.get("probe_rounds"))


def is_sample(run: SeededRun | None) -> bool:
    """A confirmatory sample standing in for the run it confirms (report/confirmation.py)."""
    return run is not None and bool(run.settings.get("confirms"))


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
    return {
        r.seed
        for r in run.results
        if r.diverged or (has_value(last := r.summary.get("final_test_accuracy")) and last <= floor)
    }


def accuracy_values(run: SeededRun | None) -> PerSeed:
    """`accuracy_by_seed` in seed order (fractions), carrying the seeds so that claims pair them, and
    marking the NC seeds as their run's worst outcome (`seeds.PerSeed.worst`)."""
    return PerSeed.from_dict(accuracy_by_seed(run), nc_seeds(run), "higher")


# ---------------------------------------------------------------- the accuracy measures the claims read
#
# docs/claims-spec.md §4: LM (the paper's Table 1: the last model on the test set, [002:L61]), T5 (the mean of
# the test set's last 5 evaluations, the tables' and the earlier ledger's), VAL (the mean of the validation
# curve over every evaluated round, Figure 2's curve: 'for any training budget'). An NC seed (diverged, or a last
# model near chance) is its run's worst outcome under every measure.

LM, T5, VAL = "LM", "T5", "VAL"
MEASURE_WORDS = {
    LM: "the last model's test accuracy (LM, the paper's Table 1)",
    T5: "the mean of the last 5 test-set evaluations (T5)",
    VAL: "the mean of the validation curve over every evaluated round (VAL, Figure 2's curve)",
}
# The confirmatory samples (params.yaml, 2026-11-27) were planned on the ledger of that day, which read T5:
# any other reading of a sample's seeds is a further look at them (docs/claims-spec.md, claims 23 and 37).
PLANNED_MEASURE = T5


def seed_value(result, measure: str):
    """One seed's accuracy (fraction) under `measure`; None where it has none."""
    if measure == LM:
        return result.summary.get("final_test_accuracy")
    if measure == VAL:
        curve = list(result.accuracy)
        return sum(curve) / len(curve) if curve and all(has_value(v) for v in curve) else None
    raise ValueError(f"unknown measure {measure!r}")


def values_of(run: SeededRun | None, measure: str = T5) -> PerSeed:
    """Per seed (fractions), in seed order with the seeds: the accuracy under `measure` (T5 is
    `accuracy_values`, with its fallback to the last model for results without a test-set mean); an NC seed
    has none and is marked its run's worst outcome."""
    if measure == T5:
        return accuracy_values(run)
    if run is None:
        return PerSeed()
    nc = nc_seeds(run)
    by_seed = {}
    for result in run.results:
        value = seed_value(result, measure)
        by_seed[result.seed] = value if has_value(value) and result.seed not in nc else None
    return PerSeed.from_dict(by_seed, nc, "higher")


def new_look(measure: str, *runs: SeededRun | None) -> str:
    """The words a reading of a confirmatory sample adds where the sample was planned under another measure."""
    if measure == PLANNED_MEASURE or not any(is_sample(r) for r in runs):
        return ""
    return (
        f"; this reading of the confirmatory sample is a new look at its seeds: the sample was planned under "
        f"{PLANNED_MEASURE}, not {measure}"
    )


# ---------------------------------------------------------------- what was trained, in words


def femnist_is_subset(records: Path | None) -> bool:
    """The FEMNIST trained is the mirror's 300-writer subset unless its record (reports/datasets/femnist.json)
    says the copy is no stand-in (FEMNIST itself, downloaded from its source)."""
    path = records / "femnist.json" if records is not None else None
    if path is None or not path.is_file():
        return True
    return json.loads(path.read_text()).get("stand_in") is not False


def data_name(dataset: str, subset: bool = True) -> str:
    """A trained dataset's name as the tables print it ('FEMNIST (the mirror's 300-writer subset)')."""
    name = DATASET_NAMES.get(dataset, dataset)
    return f"{name} ({FEMNIST_SUBSET})" if dataset == "femnist" and subset else name


def trained_label(runs: dict, dataset: str, subset: bool = True) -> str:
    """What the runs placed at the paper's `dataset` trained, beside it: 'Fashion-MNIST (standing in for
    CIFAR-10)', 'FEMNIST (the mirror's 300-writer subset)', or the paper's name where none ran."""
    trained = sorted({r.settings["dataset"] for r in runs.values() if r.paper_dataset == dataset})
    paper = DATASET_NAMES.get(dataset, dataset)
    if not trained:
        return f"{paper} (the paper's; not run)"
    if trained == [dataset]:
        return data_name(dataset, subset)
    return f"{' and '.join(data_name(t, subset) for t in trained)} (standing in for {paper})"


def stand_ins(runs: dict) -> list[tuple[str, str]]:
    """(the dataset trained, the paper's it stands for), for runs that trained another dataset than the
    paper's (TCE's default profile: Fashion-MNIST for CIFAR-10)."""
    return sorted(
        {
            (
                DATASET_NAMES.get(r.settings["dataset"], r.settings["dataset"]),
                DATASET_NAMES.get(r.paper_dataset, r.paper_dataset),
            )
            for r in runs.values()
            if r.settings["dataset"] != r.paper_dataset
        }
    )


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

    matches = sorted(
        (r for r in runs.values() if (not main_only or is_main(r)) and at_point(r)),
        key=lambda r: (not is_main(r), r.key),
    )
    if len(matches) > 1 and is_main(matches[0]) == is_main(matches[1]):
        raise UserError(
            f"TCE report: runs {matches[0].key} and {matches[1].key} both sit at {dataset}, "
            f"{LABELS[method]}, lr {lr if lr is not None else 'main'}, α {alpha:g}, C {fraction:g}; "
            "give one of them another setting or paper"
        )
    return matches[0] if matches else None


def close(a, b) -> bool:
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9)


# ---------------------------------------------------------------- Tables 1 and 2


def table1(runs: dict, published: dict, out_dir: Path, profile: str, subset: bool = True) -> dict:
    """Ours beside the published numbers, per dataset and lr; returns {(dataset, method): {lr: values}}.
    Each row names what it trained (`trained_label`): a stand-in row is never labelled with the paper's dataset
    alone."""
    rows, ours = table1_rows(runs, published, subset)
    header = ["dataset trained (the paper's)", "client lr"] + [
        f"{LABELS[m]} {side}" for m in TABLE_METHODS for side in ("ours", "published")
    ]
    write_table(
        out_dir,
        "table1",
        "TCE appendix Table 1: accuracy by client learning rate",
        header,
        rows,
        table1_notes(runs, profile, subset),
    )
    return ours


def table1_rows(runs: dict, published: dict, subset: bool = True) -> tuple[list[list[str]], dict]:
    """Table 1's rows, and ours by (dataset, method) and lr (what Table 2 reads)."""
    paper_lrs = [float(x) for x in published["table1"]["lrs"]]
    ours: dict = {}
    rows = []
    for dataset in DATASETS:
        label = trained_label(runs, dataset, subset)
        lrs = sorted(
            set(paper_lrs) | {point_of(r)[2] for r in runs.values() if point_of(r)[0] == dataset}, reverse=True
        )
        for lr in lrs:
            row = [label, f"{lr:g}"]
            for method in TABLE_METHODS:
                values = accuracy_values(find(runs, dataset, method, lr))
                if values:
                    ours.setdefault((dataset, method), {})[lr] = values
                printed = published["table1"][dataset][method]
                paper_cell = printed[paper_lrs.index(lr)] if lr in paper_lrs else "—"
                row += [cell(values), paper_cell]
            rows.append(row)
    return rows, ours


def table1_notes(runs: dict, profile: str, subset: bool = True) -> list[str]:
    notes = [
        f"profile: {profile}; accuracy = each seed's mean test accuracy over its last 5 evaluated rounds "
        "(T5; fraction; the paper prints the last model's, one evaluation, which the claims read first, as LM), "
        "mean ± sd over seeds "
        "(n = seeds); published: the paper's Table 1 as transcribed in pipeline/report/published.yaml",
        f"{NC}: a seed that diverged or whose last model is within {CHANCE_FACTOR}x chance (the paper says "
        "'did not converge' without a rule)",
        "a main run (the one with forgetting probes) stands for its own lr; the other lrs are the grid's runs",
        seeds_note(runs),
        *scaled_note(runs),
    ]
    fedavg_bn = find(runs, "cifar10", "fedavg_bn", main_only=True)
    if fedavg_bn is not None:
        notes.append(
            f"FedAvg (BN), which the paper leaves out ('known to yield poor performance'), main run at "
            f"lr {fedavg_bn.settings['lr']:g} on {trained_label(runs, 'cifar10', subset)}: "
            f"{cell(accuracy_values(fedavg_bn))}: claims.md reads it against FedAvg (GN) (the paper's "
            "premise) and TCE (BN) against it, to tell the loss's effect from the norm's"
        )
    for used, paper in stand_ins(runs):
        notes.append(
            f"the rows labelled '{used} (standing in for {paper})' trained {used} in the place of the "
            f"paper's {paper}, on the small CNN (cnn_small) for a few rounds of E = 1 where the paper trains "
            "ResNet-18 for 4,000 rounds of E = 3 (the scaled line above), chosen so that FedAvg gets within "
            "reach of the same model's centralised accuracy (docs/papers/tce.md); beside the paper's "
            f"{paper} cells they are not comparable, only the comparisons between methods are"
        )
    if subset and any(r.settings["dataset"] == "femnist" for r in runs.values()):
        notes.append(
            f"the FEMNIST rows trained {FEMNIST_SUBSET} (LEAF's 5 % non-IID sample, 41,432 + 4,755 "
            "samples; its first 100 writers as the clients), not the full FEMNIST of the paper "
            '(docs/papers/tce.md, "FEMNIST\'s stand-in")'
        )
    return notes


def within(means: dict, points: float) -> tuple[float | None, float | None, list]:
    """(best mean, its lr, lrs within `points` percentage points of it, best first)."""
    finite = {lr: m for lr, m in means.items() if m is not None}
    if not finite:
        return None, None, []
    best_lr = max(finite, key=finite.get)
    best = finite[best_lr]
    return best, best_lr, sorted((lr for lr, m in finite.items() if m >= best - points / 100), reverse=True)


def table2(ours: dict, published: dict, out_dir: Path, runs: dict | None = None, subset: bool = True) -> None:
    rows = []
    for dataset in DATASETS:
        label = trained_label(runs or {}, dataset, subset)
        for method in TABLE_METHODS:
            by_lr = ours.get((dataset, method), {})
            means = {lr: (mean_sd(v)[0] if all(has_value(x) for x in v) else None) for lr, v in by_lr.items()}
            best, best_lr, _ = within(means, 0)
            lists = [", ".join(f"{lr:g}" for lr in within(means, p)[2]) or "—" for p in (2, 3, 5)]
            printed = published["table2"][dataset][method]
            rows.append(
                [
                    label,
                    LABELS[method],
                    f"{best:.3f} ({best_lr:g})" if best is not None else NOT_RUN,
                    *lists,
                    f"{printed['best']} ({printed['best_lr'] or 'lr not printed'})",
                    *(", ".join(printed[f"within_{p}"]) for p in (2, 3, 5)),
                    str(len(by_lr)),
                ]
            )
    header = [
        "dataset trained (the paper's)",
        "method",
        "ours best (lr)",
        "ours within 2",
        "ours within 3",
        "ours within 5",
        "published best (lr)",
        "published within 2",
        "published within 3",
        "published within 5",
        "lrs run",
    ]
    notes = [
        "within x = the lrs whose mean accuracy is at least the best's minus x percentage points (the best "
        "included); ours over the lrs this profile ran (last column), each an NC-free mean over its seeds",
        "these lists read means only; the claim (claims.md, tce_more_lrs_near_best) reads the last model (LM): "
        "its counts (each lr in when its seeds + x points are separated above the best lr's by the rule, out when "
        "separated below, else open; at "
        + ", ".join(f"{p} points" for p in COUNT_TOLERANCES)
        + ", where the paper's CIFAR-10 lists show TCE (GN) "
        f"ahead) are decided only with at least {MIN_LRS_FOR_COUNTS} lrs that both methods ran "
        "(docs/claims-spec.md A4); with fewer, the per-seed shortfall from the best lr decides",
        "published: the paper's Table 2 as printed (its own inconsistencies with Table 1 are listed in published.yaml)",
    ]
    write_table(out_dir, "table2", "TCE appendix Table 2: the best lr and the lrs near it", header, rows, notes)


# ---------------------------------------------------------------- figures


def figure2(runs: dict, out_dir: Path) -> None:
    """The main runs' validation curves, one figure per dataset of the paper's (its file named by the paper's
    dataset, its title by what trained)."""
    for dataset in ("cifar10", "cifar100"):
        series = [(LABELS[m], r) for m in LABELS if (r := find(runs, dataset, m, main_only=True)) is not None]
        if series:
            top = max((a for _, run in series for r in run.results for a in r.accuracy if has_value(a)), default=1.0)
            plot_curves(
                out_dir / f"figure2_{dataset}.png",
                f"TCE Figure 2: {trained_label(runs, dataset)}, α = 0.1, C = 0.1\n"
                "(accuracy on the union of the clients' validation sets)",
                series,
                [],
                ylim=(0.0, min(1.0, math.ceil(top * 10 + 1) / 10)),
                ylabel="validation accuracy",
            )


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
        ax.errorbar(
            xs,
            [m for m, _, _ in stats],
            yerr=[sd or 0.0 for _, sd, _ in stats],
            marker="o",
            capsize=3,
            label=LABELS[method],
        )
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
    label = trained_label(runs, "cifar10")
    rows = []
    for axis, points in sweeps.items():
        for x in sorted({x for by_x in points.values() for x in by_x}):
            first, second = points.get("tce_gn", {}).get(x), points.get("fedavg_gn", {}).get(x)
            rows.append(
                [
                    axis,
                    f"{x:g}",
                    cell(accuracy_values(second)),
                    cell(accuracy_values(first)),
                    margin_cell(first, second),
                ]
            )
        if points:
            plot_sweep(
                out_dir / f"figure3{'a' if axis == 'alpha' else 'b'}.png",
                points,
                axis,
                f"TCE Figure 3{'a' if axis == 'alpha' else 'b'}: {label},\n"
                + ("C = 0.1" if axis == "alpha" else "α = 0.1"),
            )
    write_table(
        out_dir,
        "figure3",
        f"TCE Figure 3: heterogeneity (α) and participation (C), {label}",
        ["axis", "value", "FedAvg (GN)", "FedAvg + TCE (GN)", "TCE − FedAvg"],
        rows,
        [
            "each seed's mean test accuracy over its last 5 evaluated rounds, mean ± sd over seeds; the margin pairs the two runs' seeds by "
            "seed number (the seeds both have)",
            "the paper: the margin is largest at α = 0.01, the two are very close from α = 0.5, and the gap "
            "is largest when few clients take part (no values printed)",
        ],
    )
    return sweeps


def margins(first: SeededRun | None, second: SeededRun | None, measure: str = T5) -> PerSeed:
    """Per seed both runs have (paired by seed number): first − second under `measure` (fractions); None where
    either is NC. The margins carry their seeds, so that a margin at one α is compared with one at another
    seed by seed."""
    a = values_of(first, measure).by_seed() if first is not None else {}
    b = values_of(second, measure).by_seed() if second is not None else {}
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
    fig.suptitle("TCE Figure 4: the class mix of ten random clients (the paper's CIFAR-10 partitions, 100 clients)")
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
            path = folder / PROBES_FILE if folder else None
            if path and path.is_file() and round_ in (probed := read_probes(path)):
                records[method] = probed[round_]
        if len(records) < 2:
            continue
        fig, axes = pyplot().subplots(2, 3, figsize=(17, 10))
        for row, method in enumerate(("fedavg_gn", "tce_gn")):
            draw_forgetting_row(fig, axes[row], records[method], f"{'CE' if method == 'fedavg_gn' else 'TCE'}: ")
        fig.suptitle(
            f"TCE {name.replace('figure', 'Figure ')}: local client forgetting after round {round_} of "
            f"{pair['fedavg_gn'].settings['rounds']} ({trained_label(runs, 'cifar10')}, GN, "
            f"seed {pair['fedavg_gn'].seeds[0]})"
        )
        fig.tight_layout()
        save_figure(fig, out_dir / f"{name}_round{round_}.png", dpi=80)
    return figures


def forgetting_values(run: SeededRun | None, round_: int) -> PerSeed:
    """Per seed: the cohort's mean F_k after `round_` (the summary's mean of the probe's F, the one in
    forgetting/rounds.json; None: no probe that round). Seed s probes the same clients under CE and TCE
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
    write_table(
        out_dir,
        "forgetting",
        f"TCE Figures 1, 5-7: mean local client forgetting F_k, {trained_label(runs, 'cifar10')}",
        ["figure", "round", *LABELS.values()],
        rows,
        [
            "F_k = mean over the other probed clients' local models i of Acc_k(w_t^i) − Acc_k(w_{t−1}) on "
            "client k's validation data, averaged over the 10 probed clients of the round; mean ± sd over "
            "seeds; higher (less negative) = less forgetting",
            "heatmaps: figure<N>_round<t>.png (CE above, TCE below)",
        ],
    )


# ---------------------------------------------------------------- claims
#
# Every claim is decided over the readings docs/claims-spec.md §4 declares for it (amendments A2-A4, A6, A7 and
# A10 at its top), the paper's own reading first (★): a reading of several comparisons corrects them by Holm
# before combining them (readings.reading), and the claim is held or failed only when every measured reading
# says so (common.claim_of_readings). Claims compare accuracies in percentage points (the tables print
# fractions), so that an effect and a power line read as the paper's tolerances do ("within 2 points"); F_k is
# compared as it is printed.

ACCURACY_UNIT = "points"
FORGETTING_UNIT = "in F_k"
TABLE2_TOLERANCES = (2, 3, 5)  # Table 2's columns: lrs within 2, 3 and 5 points of the best
COUNT_TOLERANCES = (3, 5)  # claim 34's counts (§4): where the paper's CIFAR-10 Table 2 lists more lrs for TCE
MIN_LRS_FOR_COUNTS = 5  # A4: below this many lrs both methods ran, a count of lrs near the best cannot separate them
ACCURACY_READINGS = (("R1 LM", LM), ("R2 T5", T5), ("R3 VAL", VAL))  # claims 23-28 and N5 (§4, A2)
BEST_LR_READING = "R4 each at its best lr, LM"  # claims 23-24 and 26-27 (A2)
MEMBERSHIP_WORDS = {HELD: "in", FAILED: "out", INCONCLUSIVE: "open"}

# The paper's own words the ledger cites (line numbers of its text, 002_717454cd1d7d3160.txt).
ANY_BUDGET = (
    "'In general we conclude that for both CIFAR-10 and CIFAR-100, TCE substantially improves performance "
    "for any training budget.' (§3.2, L78); 'We observe that TCE consistently gives the best performance.' "
    "(Figure 2's caption, L49)"
)
FEMNIST_GAIN = (
    "'We see a similar performance increase when using the FEMNIST dataset (Table 1) further "
    "supporting our claims.' (§3.2, L78)"
)
BN_PREMISE = (
    "'FedAvg+TCE is robust to the normalization layer unlike vanilla FL methods which typically do poorly "
    "when using BN' (§3.2, L78); Table 1's caption: 'results of FedAvg with BN are not included since this "
    "setting is known to yield poor performance [17]' (L184)"
)
BN_MITIGATES = (
    "'indicating TCE helps to mitigate performance degradation typically observed when using BN in "
    "heterogeneous FL [17]' (§3.2, L80)"
)
FORGETTING_WORDS = (
    "'We observe forgetting is very high when using standard CE but TCE is able to control local "
    "client forgetting' (§3.1, L74)"
)
OTHER_ROUNDS = "'the observation persists for other rounds as shown in the Appendix Sec A.3' (§3.1, L74)"
ROUND_ONE = "'there is not as much accuracy to destroy' (Appendix A.3, L204)"
NORMS_WORDS = (
    "'we observe comparable performance using either BN or GN' (§3.2, L80); 'TCE combined with BN based "
    "models is competitive with group norm' (Table 1's caption, L184)"
)
EVERY_LR_WORDS = (
    "'In general, we observe that across all client learning rates TCE provides performance improvement "
    "using either normalization setting.' (§3.2, L80)"
)
NEAR_BEST_WORDS = (
    "'it's performance deviates less from the case of it's best performing hyperparameters as various "
    "settings are changed' (§3.2, L80); 'this accuracy is less sensitive to hyperparameters' (Table 2's "
    "caption, L200)"
)
MARGIN_ALPHA_WORDS = "'with the biggest margin of improvement over vanilla FedAvg occurring when' α = 0.01 (L86)"
EQUAL_IID_WORDS = (
    "'the gap between cross entropy with and without TCE shrinks until the data is iid and the two "
    "methods are equivalent' (L86)"
)
CLOSE_WORDS = (
    "'This is also the point at which the performance of FedAvg and FedAvg+TCE become very close' (L86), "
    "the point being α = 0.5, where 'most of the clients possess all of the classes, albeit in very skewed "
    "proportions' (L86)"
)
MARGIN_C_WORDS = (
    "'we observe the largest performance gap between FedAvg+TCE and FedAvg when the number of "
    "participating clients is low' (L88)"
)
NARROWS_WORDS = (
    "'As the fraction of clients selected at each round increases, we observe the performance gap between "
    "the two methods narrow' (L88)"
)

# Why a claim is not run where the specification says so (docs/claims-spec.md's amendments).
CIFAR100_NOT_RUN = (
    "not run in the default profile (docs/claims-spec.md A3; docs/papers/tce.md, CIFAR-100's stand-in): no "
    "stand-in within the profile's budget is in the paper's regime: on the mirror's CIFAR-100, cnn_small's "
    "FedAvg (GN) reached 30-51 % of the same model's centralised accuracy (0.08 to 0.14 against 0.27, seed "
    "0; the bar, written first: 80 %); the GN pair is in gpu_day (the paper's ResNet-18, 200 rounds), all "
    "four in the paper profile"
)
GAP_NARROWS_NOT_RUN = (
    "not run in the default profile (docs/claims-spec.md A7): it needs a third C, and a C = 0.2 "
    "pair (tce_c0p2_{fedavg_gn,tce_gn}) is about 15 minutes of training; the paper profile runs it"
)
SAMPLE_BEST_LR = (
    "declared on each lr's own seeds 0-7 (docs/claims-spec.md A2): the confirmatory sample trains lr "
    "0.1 alone, so it cannot give this reading; the runs' own seeds give it, in the verdict before the "
    "sample"
)
COUNTS_NOT_DECIDABLE = (
    "not decidable with {n} lrs that both methods ran (docs/claims-spec.md A4: below "
    f"{MIN_LRS_FOR_COUNTS}, counts of 1-{{n}} cannot separate the methods; a 1-vs-1 tie is no "
    "failure); R3 decides"
)


def in_points(values) -> PerSeed:
    """Accuracies (fractions) as percentage points, keeping the seeds of a PerSeed."""
    return (values if isinstance(values, PerSeed) else PerSeed(values)).map(lambda v: 100.0 * v)


def published_best_value(published: dict, dataset: str, method: str) -> tuple[float, str, str]:
    """(value, lr, printed cell) of a column's best in the published Table 1 (NC cells left out)."""
    lrs, cells = published["table1"]["lrs"], published["table1"][dataset][method]
    return max((float(c.split()[0]), lr, c) for lr, c in zip(lrs, cells) if c != NC)


def published_best(published: dict, dataset: str, method: str) -> str:
    """ "0.859 ± 0.004 (lr 0.03)": a column's best cell of the published Table 1."""
    _, lr, text = published_best_value(published, dataset, method)
    return f"{text} (lr {lr})"


def claims(context: ReportContext, runs: dict, sweeps: dict) -> list[Claim]:
    out = []
    for dataset in ("cifar10", "cifar100"):
        out += [
            main_claim(context, runs, dataset, "tce_gn"),
            main_claim(context, runs, dataset, "tce_bn"),
            bn_claim(context, runs, dataset),
            premise_claim(context, runs, dataset),
        ]
    out += [femnist_claim(context, runs, method) for method in ("tce_gn", "tce_bn")]
    out.append(forgetting_claim(context, runs))
    out.append(norms_claim(context, runs))
    out.append(every_lr_claim(context, runs))
    out.append(near_best_claim(lm_grid(runs), context.published, setting_cell(context, near_best_runs(runs))))
    out.append(margin_alpha_claim(context, sweeps["alpha"]))
    out.append(equal_at_claim(context, sweeps["alpha"], 100.0))
    out.append(close_at_claim(context, sweeps["alpha"], 0.5))
    out.append(margin_c_claim(context, sweeps["C"]))
    out.append(gap_narrows_claim(context, sweeps["C"]))
    return out


# ---------------------------------------------------------------- claims: how they are made


def paper_name(dataset: str) -> str:
    """The paper's dataset in a claim's text: '(the paper's)', the setting column saying what trained."""
    return f"{DATASET_NAMES.get(dataset, dataset)} (the paper's)"


def run_label(run: SeededRun) -> str:
    return f"{LABELS[method_of(run.settings)]} lr {float(run.settings['lr']):g}"


def accuracy_words(run: SeededRun) -> str:
    """What the tables' accuracy is: a mean over the last 5 evaluated rounds on the test set, and on which data."""
    dataset = run.settings["dataset"]
    where = (
        f", on {DATASET_NAMES.get(dataset, dataset)} standing in for "
        f"{DATASET_NAMES.get(run.paper_dataset, run.paper_dataset)}"
        if dataset != run.paper_dataset
        else ""
    )
    return (
        f"test accuracy, each seed's mean over its last 5 evaluated rounds of {run.settings.get('rounds', '?')}{where}"
    )


def setting_cell(context: ReportContext | None, runs) -> str:
    """What the claim's runs trained beside the paper's (ReportContext.setting, on the first run that has
    results); FEMNIST named as the mirror's 300-writer subset where its record does not already say so."""
    present = [r for r in runs if r is not None]
    if not present:
        return ""
    records = context.dataset_records if context is not None else None
    text = (context.setting(*(r.key for r in present)) if context is not None else "") or setting_of(
        present, records
    ).cell()
    if present[0].settings.get("dataset") == "femnist" and "300-writer" not in text and femnist_is_subset(records):
        text = text.replace("FEMNIST", f"FEMNIST ({FEMNIST_SUBSET})", 1)
    return text


def not_run(claim_id: str, text: str, published: str, why: str, declared) -> Claim:
    """A claim this profile cannot decide, with why and the readings declared for it (none measured)."""
    readings = [not_measured(name, why, primary=index == 0) for index, name in enumerate(declared)]
    return Claim(PAPER, claim_id, text, NOT_RUN, f"not run: {why}", published, readings=readings)


def missing_words(context: ReportContext, what: str, dataset: str = "cifar10") -> str:
    if dataset == "cifar100" and context.profile == "default":
        return CIFAR100_NOT_RUN
    return f"{what}: no results in this profile (not in it, or not trained yet)"


def decided(
    context: ReportContext | None,
    claim_id: str,
    text: str,
    published: str,
    readings: list[Reading],
    runs,
    unit: str = ACCURACY_UNIT,
    note: str = "",
    one_failure_fails: bool = True,
) -> Claim:
    """The claim over its declared readings, with the setting its runs trained and a note for every reading."""
    made = claim_of_readings(
        PAPER, claim_id, text, published, readings, setting_cell(context, runs), unit, one_failure_fails
    )
    if note:
        made.evidence += f" — {note}"
    return made


def above_reading(
    name: str,
    first: SeededRun,
    second: SeededRun,
    measure: str,
    primary: bool = False,
    margin: float = 0.0,
    labels: tuple[str, str] | None = None,
) -> Reading:
    """'first above second' (first + `margin` points, where a margin is given) on `measure`: one comparison,
    paired by seed where both ran the same seeds."""
    a, b = values_of(first, measure), values_of(second, measure)
    comparison = compare(shift(in_points(a), margin), in_points(b))
    la, lb = labels or (run_label(first), run_label(second))
    plus = f" + {margin:g} points" if margin else ""
    return reading(
        name,
        [comparison],
        f"{la} {cell(a)}{plus} vs {lb} {cell(b)}, on {MEASURE_WORDS[measure]}; "
        f"{comparison.reason}{new_look(measure, first, second)}",
        primary,
    )


def within_reading(
    name: str, first, second, points: float, labels: tuple[str, str], measure: str = LM, primary: bool = False, runs=()
) -> Reading:
    """'first and second are within `points` of each other': each side + `points` separated above the other
    (two comparisons, Holm over the 2, both must hold; paired where the seeds are shared)."""
    a, b = in_points(first), in_points(second)
    up, down = compare(shift(a, points), b), compare(shift(b, points), a)
    adjusted = with_holm([up, down])
    evidence = (
        f"{labels[0]} {cell(first)}, {labels[1]} {cell(second)}, on {MEASURE_WORDS[measure]}; "
        f"{labels[0]} + {points:g} points above {labels[1]}: {adjusted[0].status} ({adjusted[0].reason}); "
        f"{labels[1]} + {points:g} points above {labels[0]}: {adjusted[1].status} ({adjusted[1].reason})"
        f"{new_look(measure, *runs)}"
    )
    return reading(name, [up, down], evidence, primary)


def labelled_reading(
    name: str,
    items: list[tuple[str, Comparison]],
    prefix: str = "",
    primary: bool = False,
    status: str | None = None,
    suffix: str = "",
) -> Reading:
    """A reading of labelled comparisons, Holm within it where there are several; its evidence each one's label
    and verdict after the correction."""
    adjusted = with_holm([c for _, c in items])
    parts = [f"{label}: {c.status} ({c.reason})" for (label, _), c in zip(items, adjusted)]
    return reading(
        name, [c for _, c in items], "; ".join(([prefix] if prefix else []) + parts) + suffix, primary, status
    )


# ---------------------------------------------------------------- claims: the lr a method is read at


def lr_runs(runs: dict, dataset: str, method: str) -> dict[float, SeededRun]:
    """lr -> the method's run at the base point (α = 0.1 or FEMNIST's writers, C = 0.1), the main run first."""
    lrs = {point_of(r)[2] for r in runs.values() if point_of(r)[:2] == (dataset, method)}
    found = {lr: find(runs, dataset, method, lr) for lr in sorted(lrs, reverse=True)}
    return {lr: run for lr, run in found.items() if run is not None}


def best_in(pool: dict[float, SeededRun], measure: str) -> tuple[float | None, dict]:
    """(the lr of the highest mean over its seeds under `measure`, each lr's mean); an lr with an NC seed (or a
    seed without a value) is no candidate (§4, the lr rule)."""
    means = {}
    for lr, run in pool.items():
        values = values_of(run, measure)
        means[lr] = mean_sd(values)[0] if values and all(has_value(v) for v in values) else None
    candidates = {lr: m for lr, m in means.items() if m is not None}
    return (max(candidates, key=candidates.get) if candidates else None), means


def means_words(means: dict) -> str:
    return ", ".join(f"{lr:g}: {m:.3f}" if m is not None else f"{lr:g}: {NC}" for lr, m in means.items())


def best_lr_reading(
    name: str, runs: dict, dataset: str, method: str, measure: str, primary: bool = False, against: str = "fedavg_gn"
) -> Reading:
    """Each method at its best lr by the mean of `measure`, compared on `measure` (paired where the two runs
    share their seeds)."""
    pools = {m: lr_runs(runs, dataset, m) for m in (method, against)}
    if any(is_sample(r) for pool in pools.values() for r in pool.values()):
        return not_measured(name, SAMPLE_BEST_LR, primary)
    picks = {m: best_in(pool, measure) for m, pool in pools.items()}
    chosen = "; ".join(f"{LABELS[m]} {lr:g}" if lr is not None else f"{LABELS[m]} none" for m, (lr, _) in picks.items())
    means = "; ".join(f"{LABELS[m]} {means_words(ms)}" for m, (_, ms) in picks.items())
    prefix = f"best lr by mean {measure} (an lr with an NC seed is no candidate): {chosen} (means {means})"
    if any(lr is None for lr, _ in picks.values()):
        return reading(name, [], f"{prefix}; a method has no lr without an NC seed: no best to read", primary)
    first, second = pools[method][picks[method][0]], pools[against][picks[against][0]]
    a, b = values_of(first, measure), values_of(second, measure)
    comparison = compare(in_points(a), in_points(b))
    return reading(
        name,
        [comparison],
        f"{prefix}; {run_label(first)} {cell(a)} vs {run_label(second)} {cell(b)}, on "
        f"{MEASURE_WORDS[measure]}; {comparison.reason}",
        primary,
    )


# ---------------------------------------------------------------- claims 23-28, N5: one method above another


def accuracy_readings(first: SeededRun, second: SeededRun) -> list[Reading]:
    """R1★ LM, R2 T5, R3 VAL: first above second on each."""
    return [
        above_reading(name, first, second, measure, primary=index == 0)
        for index, (name, measure) in enumerate(ACCURACY_READINGS)
    ]


def main_claim(context: ReportContext, runs: dict, dataset: str, method: str) -> Claim:
    """Claims 23, 24 (CIFAR-10) and 26, 27 (CIFAR-100): TCE (GN or BN) above FedAvg (GN), on the main runs
    (lr 0.1 in the default profile; a confirmatory sample in their place where one decides it), and each method
    at its best lr (R4, on the runs' own seeds)."""
    claim_id = f"{method}_beats_fedavg_{dataset}"
    text = (
        f"{LABELS[method]} is more accurate than FedAvg (GN) on {paper_name(dataset)}, α = 0.1, for any training "
        "budget (Table 1, Figure 2)"
    )
    if method == "tce_bn":  # loss and norm both differ: the BN-vs-BN claim tells the loss's part
        text += "; loss and norm both differ, see TCE (BN) vs FedAvg (BN) and the premise"
    paper = (
        f"{ANY_BUDGET}; Table 1 best: {published_best(context.published, dataset, method)} vs FedAvg "
        f"{published_best(context.published, dataset, 'fedavg_gn')}"
    )
    declared = [name for name, _ in ACCURACY_READINGS] + [BEST_LR_READING]
    first, second = find(runs, dataset, method, main_only=True), find(runs, dataset, "fedavg_gn", main_only=True)
    if first is None or second is None:
        return not_run(claim_id, text, paper, missing_words(context, f"the main {dataset} runs", dataset), declared)
    readings = accuracy_readings(first, second) + [best_lr_reading(BEST_LR_READING, runs, dataset, method, LM)]
    return decided(context, claim_id, text, paper, readings, [first, second])


def bn_claim(context: ReportContext, runs: dict, dataset: str) -> Claim:
    """Claims 25 and 28: TCE mitigates BN's degradation, TCE (BN) above FedAvg (BN) (not the premise: that is
    premise_claim). Beside TCE (BN) vs FedAvg (GN) it tells the loss's effect from the norm's."""
    claim_id = f"tce_bn_beats_fedavg_bn_{dataset}"
    text = (
        f"TCE mitigates BN's degradation: FedAvg + TCE (BN) is more accurate than FedAvg (BN) on "
        f"{paper_name(dataset)}, α = 0.1"
    )
    paper = (
        f"{BN_MITIGATES}; no FedAvg (BN) numbers ({BN_PREMISE}); TCE (BN) Table 1 best: "
        f"{published_best(context.published, dataset, 'tce_bn')}"
    )
    declared = [name for name, _ in ACCURACY_READINGS]
    first, second = find(runs, dataset, "tce_bn", main_only=True), find(runs, dataset, "fedavg_bn", main_only=True)
    if first is None or second is None:
        return not_run(claim_id, text, paper, missing_words(context, f"the main {dataset} BN runs", dataset), declared)
    return decided(context, claim_id, text, paper, accuracy_readings(first, second), [first, second])


def premise_claim(context: ReportContext, runs: dict, dataset: str) -> Claim:
    """N5 (and its CIFAR-100 twin): the paper's premise, FedAvg (BN) below FedAvg (GN)."""
    claim_id = f"fedavg_bn_below_fedavg_gn_{dataset}"
    text = (
        f"The paper's premise: vanilla FedAvg does poorly with BN, FedAvg (GN) more accurate than FedAvg (BN) on "
        f"{paper_name(dataset)}, α = 0.1"
    )
    paper = (
        f"{BN_PREMISE}; 'have been noted to suffer from significant performance degradation when using BN [17]' "
        "(L148); no FedAvg (BN) numbers printed"
    )
    declared = [name for name, _ in ACCURACY_READINGS]
    first, second = find(runs, dataset, "fedavg_gn", main_only=True), find(runs, dataset, "fedavg_bn", main_only=True)
    if first is None or second is None:
        return not_run(
            claim_id, text, paper, missing_words(context, f"the main {dataset} FedAvg runs", dataset), declared
        )
    return decided(context, claim_id, text, paper, accuracy_readings(first, second), [first, second])


def femnist_published(published: dict, method: str) -> str:
    """Table 1's bests; where the TCE column tops out below FedAvg's, the paper's text claims the opposite."""
    paper = (
        f"{FEMNIST_GAIN}; Table 1 best: {published_best(published, 'femnist', method)} vs FedAvg "
        f"{published_best(published, 'femnist', 'fedavg_gn')}"
    )
    tce_best, fedavg_best = (published_best_value(published, "femnist", m)[0] for m in (method, "fedavg_gn"))
    if tce_best < fedavg_best:
        paper += (
            f"; the paper contradicts itself: its Table 1 has {LABELS[method]} below FedAvg (GN) while its "
            "text says the gain carries over to FEMNIST"
        )
    return paper


FEMNIST_READINGS = ("R1 each at its best lr by LM, LM", "R2 each at its best lr by T5, T5", "R3 both at lr 0.1, T5")


def femnist_claim(context: ReportContext, runs: dict, method: str) -> Claim:
    """Claims 29, 30 (A2): FEMNIST has no main runs; each method at the lr of its best mean in our grid."""
    claim_id = f"{method}_beats_fedavg_femnist"
    ours = f"; ours: {FEMNIST_SUBSET}" if femnist_is_subset(context.dataset_records) else ""
    text = (
        f"{LABELS[method]} is more accurate than FedAvg (GN) on FEMNIST (the paper's{ours}), each at its best lr "
        "(Table 1)"
    )
    paper = femnist_published(context.published, method)
    pools = {m: lr_runs(runs, "femnist", m) for m in (method, "fedavg_gn")}
    if not all(pools.values()):
        return not_run(
            claim_id, text, paper, missing_words(context, f"the FEMNIST ({FEMNIST_SUBSET}) runs"), FEMNIST_READINGS
        )
    readings = [
        best_lr_reading(FEMNIST_READINGS[0], runs, "femnist", method, LM, primary=True),
        best_lr_reading(FEMNIST_READINGS[1], runs, "femnist", method, T5),
    ]
    first, second = find(runs, "femnist", method, 0.1), find(runs, "femnist", "fedavg_gn", 0.1)
    readings.append(
        above_reading(FEMNIST_READINGS[2], first, second, T5)
        if first is not None and second is not None
        else not_measured(FEMNIST_READINGS[2], "lr 0.1 not run for both methods")
    )
    keys = [r for pool in pools.values() for r in pool.values()]
    return decided(context, claim_id, text, paper, readings, keys)


# ---------------------------------------------------------------- claim 32: BN near GN

NORMS_READINGS = (
    "R1 BN ≥ GN − 2 points, LM",
    "R2 within 2 points, LM",
    "R3 BN ≥ GN − 2 points, T5",
    "R4 within 2 points, T5",
)


def norms_claim(context: ReportContext, runs: dict) -> Claim:
    """Claim 32: TCE (BN) near TCE (GN), each at its best lr by the reading's mean (§4's lr rule, claim 32's runs:
    'each at its best lr'; an lr with an NC seed is no candidate)."""
    text = (
        f"FedAvg + TCE with BN is competitive with (R1, R3: at least GN − 2 points) and comparable to (R2, R4: "
        f"within 2 points of) TCE with GN on {paper_name('cifar10')}, α = 0.1, each at its best lr"
    )
    published = (
        f"{NORMS_WORDS}; Table 1 best: {published_best(context.published, 'cifar10', 'tce_bn')} (BN) vs "
        f"{published_best(context.published, 'cifar10', 'tce_gn')} (GN); 2 points = Table 2's tightest "
        "tolerance ('fall within 2%, 3% and 5% of the best accuracy', L152)"
    )
    pools = {m: lr_runs(runs, "cifar10", m) for m in ("tce_bn", "tce_gn")}
    if not all(pools.values()):
        return not_run(
            "tce_bn_near_gn", text, published, missing_words(context, "the CIFAR-10 TCE runs"), NORMS_READINGS
        )
    readings = []
    for index, measure in enumerate((LM, T5)):
        picks = {m: best_in(pool, measure) for m, pool in pools.items()}
        chosen = "; ".join(
            f"{LABELS[m]} {lr:g}" if lr is not None else f"{LABELS[m]} none" for m, (lr, _) in picks.items()
        )
        names = NORMS_READINGS[2 * index : 2 * index + 2]
        if any(lr is None for lr, _ in picks.values()):
            why = f"best lr by mean {measure}: {chosen}; a method has no lr without an NC seed: no best to read"
            readings += [reading(names[0], [], why, primary=index == 0), reading(names[1], [], why)]
            continue
        bn, gn = (pools[m][picks[m][0]] for m in ("tce_bn", "tce_gn"))
        lead = f"best lr by mean {measure} (an lr with an NC seed is no candidate): {chosen}; "
        above = above_reading(names[0], bn, gn, measure, primary=index == 0, margin=2.0)
        near = within_reading(
            names[1],
            values_of(bn, measure),
            values_of(gn, measure),
            2.0,
            (run_label(bn), run_label(gn)),
            measure,
            runs=(bn, gn),
        )
        readings += [dataclasses.replace(r, evidence=lead + r.evidence) for r in (above, near)]
    keys = [find(runs, "cifar10", m, main_only=True) or next(iter(pools[m].values())) for m in ("tce_bn", "tce_gn")]
    return decided(context, "tce_bn_near_gn", text, published, readings, keys)


# ---------------------------------------------------------------- claim 33: every lr

EVERY_LR_READINGS = (
    "R1 every lr and norm, LM",
    "R2 in general: per norm more lrs held than failed, LM",
    "R3 every lr and norm, T5",
    "R4 in general: per norm more lrs held than failed, T5",
)


def every_lr_items(runs: dict, measure: str) -> list[tuple[str, Comparison, str]]:
    """(label, TCE above FedAvg (GN) at the same lr, norm) for every lr both ran, on CIFAR-10's base point."""
    items = []
    for method in ("tce_gn", "tce_bn"):
        for lr, run in lr_runs(runs, "cifar10", method).items():
            other = find(runs, "cifar10", "fedavg_gn", lr)
            if other is not None:
                comparison = compare(in_points(values_of(run, measure)), in_points(values_of(other, measure)))
                items.append((f"{LABELS[method]} lr {lr:g}", comparison, method))
    return sorted(items, key=lambda item: item[0])


def in_general_status(statuses: list[str]) -> str:
    """'more lrs held than failed' on the lrs' verdicts, an open one either way: held when it holds however the
    open ones fall, failed when it cannot hold however they fall."""
    held, failed, open_ = (statuses.count(s) for s in (HELD, FAILED, INCONCLUSIVE))
    if held > failed + open_:
        return HELD
    if held + open_ <= failed:
        return FAILED
    return INCONCLUSIVE


def in_general_reading(name: str, items: list[tuple[str, Comparison, str]], primary: bool = False) -> Reading:
    """Per norm, more lrs held than failed (each lr's verdict after Holm over the reading's comparisons); held
    when so for both norms, failed when not for one."""
    adjusted = with_holm([c for _, c, _ in items])
    by_norm: dict[str, list[str]] = {}
    for (_, _, norm), c in zip(items, adjusted):
        by_norm.setdefault(norm, []).append(c.status)
    verdicts = {norm: in_general_status(statuses) for norm, statuses in by_norm.items()}
    words = "; ".join(
        f"{LABELS[norm]}: {s.count(HELD)} held, {s.count(FAILED)} failed, {s.count(INCONCLUSIVE)} open "
        f"of {len(s)} lrs, {verdicts[norm]}"
        for norm, s in by_norm.items()
    )
    lrs = ", ".join(
        f"{label} {c.status}" + (f" (p = {c.p:.3g})" if c.p is not None else "")
        for (label, _, _), c in zip(items, adjusted)
    )
    holm = f", after Holm over {len(adjusted)}" if len(adjusted) > 1 else ""
    return reading(
        name, [c for _, c, _ in items], f"{words} (each lr's verdict{holm}: {lrs})", primary, combine(verdicts.values())
    )


def every_lr_claim(context: ReportContext, runs: dict) -> Claim:
    text = (
        f"Across all client learning rates TCE improves on FedAvg (GN), with either norm, on "
        f"{paper_name('cifar10')}, α = 0.1 (Table 1)"
    )
    published = (
        f"{EVERY_LR_WORDS}; Table 1 itself has an exception: lr 0.5, TCE (GN) 0.751 < FedAvg 0.777 (L159-L160), 1 in 16"
    )
    by_measure = {measure: every_lr_items(runs, measure) for measure in (LM, T5)}
    if not by_measure[LM]:
        return not_run(
            "tce_every_lr", text, published, missing_words(context, "an lr with both methods"), EVERY_LR_READINGS
        )
    readings = []
    for index, measure in enumerate((LM, T5)):
        items = by_measure[measure]
        readings.append(
            labelled_reading(
                EVERY_LR_READINGS[2 * index],
                [(label, c) for label, c, _ in items],
                f"against FedAvg (GN) at the same lr, on {MEASURE_WORDS[measure]}",
                primary=index == 0,
            )
        )
        readings.append(in_general_reading(EVERY_LR_READINGS[2 * index + 1], items))
    lrs = sorted({float(label.rsplit(" ", 1)[1]) for label, _, _ in by_measure[LM]}, reverse=True)
    keys = [find(runs, "cifar10", "tce_gn", main_only=True), find(runs, "cifar10", "fedavg_gn", main_only=True)]
    return decided(
        context,
        "tce_every_lr",
        text,
        published,
        readings,
        keys,
        note=f"the stand-in runs {len(lrs)} of the paper's 9 lrs ({', '.join(f'{lr:g}' for lr in lrs)})",
    )


# ---------------------------------------------------------------- claim 34: lrs near the best (Table 2)
#
# "lr l is within x points of its method's best" is a statement about two lrs' accuracies, so it is
# decided by the rule like any other: l's per-seed accuracy + x points against the best lr's (paired by
# seed: one seed gives every lr the same initial model and client sampling). Held: l is in; failed: l is
# out (more than x below, separated); inconclusive: l is open. The best lr is the one with the highest
# mean, as the paper picks it from means of three runs, and is in by definition. A method's count is
# then a range: at least 1 + the lrs in, at most that + the open ones. "TCE has more" holds when TCE's
# fewest exceed FedAvg's most, fails when TCE's most do not exceed FedAvg's fewest (no outcome of the
# open lrs gives TCE more), and is open otherwise. Only lrs both methods ran are counted; the memberships
# are corrected by Holm over the reading's comparisons (A10). With fewer than MIN_LRS_FOR_COUNTS lrs the
# counts are not decidable (A4) and R3, the per-seed shortfall from the best lr, decides.

NEAR_BEST_READINGS = (
    "R1 counts within 3 and 5 points of the best, LM",
    "R2 counts within 3 % and 5 % of the best (relative), LM",
    "R3 per-seed mean shortfall from the best lr, smaller for TCE, LM",
)


def table2_tolerances_where_tce_leads(published: dict, dataset: str = "cifar10") -> list[int]:
    """The tolerances at which the paper's Table 2 lists more lrs for TCE (GN) than for FedAvg: what it shows
    (CIFAR-10: a tie at 2 points, TCE ahead at 3 and 5)."""
    lists = published["table2"][dataset]
    return [
        p for p in TABLE2_TOLERANCES if len(lists["tce_gn"][f"within_{p}"]) > len(lists["fedavg_gn"][f"within_{p}"])
    ]


def best_lr(by_lr: dict) -> float | None:
    """The lr with the highest mean over its seeds, among the lrs with no NC seed."""
    means = {lr: mean_sd(v)[0] for lr, v in by_lr.items() if v and all(has_value(x) for x in v)}
    return max(means, key=means.get) if means else None


def threshold(best_values, points: float, relative: bool):
    """The best lr's per-seed values less `points`: points of accuracy, or % of the best (relative)."""
    return best_values.map(lambda v: v * (1 - points / 100)) if relative else shift(best_values, -points)


def membership(values, best_values, points: float, relative: bool = False) -> Comparison:
    """Is an lr within `points` of the best? held = in, failed = out, else open: compare(lr + points, best), or
    compare(lr, best·(1 − points/100)) relative."""
    if relative:
        return compare(values, threshold(best_values, points, True))
    return compare(shift(values, points), best_values)


def membership_as_decided(values, best_values, points: float, relative: bool = False) -> Comparison:
    """The same test asked in the direction the seeds point, so that held means decided (in or out) and an
    open one's effect is its distance from being decided: what the claim's test and power columns read."""
    verdict = membership(values, best_values, points, relative)
    if verdict.status == HELD or (verdict.status == INCONCLUSIVE and (verdict.effect or 0.0) >= 0):
        return verdict
    if relative:
        return compare(threshold(best_values, points, True), values)
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


def count_reading(
    name: str, by_lr: dict, best: dict, tolerances=COUNT_TOLERANCES, relative: bool = False, primary: bool = False
) -> Reading:
    """TCE (GN) has more lrs within each tolerance of its best than FedAvg (GN) (held when at every tolerance),
    each lr's membership decided by the rule and corrected by Holm over the reading's memberships."""
    keys = [(points, m, lr) for points in tolerances for m, lrs in by_lr.items() for lr in lrs if lr != best[m]]
    raw = [membership(by_lr[m][lr], by_lr[m][best[m]], points, relative) for points, m, lr in keys]
    adjusted = dict(zip(keys, with_holm(raw)))
    as_decided = [membership_as_decided(by_lr[m][lr], by_lr[m][best[m]], points, relative) for points, m, lr in keys]
    unit = "%" if relative else ""  # 'within 3' (points, as Table 2 heads its columns) or 'within 3%'
    statuses, parts = [], []
    for points in tolerances:
        members = {m: {lr: adjusted[(points, m, lr)] for lr in lrs if lr != best[m]} for m, lrs in by_lr.items()}
        counts = {m: count_range(tests) for m, tests in members.items()}
        status = more_lrs_status(counts["tce_gn"], counts["fedavg_gn"])
        statuses.append(status)
        parts.append(
            f"within {points}{unit}: TCE {range_words(counts['tce_gn'])} vs FedAvg "
            f"{range_words(counts['fedavg_gn'])} of {len(by_lr['tce_gn'])} lrs, {status} (TCE "
            f"{membership_words(members['tce_gn'])}; FedAvg {membership_words(members['fedavg_gn'])})"
        )
    holm = f", Holm over the {len(raw)} memberships" if len(raw) > 1 else ""
    evidence = (
        f"best (highest mean): TCE {best['tce_gn']:g}, FedAvg {best['fedavg_gn']:g}; an lr is in when its "
        f"seeds {'reach' if relative else '+ x points are separated above'} the best lr's"
        f"{' × (1 − x/100)' if relative else ''} by the rule, out when separated below, else open (counts: "
        f"fewest–most{holm}); " + "; ".join(parts)
    )
    return reading(name, as_decided, evidence, primary, combine(statuses))


def shortfall(by_lr: dict, best: float) -> PerSeed:
    """Per seed: the mean over the lrs of (the best lr's accuracy − the lr's), in points; a seed on which an lr
    has no value as its worst outcome has the worst shortfall, one with a value missing otherwise none."""
    seeds = sorted(set.intersection(*(set(v.seeds or ()) for v in by_lr.values())))
    values, worst = [], []
    for seed in seeds:
        at = {lr: v.by_seed()[seed] for lr, v in by_lr.items()}
        marked = any(v.worst[v.seeds.index(seed)] for v in by_lr.values())
        if all(has_value(x) for x in at.values()):
            values.append(sum(at[best] - x for x in at.values()) / len(at))
            worst.append(False)
        else:
            values.append(None)
            worst.append(marked)
    return PerSeed(values, seeds, worst, "lower")


def shortfall_reading(name: str, by_lr: dict, best: dict, primary: bool = False) -> Reading:
    short = {m: shortfall(lrs, best[m]) for m, lrs in by_lr.items()}
    comparison = compare(short["tce_gn"], short["fedavg_gn"], "lower")
    lrs = ", ".join(f"{lr:g}" for lr in by_lr["tce_gn"])
    cells = {m: accuracy_cell(v, 2, "without a value") for m, v in short.items()}
    return reading(
        name,
        [comparison],
        f"mean shortfall (points) from each method's best lr (TCE {best['tce_gn']:g}, "
        f"FedAvg {best['fedavg_gn']:g}) over the lrs {lrs}: TCE {cells['tce_gn']}, "
        f"FedAvg {cells['fedavg_gn']}; {comparison.reason}",
        primary,
    )


def lm_grid(runs: dict) -> dict:
    """(dataset, method) -> {lr: its per-seed LM}, for claim 34's methods on CIFAR-10's base point."""
    return {
        ("cifar10", m): {lr: values_of(run, LM) for lr, run in lr_runs(runs, "cifar10", m).items()}
        for m in ("tce_gn", "fedavg_gn")
    }


def near_best_runs(runs: dict) -> list:
    return [find(runs, "cifar10", m, main_only=True) for m in ("tce_gn", "fedavg_gn")]


def near_best_claim(grid: dict, published: dict, setting: str = "") -> Claim:
    """TCE (GN)'s accuracy deviates less from its best lr's than FedAvg (GN)'s (claim 34): more lrs within 3 and
    5 points of the best (R1★), or within 3 % and 5 % (R2), both decidable only with at least MIN_LRS_FOR_COUNTS
    lrs (A4); a smaller per-seed shortfall from the best (R3). `grid`: (dataset, method) -> {lr: per-seed LM}."""
    text = (
        f"TCE (GN)'s accuracy deviates less from its best lr's than FedAvg (GN)'s: more client lrs within "
        f"{' and within '.join(f'{p} points' for p in COUNT_TOLERANCES)} of its best, a smaller shortfall from it "
        f"({paper_name('cifar10')}, Table 2)"
    )
    lists = published["table2"]["cifar10"]
    paper = (
        f"{NEAR_BEST_WORDS}; Table 2, lrs listed TCE (GN) vs FedAvg: "
        + ", ".join(
            f"within {p}: {len(lists['tce_gn'][f'within_{p}'])} vs {len(lists['fedavg_gn'][f'within_{p}'])}"
            for p in TABLE2_TOLERANCES
        )
        + " (claimed where TCE lists more)"
    )
    methods = ("tce_gn", "fedavg_gn")
    lrs = sorted(set.intersection(*(set(grid.get(("cifar10", m), {})) for m in methods)), reverse=True)
    if len(lrs) < 2:
        return not_run(
            "tce_more_lrs_near_best",
            text,
            paper,
            "fewer than 2 lrs that both methods ran in this profile",
            NEAR_BEST_READINGS,
        )
    by_lr = {m: {lr: in_points(grid[("cifar10", m)][lr]) for lr in lrs} for m in methods}
    best = {m: best_lr(by_lr[m]) for m in methods}
    lead = f"lrs both ran: {', '.join(f'{lr:g}' for lr in lrs)}"
    if any(b is None for b in best.values()):
        why = f"{lead}; a method has no lr without an NC seed: no best to measure from"
        readings = [reading(name, [], why, primary=index == 0) for index, name in enumerate(NEAR_BEST_READINGS)]
    else:
        if len(lrs) < MIN_LRS_FOR_COUNTS:
            why = COUNTS_NOT_DECIDABLE.format(n=len(lrs))
            readings = [
                not_measured(NEAR_BEST_READINGS[0], why, primary=True),
                not_measured(NEAR_BEST_READINGS[1], why),
            ]
        else:
            readings = [
                count_reading(NEAR_BEST_READINGS[0], by_lr, best, primary=True),
                count_reading(NEAR_BEST_READINGS[1], by_lr, best, relative=True),
            ]
        readings.append(shortfall_reading(NEAR_BEST_READINGS[2], by_lr, best))
    made = claim_of_readings(
        PAPER, "tce_more_lrs_near_best", text, paper, readings, setting, ACCURACY_UNIT, one_failure_fails=False
    )
    made.evidence = f"{lead} — {made.evidence}"
    return made


# ---------------------------------------------------------------- claim 31: forgetting


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


FORGETTING_READINGS = ("R1 Figure 1's round", "R2 every probe after round 1")


def forgetting_claim(context: ReportContext, runs: dict) -> Claim:
    text = (
        "TCE reduces local client forgetting: F_k is higher (less negative) than with CE at Figure 1's round, and "
        f"the observation persists at the later rounds (GN, {paper_name('cifar10')}, α = 0.1; Figures 1, 6, 7)"
    )
    published = (
        f"Figures 1, 6, 7 (rounds 2,800, 2,000, 4,000): heatmaps, no numbers; {FORGETTING_WORDS}; "
        f"{OTHER_ROUNDS}; round 1 (Figure 5) left out: {ROUND_ONE}"
    )
    first, second = find(runs, "cifar10", "tce_gn", main_only=True), find(runs, "cifar10", "fedavg_gn", main_only=True)
    if first is None or second is None:
        return not_run(
            "tce_less_forgetting",
            text,
            published,
            missing_words(context, "the main CIFAR-10 GN runs"),
            FORGETTING_READINGS,
        )
    return forgetting_claim_of(first, second, text, published, setting_cell(context, [first, second]))


def forgetting_claim_of(tce_run: SeededRun, ce_run: SeededRun, text: str, published: str, setting: str = "") -> Claim:
    """F_k higher with TCE (paired by seed: the same cohort is probed under both losses): R1★ at Figure 1's round
    (70 % through, the paper's 2,800 of 4,000); R2 at every probe after round 1, Holm over them. Round 1 is
    reported beside, not part of the claim: the paper exempts it (L204)."""
    rounds = probed_rounds(tce_run, ce_run)
    figure1 = probe_figures(tce_run).get("figure1")
    later = [r for r in rounds if r > 1]
    if not rounds or figure1 not in rounds:
        return not_run(
            "tce_less_forgetting", text, published, "no probe round that both main runs have", FORGETTING_READINGS
        )
    sides = {r: (forgetting_values(tce_run, r), forgetting_values(ce_run, r)) for r in rounds}
    comparisons = {r: compare(*sides[r]) for r in rounds}

    def words(r: int) -> str:
        return f"round {r}: TCE {forgetting_cell(sides[r][0])}, CE {forgetting_cell(sides[r][1])}"

    readings = [
        reading(
            f"{FORGETTING_READINGS[0]} ({figure1})",
            [comparisons[figure1]],
            f"mean F_k of the probed cohort; {words(figure1)}; {comparisons[figure1].reason}",
            primary=True,
        )
    ]
    if later:
        readings.append(
            labelled_reading(
                f"{FORGETTING_READINGS[1]} ({', '.join(map(str, later))})", [(words(r), comparisons[r]) for r in later]
            )
        )
    else:
        readings.append(not_measured(FORGETTING_READINGS[1], "no probe after round 1"))
    text = f"{text}: rounds {rounds_words(tce_run, [figure1])} (R1), {rounds_words(tce_run, later)} (R2)"
    made = claim_of_readings(PAPER, "tce_less_forgetting", text, published, readings, setting, FORGETTING_UNIT)
    if 1 in rounds:
        c = comparisons[1]
        made.evidence += (
            f" — round 1, reported and not part of the claim (the paper exempts it: {ROUND_ONE}): "
            f"{words(1)}, {c.status} ({c.reason})"
        )
    return made


# ---------------------------------------------------------------- claims 35-37, N6, N7: the sweeps (Figure 3)


def margin_comparison(first, second) -> Comparison:
    """compare() on two margins (in points, paired by seed); a margin with an NC seed on either method has
    no meaning (a FedAvg that did not converge is no small margin): inconclusive, said so."""
    if not all(has_value(v) for v in list(first) + list(second)):
        why = "a seed NC on one of the methods: no margin"
        return Comparison(INCONCLUSIVE, why, len(first), len(second), undecidable=why)
    return compare(in_points(first), in_points(second))


def sweep_pair(points: dict, x: float) -> tuple[SeededRun | None, SeededRun | None]:
    """(TCE (GN), FedAvg (GN)) at one α or C of a sweep."""
    return points.get("tce_gn", {}).get(x), points.get("fedavg_gn", {}).get(x)


def has_pairs(points: dict, xs) -> bool:
    return all(None not in sweep_pair(points, x) for x in xs)


def sweep_runs(points: dict, xs) -> list:
    return [run for x in xs for run in sweep_pair(points, x)]


def margin_reading(
    name: str, points: dict, symbol: str, pairs: list[tuple[float, float]], measure: str, primary: bool = False
) -> Reading:
    """m_a > m_b for each (a, b) of `pairs`, m = TCE − FedAvg per seed on `measure`; Holm over the pairs."""
    xs = sorted({x for pair in pairs for x in pair})
    margin = {x: margins(*sweep_pair(points, x), measure) for x in xs}
    items = [
        (f"m at {symbol} = {a:g} above m at {symbol} = {b:g}", margin_comparison(margin[a], margin[b]))
        for a, b in pairs
    ]
    prefix = f"margin TCE − FedAvg (fraction), on {MEASURE_WORDS[measure]}: " + ", ".join(
        f"{symbol} = {x:g}: {cell(margin[x])}" for x in xs
    )
    return labelled_reading(name, items, prefix, primary, suffix=new_look(measure, *sweep_runs(points, xs)))


MARGIN_ALPHA_READINGS = ("R1 LM", "R2 T5")


def margin_alpha_claim(context: ReportContext, points: dict) -> Claim:
    """Claim 35: m_0.01 > m_0.1 and m_0.01 > m_100 (Holm over 2)."""
    text = (
        f"TCE's margin over FedAvg (GN) is largest at α = 0.01: above the margin at α = 0.1 and at α = 100 "
        f"({paper_name('cifar10')}, Figure 3a)"
    )
    published = f"{MARGIN_ALPHA_WORDS}; Figure 3a, no numbers printed"
    xs = (0.01, 0.1, 100.0)
    if not has_pairs(points, xs):
        return not_run(
            "tce_margin_alpha",
            text,
            published,
            missing_words(context, "α = 0.01, 0.1 and 100 with both methods"),
            MARGIN_ALPHA_READINGS,
        )
    pairs = [(0.01, 0.1), (0.01, 100.0)]
    readings = [
        margin_reading(name, points, "α", pairs, measure, primary=index == 0)
        for index, (name, measure) in enumerate(zip(MARGIN_ALPHA_READINGS, (LM, T5)))
    ]
    note = (
        "at α = 0.01 most clients hold one class (docs/claims-spec.md §4, claim 35), and TCE's loss on a one-class "
        "client is identically 0: those clients do not train under TCE"
    )
    return decided(context, "tce_margin_alpha", text, published, readings, sweep_runs(points, xs), note=note)


def within_at_claim(
    context: ReportContext,
    points: dict,
    alpha: float,
    claim_id: str,
    text: str,
    published: str,
    declared: list[tuple[str, str, float]],
    note: str = "",
    runs: str = "",
) -> Claim:
    """TCE and FedAvg (GN) within d points at one α, for each declared (name, measure, d)."""
    first, second = sweep_pair(points, alpha)
    if first is None or second is None:
        return not_run(
            claim_id,
            text,
            published,
            missing_words(context, f"α = {alpha:g} with both methods ({runs})"),
            [name for name, _, _ in declared],
        )
    readings = [
        within_reading(
            name,
            values_of(first, measure),
            values_of(second, measure),
            d,
            ("TCE", "FedAvg"),
            measure,
            primary=index == 0,
            runs=(first, second),
        )
        for index, (name, measure, d) in enumerate(declared)
    ]
    return decided(context, claim_id, text, published, readings, [first, second], note=note)


def equal_at_claim(context: ReportContext, points: dict, alpha: float = 100.0) -> Claim:
    """Claim 36: at α = 100 the two are equivalent, within d points."""
    text = (
        f"As the data approach iid the gap shrinks until TCE and FedAvg (GN) are equivalent: at α = {alpha:g} "
        f"within 2 points of each other ({paper_name('cifar10')}, Figure 3a)"
    )
    published = f"{EQUAL_IID_WORDS}; Figure 3a, no numbers printed"
    return within_at_claim(
        context,
        points,
        alpha,
        "tce_equal_at_high_alpha",
        text,
        published,
        [("R1 within 2 points, LM", LM, 2.0), ("R2 within 2 points, T5", T5, 2.0), ("R3 within 1 point, T5", T5, 1.0)],
        runs="tce_alpha100_{fedavg_gn,tce_gn}",
    )


def class_coverage(records: Path, partition: str) -> str:
    """How many of a partition's clients hold every class in their training split, from its record."""
    path = records / partition / "label_counts.json"
    if not path.is_file():
        return f"not reported: no record of {partition} (its label_counts.json)"
    counts = json.loads(path.read_text())["train"]
    classes = max(len(row) for row in counts)
    held = [sum(1 for v in row if v > 0) for row in counts]
    every = sum(k == classes for k in held)
    verdict = "met" if every > len(counts) / 2 else "not met"
    return (
        f"{every} of {len(counts)} clients hold all {classes} classes in {partition}'s training split (mean "
        f"{sum(held) / len(held):.1f} classes a client): {verdict}"
    )


def close_at_claim(context: ReportContext, points: dict, alpha: float = 0.5) -> Claim:
    """N6 (A6): at α = 0.5 TCE and FedAvg become very close, with the paper's precondition (most clients hold
    every class) reported from the partition's record."""
    text = (
        f"At α = {alpha:g}, where most clients hold every class, the performance of FedAvg (GN) and FedAvg + TCE "
        f"(GN) becomes very close: within 2 points ({paper_name('cifar10')}, Figure 3a)"
    )
    published = f"{CLOSE_WORDS}; Figure 3a, no numbers printed"
    first = sweep_pair(points, alpha)[0]
    note = ""
    if first is not None:
        note = (
            f"precondition ('most of the clients possess all of the classes', L86): "
            f"{class_coverage(context.partition_records, first.settings.get('partition', ''))}"
        )
    return within_at_claim(
        context,
        points,
        alpha,
        "tce_close_at_alpha05",
        text,
        published,
        [("R1 within 2 points, LM", LM, 2.0), ("R2 within 2 points, T5", T5, 2.0), ("R3 within 3 points, LM", LM, 3.0)],
        note,
        "tce_alpha05_{fedavg_gn,tce_gn}, docs/claims-spec.md A6",
    )


def margin_c_claim(context: ReportContext, points: dict) -> Claim:
    """Claim 37: m_0.05 > m_0.1."""
    text = (
        f"TCE's margin over FedAvg (GN) is largest when few clients take part: larger at C = 0.05 than at C = 0.1 "
        f"({paper_name('cifar10')}, α = 0.1, Figure 3b)"
    )
    published = f"{MARGIN_C_WORDS}; Figure 3b, no numbers printed"
    xs = (0.05, 0.1)
    declared = ("R1 LM", "R2 T5")
    if not has_pairs(points, xs):
        return not_run(
            "tce_margin_C", text, published, missing_words(context, "C = 0.05 and 0.1 with both methods"), declared
        )
    readings = [
        margin_reading(name, points, "C", [(0.05, 0.1)], measure, primary=index == 0)
        for index, (name, measure) in enumerate(zip(declared, (LM, T5)))
    ]
    return decided(context, "tce_margin_C", text, published, readings, sweep_runs(points, xs))


GAP_NARROWS_READINGS = (
    "R1 m(0.05) > m(0.1) > m(0.2), LM",
    "R2 per-seed slope of m on log C below 0, LM",
    "R3 m(0.05) > m(0.1) > m(0.2), T5",
)
NARROWING_CS = (0.05, 0.1, 0.2)


def slope_reading(name: str, points: dict, measure: str) -> Reading:
    """Per seed, the least-squares slope of the margin (points) on log C over NARROWING_CS; below 0 (paired
    against 0 on the same seeds)."""
    margin = {x: in_points(margins(*sweep_pair(points, x), measure)) for x in NARROWING_CS}
    seeds = sorted(set.intersection(*(set(m.seeds or ()) for m in margin.values())))
    logs = [math.log(x) for x in NARROWING_CS]
    centre = sum(logs) / len(logs)
    spread = sum((v - centre) ** 2 for v in logs)
    slopes = []
    for seed in seeds:
        ys = [margin[x].by_seed()[seed] for x in NARROWING_CS]
        slopes.append(
            sum((lx - centre) * y for lx, y in zip(logs, ys)) / spread if all(has_value(y) for y in ys) else None
        )
    falling = PerSeed([-s if has_value(s) else None for s in slopes], seeds)
    comparison = compare(falling, PerSeed([0.0] * len(seeds), seeds))
    slope_cell = accuracy_cell(PerSeed(slopes, seeds), 2, "without a margin")
    return reading(
        name,
        [comparison],
        f"slope of TCE − FedAvg (points per unit of ln C) over C = "
        f"{', '.join(f'{x:g}' for x in NARROWING_CS)}, on {MEASURE_WORDS[measure]}: "
        f"{slope_cell}; minus the slope above 0: {comparison.reason}",
    )


def gap_narrows_claim(context: ReportContext, points: dict) -> Claim:
    """N7 (A7): the gap narrows as C grows, over three values of C."""
    text = (
        f"As the fraction of clients C grows, the gap between FedAvg + TCE and FedAvg (GN) narrows "
        f"({paper_name('cifar10')}, α = 0.1, Figure 3b)"
    )
    published = f"{NARROWS_WORDS}; Figure 3b, no numbers printed"
    if not has_pairs(points, NARROWING_CS):
        why = (
            GAP_NARROWS_NOT_RUN
            if context.profile == "default"
            else missing_words(context, "C = 0.05, 0.1 and 0.2 with both methods")
        )
        return not_run("tce_gap_narrows_with_C", text, published, why, GAP_NARROWS_READINGS)
    pairs = [(0.05, 0.1), (0.1, 0.2)]
    readings = [
        margin_reading(GAP_NARROWS_READINGS[0], points, "C", pairs, LM, primary=True),
        slope_reading(GAP_NARROWS_READINGS[1], points, LM),
        margin_reading(GAP_NARROWS_READINGS[2], points, "C", pairs, T5),
    ]
    return decided(context, "tce_gap_narrows_with_C", text, published, readings, sweep_runs(points, NARROWING_CS))


def tce_runs(context: ReportContext) -> dict:
    return {k: v for k, v in context.runs_of(PAPER).items() if method_of(v.settings) is not None}


def claims_of(context: ReportContext) -> list[Claim]:
    """The claims alone, nothing written (report/confirmation.py builds them again on a confirmatory sample)."""
    runs = tce_runs(context)
    return claims(context, runs, {axis: sweep(runs, axis) for axis in ("alpha", "C")})


def build(context: ReportContext) -> list[Claim]:
    out_dir, published = context.out_dir, context.published
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = tce_runs(context)
    subset = femnist_is_subset(context.dataset_records)
    ours = table1(runs, published, out_dir, context.profile, subset)
    table2(ours, published, out_dir, runs, subset)
    figure2(runs, out_dir)
    sweeps = figure3(runs, out_dir)
    figure4(out_dir, context.built_partitions, context.partition_records)
    figures = forgetting_figures(runs, out_dir)
    forgetting_table(runs, figures, out_dir)
    return claims(context, runs, sweeps)
