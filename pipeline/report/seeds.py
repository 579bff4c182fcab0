"""Summaries over a run's seeds, and THE rule that decides every claim of every paper.

A claim compares two sides, each a list of per-seed values of one run (accuracy: the mean of a seed's
last K_LAST evaluated rounds; rounds to a target: the first round at or above it). A value of None
(or NaN) means the seed has none: it never reached the target (NC) or it diverged. `decide` applies the
rule below; `RULE` is its statement as the claims ledger prints it, once, at the top.

Edge cases, decided here and stated in RULE:
- fewer than 2 seeds on either side: inconclusive. One seed can never separate two methods: a single
  run cannot tell a method's effect from seed-to-seed noise, so every claim on today's one-seed runs
  is inconclusive, honestly.
- both sides constant across their seeds (sd 0), n >= 2 each: separated whenever the values differ
  (Welch's t is infinite, p = 0); equal values are a tie: inconclusive.
- seeds without a value: if every seed of one side has a value and no seed of the other does (n >= 2
  each), the side with values is better (it reached the target / trained, the other never did); if no
  seed of either side has one, or only some seeds of a side lack one, inconclusive.
- a tie of means (or p >= alpha): inconclusive, never failed; "failed" needs the seeds to separate the
  sides the other way.
"""
from __future__ import annotations

import math
import statistics
import warnings
from dataclasses import dataclass
from typing import Iterable, Sequence

ALPHA = 0.05
K_LAST = 5  # accuracy = the mean of a seed's last K_LAST evaluated rounds (all of them if it has fewer)

HELD, FAILED, INCONCLUSIVE = "held", "failed", "inconclusive"

RULE = (
    f"One rule decides every claim. Each side of a claim is its run's per-seed values (accuracy: the mean of "
    f"a seed's last {K_LAST} evaluated rounds, except TCE's: the last model's test accuracy, which its Table 1 "
    f"reports; rounds to a target: the first round at or above it). "
    f"**held** = the seeds separate the two sides in the claimed direction, **failed** = they separate them "
    f"the other way, **inconclusive** = they do not separate them. Separated means: at least 2 seeds on each "
    f"side (a single seed can never separate: one run cannot tell a method from seed noise) and either "
    f"Welch's two-sided t-test over the per-seed values gives p < {ALPHA:g} (two sides each constant across "
    f"seeds are separated whenever they differ), or every seed of one side has a value and no seed of the "
    f"other does (a seed that never reached the target, NC, or diverged has no value; NC or diverged seeds "
    f"on both sides, or on only some seeds of a side: inconclusive). A claim made of several comparisons "
    f"(best of an ablation: the full method against each other method; an ordering; 'at every rate') is "
    f"held when every comparison is held, failed when any is failed, else inconclusive. 'Within 1 point or "
    f"better' shifts the first side up by 1 point before the test. A claim that a run trains at a setting: "
    f"held when at least 2 seeds all trained, failed when at least 2 seeds all diverged, else inconclusive. "
    f"The seeds column gives each side's n."
)


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


@dataclass
class Comparison:
    """The rule's verdict on first vs second, and why (for a claim's evidence)."""
    status: str  # held | failed | inconclusive
    reason: str
    n_first: int
    n_second: int
    p: float | None = None

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


def _constant(values: list[float]) -> bool:
    return max(values) - min(values) <= 1e-12 * max(1.0, max(abs(v) for v in values))


def compare(first: Sequence, second: Sequence, better: str = "higher", alpha: float = ALPHA) -> Comparison:
    """THE claim rule: is `first` better than `second` (higher or lower values), over their seeds?"""
    if better not in ("higher", "lower"):
        raise ValueError(f"better must be 'higher' or 'lower', got {better!r}")
    first, second = list(first), list(second)
    n1, n2 = len(first), len(second)
    if n1 < 2 or n2 < 2:
        return Comparison(INCONCLUSIVE, f"n = {n1} vs {n2}: a single seed cannot separate", n1, n2)
    a = [float(v) for v in first if has_value(v)]
    b = [float(v) for v in second if has_value(v)]
    if len(a) < n1 or len(b) < n2:  # some seeds have no value (NC or diverged)
        if len(a) == n1 and not b:
            return Comparison(HELD, "every seed of the first has a value, no seed of the second", n1, n2)
        if len(b) == n2 and not a:
            return Comparison(FAILED, "every seed of the second has a value, no seed of the first", n1, n2)
        if not a and not b:
            return Comparison(INCONCLUSIVE, "no seed of either side has a value", n1, n2)
        return Comparison(INCONCLUSIVE, f"{n1 - len(a)} of {n1} vs {n2 - len(b)} of {n2} seeds without a value",
                          n1, n2)
    sign = 1 if better == "higher" else -1
    difference = sign * (statistics.fmean(a) - statistics.fmean(b))  # > 0: first is better
    if _constant(a) and _constant(b):
        if abs(statistics.fmean(a) - statistics.fmean(b)) <= 1e-12 * max(1.0, abs(statistics.fmean(a))):
            return Comparison(INCONCLUSIVE, "the same value on every seed of both sides", n1, n2, 1.0)
        return Comparison(HELD if difference > 0 else FAILED, "each side constant across its seeds, and they differ",
                          n1, n2, 0.0)
    _, _, p = welch(a, b)
    text = f"Welch p = {p:.3g}"
    if p < alpha and difference > 0:
        return Comparison(HELD, text, n1, n2, p)
    if p < alpha and difference < 0:
        return Comparison(FAILED, text, n1, n2, p)
    return Comparison(INCONCLUSIVE, text + f" (not < {alpha:g})" if p >= alpha else text + " (a tie of means)",
                      n1, n2, p)


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


def best_of(best: Sequence, others: dict[str, Sequence], better: str = "higher",
            alpha: float = ALPHA) -> tuple[str, dict[str, Comparison]]:
    """'`best` is the best of them all': held only if it is separated (held) from every other; failed if
    some other is separated above it; else inconclusive."""
    comparisons = {name: compare(best, values, better, alpha) for name, values in others.items()}
    return combine(c.status for c in comparisons.values()), comparisons


def decide_trains(diverged: Sequence[bool]) -> str:
    """'The run trains at this setting': held when >= 2 seeds all trained, failed when >= 2 seeds all
    diverged, else inconclusive (one seed, or seeds that disagree)."""
    diverged = list(diverged)
    if len(diverged) < 2:
        return INCONCLUSIVE
    if not any(diverged):
        return HELD
    if all(diverged):
        return FAILED
    return INCONCLUSIVE
