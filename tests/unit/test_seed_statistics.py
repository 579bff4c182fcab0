"""The statistics behind the claims ledger (pipeline/report/seeds.py): comparisons paired by seed, the
moving-mean rounds to a target, whole-period readings, and the power column; and the common random
numbers that make pairing by seed meaningful (seed s gives every method the same draws).

Every expected number is worked by hand here (textbook formulas, Cohen's power tables), not by calling
the code's own formula again.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from scipy.stats import t as student_t

from pipeline.report.seeds import (
    FAILED,
    HELD,
    INCONCLUSIVE,
    PAIRED,
    WELCH,
    PerSeed,
    claim_power,
    compare,
    deciding_tests,
    needed_seeds,
    power_line,
    power_of_t_test,
    rounds_to_target_moving,
    seeds_for_power,
    window_mean,
)
from pipeline.rounds import initial_state, run_round
from support import synthetic
from support.algorithms import fedavg, fedprox

# ---------------------------------------------------------------- paired by seed, or Welch

# Three seeds whose levels differ by 10 points, each with a near-constant gain of about one point:
# the seed-to-seed spread hides the gain from Welch, the per-seed differences show it.
SEEDS = (0, 1, 2)
FIRST = [70.0, 80.0, 90.0]
SECOND = [69.0, 79.2, 88.9]


def paired_p_by_hand(first, second) -> float:
    differences = [a - b for a, b in zip(first, second)]
    n = len(differences)
    mean = sum(differences) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))
    t = mean / (sd / math.sqrt(n))
    return 2 * student_t.sf(abs(t), n - 1)


def test_the_paired_test_separates_where_welch_does_not():
    # Differences 1.0, 0.8, 1.1: mean 0.9667, sd 0.1528, t = 10.96 on 2 df.
    p_paired = paired_p_by_hand(FIRST, SECOND)
    assert p_paired == pytest.approx(0.0082, abs=3e-4)
    paired = compare(PerSeed(FIRST, SEEDS), PerSeed(SECOND, SEEDS), "higher")
    assert paired.status == HELD and paired.test == PAIRED and paired.p == pytest.approx(p_paired)
    assert paired.effect == pytest.approx(0.9667, abs=1e-4) and paired.sd == pytest.approx(0.1528, abs=1e-4)
    # The same values without their seeds: Welch, t = 0.119, nowhere near separated.
    unpaired = compare(FIRST, SECOND, "higher")
    assert unpaired.status == INCONCLUSIVE and unpaired.test == WELCH and unpaired.p > 0.9


def test_pairing_is_refused_when_the_seeds_differ():
    comparison = compare(PerSeed(FIRST, (0, 1, 2)), PerSeed(SECOND, (0, 1, 3)), "higher")
    assert comparison.test == WELCH and comparison.status == INCONCLUSIVE
    assert "differ" in comparison.reason
    # One side without seeds: Welch too, and it says why.
    comparison = compare(PerSeed(FIRST, SEEDS), SECOND, "higher")
    assert comparison.test == WELCH and "without its seeds" in comparison.reason


def test_pairs_follow_the_seeds_not_the_positions():
    # The second side listed in another seed order: still paired seed with seed.
    second = PerSeed([SECOND[2], SECOND[0], SECOND[1]], (2, 0, 1))
    comparison = compare(PerSeed(FIRST, SEEDS), second, "higher")
    assert comparison.test == PAIRED and comparison.p == pytest.approx(paired_p_by_hand(FIRST, SECOND))


def test_lower_is_better_turns_the_paired_verdict_round():
    assert compare(PerSeed(SECOND, SEEDS), PerSeed(FIRST, SEEDS), "lower").status == HELD
    assert compare(PerSeed(FIRST, SEEDS), PerSeed(SECOND, SEEDS), "lower").status == FAILED


def test_a_constant_paired_difference_goes_to_the_exact_sign_flip_test():
    # Every seed one round apart (integer rounds do this): t is undefined. Of the 2^n sign flips of the
    # differences only all-plus and all-minus are as extreme: p = 2 / 2^n.
    three = compare(PerSeed([27, 28, 27], SEEDS), PerSeed([28, 29, 28], SEEDS), "lower")
    assert three.status == INCONCLUSIVE and three.p == pytest.approx(0.25) and three.test == "exact sign-flip"
    assert "6 seeds a side" in power_line(three, "rounds")  # 2 / 2^6 = 0.031 < 0.05 < 2 / 2^5
    six = tuple(range(6))
    assert compare(PerSeed([27] * 6, six), PerSeed([28] * 6, six), "lower").status == HELD
    assert compare(PerSeed([29] * 6, six), PerSeed([28] * 6, six), "lower").status == FAILED
    tie = compare(PerSeed([3.0, 5.0], (0, 1)), PerSeed([3.0, 5.0], (0, 1)), "higher")
    assert tie.status == INCONCLUSIVE and "equal on every seed" in power_line(tie)


def test_seeds_without_a_known_value_leave_a_comparison_open():
    # Values missing for a reason other than the run's own outcome (no worst-outcome mark): nothing is known
    # of them, so even every seed of one side against none of the other decides nothing.
    reached, never = PerSeed([10, 12, 11], SEEDS), PerSeed([None, None, None], SEEDS)
    assert compare(reached, never, "lower").status == INCONCLUSIVE
    partial = compare(PerSeed([10, None, 11], SEEDS), PerSeed([20, 21, 22], SEEDS), "lower")
    assert partial.status == INCONCLUSIVE and power_line(partial).startswith("cannot be decided")
    assert "without a known value" in partial.reason


def test_per_seed_values_keep_their_seeds_through_map():
    values = PerSeed([1.0, None, 3.0], SEEDS).map(lambda v: v + 1)
    assert list(values) == [2.0, None, 4.0] and values.seeds == SEEDS
    with pytest.raises(ValueError):
        PerSeed([1.0, 2.0], SEEDS)


# ---------------------------------------------------------------- rounds to a target on a moving mean

CURVE_ROUNDS = list(range(1, 9))
CURVE = [0.5, 0.95, 0.6, 0.9, 0.92, 0.93, 0.94, 0.96]  # one lucky round 2, then a real rise from round 4


def test_the_moving_mean_ignores_one_lucky_round():
    # k = 3: windows ending at 3..8 average 0.683, 0.817, 0.807, 0.917 -> first at or above 0.9: round 6.
    assert rounds_to_target_moving(CURVE_ROUNDS, CURVE, 0.9, k=3) == 6
    # k = 1 is the paper's reading, the first round at or above the target: the lucky round 2.
    assert rounds_to_target_moving(CURVE_ROUNDS, CURVE, 0.9, k=1) == 2


def test_the_moving_mean_reports_the_round_not_the_position():
    every_fifth = [5 * r for r in CURVE_ROUNDS]
    assert rounds_to_target_moving(every_fifth, CURVE, 0.9, k=3) == 30


def test_the_moving_mean_never_reaching_or_diverging_has_no_round():
    assert rounds_to_target_moving(CURVE_ROUNDS, CURVE, 0.99, k=3) is None
    assert rounds_to_target_moving([1, 2], [0.95, 0.96], 0.9, k=3) is None  # no full window
    diverged = [0.5, 0.95, 0.96, float("nan"), 0.97, 0.98]
    # windows 1-3 (0.803) below; every window holding the NaN has no mean; 4-6 holds it too: never.
    assert rounds_to_target_moving(range(1, 7), diverged, 0.9, k=3) is None
    with pytest.raises(ValueError):
        rounds_to_target_moving(CURVE_ROUNDS, CURVE, 0.9, k=0)


# ---------------------------------------------------------------- a period-2 quantity read over its period


def test_a_see_saw_read_over_its_period():
    rounds = [1, 2, 3, 4, 5, 6]
    share = [0.95, 0.40, 0.97, 0.45, 0.99, 0.37]
    assert window_mean(rounds, share, at=4, width=2) == pytest.approx((0.97 + 0.45) / 2)
    assert window_mean(rounds, share, at=5, width=2) == pytest.approx((0.45 + 0.99) / 2)
    # One round alone swings between 45 % and 99 %: the period's mean moves by 1.5 points.
    assert window_mean(rounds, share, at=4, width=1) == pytest.approx(0.45)
    assert window_mean(rounds, share, at=1, width=2) is None  # round 0 was never read
    assert window_mean([1, 2, 4], [0.9, 0.4, 0.5], at=4, width=2) is None  # round 3 missing


# ---------------------------------------------------------------- the power column


@pytest.mark.parametrize(
    "effect_size, paired, seeds",
    [
        (0.5, False, 64),  # Cohen (1988), Table 2.4.1: d = 0.5, two-sided alpha 0.05, power 0.80 -> n = 64 a group
        (0.8, False, 26),  # the same table, d = 0.8 -> 26
        (1.0, False, 17),  # d = 1.0 -> 17
        (0.5, True, 34),  # one sample / paired, dz = 0.5 -> 34 (the standard G*Power result)
    ],
)
def test_seeds_for_power_matches_the_textbook(effect_size, paired, seeds):
    assert seeds_for_power(effect_size, paired) == seeds
    assert power_of_t_test(effect_size, seeds, paired) >= 0.8 > power_of_t_test(effect_size, seeds - 1, paired)


def test_power_is_symmetric_and_tiny_effects_need_more_than_the_cap():
    assert seeds_for_power(-0.8, False) == 26
    assert seeds_for_power(0.2, False) is None  # Cohen: 393 a group, beyond 200
    assert seeds_for_power(0.0, True) is None


def test_the_power_line_of_an_undecided_comparison():
    # Differences 2, -1, 3: mean 1.333, sd 2.082, dz = 0.64 -> 22 seeds (by the same noncentral t).
    comparison = compare(PerSeed([12.0, 9.0, 13.0], SEEDS), PerSeed([10.0, 10.0, 10.0], SEEDS), "higher")
    assert comparison.status == INCONCLUSIVE and comparison.test == PAIRED
    line = power_line(comparison, "points")
    assert (
        "+1.33 points" in line
        and "paired sd 2.08" in line
        and f"{seeds_for_power(1.3333 / 2.0817, True)} seeds" in line
    )
    against = compare(PerSeed([10.0, 10.0, 10.0], SEEDS), PerSeed([12.0, 9.0, 13.0], SEEDS), "higher")
    assert "as failed" in power_line(against)
    decided = compare(PerSeed(FIRST, SEEDS), PerSeed(SECOND, SEEDS), "higher")
    assert power_line(decided) == ""


def test_a_claim_of_several_comparisons_names_its_hardest():
    easy = compare(PerSeed([12.0, 9.0, 14.0], SEEDS), PerSeed([10.0, 10.0, 10.0], SEEDS), "higher")
    hard = compare(PerSeed([10.5, 9.0, 11.0], SEEDS), PerSeed([10.0, 10.0, 10.0], SEEDS), "higher")
    held = compare(PerSeed(FIRST, SEEDS), PerSeed(SECOND, SEEDS), "higher")
    line = claim_power([held, easy, hard])
    assert line.startswith("2 comparisons undecided") and power_line(hard) in line
    nc = compare(PerSeed([None, None, None], SEEDS), PerSeed([None, None, None], SEEDS), "lower")
    assert "cannot be decided" in claim_power([easy, nc])
    assert claim_power([held]) == ""
    assert deciding_tests([held, compare(FIRST, SECOND)]) == "paired t + Welch t"


def test_a_claim_with_a_comparison_against_it_names_the_nearest_failure():
    # All-of claims: one comparison separated against the claim fails it. Differences -2, -1, -3 (p = 0.074
    # over 3 seeds, dz = -2) need a handful of seeds; 1, -0.5, 1.2 (dz = +0.61) for the claim need more, and
    # -0.6, 0.2, -1.0 (dz = -0.76) against it sits between: the line names the first, as failed.
    base = PerSeed([10.0, 10.0, 10.0], SEEDS)
    against_near = compare(PerSeed([8.0, 9.0, 7.0], SEEDS), base, "higher")
    against_far = compare(PerSeed([9.4, 10.2, 9.0], SEEDS), base, "higher")
    for_claim = compare(PerSeed([11.0, 9.5, 11.2], SEEDS), base, "higher")
    assert {c.status for c in (against_near, against_far, for_claim)} == {INCONCLUSIVE}
    assert needed_seeds(against_near) < needed_seeds(against_far) < needed_seeds(for_claim)
    line = claim_power([for_claim, against_far, against_near])
    assert line.startswith("3 comparisons undecided; one separated against the claim fails it, the nearest: ")
    assert line.endswith(power_line(against_near)) and "as failed" in line
    # A claim whose comparisons are not its sides (one decided does not fail it) still names the hardest.
    assert claim_power([for_claim, against_far, against_near], one_failure_fails=False).endswith(power_line(for_claim))
    # Every undecided comparison for the claim: all must be decided, so the hardest is named, as before.
    assert claim_power([for_claim, dataclasses.replace(against_near, effect=2.0)]).endswith(power_line(for_claim))


# ---------------------------------------------------------------- common random numbers


def train(algorithm, hp, rounds=2, seed=3):
    data = synthetic.make_data([5, 9, 3, 11, 7, 6])
    settings = synthetic.run_settings(seed, client_fraction=0.5, momentum=0.9)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        from pipeline import models

        model = models.mlp(synthetic.SHAPE, synthetic.CLASSES, [6])
    state = initial_state(model, algorithm, len(data.clients), hp)
    cohorts = []
    for round_ in range(1, rounds + 1):
        result = run_round(model, algorithm, hp, state, data, settings, round_)
        state = result.state
        cohorts.append(list(result.cohort))
    return state, cohorts


def test_a_seed_gives_every_method_the_same_draws():
    # FedProx with mu = 0 is FedAvg: if anything random in training depended on the algorithm (its name,
    # its state, the order of its calls), the two would part.
    fedavg_state, fedavg_cohorts = train(fedavg, dict(fedavg.HYPERPARAMS))
    fedprox_state, fedprox_cohorts = train(fedprox, {**fedprox.HYPERPARAMS, "mu": 0.0})
    assert fedavg_cohorts == fedprox_cohorts
    for name, tensor in fedavg_state["params"].items():
        assert torch.equal(tensor, fedprox_state["params"][name]), name


def test_training_draws_nothing_from_the_global_generator():
    first, _ = train(fedavg, dict(fedavg.HYPERPARAMS))
    torch.rand(1000)  # another method (or a probe) consuming global draws must not shift this run's
    second, _ = train(fedavg, dict(fedavg.HYPERPARAMS))
    for name, tensor in first["params"].items():
        assert torch.equal(tensor, second["params"][name]), name


# ---------------------------------------------------------------- seeds without a value: the worst-rank rule
#
# A seed whose run diverged or never reached the target (marked `worst`) ranks below every seed with a value,
# and a rank test decides. Expected p-values are counted by hand or by brute-force enumeration of the sign
# flips / deals (itertools), not by the code's convolution.

import itertools  # noqa: E402

from scipy.stats import mannwhitneyu, rankdata, wilcoxon  # noqa: E402

from pipeline.report.seeds import MANN_WHITNEY, WILCOXON, rank_seeds_for_power, rank_sum_test, signed_rank_test  # noqa: E402


def signed_rank_p_by_enumeration(differences) -> float:
    """Two-sided p over every one of the 2^m sign flips of the nonzero differences' mid-ranks."""
    nonzero = [d for d in differences if d != 0]
    ranks = rankdata([abs(d) for d in nonzero])
    total = sum(ranks)
    observed = abs(sum(r for r, d in zip(ranks, nonzero) if d > 0) - total / 2)
    flips = list(itertools.product((0, 1), repeat=len(ranks)))
    extreme = sum(abs(sum(r for r, s in zip(ranks, signs) if s) - total / 2) >= observed - 1e-9 for signs in flips)
    return extreme / len(flips)


def rank_sum_p_by_enumeration(first, second) -> float:
    """Two-sided p over every way to deal the pooled values' mid-ranks into sides of the same sizes."""
    ranks = rankdata(list(first) + list(second))
    n1, total = len(first), len(first) + len(second)
    centre = n1 * (total + 1) / 2
    observed = abs(sum(ranks[:n1]) - centre)
    deals = list(itertools.combinations(range(total), n1))
    return sum(abs(sum(ranks[i] for i in deal) - centre) >= observed - 1e-9 for deal in deals) / len(deals)


def test_the_signed_rank_test_by_hand():
    # 7 differences all one way: only all-minus and all-plus are as extreme, p = 2/2^7.
    assert signed_rank_test([-1.0, -2, -3, -4, -5, -6, -7])[0] == pytest.approx(2 / 128)
    # One + at rank 1: W+ = 1; W+ <= 1 happens for {} and {1}, and as often at the top: p = 4/128.
    p, r, m = signed_rank_test([1.0, -2, -3, -4, -5, -6, -7])
    assert p == pytest.approx(4 / 128) and m == 7 and r == pytest.approx((1 - 27) / 28)
    # Ties: |d| = 1, 1, 2, 3 have mid-ranks 1.5, 1.5, 3, 4 (total 10), W+ = 7. Of the 16 flips, W+ >= 7:
    # {3, 4}, {1.5, 1.5, 4}, {1.5, 3, 4} twice, all = 5; W+ <= 3: {}, {1.5} twice, {3}, {1.5, 1.5} = 5: p = 10/16.
    assert signed_rank_test([1.0, 1.0, -2.0, 3.0])[0] == pytest.approx(10 / 16)
    # Zeros are dropped (Wilcoxon's convention): two seeds without a value on both sides tie.
    assert signed_rank_test([0.0, 0.0, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0])[0] == pytest.approx(2 / 64)


def test_the_rank_tests_agree_with_enumeration_and_with_scipy_where_it_is_exact():
    import random

    rng = random.Random(7)
    for _ in range(40):
        m = rng.randint(2, 10)
        differences = [rng.choice([-3, -2, -1, 0, 1, 2, 4]) * 1.0 for _ in range(m)]  # ties and zeros
        if any(differences):
            assert signed_rank_test(differences)[0] == pytest.approx(signed_rank_p_by_enumeration(differences))
        first = [rng.choice([0, 1, 2, 3]) * 1.0 for _ in range(rng.randint(2, 6))]
        second = [rng.choice([0, 1, 2, 3]) * 1.0 for _ in range(rng.randint(2, 6))]
        if len(set(first + second)) > 1:
            assert rank_sum_test(first, second)[0] == pytest.approx(rank_sum_p_by_enumeration(first, second))
        untied = [rng.gauss(0.4, 1) for _ in range(m)]  # no ties: scipy's exact distributions apply
        assert signed_rank_test(untied)[0] == pytest.approx(wilcoxon(untied, method="exact").pvalue)
        x, y = untied[: max(2, m // 2)], [rng.gauss(0, 1) for _ in range(rng.randint(2, 8))]
        assert rank_sum_test(x, y)[0] == pytest.approx(mannwhitneyu(x, y, method="exact").pvalue)
    # 4 against 4, every value of one side above the other: 2 of the C(8, 4) = 70 deals, r = 1.
    assert rank_sum_test([5.0, 6, 7, 8], [1.0, 2, 3, 4]) == (pytest.approx(2 / 70), 1.0)


def test_seeds_marked_worst_rank_below_every_seed_with_a_value():
    six = tuple(range(6))
    # Accuracy: the first side diverged on seeds 0 and 3 and is below the second on the others; higher is
    # better, so every untied seed points against it: p = 2/2^6, failed (under the old rule: undecidable).
    first = PerSeed([None, 0.60, 0.61, None, 0.58, 0.62], six, [True] * 6, "higher")
    second = PerSeed([0.70, 0.71, 0.69, 0.72, 0.70, 0.68], six, [True] * 6, "higher")
    comparison = compare(first, second, "higher")
    assert (comparison.status, comparison.test) == (FAILED, WILCOXON)
    assert comparison.p == pytest.approx(2 / 64) and comparison.effect == -1.0
    assert "2 of 6 vs 0 of 6 seeds without a value" in comparison.reason
    assert "on the 4 seeds where both sides have a value alone: paired t" in comparison.reason
    # Rounds to a target, lower is better: NC is later than any round reached.
    reached = PerSeed([10, 12, 11, 13, 10, 12], six, [True] * 6, "lower")
    never = PerSeed([None] * 6, six, [True] * 6, "lower")
    assert compare(reached, never, "lower").status == HELD and compare(never, reached, "lower").status == FAILED
    # Where both sides lack a value on a seed, it ties and drops out: 5 untied seeds, p = 2/2^5 (open).
    both_missing = PerSeed([None, 0.60, 0.61, 0.59, 0.58, 0.62], six, [True] * 6, "higher")
    second_missing = PerSeed([None, 0.70, 0.71, 0.69, 0.72, 0.70], six, [True] * 6, "higher")
    open_one = compare(both_missing, second_missing, "higher")
    assert open_one.status == INCONCLUSIVE and open_one.p == pytest.approx(2 / 32)
    # Unpaired (different seeds): Mann-Whitney, the seeds without a value tied at the bottom.
    mw = compare(
        PerSeed([0.7, 0.71, 0.72, 0.73], (0, 1, 2, 3), [True] * 4, "higher"),
        PerSeed([None, 0.5, None, 0.52], (4, 5, 6, 7), [True] * 4, "higher"),
        "higher",
    )
    assert mw.test == MANN_WHITNEY and mw.status == HELD
    assert mw.p == pytest.approx(rank_sum_p_by_enumeration([4, 5, 6, 7], [0, 1, 0, 1])) == pytest.approx(2 / 70)


def test_a_value_missing_for_another_reason_stays_unknown():
    # A ratio or margin of two runs, one of which has no value, is not the worst margin: no mark, and the
    # old rule keeps it undecided however the other seeds fall.
    six = tuple(range(6))
    unmarked = PerSeed([None, 0.60, 0.61, None, 0.58, 0.62], six)
    second = PerSeed([0.70, 0.71, 0.69, 0.72, 0.70, 0.68], six, [True] * 6, "higher")
    comparison = compare(unmarked, second, "higher")
    assert comparison.status == INCONCLUSIVE and comparison.test == "" and comparison.undecidable
    assert "without a known value" in comparison.reason
    # A mark survives `map` (a shift by points, a change of unit), and marks only seeds without a value.
    shifted = PerSeed([None, 0.6], (0, 1), [True, True], "higher").map(lambda v: v + 3)
    assert shifted.worst == (True, False) and shifted.better == "higher" and list(shifted) == [None, 3.6]


def test_the_power_of_a_rank_test_by_noethers_formula():
    z = 1.959964 + 0.841621  # z_0.975 + z_0.8
    # Unpaired, P(X > Y) = 0.8 (each y below 4 of the 5 x): n = z^2 / (6 * 0.3^2) = 14.53 -> 15 a side.
    unpaired = dataclasses.replace(
        compare([0.0, 1.0], [2.0, 3.0]), test=MANN_WHITNEY, scores=((1.0, 1.0, 1.0, 1.0, 0.0), (0.5,) * 5)
    )
    assert z**2 / (6 * 0.09) == pytest.approx(14.53, abs=0.01) and rank_seeds_for_power(unpaired) == 15
    # Paired, differences 1, 1, 1, -1: of the 10 Walsh sums (i <= j) 6 are positive and 3 zero, p' = 0.75;
    # n = z^2 / (3 * 0.25^2) = 41.86 -> 42.
    paired_case = dataclasses.replace(unpaired, test=WILCOXON, scores=((1.0, 1.0, 1.0, -1.0),))
    assert z**2 / (3 * 0.0625) == pytest.approx(41.86, abs=0.01) and rank_seeds_for_power(paired_case) == 42
    # Every untied seed one way: the fewest seeds at which the exact test separates unanimous ones (6 paired,
    # 4 a side), scaled up by the share of seeds that tie (2 of 6 tie: 6 / (4/6) = 9).
    unanimous = dataclasses.replace(paired_case, scores=((-1.0, -2.0, -3.0),))
    assert rank_seeds_for_power(unanimous) == 6
    assert rank_seeds_for_power(dataclasses.replace(paired_case, scores=((0.0, 0.0, -1, -2, -3, -4),))) == 9
    assert rank_seeds_for_power(dataclasses.replace(unpaired, scores=((2.0, 3.0), (0.0, 1.0)))) == 4
    # The power line names the test and the seeds, and says when the seeds point against the claim.
    three = compare(
        PerSeed([None, None, None], SEEDS, [True] * 3, "higher"), PerSeed([1.0, 2.0, 3.0], SEEDS, [True] * 3, "higher")
    )
    assert three.status == INCONCLUSIVE and three.p == pytest.approx(0.25)
    line = power_line(three)
    assert "Wilcoxon signed-rank" in line and "6 seeds a side would decide it" in line and "as failed" in line


def test_a_claim_that_reads_the_measure_the_other_way_counts_a_seed_without_a_value_for_it():
    # "The first is less accurate": a diverged seed of the first is the least accurate of all, so it counts for
    # the claim, not against it (the worst is placed by the measure's own direction, `better`).
    six = tuple(range(6))
    first = PerSeed([None, 0.60, 0.61, None, 0.58, 0.62], six, [True] * 6, "higher")
    second = PerSeed([0.70, 0.71, 0.69, 0.72, 0.70, 0.68], six, [True] * 6, "higher")
    assert compare(first, second, "lower").status == HELD and compare(second, first, "lower").status == FAILED
    # Marks that disagree on the measure's direction rank nothing.
    rounds = PerSeed([None, 10, 11, None, 12, 13], six, [True] * 6, "lower")
    assert compare(first, rounds, "higher").test == ""
    with pytest.raises(ValueError, match="needs the way the measure is better"):
        PerSeed([None, 1.0], (0, 1), [True, False])
