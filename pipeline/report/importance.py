"""Importance From Agent (Kim et al.): Tables 1-4, Figure 2 and the paper's claims.

Which of our runs stands for "ours" on the MLP: the paper's λ = 1e5 diverges with the per-sample
Fisher (lr·λ·max F ≈ 15 > 2, see params.yaml), so the tables show the as-published run *and* the
λ = 1e3 one, and the claims are checked on λ = 1e3 with a separate claim recording the divergence.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.report.common import (NO_DIFF, NOT_RUN, Claim, SeededRun, accuracy_cell, accuracy_note,
                                    algorithm_label, comparison_claim, comparisons_seeds, diff_cell,
                                    fewer_rounds_claim, fmt, input_scaling_note, not_run_claim, plot_curves,
                                    rounds_cell, scaled_note, seeds_note, write_table)
from pipeline.report.seeds import best_of, combine, compare, decide_trains

PAPER = "importance"
CELLS = (("mnist", "mlp"), ("mnist", "cnn"), ("cifar", "mlp"), ("cifar", "cnn"))
# The run standing for each method in each cell: importance_<dataset>_<model>_<method>.
METHOD_RUN = {"fedavg": "fedavg", "fedprox": "fedprox", "ewc": "ewc", "weighted": "weighted", "ours": "ours",
              "rwalk": "rwalk"}
STABLE_MLP_SUFFIX = "_lambda_1e3"  # the MLP's EWC-type runs at a λ that does not diverge here
FIGURE2_RATES = ((0.05, "importance_fig2_c005_{}"), (0.1, "importance_cifar_mlp_{}"), (0.2, "importance_fig2_c02_{}"))
LABELS = {"fedavg": "FedAvg", "fedprox": "FedProx (FedAvg + L2)", "ewc": "FedAvg + EWC",
          "weighted": "FedAvg + weighted average", "ours": "ours (EWC + weighted average)", "rwalk": "RWalk"}
EWC_TYPE = ("ewc", "ours", "rwalk")


def run_key(dataset: str, model: str, method: str, stable: bool = True) -> str:
    """The run for a method; on the MLP the EWC-type methods use the stable-λ run unless asked."""
    key = f"importance_{dataset}_{model}_{METHOD_RUN[method]}"
    if stable and dataset == "mnist" and model == "mlp" and method in EWC_TYPE:
        key += STABLE_MLP_SUFFIX
    return key


def accuracy_at(result: SeededRun | None, round_: int | None = None, k: int | None = None) -> list:
    """Per seed: test accuracy (%) as the mean of the last k evaluated rounds up to `round_` (None: each
    seed's last round; k None: K_LAST, k = 1: that round alone); None for a diverged seed."""
    if result is None:
        return []
    return result.accuracy_means(round_) if k is None else result.accuracy_means(round_, k)


def paper_setting(dataset: str, model: str, method: str, published: dict) -> dict:
    """The paper's hyperparameter for a method (MNIST: Table 3's λ for EWC, L2 weight for FedProx; the
    paper gives none for CIFAR-10)."""
    if dataset != "mnist":
        return {}
    lambdas = published["lambdas"][model]
    if method in EWC_TYPE:
        return {"lambda": lambdas["ewc"]}
    if method == "fedprox":
        return {"mu": lambdas["l2"]}
    return {}


def matches(result: SeededRun | None, dataset: str, model: str, method: str, published: dict) -> bool:
    return result is not None and result.matches_paper(paper_setting(dataset, model, method, published))


def cell(result: SeededRun | None, paper, matched: bool, round_: int | None = None, digits: int = 2) -> list[str]:
    """ours (mean of the last k rounds), last round, paper, diff (last-round mean − paper, only where our
    setting is the paper's)."""
    if result is None:
        return [NOT_RUN, "", fmt(paper, digits), ""]
    last = accuracy_at(result, round_, k=1)
    return [accuracy_cell(accuracy_at(result, round_), digits), accuracy_cell(last, digits), fmt(paper, digits),
            diff_cell(last, paper, matched, digits)]


def lambda_of(result: SeededRun | None) -> str:
    return "" if result is None else algorithm_label(result.settings)


def common_notes(results: dict, profile: str) -> list[str]:
    notes = [f"profile: {profile}; non-IID: 100 clients x 2 label-sorted shards (McMahan et al.), C = 0.1, "
             "E = 10, B = 10, SGD lr 0.01 as published unless scaled below; accuracy in % of the test set; "
             "NC = diverged (in a rounds-to-target column: never reached); 'k of n diverged' = k of the run's "
             "n seeds",
             "MNIST MLP EWC-type rows use λ = 1e3: the paper's λ = 1e5 diverges with the per-sample empirical "
             "Fisher (its rows are shown too); CIFAR-10 MLP λ = 1e2 (the paper gives none; 1e3 diverged); "
             "the CNN uses the paper's λ = 10; the setting column says which",
             seeds_note(results),
             input_scaling_note(results, "the paper does not say; on MNIST [0, 1] reproduces its FedAvg MLP "
                                         "baseline (85.70 % at round 100), standardised inputs reach ~90 %; "
                                         "CIFAR-10 is standardised, as McMahan et al.'s whitening, whose "
                                         "setup the paper follows")]
    return notes + scaled_note(results)


def diff_note() -> str:
    return (f"diff = our last-round mean − the paper's number, only where the run's settings are the paper's "
            f"(nothing scaled; on MNIST the paper's λ / μ of Table 3; the paper gives none for CIFAR-10); "
            f"{NO_DIFF} = our setting differs, no difference is computed (see the scaling notes and the "
            "setting column)")


def accuracy_columns(prefix: str) -> list[str]:
    return [f"{prefix} ours", f"{prefix} last round", f"{prefix} paper", f"{prefix} diff"]


def table1(results: dict, published: dict, out_dir: Path, profile: str) -> None:
    header = ["method"] + [c for d, m in CELLS for c in accuracy_columns(f"{d} {m}")] + ["setting"]
    rows = []
    for method in ("fedavg", "fedprox", "ours"):
        row = [LABELS[method]]
        settings = []
        for dataset, model in CELLS:
            result = results.get(run_key(dataset, model, method))
            row += cell(result, published["table1"][method][f"{dataset}_{model}"],
                        matches(result, dataset, model, method, published))
            if lambda_of(result):
                settings.append(f"{dataset} {model}: {lambda_of(result)}")
        rows.append(row + ["; ".join(settings)])
    paper_lambda = results.get(run_key("mnist", "mlp", "ours", stable=False))
    row = ["ours, MLP at the paper's λ = 1e5"]
    row += cell(paper_lambda, published["table1"]["ours"]["mnist_mlp"],
                matches(paper_lambda, "mnist", "mlp", "ours", published))
    row += ["", "", "", ""] * 3 + [lambda_of(paper_lambda)]
    rows.append(row)
    notes = common_notes(results, profile) + [
        accuracy_note() + "; after each run's last round (the paper's: MNIST 100, CIFAR-10 200 rounds; a scaled "
        "run stops earlier, see the scaling notes)", diff_note(), f"published: {published['source']}"]
    write_table(out_dir, "table1", "Importance From Agent Table 1: accuracy (%), non-IID MNIST and CIFAR-10",
                header, rows, notes)


def table2(results: dict, published: dict, out_dir: Path, profile: str) -> None:
    targets = published["table2"]["targets"]
    header = ["method"] + [f"{m} ({targets[m]:.0%}) {part}" for m in ("mlp", "cnn") for part in ("ours", "paper", "diff")]
    rows = []
    for method in ("fedavg", "fedprox", "ours"):
        row = [LABELS[method]]
        for model in ("mlp", "cnn"):
            result = results.get(run_key("mnist", model, method))
            paper = published["table2"][method][model]
            if result is None:
                row += [NOT_RUN, fmt(paper), ""]
                continue
            ours = result.rounds_to(targets[model], diverged_as_nc=True)
            row += [rounds_cell(ours), fmt(paper),
                    diff_cell(ours, paper, matches(result, "mnist", model, method, published), digits=0)]
        rows.append(row)
    notes = common_notes(results, profile) + ["communication rounds until the test accuracy first reaches the target; "
                                              "NC = not within the run's rounds (or diverged); 'NC on k of n' = k "
                                              "of the run's n seeds never reached it", diff_note()]
    write_table(out_dir, "table2", "Importance From Agent Table 2: rounds to a target accuracy on MNIST",
                header, rows, notes)


def table3(results: dict, published: dict, out_dir: Path, profile: str) -> None:
    header = ["method"] + [c for r in (10, 100) for m in ("mlp", "cnn") for c in accuracy_columns(f"{r} rounds {m}")]
    header += ["setting"]
    rows = []
    for method in ("fedavg", "fedprox", "ewc", "weighted", "ours"):
        rows.append(ablation_row(LABELS[method], method, results, published, stable=True))
    for method in ("ewc", "ours"):
        rows.append(ablation_row(f"{LABELS[method]}, MLP at the paper's λ = 1e5", method, results, published,
                                 stable=False, models=("mlp",)))
    notes = common_notes(results, profile) + [
        accuracy_note() + "; after 10 and after 100 rounds", "a run scaled to fewer rounds shows 'not reached' "
        "in the 100-round column (NC only if it diverged; see the scaling note)", diff_note()]
    write_table(out_dir, "table3", "Importance From Agent Table 3: ablation on MNIST, accuracy (%)",
                header, rows, notes)


def ablation_row(label, method, results, published, stable, models=("mlp", "cnn")) -> list:
    row, settings = [label], []
    for rounds in (10, 100):
        for model in ("mlp", "cnn"):
            paper = published["table3"][method][f"r{rounds}_{model}"]
            if model not in models:
                row += ["", "", fmt(paper, 2), ""]
                continue
            result = results.get(run_key("mnist", model, method, stable=stable))
            if result is not None and result.settings.get("rounds", rounds) < rounds:
                row += ["not reached", "", fmt(paper, 2), ""]  # the default profile stops this run earlier
                continue
            row += cell(result, paper, matches(result, "mnist", model, method, published), rounds)
            if rounds == 10 and lambda_of(result):
                settings.append(f"{model}: {lambda_of(result)}")
    return row + ["; ".join(settings)]


def common_round(*runs: SeededRun | None) -> int | None:
    """The last round every one of the runs reached (None: the last round of each): EWC and RWalk are
    compared after the same number of rounds even when the default profile ran RWalk for fewer."""
    lasts = [r.last_round for r in runs if r is not None and r.last_round is not None]
    return min(lasts) if len(lasts) == len(runs) and len(set(lasts)) > 1 else None


def table4(results: dict, published: dict, out_dir: Path, profile: str) -> None:
    header = ["importance"] + [c for m in ("mlp", "cnn") for c in accuracy_columns(m)]
    rows, compared = [], []
    for method, label in (("ours", "EWC (Fisher)"), ("rwalk", "RWalk (Fisher + path score)")):
        row = [label]
        for model in ("mlp", "cnn"):
            pair = [results.get(run_key("mnist", model, m)) for m in ("ours", "rwalk")]
            at = common_round(*pair)
            if at is not None and method == "ours":
                compared.append(f"{model}: both after {at} rounds (the RWalk run's length)")
            result = results.get(run_key("mnist", model, method))
            paper = published["table4"]["ewc" if method == "ours" else "rwalk"][model]
            # The paper's value is after 100 rounds: no difference against an earlier round.
            matched = at is None and matches(result, "mnist", model, method, published)
            row += cell(result, paper, matched, at)
        rows.append(row)
    notes = common_notes(results, profile) + [
        accuracy_note(), diff_note() + " (nor where EWC is compared with RWalk at an earlier round)",
        "RWalk importance = ½·(Fisher + path-integral score accumulated over the local steps), the score "
        "rescaled per layer to the Fisher's total first, so each layer keeps the Fisher's mass "
        "(pipeline/algorithms/importance.py)"] + compared
    write_table(out_dir, "table4", "Importance From Agent Table 4: EWC vs RWalk importance, MNIST accuracy (%)",
                header, rows, notes)


def legend(method: str, run: SeededRun, rate: bool = False) -> str:
    """A run's legend from its own settings: method, participation rate C, λ / μ."""
    parts = [LABELS[method].split(" (")[0] if rate else LABELS[method]]
    if rate and run.settings.get("client_fraction") is not None:
        parts.append(f"C = {run.settings['client_fraction']:g}")
    if lambda_of(run):
        parts.append(lambda_of(run))
    return ", ".join(parts)


def figure2(results: dict, out_dir: Path, profile: str) -> None:
    series = []
    for _, pattern in FIGURE2_RATES:
        for method in ("fedavg", "ours"):
            result = results.get(pattern.format(method))
            if result is not None:
                series.append((legend(method, result, rate=True), result))
    plot_curves(out_dir / "figure2.png", f"CIFAR-10, participation rates ({profile} profile)", series, [],
                ylim=(0.0, 0.6))


def ablation_curves(results: dict, published: dict, out_dir: Path, profile: str) -> None:
    """Learning curves of Table 3's rows (and RWalk), one figure per model."""
    for model in ("mlp", "cnn"):
        series = [(legend(m, results[run_key("mnist", model, m)]), results[run_key("mnist", model, m)])
                  for m in LABELS if run_key("mnist", model, m) in results]
        plot_curves(out_dir / f"ablation_mnist_{model}.png", f"MNIST {model.upper()} ablation ({profile} profile)",
                    series, [published["table2"]["targets"][model]], ylim=(0.0, 1.0))


def accuracy_claim(claim_id, text, published, results, first, second, margin=0.0, at=None) -> Claim:
    """Claim: run `first` ends (or is, after round `at`) with accuracy above run `second`'s minus `margin`,
    decided by the rule over the seeds' last-k mean accuracies (a diverged seed has no value)."""
    absent = not_run_claim(PAPER, claim_id, text, published, results, (first, second))
    if absent:
        return absent
    what = (f" after {at} rounds" if at else "") + (f" (first side + {margin:g} point(s) in the test)" if margin else "")
    return comparison_claim(PAPER, claim_id, text, published, first, second, accuracy_at(results[first], at),
                            accuracy_at(results[second], at), "higher", accuracy_cell, what, margin)


def claims(results: dict, published: dict) -> list[Claim]:
    t1, t2, t3, t4 = (published[k] for k in ("table1", "table2", "table3", "table4"))
    found = [
        accuracy_claim("mnist-mlp-ours-beats-fedavg", "MNIST MLP: ours is more accurate than FedAvg",
                       f"{t1['ours']['mnist_mlp']} vs {t1['fedavg']['mnist_mlp']}", results,
                       run_key("mnist", "mlp", "ours"), run_key("mnist", "mlp", "fedavg")),
        accuracy_claim("mnist-cnn-ours-beats-fedavg", "MNIST CNN: ours is more accurate than FedAvg",
                       f"{t1['ours']['mnist_cnn']} vs {t1['fedavg']['mnist_cnn']}", results,
                       run_key("mnist", "cnn", "ours"), run_key("mnist", "cnn", "fedavg")),
    ]
    for model in ("mlp", "cnn"):
        found.append(accuracy_claim(
            f"cifar-{model}-ours-competitive-with-fedprox",
            f"CIFAR-10 {model.upper()}: ours is competitive with FedProx (read as: within 1 point or better)",
            f"{t1['ours'][f'cifar_{model}']} vs {t1['fedprox'][f'cifar_{model}']}", results,
            run_key("cifar", model, "ours"), run_key("cifar", model, "fedprox"), margin=1.0))
    for model in ("mlp", "cnn"):
        target = t2["targets"][model]
        for other in ("fedavg", "fedprox"):
            found.append(fewer_rounds_claim(
                PAPER, f"mnist-{model}-ours-reaches-{target:g}-before-{other}",
                f"MNIST {model.upper()}: ours reaches {target:.0%} in fewer rounds than {LABELS[other].split(' (')[0]}",
                f"{t2['ours'][model]} vs {t2[other][model]}", results, run_key("mnist", model, "ours"),
                run_key("mnist", model, other), target))
    for model in ("mlp", "cnn"):
        found.append(best_of_ablation_claim(model, t3, results))
        found.append(accuracy_claim(
            f"mnist-{model}-weighted-average-gains-more-than-ewc",
            f"MNIST {model.upper()}: the weighted average alone gains more over FedAvg than EWC alone",
            f"{t3['weighted'][f'r100_{model}']} vs {t3['ewc'][f'r100_{model}']}", results,
            run_key("mnist", model, "weighted"), run_key("mnist", model, "ewc")))
        found.append(accuracy_claim(
            f"mnist-{model}-rwalk-below-ewc", f"MNIST {model.upper()}: RWalk's importance is less accurate than EWC's",
            f"{t4['rwalk'][model]} vs {t4['ewc'][model]}", results,
            run_key("mnist", model, "ours"), run_key("mnist", model, "rwalk"),
            at=common_round(results.get(run_key("mnist", model, "ours")), results.get(run_key("mnist", model, "rwalk")))))
    found.append(figure2_claim(results))
    found.append(paper_lambda_claim(results))
    return found


ABLATION = ("fedavg", "fedprox", "ewc", "weighted", "ours")


def best_of_ablation_claim(model: str, t3: dict, results: dict) -> Claim:
    """The full method is separated above every other method of the ablation (held); some other method is
    separated above it (failed); else inconclusive."""
    claim_id = f"mnist-{model}-full-method-best"
    text = f"MNIST {model.upper()}: the full method is the most accurate of the ablation (final round)"
    published = ", ".join(f"{m} {t3[m][f'r100_{model}']}" for m in ABLATION)
    keys = {m: run_key("mnist", model, m) for m in ABLATION}
    absent = not_run_claim(PAPER, claim_id, text, published, results, keys.values())
    if absent:
        return absent
    accuracy = {m: accuracy_at(results[k]) for m, k in keys.items()}
    status, comparisons = best_of(accuracy["ours"], {m: v for m, v in accuracy.items() if m != "ours"})
    evidence = ", ".join(f"{m} {accuracy_cell(v)}" for m, v in accuracy.items())
    evidence += "; ours vs " + ", ".join(f"{m}: {c.status} ({c.reason})" for m, c in comparisons.items())
    return Claim(PAPER, claim_id, text, status, evidence, published,
                 "ours " + str(len(accuracy["ours"])) + " vs " + ", ".join(str(len(accuracy[m])) for m in comparisons))


def figure2_claim(results: dict) -> Claim:
    """Ours above FedAvg at each participation rate, each pair by the rule; held only if every pair is."""
    claim_id = "cifar-ours-beats-fedavg-every-rate"
    text = "CIFAR-10: ours beats FedAvg at every participation rate of Figure 2"
    pairs = [(rate, pattern.format("ours"), pattern.format("fedavg")) for rate, pattern in FIGURE2_RATES]
    absent = not_run_claim(PAPER, claim_id, text, "figure only", results, [k for _, a, b in pairs for k in (a, b)])
    if absent:
        return absent
    parts, comparisons = [], []
    for rate, ours_key, fedavg_key in pairs:
        ours, fedavg = accuracy_at(results[ours_key]), accuracy_at(results[fedavg_key])
        comparison = compare(ours, fedavg, "higher")
        comparisons.append(comparison)
        parts.append(f"C={rate:g}: {accuracy_cell(ours)} vs {accuracy_cell(fedavg)}, {comparison.status} "
                     f"({comparison.reason})")
    return Claim(PAPER, claim_id, text, combine(c.status for c in comparisons), "; ".join(parts),
                 "figure only (rates not given)", comparisons_seeds(comparisons) + " at each rate")


def paper_lambda_claim(results: dict) -> Claim:
    """Held when at least 2 seeds all trained at λ = 1e5, failed when at least 2 all diverged."""
    claim_id = "mnist-mlp-published-lambda-trains"
    text = "MNIST MLP: the method trains at the published λ = 1e5"
    key = run_key("mnist", "mlp", "ours", stable=False)
    if key not in results:
        return Claim(PAPER, claim_id, text, NOT_RUN, f"{key} not in this profile", "89.19")
    result = results[key]
    diverged = [r.diverged for r in result.results]
    evidence = f"{key}: {sum(diverged)} of {result.n} seed(s) diverged"
    if any(diverged):
        evidence += " (after " + ", ".join(str(r.summary.get("rounds_completed")) for r in result.results
                                            if r.diverged) + " rounds)"
    if not all(diverged):
        evidence += f"; accuracy {accuracy_cell(accuracy_at(result))}"
    if result.n < 2:
        evidence += "; a single seed cannot decide it"
    return Claim(PAPER, claim_id, text, decide_trains(diverged), evidence, "89.19", str(result.n))


def build(results: dict, published: dict, out_dir: Path, profile: str) -> list[Claim]:
    out_dir.mkdir(parents=True, exist_ok=True)
    results = {k: v for k, v in results.items() if v.paper == PAPER}
    table1(results, published, out_dir, profile)
    table2(results, published, out_dir, profile)
    table3(results, published, out_dir, profile)
    table4(results, published, out_dir, profile)
    figure2(results, out_dir, profile)
    ablation_curves(results, published, out_dir, profile)
    return claims(results, published)
