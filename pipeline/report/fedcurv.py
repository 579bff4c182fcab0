"""FedCurv (Shoham et al. 2019): Table 1, Figures 1-2, the lambda/mu grid search and the claims."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from pipeline.runs import changed_scalings
from pipeline.report.common import (NO_DIFF, NOT_RUN, Claim, ReportContext, SeededRun, accuracy_cell,
                                    algorithm_label, diff_cell, fewer_rounds_claim, fmt, input_scaling_note,
                                    not_run_claim, plot_curves, rounds_cell, scaled_note, seeds_note, write_table)
from pipeline.report.seeds import (HELD, INCONCLUSIVE, K_LAST, Comparison, PerSeed, compare, has_value, mean_sd,
                                   moving_means)

PAPER = "fedcurv"
TARGETS = (0.95, 0.9, 0.85)
SEARCH_TARGET = 0.9  # the paper chose λ and μ by the fewest rounds to 90 % test accuracy
EPOCHS = (50, 10)
# Table 1's rows: (name, algorithm, run key per E). The keys are runs.<key> in params.yaml; each row's
# λ / μ comes from the runs' own settings.
ROWS = [
    ("FedCurv", "fedcurv", {50: "fedcurv_e50_fedcurv", 10: "fedcurv_e10_fedcurv"}),
    ("FedProx", "fedprox", {50: "fedcurv_e50_fedprox", 10: "fedcurv_e10_fedprox"}),
    ("FedAvg", "fedavg", {50: "fedcurv_e50_fedavg", 10: "fedcurv_e10_fedavg"}),
]
RUN_KEYS = [key for _, _, keys in ROWS for key in keys.values()]
HYPERPARAMETER = {"fedcurv": ("lambda", "λ"), "fedprox": ("mu", "μ")}

# What a stand-in for this paper must do to sit in the regime its claims are about (issue 37 section 2,
# DESIGN.md), written down before any verdict was read. The report measures each one on the runs.
STANDIN_CRITERIA = (
    "stand-in criteria (written before reading the verdicts; a stand-in is never changed because a verdict "
    "failed): (1) the model reaches every target the claims read (Table 1: 95, 90 and 85 % test accuracy), as "
    "the paper's CNN does; (2) the E contrast keeps the paper's ratio (E = 50 vs 10) on the same 96 × 2 "
    "one-label blocks; (3) λ and μ are searched per E by the paper's procedure (fewest rounds to 90 %); "
    "(4) FedAvg gets near the model's centralised accuracy")


def is_fedcurv_run(result: SeededRun) -> bool:
    return result.paper == PAPER


def paper_setting(algorithm: str, epochs: int, published: dict) -> dict:
    """The paper's λ / μ for an algorithm at E (empty for FedAvg)."""
    if algorithm not in HYPERPARAMETER:
        return {}
    name = HYPERPARAMETER[algorithm][0]
    return {name: published["hyperparameters"][algorithm][f"E{epochs}"][name]}


def row_label(name: str, algorithm: str, keys: dict, results: dict, published: dict) -> str:
    """"FedProx, μ = 0.00025 (E = 50) / μ = 1e-05 (E = 10)" from the runs' settings; for an E not run,
    the paper's value, marked so; one value when they all agree."""
    if algorithm not in HYPERPARAMETER:
        return name
    parts, absent = {}, set()
    for epochs in EPOCHS:
        run = results.get(keys[epochs])
        if run is not None:
            parts[epochs] = algorithm_label(run.settings)
        else:
            value = paper_setting(algorithm, epochs, published)[HYPERPARAMETER[algorithm][0]]
            parts[epochs] = f"{HYPERPARAMETER[algorithm][1]} = {value:g}"
            absent.add(epochs)
    if len(set(parts.values())) == 1:
        return f"{name}, {parts[EPOCHS[0]]}"
    return f"{name}, " + " / ".join(f"{text} (E = {epochs}{', the paper’s: not run' if epochs in absent else ''})"
                                    for epochs, text in parts.items())


# ---------------------------------------------------------------- the runs' ceiling

@dataclass(frozen=True)
class Ceiling:
    """The highest accuracy some runs reached: what decides whether a target is within their reach."""
    moving: float  # the highest K_LAST-round moving mean of any seed (the reading the claims decide on)
    run: str
    seed: int
    single: float  # the highest single-round accuracy of any seed (the paper's first-crossing reading)


def best_moving_mean(accuracy: Sequence, k: int = K_LAST) -> float | None:
    """The highest mean of k consecutive evaluated accuracies (full windows whose values all exist);
    None if the curve has no such window."""
    means = [mean for _, mean in moving_means(range(1, len(accuracy) + 1), accuracy, k)]
    return max(means) if means else None


def ceiling(runs: Iterable[SeededRun], k: int = K_LAST) -> Ceiling | None:
    """The highest k-round moving mean (and single round) any seed of `runs` reached; diverged seeds
    are left out, as the rounds-to-target reading leaves them out. None if no seed has a full window."""
    best, single = None, None
    for run in runs:
        for result in run.results:
            if result.diverged:
                continue
            value = best_moving_mean(result.accuracy, k)
            if value is not None and (best is None or value > best[0]):
                best = (value, run.key, result.seed)
            values = [a for a in result.accuracy if has_value(a)]
            if values and (single is None or max(values) > single):
                single = max(values)
    return None if best is None else Ceiling(best[0], best[1], best[2], single)


def percent(fraction: float) -> str:
    return f"{100 * fraction:.2f} %"


def ceiling_reason(target: float, top: Ceiling, names: Sequence[str]) -> str:
    """Why no number of seeds decides a rounds-to-target comparison that no seed ever reached."""
    return (f"no seed of {' or '.join(names)} reaches {100 * target:g} % on its {K_LAST}-round moving mean: the runs' "
            f"ceiling, the highest {K_LAST}-round moving mean any seed reached, is {percent(top.moving)} "
            f"({top.run}, seed {top.seed}; best single round {percent(top.single)}), below the target; more seeds "
            "do not lift it")


def with_ceiling(claim: Claim, runs: Sequence[SeededRun], target: float) -> Claim:
    """A rounds-to-target claim on which no seed of either run reaches the target: its comparison is
    undecidable at this scale, and the evidence and power line give the measured ceiling that says
    why. Any other claim is returned as it is."""
    reached = any(has_value(v) for run in runs for v in run.rounds_to_moving(target))
    top = ceiling(runs)
    if claim.status != INCONCLUSIVE or reached or top is None or top.moving >= target:
        return claim
    why = ceiling_reason(target, top, [run.key for run in runs])
    seen = (f"; ceiling: the highest {K_LAST}-round moving mean of any seed is {percent(top.moving)} ({top.run}, "
            f"seed {top.seed}), below {100 * target:g} %")
    return dataclasses.replace(claim, evidence=claim.evidence + seen,
                               comparisons=[dataclasses.replace(c, undecidable=why) for c in claim.comparisons])


# ---------------------------------------------------------------- Table 1

def standin_notes(results: dict[str, SeededRun]) -> list[str]:
    """The stand-in criteria and, for each, what the runs measure (only when Table 1's runs are
    scaled stand-ins): known misfits are named, not fixed, in this profile."""
    table_runs = {k: v for k, v in results.items() if k in RUN_KEYS}
    if not any(changed_scalings(run.scaled) for run in table_runs.values()):
        return []
    return [STANDIN_CRITERIA, targets_measurement(table_runs), epochs_measurement(table_runs),
            search_measurement(results),
            "(4) not measured: this profile has no centralised run of the stand-in model"]


def targets_measurement(table_runs: dict[str, SeededRun]) -> str:
    """Criterion (1) on the runs: the targets above the runs' ceiling can never be reached."""
    top = ceiling(table_runs.values())
    if top is None:
        return "(1) not measured: no Table 1 run has a full moving-mean window yet"
    per_run = [c.moving for run in table_runs.values() if (c := ceiling([run])) is not None]
    missed = [t for t in TARGETS if t > top.moving]
    verdict = (f"missed: {' and '.join(f'{100 * t:g} %' for t in missed)} is never reached, so the claims on it cannot "
               "be decided at this scale; a known misfit, not changed in this profile") if missed else "met"
    return (f"(1) measured: the highest {K_LAST}-round moving mean of any seed of a Table 1 run is "
            f"{percent(top.moving)} ({top.run}, seed {top.seed}; per run {percent(min(per_run))}–"
            f"{percent(max(per_run))}; best single round {percent(top.single)}): {verdict}")


def epochs_measurement(table_runs: dict[str, SeededRun]) -> str:
    """Criterion (2) on the runs: the trained E of the E = 50 and E = 10 runs keep the paper's ratio."""
    trained = {}
    for epochs in EPOCHS:
        used = {run.settings.get("local_epochs") for run in table_runs.values()
                if run.paper_value("local_epochs") == epochs}
        if len(used) == 1:
            trained[epochs] = used.pop()
    if len(trained) < len(EPOCHS):
        return "(2) not measured: Table 1's runs are not all there at both E, or train one E with several"
    high, low = EPOCHS
    kept = trained[high] * low == trained[low] * high
    return (f"(2) measured: E = {high} vs {low} trained as {trained[high]} vs {trained[low]}: "
            + ("the ratio is kept" if kept else "the ratio is not kept (a misfit)"))


def search_measurement(results: dict) -> str:
    """Criterion (3) on the runs: at which E each hyperparameter was searched (grid_search.md)."""
    searched = searched_epochs(results)
    per_e = "; ".join(f"{HYPERPARAMETER[a][1]} at E = {', '.join(map(str, e))}" if e
                      else f"{HYPERPARAMETER[a][1]} not searched" for a, e in searched.items())
    if all(set(e) == set(EPOCHS) for e in searched.values()):
        return f"(3) measured: searched per E ({per_e}): met"
    return (f"(3) measured: searched ({per_e}); a value searched at one E only is used at both (grid_search.md): "
            "missed, the paper searches per E; a known misfit, not changed in this profile")


def table1(results: dict, published: dict, out_dir: Path, profile: str) -> None:
    header = ["algorithm"]
    for epochs in EPOCHS:
        for target in TARGETS:
            header += [f"E={epochs} {target:.0%} ours", f"E={epochs} {target:.0%} paper", f"E={epochs} {target:.0%} diff"]
    rows, differs = [], []
    for name, algorithm, keys in ROWS:
        row = [row_label(name, algorithm, keys, results, published)]
        for epochs in EPOCHS:
            result = results.get(keys[epochs])
            matches = result is not None and result.matches_paper(paper_setting(algorithm, epochs, published))
            if result is not None and not matches:
                differs.append(result.key)
            for target in TARGETS:
                paper = published["table1"][algorithm][f"E{epochs}"][f"{target:g}"]
                if result is None:
                    row += [NOT_RUN, fmt(paper), ""]
                    continue
                ours = result.rounds_to(target)
                row += [rounds_cell(ours), fmt(paper), diff_cell(ours, paper, matches, digits=0)]
        rows.append(row)
    table_runs = {k: v for k, v in results.items() if k in RUN_KEYS}
    notes = [f"profile: {profile}; rounds to reach each test accuracy on non-IID MNIST, the paper's reading (the "
             f"first round at or above it); the claims (claims.md) read the {K_LAST}-round moving mean instead; "
             "NC = not reached within the run's rounds (or diverged); 'NC on k of n' = k of the run's n seeds "
             "never reached it",
             seeds_note(table_runs),
             f"diff = our mean − the paper's number, only where the run's settings are the paper's (nothing "
             f"scaled, the paper's λ / μ at that E); {NO_DIFF} = our setting differs, no difference is computed"
             + (f" ({', '.join(differs)})" if differs else ""),
             f"published: {published['source']}",
             input_scaling_note(table_runs, "as the PyTorch MNIST example the paper cites, which "
                                            "normalises with MNIST's mean and sd")]
    notes += scaled_note(table_runs)
    if profile == "default":
        notes.append("the default profile is a scaled stand-in (smaller model, fewer local epochs and rounds): "
                     "compare the ordering of the algorithms and the E = 50 vs E = 10 contrast, not the counts")
    notes += standin_notes(results)
    write_table(out_dir, "table1", "FedCurv Table 1: rounds to reach a test accuracy", header, rows, notes)


# ---------------------------------------------------------------- the λ / μ grid search

def grid_groups(results: dict) -> dict[tuple[int, str], list[SeededRun]]:
    """The searched runs by (the paper's E, algorithm): every FedCurv and FedProx run of this paper."""
    groups: dict[tuple[int, str], list[SeededRun]] = {}
    for result in results.values():
        if not is_fedcurv_run(result):
            continue
        algorithm = result.settings["algorithm"]["name"]
        if algorithm in HYPERPARAMETER:
            groups.setdefault((result.paper_value("local_epochs"), algorithm), []).append(result)
    return groups


def searched_value(run: SeededRun) -> str:
    """"mu = 0.01": the searched hyperparameter of a run, as the grid table names it."""
    name = HYPERPARAMETER[run.settings["algorithm"]["name"]][0]
    return f"{name} = {run.settings['algorithm'][name]:g}"


def search_rounds(run: SeededRun) -> PerSeed:
    """Per seed: rounds to 90 % on the K_LAST-round moving mean, the reading the claims use."""
    return run.rounds_to_moving(SEARCH_TARGET)


def best_marks(members: list[SeededRun]) -> dict[str, str]:
    """{run key: mark} for one E and algorithm. The best is the value with the fewest mean rounds to
    90 % (moving mean) over its seeds, among the values whose every seed reached it; it is compared by
    the rule with every other such value: "best" when separated from all of them (the runner-up's test
    shown), else a tie, marked on the best and on each value it is not separated from. Values with the
    same mean are all tied best; nothing breaks a tie (not key order, not a criterion the paper did not
    use)."""
    rounds = {r.key: search_rounds(r) for r in members}
    means = {key: mean_sd(values)[0] for key, values in rounds.items()
             if values and all(has_value(v) for v in values)}
    if not means:
        return {}
    fewest = min(means.values())
    leaders = sorted(key for key, mean in means.items() if abs(mean - fewest) <= 1e-9)
    others = sorted((key for key in means if key not in leaders), key=lambda key: (means[key], key))
    versus = {(leader, key): compare(rounds[leader], rounds[key], "lower") for leader in leaders for key in others}
    tied = [key for key in others if any(versus[(leader, key)].status != HELD for leader in leaders)]
    tied_marks = {key: "tied with the best (not separated)" for key in tied}
    if len(leaders) > 1:
        either = f"; not separated from {len(tied)} other value(s) either" if tied else ""
        return {**{key: f"tied best ({len(leaders)}): the same mean{either}" for key in leaders}, **tied_marks}
    (best,) = leaders
    if not others:
        return {best: f"best: the only value whose every seed reached {SEARCH_TARGET:.0%}"}
    by_key = {r.key: r for r in members}
    runner_up = f"{searched_value(by_key[others[0]])}: {versus[(best, others[0])].reason}"
    if not tied:
        return {best: f"best: separated from the runner-up ({runner_up})"}
    return {best: f"best by the mean, a tie: not separated from {len(tied)} other value(s); runner-up {runner_up}",
            **tied_marks}


def searched_epochs(results: dict) -> dict[str, list[int]]:
    """{algorithm: the paper's E at which more than one λ / μ was run}: where a search took place."""
    groups = grid_groups(results)
    return {algorithm: sorted(epochs for (epochs, kind), members in groups.items()
                              if kind == algorithm and len(members) > 1)
            for algorithm in HYPERPARAMETER}


def mu_search_note(results: dict, published: dict) -> str:
    """At which trained E FedProx's μ was searched, against the paper's search per E, with what the
    runs measure at E = 10: a known misfit of the stand-in when it searched one E only."""
    searched = sorted({(r.paper_value("local_epochs"), r.settings.get("local_epochs")) for r in results.values()
                       if is_fedcurv_run(r) and r.key not in RUN_KEYS
                       and r.settings["algorithm"]["name"] == "fedprox"})
    standins = [r for r in results.values() if is_fedcurv_run(r) and changed_scalings(r.scaled)]
    if len(searched) != 1 or not standins:
        return ""
    (paper_epochs, trained), = searched
    chosen = sorted({f"{results[key].settings['algorithm']['mu']:g}" for key in
                     ("fedcurv_e50_fedprox", "fedcurv_e10_fedprox") if key in results})
    paper = ", ".join(f"{paper_setting('fedprox', e, published)['mu']:g} at E = {e}" for e in EPOCHS)
    text = (f"known misfit, not changed in this profile: FedProx's μ was searched at the trained E = {trained} "
            f"only (the paper's E = {paper_epochs}) and the μ it gave ({', '.join(chosen) or 'none run'}) is used "
            f"at both E; the paper searches per E ({paper})")
    prox, avg = results.get("fedcurv_e10_fedprox"), results.get("fedcurv_e10_fedavg")
    if prox is not None and avg is not None:
        versus = compare(search_rounds(prox), search_rounds(avg), "lower")
        text += (f"; at E = 10 the stand-in's FedProx reaches 90 % ({K_LAST}-round moving mean) in "
                 f"{rounds_cell(search_rounds(prox))} rounds vs FedAvg's {rounds_cell(search_rounds(avg))} "
                 f"({versus.reason})")
    return text


def grid_search(results: dict, published: dict, out_dir: Path, profile: str) -> None:
    """Every lambda / mu tried, per E, with the best by the mean over seeds and whether the seeds
    separate it from the rest (best_marks)."""
    groups = grid_groups(results)
    rows = []
    for (epochs, algorithm), members in sorted(groups.items(), key=lambda item: (-item[0][0], item[0][1])):
        name = HYPERPARAMETER[algorithm][0]
        marks = best_marks(members)
        for result in sorted(members, key=lambda r: (r.settings["algorithm"][name], r.key)):
            rows.append([f"E={epochs}", algorithm, searched_value(result), rounds_cell(search_rounds(result)),
                         rounds_cell(result.rounds_to(SEARCH_TARGET)), accuracy_cell(result.accuracy_means()),
                         marks.get(result.key, ""), result.key])
    notes = [f"profile: {profile}; the paper searched a multiplicative grid (factor 10, then 2) for the value "
             "reaching 90 % test accuracy in the fewest rounds and chose lambda = 1.0, mu = 0.00025 (E = 50) "
             "and 0.00001 (E = 10)",
             "E is the paper's setting of the run (the default profile trains it with fewer local epochs)",
             seeds_note({r.key: r for members in groups.values() for r in members}),
             f"rounds to 90 % = each seed's first round whose {K_LAST}-round moving mean reaches it (the reading the "
             "claims use), then mean ± sd over seeds; 'first crossing' = the paper's reading, the first round at or "
             "above 90 %",
             f"accuracy (%) = each seed's mean over its last k = {K_LAST} evaluated rounds, mean ± sd over seeds",
             "best = the fewest mean rounds to 90 % (moving mean) among the values whose every seed reached it; the "
             "rule of claims.md then compares it with every other such value (paired by seed where they share "
             "seeds): 'best: separated' when the seeds separate it from all of them, else 'a tie' with those it is "
             "not separated from (one seed never separates); values with the same mean are 'tied best'. A "
             "description of the search, not a claim"]
    if profile == "default":
        notes.append("default profile: mu carried over from the paper's CNN (1e-6 to 1e-4) leaves the MLP "
                     "stand-in's FedProx equal to FedAvg, so the stand-in searched mu again from 1e-3 to 1, at each "
                     "E (fedcurv_grid_e10_standin_*, fedcurv_grid_e50_standin_*), keeping the largest of the "
                     "values tied for the fewest rounds: at the paper's E = 10 on seed 0's first crossing, at E = 50 "
                     "by a rule written in params.yaml before its runs were read (seeds 0-2, the moving mean, within "
                     "one round); both kept the value the FedProx runs use, named in Table 1's row "
                     "(docs/papers/fedcurv.md)")
    misfit = mu_search_note(results, published)
    if misfit:
        notes.append(misfit)
    write_table(out_dir, "grid_search", "FedCurv: the lambda and mu grid search",
                ["E", "algorithm", "value", f"rounds to 90% ({K_LAST}-round moving mean)",
                 "rounds to 90% (first crossing)", f"accuracy (last {K_LAST}, %)", "best", "run"], rows, notes)


# ---------------------------------------------------------------- figures

def legend(name: str, run: SeededRun) -> str:
    """The legend of a run: its algorithm and its own λ / μ (from its settings, never hard-coded)."""
    setting = algorithm_label(run.settings)
    return f"{name}, {setting}" if setting else name


def figures(results: dict, out_dir: Path, profile: str) -> None:
    for number, epochs in ((1, 50), (2, 10)):
        series = [(legend(name, results[keys[epochs]]), results[keys[epochs]]) for name, _, keys in ROWS
                  if keys[epochs] in results]
        used = series[0][1].settings.get("local_epochs") if series else epochs
        scaled = f" (trained with E={used}, {profile} profile)" if used != epochs else ""
        plot_curves(out_dir / f"figure{number}.png", f"Learning curves, E={epochs}{scaled}", series, list(TARGETS))


# ---------------------------------------------------------------- claims

# (id, claim, subject (algorithm, E), compared with (algorithm, E), target, whether the subject is the
# faster one), as section 4 states them.
ORDER_CLAIMS = [
    ("fedcurv-e50-90-faster-than-fedavg", "At E = 50, FedCurv reaches 90 % in fewer rounds than FedAvg",
     ("fedcurv", 50), ("fedavg", 50), 0.9, True),
    ("fedcurv-e50-95-faster-than-fedavg", "At E = 50, FedCurv reaches 95 % in fewer rounds than FedAvg",
     ("fedcurv", 50), ("fedavg", 50), 0.95, True),
    ("fedprox-e50-90-faster-than-fedavg", "At E = 50, FedProx reaches 90 % in fewer rounds than FedAvg",
     ("fedprox", 50), ("fedavg", 50), 0.9, True),
    ("fedprox-e50-95-slower-than-fedavg", "At E = 50, FedProx reaches 95 % later than FedAvg",
     ("fedprox", 50), ("fedavg", 50), 0.95, False),
    ("fedcurv-e10-90-faster-than-fedprox", "At E = 10, FedCurv still reaches 90 % in fewer rounds than FedProx",
     ("fedcurv", 10), ("fedprox", 10), 0.9, True),
    ("fedcurv-e10-90-faster-than-fedavg", "At E = 10, FedCurv still reaches 90 % in fewer rounds than FedAvg",
     ("fedcurv", 10), ("fedavg", 10), 0.9, True),
]


def claims(results: dict, published: dict) -> list[Claim]:
    table = published["table1"]
    found = []
    for claim_id, text, subject, other, target, subject_faster in ORDER_CLAIMS:
        paper = " vs ".join(str(table[name][f"E{epochs}"][f"{target:g}"]) for name, epochs in (subject, other))
        faster, slower = (subject, other) if subject_faster else (other, subject)
        keys = [f"fedcurv_e{faster[1]}_{faster[0]}", f"fedcurv_e{slower[1]}_{slower[0]}"]
        claim = fewer_rounds_claim(PAPER, claim_id, text, paper, results, *keys, target)
        if all(key in results for key in keys):
            claim = with_ceiling(claim, [results[key] for key in keys], target)
        found.append(claim)
    return found + [gain_claim(results, table)]


def ratio_per_seed(numerator: PerSeed, denominator: PerSeed) -> PerSeed:
    """numerator / denominator seed by seed, over the seeds both carry (None where either has no value),
    keeping the seeds so that two ratios on the same seeds are compared paired."""
    top, bottom = numerator.by_seed(), denominator.by_seed()
    shared = sorted(set(top) & set(bottom))
    return PerSeed([top[s] / bottom[s] if has_value(top[s]) and has_value(bottom[s]) and bottom[s] else None
                    for s in shared], shared)


def ratio_cell(values: Sequence) -> str:
    mean, sd, n = mean_sd(values)
    if mean is None:
        return "none"
    return f"{mean:.2f}x" + (f" ± {sd:.2f}" if sd is not None else "") + f" (n={n})"


def gain_claim(results: dict, t: dict) -> Claim:
    """FedCurv's speed-up over FedAvg (rounds to 90 %, as a ratio) is larger at E = 50 than at E = 10.
    Per seed s: FedAvg's rounds / FedCurv's (seed s of both runs, K_LAST-round moving mean; the paper's
    first crossing beside); the two E's ratios are compared by the rule, paired by seed where both E
    ran the same seeds. A ratio needs both runs to reach 90 %: a seed where either did not makes the
    claim inconclusive (a missing ratio is neither large nor small)."""
    claim_id = "gain-larger-at-e50"
    text = "FedCurv's gain over FedAvg (ratio of rounds to 90 %) is larger at E = 50 than at E = 10"
    published = (f"{t['fedavg']['E50']['0.9'] / t['fedcurv']['E50']['0.9']:.2f}x vs "
                 f"{t['fedavg']['E10']['0.9'] / t['fedcurv']['E10']['0.9']:.2f}x")
    keys = ["fedcurv_e50_fedcurv", "fedcurv_e50_fedavg", "fedcurv_e10_fedcurv", "fedcurv_e10_fedavg"]
    absent = not_run_claim(PAPER, claim_id, text, published, results, keys)
    if absent:
        return absent
    moving = {k: search_rounds(results[k]) for k in keys}
    gains = gains_per_e(moving, keys)
    first_gains = gains_per_e({k: results[k].rounds_to(SEARCH_TARGET) for k in keys}, keys)
    comparison = gain_comparison(gains[50], gains[10])
    evidence = (f"rounds to 90 % ({K_LAST}-round moving mean): "
                + ", ".join(f"{k} {rounds_cell(moving[k])}" for k in keys)
                + f"; gains at E = 50: {ratio_cell(gains[50])}, at E = 10: {ratio_cell(gains[10])}; "
                + comparison.reason
                + f"; first crossing (the paper's reading): gains {ratio_cell(first_gains[50])} vs "
                  f"{ratio_cell(first_gains[10])}")
    return Claim(PAPER, claim_id, text, comparison.status, evidence, published, comparison.seeds, [comparison],
                 "in the ratio")


def gains_per_e(rounds: dict[str, PerSeed], keys: Sequence[str]) -> dict[int, PerSeed]:
    """{E: FedAvg's rounds / FedCurv's, per seed} from the rounds of keys = (FedCurv E = 50, FedAvg E = 50,
    FedCurv E = 10, FedAvg E = 10)."""
    curv_50, avg_50, curv_10, avg_10 = keys
    return {50: ratio_per_seed(rounds[avg_50], rounds[curv_50]), 10: ratio_per_seed(rounds[avg_10], rounds[curv_10])}


def gain_comparison(at_50: PerSeed, at_10: PerSeed) -> Comparison:
    """The rule on the two E's per-seed gains, higher at E = 50 claimed; a seed without a ratio leaves it
    undecided, as no number of seeds that keep it can say which E gains more."""
    missing = sum(not has_value(v) for v in list(at_50) + list(at_10))
    if missing:
        why = (f"{missing} seed(s) without a ratio (a run's moving mean never reached 90 % in its rounds): a "
               "missing ratio is neither large nor small; longer runs would give one")
        return Comparison(INCONCLUSIVE, why, len(at_50), len(at_10), undecidable=why)
    return compare(at_50, at_10, "higher")


def build(context: ReportContext) -> list[Claim]:
    context.out_dir.mkdir(parents=True, exist_ok=True)
    results, published = context.runs_of(PAPER), context.published
    table1(results, published, context.out_dir, context.profile)
    grid_search(results, published, context.out_dir, context.profile)
    figures(results, context.out_dir, context.profile)
    return claims(results, published)
