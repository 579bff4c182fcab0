"""reports/fedcurv from runs built in memory (SeededRun / RunResult with hand-chosen curves): the claims over
their declared readings (docs/claims-spec.md §2 and A1: FC ★ and MM, FC(0.85) where declared, N1's L5 / last
round / FedAvg reference), the verdict over readings (reading-dependent where they disagree), Holm within a
reading, the paper's rule for FedProx's μ on a constructed grid (ties, the main run read on seeds 0-2, the
rule's pick as a further reading), the runs' ceiling behind the 95 % claims, the stand-in notes and the grid
table. Expected numbers are worked by hand in the comments, never recomputed by the module's formulas."""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

import pytest
import yaml

from pipeline.report import fedcurv
from pipeline.report.common import ReportContext, RunResult, SeededRun
from pipeline.report.confirmation import build_with_confirmations

PUBLISHED = yaml.safe_load((Path(fedcurv.__file__).with_name("published.yaml")).read_text())["fedcurv"]
ROUNDS = 45  # the stand-in's E = 10 runs train 45 rounds
ALGORITHMS = {
    "fedcurv": {"name": "fedcurv", "lambda": 1.0},
    "fedprox": {"name": "fedprox", "mu": 0.02},
    "fedavg": {"name": "fedavg"},
}
FEDCURV_IDS = [
    "fedcurv-e50-90-faster-than-fedavg",
    "fedcurv-e50-95-faster-than-fedavg",
    "fedprox-e50-90-faster-than-fedavg",
    "fedprox-e50-95-slower-than-fedavg",
    "fedcurv-e10-90-faster-than-fedprox",
    "fedcurv-e10-90-faster-than-fedavg",
    "gain-larger-at-e50",
    "fedprox-stiffness-costs-accuracy",
]


# ---------------------------------------------------------------- runs in memory


def reaching(round_: int, total: int = ROUNDS, high: float = 0.92) -> list[float]:
    """A curve whose 5-round moving mean first reaches 90 % at `round_` (>= 5): 0.5 up to round_ - 5, then
    0.92. The window ending at round_ is five 0.92s; the one before holds a 0.5: (0.5 + 4·0.92) / 5 = 0.836.
    Its first round at or above 90 % (and 85 %: FC(0.85)) is round_ - 4."""
    assert round_ >= 5
    return [0.5] * (round_ - 5) + [high] * (total - round_ + 5)


NEVER = [0.5] * ROUNDS  # never reaches 85 %, 90 % or 95 %

# Rounds 21-30 of a stand-in that plateaus near 0.905-0.909 (the MLP's regime). Its 5-round moving
# means over the last ten rounds: 0.904, 0.906, 0.907, 0.9072, 0.9066, 0.9052; the highest,
# (0.906 + 0.908 + 0.910 + 0.907 + 0.905) / 5 = 4.536 / 5 = 0.9072, ends at round 28; best round 0.910.
PLATEAU = [0.5] * 20 + [0.900, 0.902, 0.904, 0.906, 0.908, 0.910, 0.907, 0.905, 0.903, 0.901]


def lowered(curve: list[float], by: float) -> list[float]:
    return [a - by for a in curve]


def seed_result(
    key: str,
    seed: int,
    algorithm: dict,
    epochs: int,
    curve: list[float],
    trained: int | None = None,
    extra: dict | None = None,
) -> RunResult:
    """One seed as the train stage records it; trained: the E the default profile used (None: the paper's)."""
    settings = {
        "paper": "fedcurv",
        "dataset": "mnist",
        "algorithm": algorithm,
        "local_epochs": trained or epochs,
        "seed": seed,
        "targets": [],
        "scaled": {},
        **(extra or {}),
    }
    if trained is not None:
        settings["scaled"] = {
            "local_epochs": {"paper": epochs, "used": trained},
            "model": {"paper": "cnn_mnist", "used": "mlp_200"},
        }
    summary = {"status": "ok", "final_accuracy": curve[-1]}
    return RunResult(key, seed, settings, summary, list(range(1, len(curve) + 1)), curve)


def run(
    key: str, algorithm: dict, epochs: int, curves: list[list[float]], seeds=None, trained=None, extra=None
) -> SeededRun:
    seeds = list(range(len(curves))) if seeds is None else list(seeds)
    return SeededRun(key, [seed_result(key, s, algorithm, epochs, c, trained, extra) for s, c in zip(seeds, curves)])


def table1_run(algorithm: str, epochs: int, curves: list[list[float]], seeds=None, trained=None) -> SeededRun:
    return run(f"fedcurv_e{epochs}_{algorithm}", ALGORITHMS[algorithm], epochs, curves, seeds, trained)


def by_rounds(algorithm: str, epochs: int, rounds: list, seeds=None, total: int = ROUNDS) -> SeededRun:
    """A Table 1 run whose seeds' moving means reach 90 % at these rounds (None: never)."""
    return table1_run(algorithm, epochs, [[0.5] * total if r is None else reaching(r, total) for r in rounds], seeds)


def results_of(*runs: SeededRun) -> dict[str, SeededRun]:
    return {r.key: r for r in runs}


def context_of(results: dict, profile: str = "paper", out: Path = Path("/nonexistent")) -> ReportContext:
    return ReportContext(profile, results, PUBLISHED, out, Path("."), frozenset())


def claims_of(*runs: SeededRun, profile: str = "paper") -> dict:
    return {c.id: c for c in fedcurv.claims_of(context_of(results_of(*runs), profile))}


def readings_of(claim) -> dict:
    return {r.name: r for r in claim.readings}


def paired_p(t: float) -> float:
    """Two-sided p of Student's t with 2 degrees of freedom (3 paired seeds), in closed form:
    P(|T| > t) = 1 - t / sqrt(t² + 2)."""
    return 1 - t / math.sqrt(t * t + 2)


def textbook_paired_p(differences: list[float]) -> float:
    """The paired t-test's two-sided p from the per-seed differences, by the textbook formula:
    t = mean(d) / (sd(d) / sqrt(n)), p = 2·P(T > |t|) with n - 1 degrees of freedom (scipy.stats.t)."""
    from scipy.stats import t as student_t

    n = len(differences)
    t = statistics.fmean(differences) / (statistics.stdev(differences) / math.sqrt(n))
    return float(2 * student_t.sf(abs(t), n - 1))


# ---------------------------------------------------------------- the order claims and their readings


def test_every_claim_is_made_with_its_declared_readings_the_papers_own_first():
    claims = claims_of(by_rounds("fedcurv", 50, [9]))
    assert list(claims) == FEDCURV_IDS
    names = {claim_id: [(r.name, r.primary) for r in c.readings] for claim_id, c in claims.items()}
    assert names["fedcurv-e50-90-faster-than-fedavg"] == [("R1 FC(0.90)", True), ("R2 MM(0.90)", False)]
    assert names["fedprox-e50-95-slower-than-fedavg"] == [("R1 FC(0.95)", True), ("R2 MM(0.95)", False)]
    assert names["fedcurv-e10-90-faster-than-fedprox"] == [
        ("R1 FC(0.90)", True),
        ("R2 MM(0.90)", False),
        ("R3 FC(0.85)", False),
    ]
    assert names["gain-larger-at-e50"] == names["fedcurv-e10-90-faster-than-fedavg"]
    assert names["fedprox-stiffness-costs-accuracy"] == [
        ("R1 L5", True),
        ("R2 AT(last round)", False),
        ("R3 L5, FedAvg as the reference", False),
    ]
    # Nothing else run: every claim "not run", naming what is missing, its readings not measured.
    assert {c.status for c in claims.values()} == {"not run"}
    assert "fedcurv_e50_fedavg" in claims["fedcurv-e50-90-faster-than-fedavg"].evidence
    assert all(r.status == "not measured" for c in claims.values() for r in c.readings)
    # Table 1's numbers beside each; N1 cites the paper's sentence (no number).
    assert claims["fedcurv-e50-90-faster-than-fedavg"].published == "9 vs 30"
    assert claims["fedcurv-e10-90-faster-than-fedprox"].published == "35 vs 46 (0.90); 27 vs 33 (0.85)"
    assert (
        claims["gain-larger-at-e50"].published == "3.33x vs 1.46x (0.90); 3.67x vs 1.59x (0.85)"
    )  # 30/9, 51/35; 22/6, 43/27
    assert (
        "the stiffness of the parameters in FedProx comes at the expense of accuracy"
        in claims["fedprox-stiffness-costs-accuracy"].published
        and "L132" in claims["fedprox-stiffness-costs-accuracy"].published
    )


def test_shared_seeds_are_paired_and_separate_where_the_spread_hides_it():
    # Seed by seed FedCurv is 2, 2 and 3 rounds ahead of FedAvg (on FC, MM and FC(0.85) alike: `reaching`
    # moves all three together): differences mean 7/3, sd 1/sqrt(3), so t = (7/3) / (1/sqrt(3) / sqrt(3)) = 7
    # and p = 1 - 7/sqrt(51) = 0.0198. Across seeds the rounds swing over 8+ (34 ± 4 vs 36.3 ± 4.5).
    claims = claims_of(by_rounds("fedcurv", 10, [30, 34, 38]), by_rounds("fedavg", 10, [32, 36, 41]))
    claim = claims["fedcurv-e10-90-faster-than-fedavg"]
    assert claim.status == "held" and claim.test == "paired t" and claim.seeds == "3 vs 3"
    assert all(r.status == "held" for r in claim.readings) and len(claim.readings) == 3
    assert claim.comparisons[0].p == pytest.approx(paired_p(7.0)) and paired_p(7.0) == pytest.approx(0.0198, abs=1e-4)
    # The paper's reading (FC ★) first: four rounds before the moving mean on every seed.
    assert claim.evidence.startswith(
        "**R1 FC(0.90) ★**: held; rounds to 90 % (first round at or above it, the "
        "paper's Table 1): fedcurv_e10_fedcurv 30.0 ± 4.0 (n=3) vs fedcurv_e10_fedavg "
        "32.3 ± 4.5 (n=3)"
    )
    assert (
        "**R2 MM(0.90)**: held; rounds to 90 % (5-round moving mean): fedcurv_e10_fedcurv 34.0 ± 4.0 (n=3) vs "
        "fedcurv_e10_fedavg 36.3 ± 4.5 (n=3)"
    ) in claim.evidence
    assert claim.unit == "rounds" and claim.power == ""


def test_seeds_that_differ_are_not_paired_and_the_power_line_says_what_would_decide():
    # The same rounds, FedCurv on seeds 3-5: pairing is refused, Welch does not separate 30 ± 4 from
    # 32.3 ± 4.5 (effect 7/3 = 2.33 rounds, pooled sd sqrt((16 + 61/3) / 2) = 4.26).
    claims = claims_of(by_rounds("fedcurv", 10, [30, 34, 38], seeds=[3, 4, 5]), by_rounds("fedavg", 10, [32, 36, 41]))
    claim = claims["fedcurv-e10-90-faster-than-fedavg"]
    assert claim.status == "inconclusive" and claim.test == "Welch t"
    assert "unpaired: seeds 3, 4, 5 vs 0, 1, 2 differ" in claim.evidence
    assert claim.power.startswith("effect +2.33 rounds (pooled sd 4.26, d = +0.55)")
    assert "seeds a side would decide it at 80% power" in claim.power


def test_a_constant_lead_of_the_other_side_fails_paired():
    # FedAvg reaches 90 % 15 rounds before FedCurv on every seed: the same difference on each, so sd 0 and
    # no t statistic. The exact sign-flip test decides: of the 2^n sign flips of the n differences only
    # the observed one and its mirror are as extreme, p = 2 / 2^n. With 3 seeds p = 2/8 = 0.25: not
    # separated, inconclusive, and the power line says how many unanimous seeds would separate them:
    # 2/2^5 = 0.0625 is not < 0.05, 2/2^6 = 0.03125 is, so 6.
    claims = claims_of(by_rounds("fedcurv", 50, [20, 21, 22], total=30), by_rounds("fedavg", 50, [5, 6, 7], total=30))
    claim = claims["fedcurv-e50-90-faster-than-fedavg"]
    assert claim.status == "inconclusive" and claim.test == "exact sign-flip" and claim.seeds == "3 vs 3"
    assert claim.comparisons[0].p == pytest.approx(2 / 2**3) and 2 / 2**3 == 0.25
    assert "the same difference on every seed: exact sign-flip p = 2/2^3 = 0.25" in claim.evidence
    assert claim.power == (
        "effect -15 rounds on every seed (sd 0): the exact test separates unanimous seeds from "
        "6 seeds a side, as failed (the observed direction is against the claim)"
    )
    # Six seeds, FedAvg 15 rounds ahead on each: p = 2/2^6 = 0.03125 < 0.05, separated the other way: failed
    # on both readings.
    claims = claims_of(
        by_rounds("fedcurv", 50, [20, 21, 22, 23, 24, 25], total=30),
        by_rounds("fedavg", 50, [5, 6, 7, 8, 9, 10], total=30),
    )
    claim = claims["fedcurv-e50-90-faster-than-fedavg"]
    assert claim.status == "failed" and claim.test == "exact sign-flip" and claim.seeds == "6 vs 6"
    assert [r.status for r in claim.readings] == ["failed", "failed"]
    assert claim.comparisons[0].p == pytest.approx(2 / 2**6) and 2 / 2**6 == 0.03125
    assert "the same difference on every seed: exact sign-flip p = 2/2^6 = 0.0312" in claim.evidence
    assert claim.power == ""


def test_one_seed_a_side_is_inconclusive_and_asks_for_seeds():
    claims = claims_of(by_rounds("fedcurv", 50, [9], total=30), by_rounds("fedavg", 50, [12], total=30))
    claim = claims["fedcurv-e50-90-faster-than-fedavg"]
    assert claim.status == "inconclusive" and claim.seeds == "1 vs 1" and claim.comparisons
    assert claim.power == "one seed a side: its sd is unknown; 3 seeds a side would measure it"


def test_the_first_crossing_and_the_moving_mean_disagreeing_make_the_claim_reading_dependent():
    # FedCurv touches 91 % once at round 5, falls back to 85 % and holds 92 % from round 21: its first round at
    # or above 90 % (FC) is 5, its moving mean first reaches 90 % at round 24 ((4·0.92 + 0.85) / 5 = 0.906;
    # the window ending at 23, (3·0.92 + 2·0.85) / 5 = 0.892, does not; the earlier ones hold at most one
    # 0.91 among 0.85s and 0.5s). FedAvg holds 92 % from round 10: FC 10, MM 14. On each of 6 seeds FedCurv
    # is 5 rounds ahead on FC and 10 behind on MM: the exact sign-flip p = 2/2^6 = 0.03125 both ways, so R1
    # held and R2 failed: reading-dependent.
    spiky = [0.5] * 4 + [0.91] + [0.85] * 15 + [0.92] * 10
    steady = [0.5] * 9 + [0.92] * 21
    claims = claims_of(table1_run("fedcurv", 50, [spiky] * 6), table1_run("fedavg", 50, [steady] * 6))
    claim = claims["fedcurv-e50-90-faster-than-fedavg"]
    first, moving = readings_of(claim)["R1 FC(0.90)"], readings_of(claim)["R2 MM(0.90)"]
    assert (first.status, moving.status) == ("held", "failed")
    assert first.p == pytest.approx(2 / 2**6) and moving.p == pytest.approx(2 / 2**6)
    assert "fedcurv_e50_fedcurv 5.0 ± 0.0 (n=6) vs fedcurv_e50_fedavg 10.0 ± 0.0 (n=6)" in first.evidence
    assert "fedcurv_e50_fedcurv 24.0 ± 0.0 (n=6) vs fedcurv_e50_fedavg 14.0 ± 0.0 (n=6)" in moving.evidence
    assert claim.status == "reading-dependent"
    assert claim.seeds == "6 vs 6" and claim.test == "exact sign-flip"


def test_never_reached_by_every_seed_of_a_side():
    # A seed that never reaches 90 % ranks below every seed that does (the worst-rank rule), and the
    # signed-rank test decides: 3 seeds of FedCurv NC against FedProx reaching it on all 3 is p = 2/2^3 =
    # 0.25, open; 6 seeds a side are the fewest at which unanimous seeds separate (2/2^6 = 0.031).
    claims = claims_of(
        by_rounds("fedcurv", 10, [None, None, None]),
        by_rounds("fedprox", 10, [30, 35, 40]),
        by_rounds("fedavg", 10, [None, 9, 9]),
    )
    claim = claims["fedcurv-e10-90-faster-than-fedprox"]
    assert claim.status == "inconclusive" and claim.test == "Wilcoxon signed-rank"
    assert "p = 0.25" in claim.evidence and "6 seeds a side would decide it" in claim.power
    six = list(range(6))
    claims = claims_of(
        by_rounds("fedcurv", 10, [None] * 6, six),
        by_rounds("fedprox", 10, [30, 35, 40] * 2, six),
        by_rounds("fedavg", 10, [None, 9, 9] * 2, six),
    )
    assert claims["fedcurv-e10-90-faster-than-fedprox"].status == "failed"
    # Seeds NC on both sides tie and drop out: 4 untied seeds of 6, all against FedCurv, p = 2/2^4.
    claim = claims["fedcurv-e10-90-faster-than-fedavg"]
    assert claim.status == "inconclusive" and "over 4 untied seeds: p = 0.125" in claim.evidence
    assert "as failed" in claim.power


def test_95_percent_order_when_the_runs_reach_it():
    # A model that reaches 95 %: FedCurv's moving mean gets there at rounds 10, 11, 12, FedAvg's at 20, 22,
    # 21, FedProx's at 25, 26, 28 (their first crossings 4 rounds earlier each). Curves: 0.5, then 0.96.
    def at(rounds):
        return [[0.5] * (r - 5) + [0.96] * (30 - r + 5) for r in rounds]

    claims = claims_of(
        table1_run("fedcurv", 50, at([10, 11, 12])),
        table1_run("fedavg", 50, at([20, 22, 21])),
        table1_run("fedprox", 50, at([25, 26, 28])),
    )
    assert claims["fedcurv-e50-95-faster-than-fedavg"].status == "held"
    # "FedProx reaches 95 % later than FedAvg": FedAvg first, 5, 4 and 7 rounds ahead: held on both readings.
    slower = claims["fedprox-e50-95-slower-than-fedavg"]
    assert slower.status == "held" and slower.test == "paired t" and slower.published == "140 vs 76"
    assert "ceiling" not in slower.evidence


# ---------------------------------------------------------------- the 95 % claims and the runs' ceiling


def plateau_runs(seeds: int) -> dict[str, SeededRun]:
    """The E = 50 trio on the stand-in's plateau: every seed a little below PLATEAU except FedCurv's seed
    `seeds` - 1, which is PLATEAU itself: the ceiling is 0.9072 (90.72 %) on the moving mean, best round
    0.910 (91.00 %)."""

    def curves(algorithm):
        return [
            PLATEAU if (algorithm, s) == ("fedcurv", seeds - 1) else lowered(PLATEAU, 0.001 * (s + 1))
            for s in range(seeds)
        ]

    return results_of(*(table1_run(a, 50, curves(a), trained=10) for a in ("fedcurv", "fedavg", "fedprox")))


@pytest.mark.parametrize("seeds", [3, 1])
def test_95_percent_claims_below_the_ceiling_are_not_decidable_at_this_scale(seeds):
    claims = {c.id: c for c in fedcurv.claims_of(context_of(plateau_runs(seeds)))}
    claim = claims["fedcurv-e50-95-faster-than-fedavg"]
    assert claim.status == "inconclusive" and claim.comparisons
    # Whatever the number of seeds (one seed a side included): no number of seeds decides either reading. The
    # power line is the paper's reading's: no single round reaches 95 %.
    assert claim.power == (
        "cannot be decided at this scale: no seed of fedcurv_e50_fedcurv or fedcurv_e50_fedavg "
        "reaches 95 % in any evaluated round: the runs' ceiling, the best single round any seed "
        f"reached, is 91.00 % (fedcurv_e50_fedcurv, seed {seeds - 1}), below the target; more "
        "seeds do not lift it"
    )
    assert (
        f"not decidable at this scale (ceiling): the best single round of any seed is 91.00 % (fedcurv_e50_fedcurv, "
        f"seed {seeds - 1}), below 95 %"
    ) in readings_of(claim)["R1 FC(0.95)"].evidence
    moving = readings_of(claim)["R2 MM(0.95)"]
    assert (
        f"not decidable at this scale (ceiling): the highest 5-round moving mean of any seed is 90.72 % "
        f"(fedcurv_e50_fedcurv, seed {seeds - 1}), below 95 %"
    ) in moving.evidence
    assert moving.comparisons[0].undecidable.startswith(
        "no seed of fedcurv_e50_fedcurv or fedcurv_e50_fedavg reaches 95 % on its 5-round moving mean"
    )
    slower = claims["fedprox-e50-95-slower-than-fedavg"]
    assert slower.status == "inconclusive" and slower.evidence.count("not decidable at this scale (ceiling)") == 2
    assert slower.power.startswith(
        "cannot be decided at this scale: no seed of fedcurv_e50_fedavg or "
        "fedcurv_e50_fedprox reaches 95 % in any evaluated round"
    )
    # That plateau's ceiling is FedCurv's: FedAvg and FedProx's best round is 0.910 - 0.001 = 90.90 %, their
    # highest moving mean 0.9072 - 0.001 = 90.62 %.
    assert "90.90 %" in slower.power and "90.62 %" in slower.evidence
    # 90 % is within reach (every seed's moving mean gets there at round 25): no ceiling is invoked.
    assert "ceiling" not in claims["fedcurv-e50-90-faster-than-fedavg"].evidence


def test_a_run_that_reaches_95_percent_is_decided_as_usual():
    runs = plateau_runs(6)
    runs["fedcurv_e50_fedcurv"] = table1_run("fedcurv", 50, [[0.5] * 20 + [0.96] * 10] * 6, trained=10)
    claim = {c.id: c for c in fedcurv.claims_of(context_of(runs))}["fedcurv-e50-95-faster-than-fedavg"]
    # Every FedCurv seed reached 95 % (round 21 first, round 25 on the moving mean), no FedAvg seed did: each
    # FedAvg seed ranks below its FedCurv seed, 6 of 6 (signed-rank p = 2/2^6): held, no ceiling in the evidence.
    assert claim.status == "held" and "ceiling" not in claim.evidence and claim.comparisons[0].p == 2 / 2**6
    assert all(r.p == 2 / 2**6 for r in claim.readings)


# ---------------------------------------------------------------- FedProx's μ by the paper's rule (A1)

GRID_E50 = {"1em3": 1e-3, "5em3": 5e-3, "2em2": 2e-2, "1em1": 0.1, "1": 1.0}


def e50_grid(main_rounds: list, grid_rounds: dict, fedavg_rounds: list, skip=()) -> dict[str, SeededRun]:
    """The E = 50 stand-in's runs, trained E = 10 for 30 rounds: Table 1's FedProx (μ = 0.01, seeds 0-6),
    FedAvg (seeds 0-6), the grid fedcurv_grid_e50_standin_mu_* (seeds 0-2), each seed's moving mean reaching
    90 % at the given round (None: never), its first crossing 4 rounds earlier."""

    def curves(rounds):
        return [[0.5] * 30 if r is None else reaching(r, 30) for r in rounds]

    runs = [
        run("fedcurv_e50_fedprox", {"name": "fedprox", "mu": 0.01}, 50, curves(main_rounds), trained=10),
        run("fedcurv_e50_fedavg", ALGORITHMS["fedavg"], 50, curves(fedavg_rounds), trained=10),
    ]
    runs += [
        run(
            f"fedcurv_grid_e50_standin_mu_{name}",
            {"name": "fedprox", "mu": mu},
            50,
            curves(grid_rounds[name]),
            trained=10,
        )
        for name, mu in GRID_E50.items()
        if name not in skip
    ]
    return results_of(*runs)


def test_the_rule_ties_values_of_equal_mean_and_reads_the_main_run_on_seeds_0_to_2():
    # Means over seeds 0-2 (moving mean): μ = 0.01 (the main run) (20 + 21 + 22) / 3 = 21, 1e-3 (22 + 20 + 21) / 3
    # = 21, 5e-3 21, 0.02 (22 + 22 + 23) / 3 = 22.3, 0.1 and 1 never on some seed (not contenders). The main
    # run's seeds 3-6 (29 each) would lift its mean over 0-6 to (63 + 116) / 7 = 25.6: the rule reads 0-2 only,
    # so 0.001, 0.005 and 0.01 tie, and 0.01 is among them: no further reading.
    runs = e50_grid(
        [20, 21, 22, 29, 29, 29, 29],
        {"1em3": [22, 20, 21], "5em3": [21, 21, 21], "2em2": [22, 22, 23], "1em1": [24, None, 25], "1": [None] * 3},
        [19, 20, 21, 28, 28, 28, 28],
    )
    rule = fedcurv.mu_rule(runs, 50, "default")
    assert [rule.mu(k) for k in rule.tied] == [0.001, 0.005, 0.01] and rule.main_tied and rule.picks == []
    assert rule.means["fedcurv_e50_fedprox"] == pytest.approx(21.0)
    assert rule.means["fedcurv_grid_e50_standin_mu_2em2"] == pytest.approx(67 / 3)
    assert rule.means["fedcurv_grid_e50_standin_mu_1em1"] is None
    claim = {c.id: c for c in fedcurv.claims_of(context_of(runs, "default"))}["fedprox-e50-90-faster-than-fedavg"]
    assert [r.name for r in claim.readings] == ["R1 FC(0.90)", "R2 MM(0.90)"]
    assert (
        "3 values tie, μ = 0.001, 0.005, 0.01 (21.0 rounds; means: 0.001: 21.0, 0.005: 21.0, 0.01: 21.0, "
        "0.02: 22.3, 0.1: NC, 1: NC); the claims' μ = 0.01 is among them: no further reading"
    ) in claim.evidence
    # The main run is 1 round behind FedAvg on every one of its 7 seeds: exact sign-flip p = 2/2^7 = 0.0156, failed.
    assert claim.status == "failed" and claim.seeds == "7 vs 7" and claim.comparisons[0].p == pytest.approx(2 / 2**7)
    assert "FedProx μ = 0.01 (paper: 0.00025)" in claim.setting and "E = 10 (paper: E = 50)" in claim.setting


def test_where_the_rule_does_not_tie_the_main_runs_mu_every_tied_value_is_a_further_reading():
    # Means over seeds 0-2: 1e-3 (21 + 20 + 21) / 3 = 20.67 and 5e-3 (20 + 21 + 21) / 3 = 20.67 tie for the
    # fewest; the main run (μ = 0.01) 25, 0.02 26.3: 0.01 is not among the tied values, and the paper breaks no
    # tie, so both are read (A1c). Read on seeds 0-2 against FedAvg's seeds 0-2 (23, 24, 25), 0.005 is 3, 3 and 4
    # rounds ahead: mean 10/3, sd 1/sqrt(3), t = (10/3) / (1/sqrt(3) / sqrt(3)) = 10, p = 1 - 10/sqrt(102) =
    # 0.0099: held, on FC and MM alike; 0.001 is 2, 4, 4 ahead. The main run is 1 round behind FedAvg on each of
    # 7 seeds (p = 2/2^7): failed. The claim: reading-dependent.
    runs = e50_grid(
        [24, 25, 26, 25, 25, 25, 25],
        {"1em3": [21, 20, 21], "5em3": [20, 21, 21], "2em2": [26, 26, 27], "1em1": [None] * 3, "1": [None] * 3},
        [23, 24, 25, 24, 24, 24, 24],
    )
    rule = fedcurv.mu_rule(runs, 50, "default")
    assert [rule.mu(k) for k in rule.tied] == [0.001, 0.005] and not rule.main_tied
    assert [p.key for p in rule.picks] == ["fedcurv_grid_e50_standin_mu_1em3", "fedcurv_grid_e50_standin_mu_5em3"]
    assert all(p.seeds == [0, 1, 2] for p in rule.picks)
    claims = {c.id: c for c in fedcurv.claims_of(context_of(runs, "default"))}
    claim = claims["fedprox-e50-90-faster-than-fedavg"]
    readings = readings_of(claim)
    assert list(readings) == [
        "R1 FC(0.90)",
        "R2 MM(0.90)",
        "R1 FC(0.90) at μ = 0.001 (tied by the rule, seeds 0-2)",
        "R2 MM(0.90) at μ = 0.001 (tied by the rule, seeds 0-2)",
        "R1 FC(0.90) at μ = 0.005 (tied by the rule, seeds 0-2)",
        "R2 MM(0.90) at μ = 0.005 (tied by the rule, seeds 0-2)",
    ]
    pick = readings["R1 FC(0.90) at μ = 0.005 (tied by the rule, seeds 0-2)"]
    assert not pick.primary and pick.status == "held" and pick.comparisons[0].test == "paired t"
    assert pick.p == pytest.approx(paired_p(10.0)) and paired_p(10.0) == pytest.approx(0.0099, abs=1e-4)
    assert textbook_paired_p([3, 3, 4]) == pytest.approx(paired_p(10.0))
    assert (
        "fedcurv_grid_e50_standin_mu_5em3 16.7 ± 0.6 (n=3) vs fedcurv_e50_fedavg (seeds 0-2) 20.0 ± 1.0 (n=3)"
        in pick.evidence
    )
    assert [readings[n].status for n in ("R1 FC(0.90)", "R2 MM(0.90)")] == ["failed", "failed"]
    assert claim.status == "reading-dependent"
    assert (
        "2 values tie, μ = 0.001, 0.005 (20.7 rounds; means: 0.001: 20.7, 0.005: 20.7, 0.01: 25.0, 0.02: 26.3, "
        "0.1: NC, 1: NC); the claims' μ = 0.01 is not among them: every value the rule ties (the paper breaks no "
        "tie), μ = 0.001, 0.005 on seeds 0-2, is read as a further reading"
    ) in claim.evidence
    # Claim 4 (95 %) takes both tied values as well; no seed reaches 95 %, so every reading stays undecidable.
    slower = claims["fedprox-e50-95-slower-than-fedavg"]
    assert len(slower.readings) == 6 and slower.status == "inconclusive"
    assert slower.evidence.count("not decidable at this scale (ceiling)") == 6


def spiked(round_: int, spike: int, total: int = 30) -> list[float]:
    """reaching(round_) with one 0.92 alone at round `spike` (< round_ - 5): its first crossing of 90 % is that
    round, while its 5-round moving mean still first reaches 90 % at round_ (one 0.92 among 0.5s: 0.584)."""
    curve = reaching(round_, total)
    curve[spike - 1] = 0.92
    return curve


def test_the_rule_on_the_papers_own_count_picks_another_mu_and_adds_its_readings():
    # Seeds 0-2 of each value. Moving mean (A1): μ = 0.005 and the main run's 0.01 both reach 90 % at round 21
    # on every seed: a tie holding 0.01, no pick. First crossing (the paper's Table 1 count): 0.005 touches 90 %
    # alone at round 10 on every seed, 0.01 first at round 17 (21 - 4): 0.005 alone is the fewest, the pick.
    # Its readings against FedAvg's seeds 0-2 (first crossing 20, moving mean 24): 10 and 3 rounds ahead on each
    # of 3 seeds, a constant difference: the exact sign-flip test's p = 2/2^3 = 0.25, inconclusive. The main
    # run is 3 rounds ahead of FedAvg on all 7 seeds on both measures (p = 2/2^7): held. The claim:
    # reading-dependent, by the readings the paper's own count adds.
    runs = e50_grid(
        [21] * 7, {"2em2": [23] * 3, "1em1": [None] * 3, "1": [None] * 3, "1em3": [22] * 3}, [24] * 7, skip=("5em3",)
    )
    runs["fedcurv_grid_e50_standin_mu_5em3"] = run(
        "fedcurv_grid_e50_standin_mu_5em3", {"name": "fedprox", "mu": 0.005}, 50, [spiked(21, 10)] * 3, trained=10
    )
    moving = fedcurv.mu_rule(runs, 50, "default")
    crossing = fedcurv.mu_rule(runs, 50, "default", fedcurv.FIRST_CROSSING)
    assert [moving.mu(k) for k in moving.tied] == [0.005, 0.01] and moving.picks == []
    assert [crossing.mu(k) for k in crossing.tied] == [0.005] and crossing.picks[0].key.endswith("mu_5em3")
    assert crossing.means["fedcurv_e50_fedprox"] == pytest.approx(17.0)
    claim = {c.id: c for c in fedcurv.claims_of(context_of(runs, "default"))}["fedprox-e50-90-faster-than-fedavg"]
    readings = readings_of(claim)
    assert list(readings) == [
        "R1 FC(0.90)",
        "R2 MM(0.90)",
        "R1 FC(0.90) at μ = 0.005 (tied by the rule on first crossing, seeds 0-2)",
        "R2 MM(0.90) at μ = 0.005 (tied by the rule on first crossing, seeds 0-2)",
    ]
    assert [r.status for r in readings.values()] == ["held", "held", "inconclusive", "inconclusive"]
    assert readings["R1 FC(0.90)"].p == pytest.approx(2 / 2**7)
    assert readings["R1 FC(0.90) at μ = 0.005 (tied by the rule on first crossing, seeds 0-2)"].p == pytest.approx(0.25)
    assert claim.status == "reading-dependent"
    assert "first crossing, the paper's Table 1 count" in claim.evidence
    assert "the claims' μ = 0.01 is among them: no further reading" in claim.evidence  # the moving mean's words


def test_where_both_measures_pick_the_same_run_it_is_read_once():
    runs = e50_grid(
        [24, 25, 26, 25, 25, 25, 25],
        {"1em3": [21, 20, 21], "5em3": [20, 21, 21], "2em2": [26, 26, 27], "1em1": [None] * 3, "1": [None] * 3},
        [23, 24, 25, 24, 24, 24, 24],
    )
    claim = {c.id: c for c in fedcurv.claims_of(context_of(runs, "default"))}["fedprox-e50-90-faster-than-fedavg"]
    # both measures tie 0.001 and 0.005 without 0.01: each tied value read once (2 declared readings each)
    assert len(claim.readings) == 6 and not any("first crossing" in r.name for r in claim.readings)


def test_the_rule_waits_for_the_whole_grid():
    # 0.02's grid run has no results yet: the rule is not applied (0.02 could still be the fewest), the claim
    # says so in a reading not measured, and is decided by its own readings.
    runs = e50_grid(
        [24, 25, 26, 25, 25, 25, 25],
        {"1em3": [21, 20, 21], "5em3": [20, 21, 21], "1em1": [None] * 3, "1": [None] * 3},
        [23, 24, 25, 24, 24, 24, 24],
        skip=("2em2",),
    )
    claim = {c.id: c for c in fedcurv.claims_of(context_of(runs, "default"))}["fedprox-e50-90-faster-than-fedavg"]
    (waiting,) = [r for r in claim.readings if r.status == "not measured"]
    assert waiting.name == "μ by the paper's rule (seeds 0-2)"
    assert "fedcurv_grid_e50_standin_mu_2em2 not trained yet" in waiting.evidence
    assert claim.status == "failed"  # the measured readings agree
    # The default profile's grid names are awaited in the default profile only: elsewhere the rule reads the
    # values there are.
    paper = fedcurv.mu_rule(runs, 50, "paper")
    assert (
        paper.missing == []
        and paper.main_tied is False
        and [p.key for p in paper.picks] == ["fedcurv_grid_e50_standin_mu_1em3", "fedcurv_grid_e50_standin_mu_5em3"]
    )


# ---------------------------------------------------------------- N1: FedProx's stiffness costs accuracy


def stiffness_runs(seeds: int, curv: float, prox: float, avg: float, total: int = 30) -> dict[str, SeededRun]:
    """The six Table 1 runs, every seed holding a flat accuracy over its last rounds (0.5 before round 6)."""

    def curves(level):
        return [[0.5] * 5 + [level] * (total - 5)] * seeds

    return results_of(
        *(
            table1_run(a, e, curves(level))
            for e in (50, 10)
            for a, level in (("fedcurv", curv), ("fedprox", prox), ("fedavg", avg))
        )
    )


def test_fedprox_below_fedcurv_at_both_e_is_held_on_every_reading():
    # 7 seeds, FedCurv and FedAvg end at 92 %, FedProx at 90 %: 2 points below on every seed, at each E. The
    # exact sign-flip p = 2/2^7 = 0.0156 at each E; Holm over the 2: 2 · 0.0156 = 0.03125 < 0.05, held.
    claim = claims_of(*stiffness_runs(7, 0.92, 0.90, 0.92).values())["fedprox-stiffness-costs-accuracy"]
    assert claim.status == "held" and claim.unit == "points" and claim.seeds == "7 vs 7"
    for r in claim.readings:
        assert r.status == "held" and [c.p for c in r.comparisons] == pytest.approx([2 / 2**6] * 2), r.name
    assert "E = 50: fedcurv_e50_fedcurv 92.00 ± 0.00 (n=7) vs fedcurv_e50_fedprox 90.00 ± 0.00 (n=7)" in claim.evidence
    assert "caveat: our runs end at round 30 (E = 50), 30 (E = 10)" in claim.evidence


def test_fedprox_above_fedcurv_is_not_held():
    claim = claims_of(*stiffness_runs(7, 0.90, 0.92, 0.90).values())["fedprox-stiffness-costs-accuracy"]
    assert claim.status == "failed" and all(r.status == "failed" for r in claim.readings)


def test_holm_within_a_reading_turns_a_p_that_passes_alone_into_an_open_one():
    # 6 seeds: FedProx 2 points below at each E on every seed, exact sign-flip p = 2/2^6 = 0.03125 < 0.05 alone
    # (held), but Holm over the reading's 2 comparisons doubles the smaller: 2 · 0.03125 = 0.0625, and the
    # larger is raised to it: both 0.0625, not < 0.05: inconclusive (Holm 1979, step-down).
    from pipeline.report.seeds import compare

    runs = stiffness_runs(6, 0.92, 0.90, 0.92)
    alone = compare(runs["fedcurv_e50_fedcurv"].accuracy_means(), runs["fedcurv_e50_fedprox"].accuracy_means())
    assert alone.status == "held" and alone.p == pytest.approx(0.03125)
    claim = claims_of(*runs.values())["fedprox-stiffness-costs-accuracy"]
    primary = readings_of(claim)["R1 L5"]
    assert [c.p for c in primary.comparisons] == pytest.approx([0.0625, 0.0625])
    assert [c.status for c in primary.comparisons] == ["inconclusive", "inconclusive"]
    assert primary.status == "inconclusive" and "Holm over 2: p = 0.0625, inconclusive (was held)" in primary.evidence
    assert claim.status == "inconclusive"


# ---------------------------------------------------------------- the gain claim


def test_gain_ratios_keep_their_seeds_and_are_paired():
    # Moving mean (R2): FedCurv at round 10 on every seed; FedAvg at 16, 20, 24 (E = 50) and 14, 18, 21 (E = 10):
    # gains 1.6, 2.0, 2.4 vs 1.4, 1.8, 2.1. Seed by seed E = 50 gains 0.2, 0.2 and 0.3 more: mean 0.7/3, sd
    # 0.1/sqrt(3), t = (0.7/3) / (0.1/sqrt(3) / sqrt(3)) = 7, p = 1 - 7/sqrt(51) = 0.0198 (paired). Over seeds
    # 2.00 ± 0.40 vs 1.77 ± 0.35 is no separation without the pairing.
    # First crossing (R1 ★, and R3 at 85 %, the same rounds here): FedCurv 6, FedAvg 12, 16, 20 and 10, 14, 17:
    # gains 2, 2.67, 3.33 vs 1.67, 2.33, 2.83; differences 1/3, 1/3, 1/2 = (2, 2, 3) / 6, the same shape: t = 7.
    claims = claims_of(
        by_rounds("fedcurv", 50, [10, 10, 10]),
        by_rounds("fedavg", 50, [16, 20, 24]),
        by_rounds("fedcurv", 10, [10, 10, 10]),
        by_rounds("fedavg", 10, [14, 18, 21]),
    )
    gain = claims["gain-larger-at-e50"]
    assert gain.status == "held" and gain.test == "paired t" and gain.seeds == "3 vs 3" and gain.unit == "in the ratio"
    expected_p = textbook_paired_p([1.6 - 1.4, 2.0 - 1.8, 2.4 - 2.1])
    assert expected_p == pytest.approx(paired_p(7.0)) and expected_p == pytest.approx(0.0198, abs=1e-4)
    assert textbook_paired_p([2 / 6, 2 / 6, 3 / 6]) == pytest.approx(paired_p(7.0))
    for r in gain.readings:
        assert r.status == "held" and r.p == pytest.approx(expected_p), r.name
    moving = readings_of(gain)["R2 MM(0.90)"]
    assert "gains at E = 50: 2.00x ± 0.40 (n=3), at E = 10: 1.77x ± 0.35 (n=3)" in moving.evidence
    assert "paired t-test over 3 seeds: p = 0.0198" in moving.evidence
    # sd of 2, 2.67, 3.33 = 2/3 = 0.67; mean of 1.67, 2.33, 2.83 = 41/18 = 2.28.
    assert "gains at E = 50: 2.67x ± 0.67 (n=3), at E = 10: 2.28x" in readings_of(gain)["R1 FC(0.90)"].evidence


def test_gain_ratios_on_different_seeds_are_compared_unpaired():
    claims = claims_of(
        by_rounds("fedcurv", 50, [10, 10, 10]),
        by_rounds("fedavg", 50, [16, 20, 24]),
        by_rounds("fedcurv", 10, [10, 10, 10], seeds=[3, 4, 5]),
        by_rounds("fedavg", 10, [14, 18, 22], seeds=[3, 4, 5]),
    )
    gain = claims["gain-larger-at-e50"]
    assert gain.status == "inconclusive" and gain.test == "Welch t"
    # The power line is the paper's reading's (FC): gains 2, 2.67, 3.33 vs 1.67, 2.33, 3: effect 1/3, pooled sd
    # 2/3 (both sides' sd), d = 0.5.
    assert gain.power.startswith("effect +0.333 in the ratio (pooled sd 0.667, d = +0.50)")


def test_gain_without_a_ratio_on_a_seed_is_inconclusive_with_its_reason():
    claims = claims_of(
        by_rounds("fedcurv", 50, [10, 10, 10]),
        by_rounds("fedavg", 50, [16, None, 24]),
        by_rounds("fedcurv", 10, [10, 10, 10]),
        by_rounds("fedavg", 10, [14, 18, 22]),
    )
    gain = claims["gain-larger-at-e50"]
    assert gain.status == "inconclusive" and gain.comparisons
    assert gain.power.startswith("cannot be decided at this scale: 1 seed(s) without a ratio")


def test_every_run_claim_carries_the_comparisons_that_decided_it_and_its_setting():
    runs = plateau_runs(3)
    runs.update(
        results_of(
            *(table1_run(a, 10, [lowered(PLATEAU, 0.002)] * 3, trained=2) for a in ("fedcurv", "fedavg", "fedprox"))
        )
    )
    claims = {c.id: c for c in fedcurv.claims_of(context_of(runs))}
    assert list(claims) == FEDCURV_IDS
    for claim in claims.values():
        assert claim.comparisons and claim.unit and claim.readings, claim.id
        decided = claim.status in ("held", "failed")
        assert decided or claim.power not in ("", "no comparison to measure (see our numbers)"), claim.id
        # Nothing that would split the ledger's markdown row.
        assert "|" not in claim.setting + claim.evidence + claim.published + claim.power, claim.id
        # The trained setting beside the paper's: the MLP for the CNN, and the E trained for the paper's.
        assert claim.setting.count("mlp_200 (paper: cnn_mnist)") >= 1, claim.id
    assert (
        claims["fedcurv-e50-90-faster-than-fedavg"].setting
        == "MNIST; mlp_200 (paper: cnn_mnist); E = 10 (paper: E = 50)"
    )
    assert claims["gain-larger-at-e50"].setting == (
        "E = 50 runs: MNIST; mlp_200 (paper: cnn_mnist); E = 10 (paper: "
        "E = 50) / E = 10 runs: MNIST; mlp_200 (paper: cnn_mnist); E = 2 "
        "(paper: E = 10)"
    )
    assert claims["fedcurv-e10-90-faster-than-fedprox"].setting.endswith("; FedProx μ = 0.02 (paper: 1e-05)")


def test_a_confirmatory_sample_decides_a_claim_on_its_own_seeds():
    # Samples of both runs of claim 1 on seeds 10-15: FedCurv reaches 90 % 3 rounds before FedAvg on each of the
    # 6 (exact sign-flip p = 2/2^6 = 0.03125, both readings): held on the sample's seeds alone, paired; the
    # runs' own seeds 0-2 (a 1-round lead, p = 0.25) stay in the evidence.
    def sample(algorithm, rounds):
        return run(
            f"fedcurv_e50_{algorithm}_confirm",
            ALGORITHMS[algorithm],
            50,
            [reaching(r, 30) for r in rounds],
            seeds=range(10, 16),
            extra={"confirms": {"run": f"fedcurv_e50_{algorithm}", "claims": ["fedcurv-e50-90-faster-than-fedavg"]}},
        )

    runs = results_of(
        by_rounds("fedcurv", 50, [20, 21, 22], total=30),
        by_rounds("fedavg", 50, [21, 22, 23], total=30),
        sample("fedcurv", [10] * 6),
        sample("fedavg", [13] * 6),
    )
    claims = {c.id: c for c in confirmed_claims(runs)}
    claim = claims["fedcurv-e50-90-faster-than-fedavg"]
    assert claim.status == "held" and claim.seeds == "6 vs 6" and claim.sample == "confirmatory sample, seeds 10-15"
    assert all(r.p == pytest.approx(2 / 2**6) for r in claim.readings)
    assert "Before it, on the runs' own seeds (3 vs 3): inconclusive" in claim.evidence
    # The other claims read the runs' own seeds.
    assert claims["fedcurv-e50-95-faster-than-fedavg"].seeds == "3 vs 3"


def confirmed_claims(runs: dict) -> list:
    """The claims as the report stage makes them (confirmation.build_with_confirmations), without writing
    tables: build is replaced by claims_of."""

    class ClaimsOnly:
        PAPER = fedcurv.PAPER
        claims_of = staticmethod(fedcurv.claims_of)
        build = staticmethod(fedcurv.claims_of)

    return build_with_confirmations(ClaimsOnly, context_of(runs))


# ---------------------------------------------------------------- Table 1's stand-in notes


def test_table1_notes_state_the_stand_in_criteria_the_trained_setting_and_the_measured_ceiling(tmp_path):
    runs = plateau_runs(3)
    runs.update(
        results_of(
            *(table1_run(a, 10, [lowered(PLATEAU, 0.002)] * 3, trained=2) for a in ("fedcurv", "fedavg", "fedprox"))
        )
    )
    fedcurv.table1(runs, PUBLISHED, tmp_path, "default")
    notes = (tmp_path / "table1.md").read_text().split("\n- ")
    assert any(n.startswith("stand-in criteria (written before reading the verdicts") for n in notes)
    (trained,) = [n for n in notes if n.startswith("trained, beside the paper's")]
    assert (
        "E = 50 columns: MNIST; mlp_200 (paper: cnn_mnist); E = 10 (paper: E = 50) | E = 10 columns: MNIST; "
        "mlp_200 (paper: cnn_mnist); E = 2 (paper: E = 10)"
    ) in trained
    (measured,) = [n for n in notes if n.startswith("(1) measured")]
    # Highest: FedCurv E = 50 seed 2, 90.72 %; lowest run: the E = 10 trio, 0.9072 - 0.002 = 90.52 %.
    assert "90.72 % (fedcurv_e50_fedcurv, seed 2; per run 90.52 %–90.72 %" in measured
    assert "missed: 95 % is never reached" in measured and "known misfit, not changed in this profile" in measured
    (epochs,) = [n for n in notes if n.startswith("(2) measured")]
    assert "E = 50 vs 10 trained as 10 vs 2: the ratio is kept" in epochs
    # No λ or μ grid among these runs; below, μ searched at E = 10 only.
    (search,) = [n for n in notes if n.startswith("(3) measured")]
    assert search.startswith("(3) measured: searched (λ not searched; μ not searched)") and "missed" in search
    runs.update(results_of(mu_run("fedcurv_grid_e10_standin_mu_1em3", 1e-3, [25, 26, 28])))
    fedcurv.table1(runs, PUBLISHED, tmp_path, "default")
    (search,) = [n for n in (tmp_path / "table1.md").read_text().split("\n- ") if n.startswith("(3) measured")]
    assert search.startswith(
        "(3) measured: searched (λ not searched; μ at E = 10); a value searched at one E only is used at both"
    )


def test_table1_has_no_stand_in_notes_for_the_papers_own_settings(tmp_path):
    runs = results_of(table1_run("fedcurv", 50, [reaching(9)] * 2), table1_run("fedavg", 50, [reaching(12)] * 2))
    fedcurv.table1(runs, PUBLISHED, tmp_path, "paper")
    text = (tmp_path / "table1.md").read_text()
    assert "stand-in criteria" not in text
    assert "E = 50 columns: MNIST; the paper's settings | E = 10 columns: not run in this profile" in text


# ---------------------------------------------------------------- the grid search's best


def mu_run(key: str, mu: float, rounds: list, seeds=None) -> SeededRun:
    return run(
        key, {"name": "fedprox", "mu": mu}, 10, [NEVER if r is None else reaching(r) for r in rounds], seeds, trained=2
    )


def test_best_separated_from_the_runner_up():
    # Means 21 vs 26.3: seed by seed 5, 5 and 6 rounds ahead: t = (16/3) / (1/sqrt(3) / sqrt(3)) = 16,
    # p = 1 - 16/sqrt(258) = 0.00388. The third, 41 rounds, is further still: seed by seed 20, 21 and 19
    # rounds behind the best, mean 20, sd 1, t = 20 / (1 / sqrt(3)) = 34.6, p = 0.00083.
    marks = fedcurv.best_marks(
        [mu_run("a", 1e-3, [25, 26, 28]), mu_run("b", 1e-2, [20, 21, 22]), mu_run("c", 1e-1, [40, 42, 41])]
    )
    assert paired_p(16.0) == pytest.approx(0.00388, abs=1e-5)
    assert textbook_paired_p([5, 5, 6]) == pytest.approx(paired_p(16.0))
    assert textbook_paired_p([20, 21, 19]) == pytest.approx(0.000832, abs=1e-6)
    assert marks == {"b": "best: separated from the runner-up (mu = 0.001: paired t-test over 3 seeds: p = 0.00388)"}


def test_best_by_the_mean_not_separated_is_a_tie():
    # "b" has the fewest mean rounds (24) though its seeds swing (20, 30, 22); against "a" (26) the seed
    # differences 5, -4, 5 do not separate them: a tie. "c" (41) is separated from "b": seed differences
    # 20, 11, 20, mean 17, sd sqrt(27), t = 17 / (sqrt(27) / sqrt(3)) = 17/3, p = 1 - (17/3)/sqrt(289/9 + 2) = 0.0297.
    assert paired_p(17 / 3) == pytest.approx(0.0297, abs=1e-4)
    marks = fedcurv.best_marks(
        [mu_run("a", 1e-3, [25, 26, 27]), mu_run("b", 1e-2, [20, 30, 22]), mu_run("c", 1e-1, [40, 41, 42])]
    )
    assert marks["b"].startswith("best by the mean, a tie: not separated from 1 other value(s); runner-up mu = 0.001")
    assert marks["a"] == "tied with the best (not separated)"
    assert "c" not in marks


def test_single_seed_values_are_never_a_separated_best():
    # 20 rounds against 25 on one seed each: one seed cannot separate, so the best by the mean is a tie.
    marks = fedcurv.best_marks([mu_run("a", 1e-3, [25]), mu_run("b", 1e-2, [20])])
    assert marks["b"].startswith("best by the mean, a tie") and "a single seed cannot separate" in marks["b"]
    assert marks["a"] == "tied with the best (not separated)"


def test_equal_means_are_tied_best_and_values_some_seeds_never_reached_are_not_contenders():
    # Means 22 and 22; "c" reached 90 % at 5 on one seed of three only: no mean, not a contender.
    members = [mu_run("a", 1e-3, [20, 22, 24]), mu_run("b", 1e-2, [22, 22, 22]), mu_run("c", 1e-1, [5, None, None])]
    marks = fedcurv.best_marks(members)
    assert marks == {"a": "tied best (2): the same mean", "b": "tied best (2): the same mean"}
    assert fedcurv.best_marks([mu_run("c", 1e-1, [None, None])]) == {}
    # The paper's rule on them: a and b tie (the same mean, whatever their seeds), and the paper breaks no tie:
    # both are read.
    assert fedcurv.rule_marks(members) == {
        "a": "tied for the fewest (2): read as a further reading (the paper breaks no tie)",
        "b": "tied for the fewest (2): read as a further reading (the paper breaks no tie)",
        "c": "not a contender: a seed never reached 90%",
    }


def test_a_value_not_separated_from_tied_best_values_is_tied_too():
    # "a" and "b" one seed each at 36 rounds (tied best); "c" 38, 40, 42 (mean 40) cannot be separated from a
    # single seed: tied with the best. "d" reaches it at 40 on one seed only: no mean, no mark.
    marks = fedcurv.best_marks(
        [
            mu_run("a", 1e-3, [36]),
            mu_run("b", 1e-2, [36]),
            mu_run("c", 2e-2, [38, 40, 42]),
            mu_run("d", 1e-1, [40, None, None]),
        ]
    )
    assert marks == {
        "a": "tied best (2): the same mean; not separated from 1 other value(s) either",
        "b": "tied best (2): the same mean; not separated from 1 other value(s) either",
        "c": "tied with the best (not separated)",
    }


def test_grid_search_table_and_the_mu_misfit_note(tmp_path):
    runs = results_of(
        mu_run("fedcurv_grid_e10_standin_mu_1em3", 1e-3, [25, 26, 28]),
        mu_run("fedcurv_e10_fedprox", 0.02, [20, 21, 22]),
        table1_run("fedavg", 10, [reaching(r) for r in (20, 22, 21)], trained=2),
        run("fedcurv_e50_fedcurv", ALGORITHMS["fedcurv"], 50, [reaching(9)], trained=10),
    )
    fedcurv.grid_search(runs, PUBLISHED, tmp_path, "paper")
    with open(tmp_path / "grid_search.csv") as handle:
        rows = {r["run"]: r for r in csv.DictReader(handle)}
    assert list(rows) == ["fedcurv_e50_fedcurv", "fedcurv_grid_e10_standin_mu_1em3", "fedcurv_e10_fedprox"]
    best = rows["fedcurv_e10_fedprox"]
    assert (best["E"], best["trained E"], best["seeds"]) == ("E=10", "E=2", "0-2")
    assert best["best (the seeds' separation)"].startswith("best: separated from the runner-up (mu = 0.001")
    assert best["the paper's rule"] == "the fewest: Table 1's run (the claims' value)"
    assert rows["fedcurv_grid_e10_standin_mu_1em3"]["the paper's rule"] == ""
    assert best["rounds to 90% (5-round moving mean)"] == "21.0 ± 1.0 (n=3)"
    assert best["rounds to 90% (first crossing)"] == "17.0 ± 1.0 (n=3)"
    assert (
        rows["fedcurv_e50_fedcurv"]["best (the seeds' separation)"]
        == "best: the only value whose every seed reached 90%"
    )
    notes = (tmp_path / "grid_search.md").read_text()
    assert (
        "known misfit, not changed in this profile: FedProx's μ was searched at the trained E = 2 only (the "
        "paper's E = 10) and the μ it gave (0.02) is used at both E; the paper searches per E (0.00025 at "
        "E = 50, 1e-05 at E = 10)"
    ) in notes
    # FedProx 20, 21, 22 vs FedAvg 20, 22, 21: seed differences 0, 1, -1, no separation.
    assert "FedProx reaches 90 % (5-round moving mean) in 21.0 ± 1.0 (n=3) rounds vs FedAvg's 21.0 ± 1.0 (n=3)" in notes
    assert "μ by the paper's rule at the paper's E = 10" in notes and "one value is the fewest, μ = 0.02" in notes


def test_grid_search_reads_the_renamed_grid_and_table_1s_run_on_seeds_0_to_2(tmp_path):
    # The E = 50 grid of A1 (1e-3, 5e-3, 0.02, 0.1, 1; seeds 0-2) with Table 1's μ = 0.01 run (seeds 0-6) as its
    # 0.01 row, read on seeds 0-2: the means of the rule's test above (0.001 and 0.005 tie at 20.7).
    runs = e50_grid(
        [24, 25, 26, 25, 25, 25, 25],
        {"1em3": [21, 20, 21], "5em3": [20, 21, 21], "2em2": [26, 26, 27], "1em1": [None] * 3, "1": [None] * 3},
        [23, 24, 25, 24, 24, 24, 24],
    )
    fedcurv.grid_search(runs, PUBLISHED, tmp_path, "default")
    with open(tmp_path / "grid_search.csv") as handle:
        rows = {r["run"]: r for r in csv.DictReader(handle)}
    assert [r["value"] for r in rows.values()] == [
        "mu = 0.001",
        "mu = 0.005",
        "mu = 0.01",
        "mu = 0.02",
        "mu = 0.1",
        "mu = 1",
    ]
    main = rows["fedcurv_e50_fedprox"]
    assert main["seeds"] == "0-2" and main["rounds to 90% (5-round moving mean)"] == "25.0 ± 1.0 (n=3)"
    assert main["trained E"] == "E=10" and main["the paper's rule"] == ""
    assert (
        rows["fedcurv_grid_e50_standin_mu_5em3"]["the paper's rule"]
        == "tied for the fewest (2): read as a further reading (the paper breaks no tie)"
    )
    assert rows["fedcurv_grid_e50_standin_mu_1em3"]["the paper's rule"] == (
        "tied for the fewest (2): read as a further reading (the paper breaks no tie)"
    )
    assert rows["fedcurv_grid_e50_standin_mu_1"]["the paper's rule"] == "not a contender: a seed never reached 90%"
    notes = (tmp_path / "grid_search.md").read_text()
    assert (
        "the claims' μ = 0.01 is not among them: every value the rule ties (the paper breaks no tie), μ = 0.001, "
        "0.005 on seeds 0-2" in notes
    )
    assert "fedcurv_grid_e50_standin_mu_1em2" not in notes and "within one round" in notes  # named as the old rule


def test_the_stiffness_claim_reads_every_tied_mu_once_per_measure():
    """A1c: per measure, every value the rule ties at each E goes into one reading; a measure whose ties are an
    earlier measure's exactly adds none."""
    from types import SimpleNamespace

    def rule(epochs, measure, keys):
        picks = [SimpleNamespace(key=k) for k in keys]
        return fedcurv.MuRule(epochs, {}, {}, "main", [], [], picks=picks, measure=measure)  # type: ignore[arg-type]

    moving, crossing = fedcurv.MOVING_MEAN, fedcurv.FIRST_CROSSING
    same = {50: [rule(50, moving, ["a", "b"]), rule(50, crossing, ["a", "b"])]}
    assert [(m, {e: [p.key for p in t] for e, t in picks.items()}) for m, picks in fedcurv.stiffness_picks(same)] == [
        (moving, {50: ["a", "b"]})
    ]
    more = {
        50: [rule(50, moving, ["a", "b"]), rule(50, crossing, ["a", "b"])],
        10: [rule(10, moving, []), rule(10, crossing, ["c", "d"])],
    }
    assert [(m, {e: [p.key for p in t] for e, t in picks.items()}) for m, picks in fedcurv.stiffness_picks(more)] == [
        (moving, {50: ["a", "b"]}),
        (crossing, {50: ["a", "b"], 10: ["c", "d"]}),
    ]
