"""The one rule that decides every claim (pipeline/report/seeds.py), on constructed per-seed values.

Welch's t, its degrees of freedom and p are computed here by the textbook formulas (and
scipy.stats.t.sf for the tail), not by calling ttest_ind again, and checked against hand-picked numbers.
"""

from __future__ import annotations

import math

import pytest
from scipy.stats import t as student_t

from pipeline.report.seeds import (
    ALPHA,
    FAILED,
    HELD,
    INCONCLUSIVE,
    K_LAST,
    RULE,
    PerSeed,
    best_of,
    combine,
    compare,
    decide,
    last_k_mean,
    mean_sd,
    welch,
)


def welch_by_hand(first: list[float], second: list[float]) -> tuple[float, float, float]:
    """(t, Welch–Satterthwaite df, two-sided p) from the textbook formulas."""
    n1, n2 = len(first), len(second)
    m1, m2 = sum(first) / n1, sum(second) / n2
    v1 = sum((x - m1) ** 2 for x in first) / (n1 - 1)
    v2 = sum((x - m2) ** 2 for x in second) / (n2 - 1)
    se2 = v1 / n1 + v2 / n2
    t = (m1 - m2) / math.sqrt(se2)
    df = se2**2 / ((v1 / n1) ** 2 / (n1 - 1) + (v2 / n2) ** 2 / (n2 - 1))
    return t, df, 2 * student_t.sf(abs(t), df)


# ---------------------------------------------------------------- summaries


def test_mean_sd_is_the_sample_sd_and_none_with_one_value():
    mean, sd, n = mean_sd([1.0, 2.0, 3.0])
    assert (mean, sd, n) == (2.0, 1.0, 3)  # sd with n − 1: sqrt((1 + 0 + 1) / 2)
    assert mean_sd([5.0]) == (5.0, None, 1)
    assert mean_sd([]) == (None, None, 0)
    assert mean_sd([1.0, None, float("nan"), 3.0]) == (2.0, pytest.approx(math.sqrt(2)), 2)  # no value: not counted


def test_last_k_mean():
    assert K_LAST == 5
    curve = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]
    assert last_k_mean(curve, 5) == pytest.approx(0.5)  # 0.3 .. 0.7
    assert last_k_mean(curve) == pytest.approx(0.5)
    assert last_k_mean(curve, 1) == pytest.approx(0.7)
    assert last_k_mean([0.2, 0.4], 5) == pytest.approx(0.3)  # fewer rounds than k: all of them
    assert last_k_mean([0.5, float("nan")], 5) is None  # a diverged curve has no mean
    assert last_k_mean([float("nan"), 0.5, 0.5, 0.5, 0.5, 0.5], 5) == pytest.approx(0.5)  # outside the window
    assert last_k_mean([], 5) is None
    with pytest.raises(ValueError):
        last_k_mean(curve, 0)


# ---------------------------------------------------------------- Welch's test itself


@pytest.mark.parametrize(
    "first, second, t, df",
    [
        ([90.0, 91.0, 92.0], [80.0, 81.5, 82.0], 11.8, 3.9936),
        ([58.5, 64.08, 69.6], [53.0, 58.48, 64.0], 1.2340, 3.9997),
        ([10.0, 11.0, 12.0, 13.0], [12.0, 13.0, 14.0, 15.0, 16.0], -2.6112, 6.9808),
    ],
)
def test_welch_matches_the_textbook_formula(first, second, t, df):
    hand_t, hand_df, hand_p = welch_by_hand(first, second)
    assert (hand_t, hand_df) == (pytest.approx(t, abs=1e-3), pytest.approx(df, abs=1e-3))  # hand-picked
    got_t, got_df, got_p = welch(first, second)
    assert (got_t, got_df, got_p) == (pytest.approx(hand_t), pytest.approx(hand_df), pytest.approx(hand_p))


# ---------------------------------------------------------------- the rule: held, failed, inconclusive


def test_clearly_separated_seeds_hold():
    first, second = [90.0, 91.0, 92.0], [80.0, 81.5, 82.0]
    _, _, p = welch_by_hand(first, second)
    assert p == pytest.approx(2.98e-4, rel=1e-2) and p < ALPHA
    comparison = compare(first, second, "higher")
    assert comparison.status == HELD and comparison.p == pytest.approx(p) and comparison.seeds == "3 vs 3"
    assert decide(first, second, "higher") == HELD


def test_reversed_is_failed():
    first, second = [80.0, 81.5, 82.0], [90.0, 91.0, 92.0]
    assert decide(first, second, "higher") == FAILED
    # "lower is better" turns it round again.
    assert decide(first, second, "lower") == HELD


def test_an_eleven_point_spread_is_inconclusive_though_the_means_differ():
    # 64.06 vs 58.49 by the means (5.6 points), each side's seeds over 11 points.
    first, second = [58.5, 64.08, 69.6], [53.0, 58.48, 64.0]
    assert sum(first) / 3 - sum(second) / 3 == pytest.approx(5.57, abs=0.01)
    _, _, p = welch_by_hand(first, second)
    assert p == pytest.approx(0.285, abs=1e-3) and p >= ALPHA
    comparison = compare(first, second, "higher")
    assert comparison.status == INCONCLUSIVE and comparison.p == pytest.approx(p)
    assert decide(second, first, "higher") == INCONCLUSIVE  # nor failed the other way


def test_alpha_is_the_threshold():
    first, second = [10.0, 11.0, 12.0, 13.0], [12.0, 13.0, 14.0, 15.0, 16.0]  # rounds: first is faster
    _, _, p = welch_by_hand(first, second)
    assert 0.01 < p < 0.05 and p == pytest.approx(0.0349, abs=1e-3)
    assert decide(first, second, "lower") == HELD
    assert decide(first, second, "lower", alpha=0.01) == INCONCLUSIVE
    assert compare(first, second, "lower").seeds == "4 vs 5"


def test_one_seed_can_never_separate():
    assert decide([99.0], [1.0], "higher") == INCONCLUSIVE
    assert decide([99.0], [1.0, 1.1, 0.9], "higher") == INCONCLUSIVE
    assert decide([99.0, 98.0, 97.0], [1.0], "higher") == INCONCLUSIVE
    comparison = compare([99.0], [1.0], "higher")
    assert "single seed" in comparison.reason and comparison.p is None and comparison.seeds == "1 vs 1"
    assert decide([], [], "higher") == INCONCLUSIVE


def test_constant_sides_go_to_the_exact_permutation_test():
    # Each side the same on every seed: Welch's t is undefined (sd 0). Of the C(n1 + n2, n1) ways to deal
    # the values into two sides only the observed one and its mirror are as far apart.
    two = compare([5.0, 5.0], [7.0, 7.0], "lower")
    assert two.status == INCONCLUSIVE and two.p == pytest.approx(2 / 6)  # C(4, 2) = 6
    assert decide([5.0] * 4, [7.0] * 4, "lower") == HELD  # 2 / C(8, 4) = 2 / 70 = 0.029
    assert decide([7.0] * 4, [5.0] * 4, "lower") == FAILED
    three_two = compare([7.0, 7.0, 7.0], [5.0, 5.0], "lower")
    assert three_two.p == pytest.approx(1 / 10)  # sizes differ: no mirror, 1 of C(5, 2) = 10
    assert decide([5.0], [7.0], "lower") == INCONCLUSIVE
    # A tie on every seed: neither side is better.
    assert decide([5.0, 5.0], [5.0, 5.0], "lower") == INCONCLUSIVE
    # One side constant, the other not: Welch as usual.
    _, _, p = welch_by_hand([6.0, 6.0, 6.0], [7.0, 8.0, 9.0])
    assert p == pytest.approx(0.0742, abs=1e-3)
    assert decide([6.0, 6.0, 6.0], [7.0, 8.0, 9.0], "lower") == INCONCLUSIVE


def test_better_must_be_higher_or_lower():
    with pytest.raises(ValueError):
        decide([1.0, 2.0], [3.0, 4.0], "bigger")


# ---------------------------------------------------------------- seeds without a value: NC / diverged


def test_rounds_to_target_with_nc_seeds():
    def nc(values, better="lower"):  # rounds to a target as a run reports them: NC is the run's worst outcome
        return PerSeed(values, range(len(values)), [True] * len(values), better)

    # Every seed of one side reached the target, no seed of the other: each NC seed ranks last, and 6 seeds
    # a side are the fewest at which the signed-rank test separates them (2/2^6 = 0.031; 3 give 0.25).
    assert decide(nc([10, 12, 11, 13, 10, 12]), nc([None] * 6), "lower") == HELD
    assert decide(nc([None] * 6), nc([30, 35, 40, 31, 36, 41]), "lower") == FAILED
    assert decide(nc([10, 12, 11]), nc([None] * 3), "lower") == INCONCLUSIVE
    # No seed of either reached it: a tie, which no number of seeds breaks.
    assert compare(nc([None, None]), nc([None, None]), "lower").undecidable
    # Only some seeds of a side reached it: ranked as well, the NC seeds below every round reached.
    assert decide(nc([10, None, 12, 11, 10, 13]), nc([20, 21, 22, 20, 21, 22]), "lower") == INCONCLUSIVE  # 5 of 6
    assert decide(nc([10, 11, 12, 10, 11, 12]), nc([20, None, 22, 21, None, 20]), "lower") == HELD
    # One seed a side: never separated, even by NC.
    assert decide(nc([10]), nc([None]), "lower") == INCONCLUSIVE
    # NaN counts as no value too (a diverged seed's accuracy).
    nan = float("nan")
    assert decide(nc([0.9, 0.91, 0.92, 0.9, 0.91, 0.92], "higher"), nc([nan] * 6, "higher"), "higher") == HELD
    # Values missing without a mark (not the run's own outcome) are unknown: nothing is decided on them.
    assert decide([10, 12], [None, None], "lower") == INCONCLUSIVE
    # Every seed reached it on both sides: Welch on the rounds, lower is better.
    first, second = [10, 11, 12, 13], [12, 13, 14, 15, 16]
    assert decide(first, second, "lower") == HELD
    assert decide(second, first, "lower") == FAILED


# ---------------------------------------------------------------- claims of several comparisons


def test_best_of_an_ablation():
    ours = [92.0, 92.5, 91.5]
    clearly_below = {"fedavg": [85.0, 86.0, 84.0], "ewc": [83.0, 84.0, 82.0]}
    # Separated above every other method: held.
    status, comparisons = best_of(ours, {**clearly_below, "weighted": [88.0, 88.5, 87.5]})
    assert status == HELD and set(comparisons) == {"fedavg", "ewc", "weighted"}
    # Not separated from the runner-up (the means still put ours first): inconclusive.
    runner_up = [86.0, 92.3, 97.0]
    assert sum(runner_up) / 3 < sum(ours) / 3
    status, comparisons = best_of(ours, {**clearly_below, "weighted": runner_up})
    assert status == INCONCLUSIVE
    assert comparisons["weighted"].status == INCONCLUSIVE and comparisons["fedavg"].status == HELD
    # Another method separated above it: failed.
    status, _ = best_of(ours, {**clearly_below, "weighted": [95.0, 95.5, 94.5]})
    assert status == FAILED
    # One seed each: inconclusive, however large the gaps.
    status, _ = best_of([99.0], {"fedavg": [1.0], "ewc": [2.0]})
    assert status == INCONCLUSIVE


def test_an_ordering_chains_the_pairwise_claims():
    a, b, c = [95.0, 95.5, 94.5], [90.0, 90.5, 89.5], [80.0, 80.5, 79.5]
    assert combine([decide(a, b), decide(b, c)]) == HELD  # A > B > C
    assert combine([decide(a, c), decide(c, b)]) == FAILED  # A > C > B: C > B fails
    noisy = [85.0, 92.0, 99.0]
    assert combine([decide(a, noisy), decide(noisy, c)]) == INCONCLUSIVE
    assert combine([HELD, INCONCLUSIVE, FAILED]) == FAILED
    assert combine([]) == INCONCLUSIVE


def test_every_test_the_rule_applies_is_the_one_the_ledger_states():
    """The ledger prints RULE once and each comparison's test beside it: a comparison of every kind the
    rule distinguishes (same seeds; seeds that differ; each of those with sd zero) carries the test RULE
    names for that case, and the exact tests' p is the formula RULE prints."""
    from pipeline.report import seeds
    from pipeline.report.seeds import PerSeed

    spread, shifted = [90.0, 91.5, 92.0, 93.5, 94.0, 95.5], [80.0, 80.5, 82.0, 82.5, 84.0, 84.5]
    cases = {  # the words of RULE that state the case -> a comparison in that case
        "**paired** on the per-seed differences": compare(PerSeed(spread, range(6)), PerSeed(shifted, range(6))),
        "**Welch**'s over the per-seed values": compare(PerSeed(spread, range(6)), PerSeed(shifted, range(6, 12))),
        "p = 2/2^n paired": compare(PerSeed([2.0] * 6, range(6)), PerSeed([1.0] * 6, range(6))),
        "2/C(n1 + n2, n1) unpaired": compare([2.0] * 4, [1.0] * 4),
    }
    tests = {case: comparison.test for case, comparison in cases.items()}
    assert tests == {
        "**paired** on the per-seed differences": seeds.PAIRED,
        "**Welch**'s over the per-seed values": seeds.WELCH,
        "p = 2/2^n paired": seeds.EXACT_PAIRED,
        "2/C(n1 + n2, n1) unpaired": seeds.EXACT_UNPAIRED,
    }
    for case, comparison in cases.items():
        assert case in RULE, case
        assert comparison.status == HELD and comparison.p < ALPHA, (case, comparison)
    assert cases["p = 2/2^n paired"].p == pytest.approx(2 / 2**6)
    assert cases["2/C(n1 + n2, n1) unpaired"].p == pytest.approx(2 / math.comb(8, 4))
    assert f"p < {ALPHA:g}" in RULE and f"last {K_LAST} evaluated rounds" in RULE


def test_the_ledgers_baselines_are_the_committed_ledgers_of_their_commits():
    """claims.md sets its totals beside earlier ledgers (report/__main__.BASELINES); each ledger's own totals
    line, read from git at its commit, must give the same counts (skipped where the clone lacks the commit)."""
    import re
    import subprocess
    from pathlib import Path

    from pipeline.report.__main__ import BASELINES

    repo = Path(__file__).resolve().parents[2]
    for baseline in BASELINES:
        shown = subprocess.run(
            ["git", "show", f"{baseline['commit']}:reports/claims.md"], cwd=repo, capture_output=True, text=True
        )
        if shown.returncode != 0:
            pytest.skip(f"commit {baseline['commit']} is not in this clone's history")
        (totals,) = [line for line in shown.stdout.splitlines() if line.startswith("Totals: ")]
        counted = {status: int(n) for n, status in re.findall(r"(\d+) (held|failed|inconclusive|not run)", totals)}
        assert counted == baseline["totals"], (baseline["commit"], totals)
