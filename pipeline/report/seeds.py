"""Summaries over a run's seeds, and THE rule that decides every claim of every paper.

A claim compares two sides, each a run's per-seed values (accuracy: the mean of a seed's last K_LAST
evaluated rounds; rounds to a target: the first round at which the K_LAST-round moving mean reaches
it). A value of None (or NaN) means the seed has none: it never reached the target (NC) or it
diverged. Values carry the seeds they came from (`PerSeed`), so that two sides trained on the same
seeds (common random numbers: seed s gives every method the same initial model, client sampling and
batch order) are compared seed by seed. `compare` applies the rule below; `RULE` is its statement
as the claims ledger prints it, once, at the top.

Edge cases, decided here and stated in RULE:
- the test: a paired t-test on the per-seed differences when both sides carry the same seeds; Welch's
  t-test otherwise (a side without seed identity, or seeds that differ: pairing is refused, never
  guessed). Each comparison says which test decided it.
- fewer than 2 seeds on either side: inconclusive. One seed can never separate two methods.
- constant differences (paired) or both sides constant (Welch): the t statistic is undefined (sd 0),
  which integer rounds to a target hit often (every seed one round apart). The exact permutation test
  decides then: sign flips of the n differences (p = 2 / 2^n: 6 seeds at least) or relabellings of
  the n1 + n2 values (p = 2 / C(n1 + n2, n1): 4 seeds a side). Equal values are a tie: inconclusive.
- seeds without a value as their run's worst outcome (diverged, never reached the target, ended near
  chance: `PerSeed.worst`, with the way the measure is better, `PerSeed.better`): ranked below every
  seed with a value, and a rank test decides (Wilcoxon's signed-rank paired, Mann-Whitney's U
  otherwise; two seeds without a value tie). A value missing for another reason (a ratio of two runs
  one of which has none, a round the run never trained to) is unknown: inconclusive, since nothing is
  known of it.
- a tie of means (or p >= alpha): inconclusive, never failed; "failed" needs the seeds to separate the
  sides the other way.

For a comparison the seeds do not decide, `power_line` says what would: the observed effect, its sd,
and the seeds a side that a two-sided test at ALPHA would need for POWER (80 %) power, or why no
number of seeds decides it at this scale.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import warnings
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence, cast

ALPHA = 0.05
POWER = 0.8
MAX_SEEDS = 200  # the power search stops here: beyond it, more seeds are not the way to decide a claim
K_LAST = 5  # accuracy = the mean of a seed's last K_LAST evaluated rounds (all of them if it has fewer);
# rounds to a target = the first round at which the mean of the last K_LAST evaluated rounds reaches it

HELD, FAILED, INCONCLUSIVE = "held", "failed", "inconclusive"
PAIRED, WELCH = "paired t", "Welch t"
EXACT_PAIRED, EXACT_UNPAIRED = "exact sign-flip", "exact permutation"  # where the seeds' sd is zero
WILCOXON, MANN_WHITNEY = "Wilcoxon signed-rank", "Mann-Whitney U"  # where seeds lack a value as their worst outcome
RANK_TESTS = (WILCOXON, MANN_WHITNEY)
EXACT_RANKS_UP_TO = 60  # seeds a side (paired) or in all (unpaired) for the exact rank distributions; beyond: normal

RULE = (
    f"One rule decides every claim. Each side of a claim is its run's per-seed values (accuracy: the mean of "
    f"a seed's last {K_LAST} evaluated rounds, TCE's on the test set, evaluated at those rounds while its "
    f"curves are on validation data; rounds to a target: the first round at which the mean of the last {K_LAST} evaluated rounds "
    f"reaches it, with the paper's own reading, the first round at or above it, shown beside). "
    f"**held** = the seeds separate the two sides in the claimed direction, **failed** = they separate them "
    f"the other way, **inconclusive** = they do not separate them. Separated means: at least 2 seeds on each "
    f"side (a single seed can never separate: one run cannot tell a method from seed noise) and either "
    f"a two-sided t-test gives p < {ALPHA:g} — **paired** on the per-seed differences when both sides ran the "
    f"same seeds (seed s gives every method the same initial model, client sampling and batch order), "
    f"**Welch**'s over the per-seed values otherwise (the test column says which; where the seeds' sd is zero, as when every seed differs by "
    f"the same whole round, the t statistic is undefined and the exact permutation test decides: p = 2/2^n "
    f"paired, 2/C(n1 + n2, n1) unpaired). A seed that diverged, never reached the target (NC) or ended near "
    f"chance has no number but has an outcome, the worst: it ranks below every seed with a value, and a rank "
    f"test decides instead of the t-test — **Wilcoxon signed-rank** on the paired differences (two seeds "
    f"without a value tie and drop out), **Mann-Whitney U** unpaired, exact up to {EXACT_RANKS_UP_TO} seeds "
    f"(docs/methodology.md#seeds-without-a-value); a value missing for another reason (a ratio of two runs one "
    f"of which has none) is unknown, and leaves the comparison inconclusive. A claim made of several "
    f"comparisons (best of an ablation: the full method against each other method; an ordering; 'at every "
    f"rate') is held when every comparison is held, failed when any is failed, else inconclusive. 'Within 1 "
    f"point or better' shifts the first side up by 1 point before the test. A count claim ('more learning "
    f"rates within x points of the best') counts each rate in, out or open by the rule, and is held when "
    f"the claimed side's fewest possible count exceeds the other's most, failed when its most cannot. The seeds column gives each side's n. For an undecided claim the power column gives the "
    f"observed effect, its sd over seeds and the seeds a side that would decide it at {POWER:.0%} power "
    f"(two-sided, α = {ALPHA:g}; the noncentral t, Noether's formula for a rank test), or why no number of "
    f"seeds decides it at this scale. "
    "Where the test column says **confirmatory sample**, the claim's runs were trained again on fresh seeds, "
    "at least as many as its power line asked when its own seeds left it open, and it is decided on those "
    "alone, once (docs/methodology.md#a-confirmatory-sample); the evidence gives the earlier verdict beside it."
)


class PerSeed(list):
    """Per-seed values in seed order, with the seeds they came from (`seeds`; None: unknown). A list, so
    every summary reads it as one; `compare` pairs two sides whose seeds are the same. Derive values with
    `map` (a list comprehension drops the seeds, and the comparison falls back to Welch).

    `worst` marks, per seed, a missing value that is its run's worst outcome: the run diverged, never
    reached the target, or ended near chance; `better` says which way the measure is better ("higher"
    for accuracy, "lower" for rounds to a target), so that the worst is placed at its bottom whatever
    way a claim compares. `compare` ranks such a seed below every seed with a value. A value missing for
    any other reason (a ratio or difference of two runs one of which has none, a round the run never
    trained to) is unknown, and stays so: nothing is made up for it."""

    def __init__(
        self,
        values: Iterable = (),
        seeds: Iterable[int] | None = None,
        worst: Iterable[bool] | None = None,
        better: str | None = None,
    ):
        super().__init__(values)
        self.seeds = None if seeds is None else tuple(int(s) for s in seeds)
        if self.seeds is not None and len(self.seeds) != len(self):
            raise ValueError(f"{len(self)} values for {len(self.seeds)} seeds")
        self.worst = (
            tuple(bool(w) and not has_value(v) for v, w in zip(self, worst))
            if worst is not None
            else (False,) * len(self)
        )
        if len(self.worst) != len(self):
            raise ValueError(f"{len(self)} values for {len(self.worst)} worst-outcome marks")
        if better not in (None, "higher", "lower"):
            raise ValueError(f"better must be 'higher', 'lower' or None, got {better!r}")
        if any(self.worst) and better is None:
            raise ValueError("a worst-outcome mark needs the way the measure is better ('higher' or 'lower')")
        self.better = better

    @classmethod
    def from_dict(cls, by_seed: dict, worst_seeds: Iterable[int] = (), better: str | None = None) -> "PerSeed":
        seeds, worst = sorted(by_seed), set(worst_seeds)
        return cls([by_seed[s] for s in seeds], seeds, [s in worst for s in seeds], better)

    def by_seed(self) -> dict:
        if self.seeds is None:
            raise ValueError("these values carry no seeds")
        return dict(zip(self.seeds, self))

    def map(self, transform: Callable) -> "PerSeed":
        """transform(value) for each value that exists (None and NaN stay as they are, and so do their
        worst-outcome marks), seeds kept. The transform must keep the measure's direction (a shift, a
        change of unit)."""
        return PerSeed([transform(v) if has_value(v) else v for v in self], self.seeds, self.worst, self.better)


def worst_marks(values: Sequence) -> tuple[bool, ...]:
    """Per position: is the value missing as its run's worst outcome (`PerSeed.worst`)? False for a
    plain list, which carries no marks."""
    return tuple(getattr(values, "worst", None) or (False,) * len(values))


def in_seed_order(side: Sequence, seeds: list[int] | None) -> tuple[list, tuple[bool, ...]]:
    """A side's values and worst-outcome marks in the order of `seeds` (None: as they are)."""
    marks = worst_marks(side)
    if seeds is None:
        return list(side), marks
    position = {s: i for i, s in enumerate(cast(PerSeed, side).seeds or ())}
    return [side[position[s]] for s in seeds], tuple(marks[position[s]] for s in seeds)


def worst_direction(first: Sequence, second: Sequence) -> str | None:
    """The way the measure is better for the sides' worst-outcome marks: the `better` of every side that has
    a marked seed, when they agree; None when no side has one, or they disagree (then nothing is ranked)."""
    directions = {getattr(side, "better", None) for side in (first, second) if any(worst_marks(side))}
    return directions.pop() if len(directions) == 1 else None


def has_value(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def mean_sd(values: Iterable) -> tuple[float | None, float | None, int]:
    """(mean, sample sd with n - 1, n) of the values that are numbers (None and NaN are not counted);
    sd is None when n < 2, mean is None when n == 0."""
    present = [float(v) for v in values if has_value(v)]
    n = len(present)
    if n == 0:
        return None, None, 0
    mean = statistics.fmean(present)
    return mean, (statistics.stdev(present) if n >= 2 else None), n


def last_k_mean(accuracies: Sequence, k: int = K_LAST) -> float | None:
    """The mean of the last `k` values of a curve (all of them if it has fewer); None if the curve is
    empty or any of those values is None or NaN (a diverged curve has no mean)."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    window = list(accuracies)[-k:]
    if not window or not all(has_value(v) for v in window):
        return None
    return statistics.fmean(float(v) for v in window)


def moving_means(rounds: Sequence[int], accuracies: Sequence, k: int = K_LAST) -> list[tuple[int, float]]:
    """(round, mean of the k evaluated accuracies ending at it) for every full window of k whose values
    all exist (a window holding a diverged, NaN, value has no mean)."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    rounds, accuracies = list(rounds), list(accuracies)
    windows = ((int(rounds[end - 1]), accuracies[end - k : end]) for end in range(k, len(accuracies) + 1))
    return [(r, statistics.fmean(float(v) for v in w)) for r, w in windows if all(has_value(v) for v in w)]


def rounds_to_target_moving(rounds: Sequence[int], accuracies: Sequence, target: float, k: int = K_LAST) -> int | None:
    """The first round at which the mean of the last `k` evaluated accuracies (a full window of k) is at
    or above `target`; None if it never is. One lucky round of a swinging non-IID curve does not count as
    reaching the target; k rounds that average above it do."""
    return next((r for r, mean in moving_means(rounds, accuracies, k) if mean >= target - 1e-12), None)


def window_mean(rounds: Sequence[int], values: Sequence, at: int, width: int) -> float | None:
    """The mean of the `width` values at rounds at - width + 1 .. at (a whole period of a quantity that
    swings with period `width`); None if any of those rounds is missing or has no value."""
    by_round = dict(zip((int(r) for r in rounds), values))
    window = [by_round.get(r) for r in range(at - width + 1, at + 1)]
    if not window or not all(has_value(v) for v in window):
        return None
    return statistics.fmean(float(v) for v in window if v is not None)


@dataclass
class Comparison:
    """The rule's verdict on first vs second, and why (for a claim's evidence and its power line)."""

    status: str  # held | failed | inconclusive
    reason: str
    n_first: int
    n_second: int
    p: float | None = None
    test: str = ""  # PAIRED | WELCH | EXACT_PAIRED | EXACT_UNPAIRED | "" (no test: n < 2, NC)
    effect: float | None = None  # mean difference, first minus second, in the claimed direction (> 0: as claimed);
    # for a rank test, the rank-biserial correlation (-1 .. 1, > 0: as claimed)
    sd: float | None = None  # the sd the test used: of the paired differences, or the two sides' pooled sd
    undecidable: str = ""  # why no number of seeds decides it at this scale ("" if more seeds could)
    scores: tuple = ()  # a rank test's inputs, for its power: (differences,) paired, (first, second) unpaired
    sides: tuple = ()  # what `compare` was given, per side: ((seed or None, value or None), ...), for the table
    # of the seeds that decide a claim (report/confirmation.py)

    @property
    def seeds(self) -> str:
        return f"{self.n_first} vs {self.n_second}"


def welch(first: Sequence[float], second: Sequence[float]) -> tuple[float, float, float]:
    """(t, df, two-sided p) of Welch's t-test, first minus second (scipy.stats.ttest_ind, equal_var=False)."""
    from scipy.stats import ttest_ind

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nearly constant seeds: scipy warns, the result stands
        result = ttest_ind(list(first), list(second), equal_var=False)
    return float(result.statistic), float(result.df), float(result.pvalue)


def paired(first: Sequence[float], second: Sequence[float]) -> tuple[float, float, float]:
    """(t, df, two-sided p) of the paired t-test on first[i] - second[i] (scipy.stats.ttest_rel)."""
    from scipy.stats import ttest_rel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = ttest_rel(list(first), list(second))
    return float(result.statistic), float(result.df), float(result.pvalue)


def _constant(values: list[float]) -> bool:
    return max(values) - min(values) <= 1e-12 * max(1.0, max(abs(v) for v in values))


def pairing(first: Sequence, second: Sequence) -> tuple[list[int] | None, str]:
    """The seeds to pair the two sides on, or None and why not: pairing needs both sides to carry their
    seeds, and the same ones (a seed of one side with no partner would be dropped or guessed)."""
    seeds_first, seeds_second = getattr(first, "seeds", None), getattr(second, "seeds", None)
    if seeds_first is None or seeds_second is None:
        return None, "unpaired: a side without its seeds"
    if sorted(seeds_first) != sorted(seeds_second):
        return None, (
            f"unpaired: seeds {', '.join(map(str, seeds_first))} vs {', '.join(map(str, seeds_second))} differ"
        )
    return sorted(seeds_first), ""


def exact_p(n1: int, n2: int, is_paired: bool) -> float:
    """Two-sided p of the exact permutation test when every seed says the same (sd zero, values apart):
    only the observed arrangement and its mirror are as extreme. Paired: 2 of the 2^n sign flips of the
    differences; unpaired: 2 of the C(n1 + n2, n1) ways to deal the values into the two sides (1 of them
    when the sides' sizes differ, since the mirror arrangement then does not exist)."""
    if is_paired:
        return min(1.0, 2.0 / 2**n1)
    return min(1.0, (2.0 if n1 == n2 else 1.0) / math.comb(n1 + n2, n1))


def exact_seeds(is_paired: bool, alpha: float = ALPHA) -> int:
    """The fewest seeds a side at which unanimous seeds separate the sides by the exact test."""
    n = 2
    while exact_p(n, n, is_paired) >= alpha:
        n += 1
    return n


def _without_values(first: list, second: list, n1: int, n2: int) -> Comparison:
    """Seeds without a value for a reason other than their run's outcome (a ratio of two runs one of which
    has none): nothing is known of them, so the comparison is not decided."""
    a = [v for v in first if has_value(v)]
    b = [v for v in second if has_value(v)]
    if not a and not b:
        return Comparison(
            INCONCLUSIVE,
            "no seed of either side has a value",
            n1,
            n2,
            undecidable="no seed of either side has a value (none reaches the target, or all diverged)",
        )
    return Comparison(
        INCONCLUSIVE,
        f"{n1 - len(a)} of {n1} vs {n2 - len(b)} of {n2} seeds without a known value",
        n1,
        n2,
        undecidable=f"{n1 - len(a)} of {n1} vs {n2 - len(b)} of {n2} seeds without a known "
        "value (not their run's outcome, so not ranked): more seeds keep some",
    )


def _verdict(p: float, difference: float, alpha: float) -> str:
    if p < alpha and difference > 0:
        return HELD
    if p < alpha and difference < 0:
        return FAILED
    return INCONCLUSIVE


def compare(first: Sequence, second: Sequence, better: str = "higher", alpha: float = ALPHA) -> Comparison:
    """THE claim rule: is `first` better than `second` (higher or lower values), over their seeds? Paired
    by seed when both sides carry the same seeds (`PerSeed`), Welch otherwise. The comparison keeps its
    inputs (`sides`)."""
    return dataclasses.replace(_decide(first, second, better, alpha), sides=(_side(first), _side(second)))


def _side(values: Sequence) -> tuple:
    """((seed, value), ...) of one side as given, the seed None where the side does not carry its seeds."""
    seeds = getattr(values, "seeds", None) or (None,) * len(values)
    return tuple((seed, float(v) if has_value(v) else None) for seed, v in zip(seeds, values))


def _decide(first: Sequence, second: Sequence, better: str, alpha: float) -> Comparison:
    if better not in ("higher", "lower"):
        raise ValueError(f"better must be 'higher' or 'lower', got {better!r}")
    seeds, why_unpaired = pairing(first, second)
    natural = worst_direction(first, second)
    (first, worst_first), (second, worst_second) = in_seed_order(first, seeds), in_seed_order(second, seeds)
    worst = worst_first + worst_second
    n1, n2 = len(first), len(second)
    if n1 < 2 or n2 < 2:
        return Comparison(
            INCONCLUSIVE,
            f"n = {n1} vs {n2}: a single seed cannot separate",
            n1,
            n2,
            undecidable="" if n1 and n2 else "a side has no seed",
        )
    sign = 1 if better == "higher" else -1
    if not all(has_value(v) for v in first + second):
        every_missing_is_worst = all(w for v, w in zip(first + second, worst) if not has_value(v))
        if every_missing_is_worst and natural is not None and any(has_value(v) for v in first + second):
            natural_sign = 1 if natural == "higher" else -1
            return _compare_ranked(first, second, sign, natural_sign, seeds is not None, alpha, why_unpaired)
        return _without_values(first, second, n1, n2)
    a, b = [float(v) for v in first], [float(v) for v in second]
    if seeds is not None:
        return _compare_paired(a, b, sign, alpha, n1)
    return _compare_welch(a, b, sign, alpha, why_unpaired)


def _tie(n1: int, n2: int, test: str) -> Comparison:
    return Comparison(
        INCONCLUSIVE,
        "the same value on every seed of both sides",
        n1,
        n2,
        1.0,
        test,
        0.0,
        0.0,
        undecidable="the two sides are equal on every seed",
    )


def _exact(effect: float, n1: int, n2: int, is_paired: bool, alpha: float, why: str) -> Comparison:
    """Every seed says the same (sd zero): the exact permutation test's verdict."""
    p = exact_p(n1, n2, is_paired)
    if is_paired:
        text = f"the same difference on every seed: exact sign-flip p = 2/2^{n1} = {p:.3g}"
    else:
        text = (
            f"each side constant across its seeds: exact permutation p = {2 if n1 == n2 else 1}/"
            f"C({n1 + n2},{n1}) = {p:.3g}; {why}"
        )
    return Comparison(
        _verdict(p, effect, alpha), text, n1, n2, p, EXACT_PAIRED if is_paired else EXACT_UNPAIRED, effect, 0.0
    )


def _t_test(
    p: float, effect: float, sd: float | None, n1: int, n2: int, test: str, alpha: float, text: str
) -> Comparison:
    status = _verdict(p, effect, alpha)
    if status == INCONCLUSIVE:
        text += f" (not < {alpha:g})" if p >= alpha else " (a tie of means)"
    return Comparison(status, text, n1, n2, p, test, effect, sd)


def _is_zero(value: float, scale: float) -> bool:
    return abs(value) <= 1e-12 * max(1.0, abs(scale))


def _compare_paired(a: list[float], b: list[float], sign: int, alpha: float, n: int) -> Comparison:
    differences = [sign * (x - y) for x, y in zip(a, b)]  # > 0: first is better on that seed
    effect, sd = statistics.fmean(differences), statistics.stdev(differences)
    if _constant(differences):
        if _is_zero(effect, statistics.fmean(a)):
            return _tie(n, n, EXACT_PAIRED)
        return _exact(effect, n, n, True, alpha, "")
    _, _, p = paired(a, b)
    return _t_test(p, effect, sd, n, n, PAIRED, alpha, f"paired t-test over {n} seeds: p = {p:.3g}")


def _compare_welch(a: list[float], b: list[float], sign: int, alpha: float, why_unpaired: str) -> Comparison:
    n1, n2 = len(a), len(b)
    effect = sign * (statistics.fmean(a) - statistics.fmean(b))  # > 0: first is better
    sd = math.sqrt((statistics.variance(a) + statistics.variance(b)) / 2)
    if _constant(a) and _constant(b):
        if _is_zero(effect, statistics.fmean(a)):
            return _tie(n1, n2, EXACT_UNPAIRED)
        return _exact(effect, n1, n2, False, alpha, why_unpaired)
    _, _, p = welch(a, b)
    text = f"Welch p = {p:.3g}"
    comparison = _t_test(p, effect, sd, n1, n2, WELCH, alpha, text)
    comparison.reason += f"; {why_unpaired}"
    return comparison


# ---------------------------------------------------------------- seeds without a value: the worst-rank rule
#
# A seed whose run diverged, never reached the target or ended near chance has no number, but it has an
# outcome: the worst one. Dropping it would favour the method that diverges more (its bad seeds vanish);
# calling every such comparison undecidable left claims open however lopsided the seeds. So each such seed
# is ranked below every seed with a value (the worst-rank score of clinical trials, Lachin 1999, where a
# patient who dies before the outcome is measured ranks below every survivor), and a rank test, which
# needs no number for it, decides: Wilcoxon's signed-rank on the paired differences (two seeds both
# without a value tie, and a tie is dropped), Mann-Whitney's U unpaired. Both are exact up to
# EXACT_RANKS_UP_TO seeds, mid-ranks for ties included.


def worst_rank_scores(first: list, second: list, sign: int, natural_sign: int) -> tuple[list[float], list[float]]:
    """Each value in the claimed direction (`sign`: +1 when the claim wants the first side higher); a seed
    without one scored beyond every value of either side by more than their range, at the bottom of the
    measure's own direction (`natural_sign`: +1 when higher is better), so that a pair with one value has a
    larger difference than any pair with two, and two seeds without a value tie. Where the claim reads the
    measure the other way ("less accurate"), a seed without a value counts for the claim."""
    present = [natural_sign * float(v) for v in first + second if has_value(v)]
    floor = min(present) - (max(present) - min(present)) - 1.0
    flip = sign * natural_sign

    def score(v) -> float:
        return flip * (natural_sign * float(v) if has_value(v) else floor)

    return [score(v) for v in first], [score(v) for v in second]


def _doubled_ranks(values: Sequence[float]) -> list[int]:
    """Twice the mid-ranks (ties share the mean of their ranks): integers, for the exact distributions."""
    from scipy.stats import rankdata

    return [int(round(2 * r)) for r in rankdata(list(values))]


def signed_rank_test(differences: Sequence[float]) -> tuple[float, float, int]:
    """(two-sided p, rank-biserial r, seeds used) of Wilcoxon's signed-rank test on the nonzero differences.
    Exact up to EXACT_RANKS_UP_TO of them: the rank sum's null distribution over all 2^m sign flips, given
    the ranks, mid-ranks for ties included (scipy's exact distribution assumes no ties, and its
    permutation fallback took 0.5 s a call at m = 12, measured; here it is a convolution). r = (W+ - W-)
    / (W+ + W-), the matched-pairs rank-biserial correlation (> 0: the differences lean positive)."""
    nonzero = [float(d) for d in differences if d != 0]
    m = len(nonzero)
    if m == 0:
        return 1.0, 0.0, 0
    ranks = _doubled_ranks([abs(d) for d in nonzero])
    total = sum(ranks)
    plus = sum(r for r, d in zip(ranks, nonzero) if d > 0)
    r_biserial = (2 * plus - total) / total
    if m > EXACT_RANKS_UP_TO:
        from scipy.stats import wilcoxon

        return float(wilcoxon(nonzero, method="approx").pvalue), r_biserial, m
    import numpy as np

    probability = np.zeros(total + 1)
    probability[0] = 1.0
    for r in ranks:  # each difference's sign: + (adds its rank) or -, each with probability 1/2
        shifted = np.zeros_like(probability)
        shifted[r:] = probability[: total + 1 - r]
        probability = (probability + shifted) / 2
    distance = np.abs(2 * np.arange(total + 1) - total)
    p = float(probability[distance >= abs(2 * plus - total)].sum())
    return min(1.0, p), r_biserial, m


def rank_sum_test(first: Sequence[float], second: Sequence[float]) -> tuple[float, float]:
    """(two-sided p, rank-biserial r) of the Mann-Whitney U test, first against second. Exact up to
    EXACT_RANKS_UP_TO values in all: the rank sum's null distribution over every way to deal the values
    into two sides, mid-ranks for ties included; beyond, scipy's normal approximation with the tie
    correction. r = 2 U / (n1 n2) - 1 (> 0: the first side ranks higher)."""
    n1, n2 = len(first), len(second)
    ranks = _doubled_ranks(list(first) + list(second))
    observed = sum(ranks[:n1])
    u_first = observed / 2 - n1 * (n1 + 1) / 2
    r_biserial = 2 * u_first / (n1 * n2) - 1
    if n1 + n2 > EXACT_RANKS_UP_TO:
        from scipy.stats import mannwhitneyu

        return float(mannwhitneyu(list(first), list(second), method="asymptotic").pvalue), r_biserial
    import numpy as np

    total = sum(ranks)
    ways = np.zeros((n1 + 1, total + 1))  # ways[k, s]: sets of k values whose doubled ranks sum to s
    ways[0, 0] = 1.0
    for r in ranks:
        ways[1:, r:] = ways[1:, r:] + ways[:-1, : total + 1 - r]  # numpy reads the right side first: each value once
    probability = ways[n1] / math.comb(n1 + n2, n1)
    centre = n1 * (n1 + n2 + 1)  # the doubled rank sum's mean
    distance = np.abs(np.arange(total + 1) - centre)
    p = float(probability[distance >= abs(observed - centre) - 1e-9].sum())
    return min(1.0, p), r_biserial


def _complete_seeds_words(first: list, second: list, is_paired: bool) -> str:
    """The verdict on the seeds with a value alone, shown beside the rank test's as a check on it."""
    if is_paired:
        both = [(x, y) for x, y in zip(first, second) if has_value(x) and has_value(y)]
        a, b = [float(x) for x, _ in both], [float(y) for _, y in both]
        where = f"on the {len(both)} seeds where both sides have a value alone"
    else:
        a, b = [float(v) for v in first if has_value(v)], [float(v) for v in second if has_value(v)]
        where = "on the seeds with a value alone"
    if min(len(a), len(b)) < 2 or (_constant(a) and _constant(b)):
        return f"{where}: too few, or constant, for a t-test"
    differences = [x - y for x, y in zip(a, b)]
    if is_paired and _constant(differences):
        return f"{where}: the same difference on every seed"
    _, _, p = paired(a, b) if is_paired else welch(a, b)
    return f"{where}: {'paired t' if is_paired else 'Welch'} p = {p:.3g}"


def _compare_ranked(
    first: list, second: list, sign: int, natural_sign: int, is_paired: bool, alpha: float, why_unpaired: str
) -> Comparison:
    """The worst-rank rule, for sides where some seeds lack a value as their run's worst outcome."""
    n1, n2 = len(first), len(second)
    missing = (
        f"{sum(not has_value(v) for v in first)} of {n1} vs {sum(not has_value(v) for v in second)} of "
        f"{n2} seeds without a value (diverged, NC or near chance: ranked below every seed with one)"
    )
    a, b = worst_rank_scores(first, second, sign, natural_sign)
    scores: tuple[tuple[float, ...], ...]
    if is_paired:
        differences = [x - y for x, y in zip(a, b)]
        p, r_biserial, m = signed_rank_test(differences)
        if m == 0:
            return _tie(n1, n2, WILCOXON)
        test, scores = WILCOXON, (tuple(differences),)
        text = f"{missing}; Wilcoxon signed-rank over {m} untied seeds: p = {p:.3g}"
    else:
        p, r_biserial = rank_sum_test(a, b)
        test, scores = MANN_WHITNEY, (tuple(a), tuple(b))
        text = f"{missing}; Mann-Whitney U: p = {p:.3g}; {why_unpaired}"
    text += f" ({_complete_seeds_words(first, second, is_paired)})"
    return dataclasses.replace(_t_test(p, r_biserial, None, n1, n2, test, alpha, text), scores=scores)


def rank_seeds_for_power(
    comparison: Comparison, power: float = POWER, alpha: float = ALPHA, most: int = MAX_SEEDS
) -> int | None:
    """Seeds a side at which a rank test (`_compare_ranked`) would reach `power` were its seeds like these:
    Noether's (1987) formula, n = (z_(1-alpha/2) + z_power)^2 / (3 (p' - 1/2)^2) for the signed-rank test,
    p' = P(D + D' > 0) over two differences (Walsh averages of the nonzero ones; the seeds whose pairs tie
    are dropped by the test, so n grows by their share), and n = (z + z)^2 / (6 (p - 1/2)^2) a side for
    Mann-Whitney, p = P(X > Y), ties counted half; at least the seeds at which unanimous ones can separate
    (6 paired, 4 a side), which is the answer where every seed points the same way (there Noether's normal
    approximation overstates: 11 for 6). None if the seeds do not lean either way, or `most` would not do."""
    from scipy.stats import norm

    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    if comparison.test == WILCOXON:
        nonzero = [d for d in comparison.scores[0] if d != 0]
        if not nonzero:
            return None
        walsh = [nonzero[i] + nonzero[j] for i in range(len(nonzero)) for j in range(i, len(nonzero))]
        lean = (sum(w > 0 for w in walsh) + sum(w == 0 for w in walsh) / 2) / len(walsh) - 0.5
        untied = len(nonzero) / len(comparison.scores[0])
        least = exact_seeds(True, alpha) / untied
        needed = least if abs(lean) == 0.5 else z**2 / (3 * lean**2) / untied if lean else math.inf
    else:
        first, second = comparison.scores
        above = sum((x > y) + (x == y) / 2 for x in first for y in second) / (len(first) * len(second))
        lean = above - 0.5
        least = exact_seeds(False, alpha)
        needed = least if abs(lean) == 0.5 else z**2 / (6 * lean**2) if lean else math.inf
    if not math.isfinite(needed):
        return None
    n = max(math.ceil(least - 1e-9), math.ceil(needed - 1e-9))
    return n if n <= most else None


# ---------------------------------------------------------------- power: what would decide an undecided claim


def power_of_t_test(effect_size: float, n: int, is_paired: bool, alpha: float = ALPHA) -> float:
    """Power of the two-sided t-test at `alpha` for a standardised effect d with n seeds a side: the
    noncentral t's mass beyond the critical values. Paired: one sample of n differences, df = n - 1,
    noncentrality d·sqrt(n); unpaired: two samples of n, df = 2n - 2, noncentrality d·sqrt(n/2)."""
    from scipy.stats import nct, t

    df = n - 1 if is_paired else 2 * n - 2
    noncentrality = abs(effect_size) * math.sqrt(n if is_paired else n / 2)
    critical = t.ppf(1 - alpha / 2, df)
    return float(nct.sf(critical, df, noncentrality) + nct.cdf(-critical, df, noncentrality))


def seeds_for_power(
    effect_size: float, is_paired: bool, power: float = POWER, alpha: float = ALPHA, most: int = MAX_SEEDS
) -> int | None:
    """The fewest seeds a side (>= 2) at which the test reaches `power` for the standardised effect d;
    None if even `most` do not."""
    if effect_size == 0 or not math.isfinite(effect_size):
        return None if effect_size == 0 else 2
    for n in range(2, most + 1):  # the first n that reaches it (a bisection met NaN from scipy at large n·d)
        if power_of_t_test(effect_size, n, is_paired, alpha) >= power:
            return n
    return None


def power_line(comparison: Comparison, unit: str = "") -> str:
    """For a comparison the seeds did not decide: the effect, its sd and the seeds a side that would
    decide it at POWER, or why no number of seeds would at this scale. "" for a decided comparison."""
    if comparison.status != INCONCLUSIVE:
        return ""
    if comparison.undecidable:
        return f"cannot be decided at this scale: {comparison.undecidable}"
    direction = "" if (comparison.effect or 0.0) > 0 else ", as failed (the observed direction is against the claim)"
    if comparison.test in RANK_TESTS:
        needed = rank_seeds_for_power(comparison)
        measured = (
            f"rank-biserial r = {comparison.effect:+.2f} ({comparison.test}; the seeds without a value ranked lowest)"
        )
        if needed is None:
            return f"{measured}: the seeds lean neither way, or more than {MAX_SEEDS} a side would be needed"
        return f"{measured}: {needed} seeds a side would decide it at {POWER:.0%} power (Noether's formula){direction}"
    if comparison.effect is None or comparison.sd is None:
        return "one seed a side: its sd is unknown; 3 seeds a side would measure it"
    unit_text = f" {unit}" if unit else ""
    if comparison.sd == 0:  # every seed agrees: the exact test needs enough of them
        return (
            f"effect {comparison.effect:+.3g}{unit_text} on every seed (sd 0): the exact test separates "
            f"unanimous seeds from {needed_seeds(comparison)} seeds a side{direction}"
        )
    is_paired = comparison.test == PAIRED
    effect_size = comparison.effect / comparison.sd
    needed = seeds_for_power(effect_size, is_paired)
    measured = (
        f"effect {comparison.effect:+.3g}{unit_text} ({'paired sd' if is_paired else 'pooled sd'} "
        f"{comparison.sd:.3g}, d = {effect_size:+.2f})"
    )
    if needed is None:
        return f"{measured}: more than {MAX_SEEDS} seeds a side: not decidable by seeds at this scale"
    return f"{measured}: {needed} seeds a side would decide it at {POWER:.0%} power{direction}"


def needed_seeds(comparison: Comparison) -> int | None:
    """Seeds a side that would decide the comparison at POWER; None when no number would (or its sd is
    unknown)."""
    if comparison.test in RANK_TESTS and not comparison.undecidable:
        return rank_seeds_for_power(comparison)
    if comparison.undecidable or comparison.effect is None or comparison.sd is None:
        return None
    if comparison.sd == 0:
        return exact_seeds(comparison.test == EXACT_PAIRED)
    effect_size = comparison.effect / comparison.sd if comparison.sd > 0 else math.inf
    return seeds_for_power(effect_size, comparison.test == PAIRED)


def claim_power(comparisons: Iterable[Comparison], unit: str = "", one_failure_fails: bool = True) -> str:
    """The power line of a claim of one or several comparisons; "" when the claim is decided.

    Combined by `combine`, a claim is failed as soon as one comparison is failed, and held only when every
    one is held. So when an undecided comparison points against the claim, the seeds that decide that one
    at POWER decide the claim with at least that power (as failed): the line names the one of those that
    needs the fewest. Otherwise (every undecided one points for the claim, or `one_failure_fails` is False
    for a claim whose comparisons are not combined that way) it names the one no number of seeds decides,
    else the one that needs the most, since all of them must be decided for the claim to hold."""
    comparisons = list(comparisons)
    if not comparisons or combine(c.status for c in comparisons) != INCONCLUSIVE:
        return ""
    undecided = [c for c in comparisons if c.status == INCONCLUSIVE]
    against = [c for c in undecided if one_failure_fails and (c.effect or 0.0) < 0 and needed_seeds(c) is not None]
    if against:
        nearest = min(against, key=lambda c: needed_seeds(c) or 0)
        line = power_line(nearest, unit)
        if len(undecided) == 1:
            return line
        return f"{len(undecided)} comparisons undecided; one separated against the claim fails it, the nearest: {line}"
    hardest = max(undecided, key=lambda c: (needed_seeds(c) is None, needed_seeds(c) or 0))
    line = power_line(hardest, unit)
    return line if len(undecided) == 1 else f"{len(undecided)} comparisons undecided; the hardest: {line}"


def deciding_tests(comparisons: Iterable[Comparison]) -> str:
    """Which tests decided a claim's comparisons ("paired t", "Welch t", both, or "—" for none)."""
    names = list(dict.fromkeys(c.test for c in comparisons if c.test))
    return " + ".join(names) if names else "—"


def decide(first: Sequence, second: Sequence, better: str = "higher", alpha: float = ALPHA) -> str:
    """held | failed | inconclusive: `compare`'s status."""
    return compare(first, second, better, alpha).status


def combine(statuses: Iterable[str]) -> str:
    """A claim made of several comparisons: held if every one is held, failed if any is failed, else
    inconclusive (an ordering A > B > C; best of an ablation; 'at every rate')."""
    statuses = list(statuses)
    if statuses and all(s == HELD for s in statuses):
        return HELD
    if any(s == FAILED for s in statuses):
        return FAILED
    return INCONCLUSIVE


def best_of(
    best: Sequence, others: dict[str, Sequence], better: str = "higher", alpha: float = ALPHA
) -> tuple[str, dict[str, Comparison]]:
    """'`best` is the best of them all': held only if it is separated (held) from every other; failed if
    some other is separated above it; else inconclusive."""
    comparisons = {name: compare(best, values, better, alpha) for name, values in others.items()}
    return combine(c.status for c in comparisons.values()), comparisons
