"""reports/fedwavg from hand-made run folders: runs placed by their settings, the paper's rounds read from the
experiment each table comes from, shares read over a whole period of their see-saw, Top / Average and its gap,
'around 20 % better', pairing by seed, and the claims' verdicts, against hand-worked numbers."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pipeline.report import fedwavg
from pipeline.report.common import RunResult, SeededRun, load_results
from pipeline.report.seeds import HELD, PAIRED, WELCH, compare
from test_report import PNG_SIGNATURE, report_context, write_run

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = yaml.safe_load((ROOT / "pipeline" / "report" / "published.yaml").read_text())["fedwavg"]
PARTITIONS = {
    "c28": {"dataset": "cifar10", "scheme": "clusters", "cluster_sizes": [2, 8], "classes_per_cluster": 2,
            "samples_per_client": 300},
    "c46": {"dataset": "cifar10", "scheme": "clusters", "cluster_sizes": [4, 6], "classes_per_cluster": 2,
            "samples_per_client": 300},
    "c27": {"dataset": "cifar10", "scheme": "clusters", "cluster_sizes": [2, 7], "classes_per_cluster": 2,
            "samples_per_client": 300},
    "c234": {"dataset": "cifar10", "scheme": "clusters", "cluster_sizes": [2, 3, 4], "classes_per_cluster": 2,
             "samples_per_client": 300},
    "mnist_one": {"dataset": "mnist", "scheme": "iid", "clients": 1},
    "mnist_five": {"dataset": "mnist", "scheme": "iid", "clients": 5},
}
FEDWAVG = {"name": "fedwavg", "alpha": 0.3, "period": 1}
FEDPROX = {"name": "fedprox", "mu": 0.1}


def write_fedwavg_run(root, key, partition, algorithm, rounds, paper_rounds, accuracies, freeze="none",
                      forgettable=None, summary=None, dataset="cifar10", example_events=False, seeds=None):
    """One run, a seed per entry of `accuracies` (seeds 0, 1, ... unless `seeds` names them); forgettable:
    per seed, round -> per-client counts."""
    scaled = {"rounds": {"paper": paper_rounds, "used": rounds}} if rounds != paper_rounds else {}
    for index, accuracy in enumerate(accuracies):
        seed = seeds[index] if seeds is not None else index
        folder = write_run(root, key, algorithm, 2, paper="fedwavg", seed=seed, accuracy=accuracy, scaled=scaled,
                           extra={"partition": partition, "rounds": rounds, "dataset": dataset, "freeze": freeze,
                                  "example_events": example_events})
        if forgettable is not None:
            rows = "".join(f"{r}\t{k}\t{c}\n" for r, counts in sorted(forgettable[index].items())
                           for k, c in enumerate(counts))
            (folder / "forgetting" / "forgettable.tsv").write_text("round\tclient\tforgettable\n" + rows)
        if summary is not None:
            metrics = json.loads((folder / "metrics.json").read_text())
            metrics.update(summary[index])
            (folder / "metrics.json").write_text(json.dumps(metrics))


def counts(minority, majority, clients=(2, 8)):
    return [minority] * clients[0] + [majority] * (sum(clients) - clients[0])


def build(root: Path, keys: list[str]) -> tuple[dict, dict]:
    """The runs `keys` under root as the report loads them (with the test partitions), and the claims the
    report builds on them."""
    results = load_results(keys, root / "reports" / "runs", PARTITIONS)
    claims = fedwavg.build(report_context(root, "fedwavg", results, PUBLISHED))
    return results, {c.id: c for c in claims}


@pytest.fixture
def built(tmp_path):
    # Table 2: 20 of the paper's 100 rounds; the paper's round 10 is our round 2, its 100 our 20 (read over
    # rounds 19-20 by the claim).
    write_fedwavg_run(tmp_path, "aa", "c28", {"name": "fedavg"}, 20, 100, [[0.5, 0.5], [0.5, 0.5]],
                      forgettable=[{2: counts(240, 30), 19: counts(285, 0), 20: counts(285, 0)},
                                   {2: counts(260, 30), 19: counts(291, 3), 20: counts(291, 3)}])
    # Table 1, MNIST: centralised 100 and 120 events, federated 250 and 240 forgettable (ratios ×2.5, ×2.0).
    write_fedwavg_run(tmp_path, "bb", "mnist_one", {"name": "fedavg"}, 4, 40, [[0.9], [0.9]], dataset="mnist",
                      example_events=True, summary=[{"example_events": {"forgetting_events": 100}},
                                                    {"example_events": {"forgetting_events": 120}}])
    write_fedwavg_run(tmp_path, "cc", "mnist_five", {"name": "fedavg"}, 4, 40, [[0.9], [0.9]], dataset="mnist",
                      example_events=True, summary=[{"forgettable_total": 250}, {"forgettable_total": 240}])
    # Tables 4-5, CIFAR-10 2:7: FedAvg curve 0.5, 0.7, 0.6 (Top 70, Average 60); FedWAvg α 0.3 above.
    write_fedwavg_run(tmp_path, "dd", "c27", {"name": "fedavg"}, 3, 200, [[0.5, 0.7, 0.6], [0.5, 0.7, 0.61]])
    write_fedwavg_run(tmp_path, "ee", "c27", FEDWAVG, 3, 200, [[0.6, 0.8, 0.75], [0.6, 0.81, 0.7]])
    write_fedwavg_run(tmp_path, "mu", "c27", {"name": "fedprox", "mu": 0.1}, 3, 200, [[0.4, 0.5, 0.45]])
    # Figures 2-3 and Tables 6-8: 30 rounds for the paper's 1000-round run; Tables 6-8 are its 500-round
    # experiment, so the paper's round 200 is our 30 × 200 / 500 = 12 (read over rounds 11-12).
    long_counts = {"fedavg": [counts(290, 0)] * 2, "fedprox": [counts(295, 1)] * 2, "fedwavg": [counts(150, 3), counts(148, 2)]}
    # 30-round curves: FedWAvg swings by 20 points a round (Top − Average 80 − 70 = 10 and 81 − 70.5 = 10.5),
    # FedAvg's by 1-2 (52 − 51 = 1, 51 − 50.5 = 0.5), FedProx's by 0-1 (56 − 55.5 = 0.5, 0); the frozen run is
    # the plain FedWAvg run plus 2 points everywhere on seed 0 and 2.1 on seed 1.
    wavg = [[0.6, 0.8] * 15, [0.6, 0.81] * 15]
    for key, algorithm, accuracies in (
            ("ff", {"name": "fedavg"}, [[0.5, 0.52] * 15, [0.5, 0.51] * 15]),
            ("gg", {"name": "fedprox", "mu": 0.01}, [[0.55, 0.56] * 15, [0.55, 0.55] * 15]),
            ("hh", FEDWAVG, wavg)):
        write_fedwavg_run(tmp_path, key, "c28", algorithm, 30, 1000, accuracies,
                          forgettable=[{11: c, 12: c, 30: c} for c in long_counts[algorithm["name"]]])
    write_fedwavg_run(tmp_path, "ii", "c28", FEDWAVG, 30, 1000,
                      [[a + lift for a in curve] for curve, lift in zip(wavg, (0.02, 0.021))],
                      freeze="classifier", forgettable=[{12: counts(100, 0), 30: counts(100, 0)}] * 2)
    _, claims = build(tmp_path, ["aa", "bb", "cc", "dd", "ee", "mu", "ff", "gg", "hh", "ii"])
    return tmp_path / "reports" / "fedwavg", claims


def p_paired(differences: list[float]) -> float:
    """The paired t-test's two-sided p by hand: t = mean / (sd / sqrt n), p = 2 t.sf(|t|, n - 1)."""
    from scipy.stats import t as t_distribution

    n = len(differences)
    mean = sum(differences) / n
    sd = (sum((d - mean) ** 2 for d in differences) / (n - 1)) ** 0.5
    return float(2 * t_distribution.sf(abs(mean / (sd / n ** 0.5)), n - 1))


def rows(path: Path) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in path.read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| paper round") and not line.startswith("| method")
            and not line.startswith("|  |")]


def one_run(*curves) -> SeededRun:
    return SeededRun("x", [RunResult("x", s, {}, {"status": "ok"}, list(range(1, len(c) + 1)), c)
                           for s, c in enumerate(curves)])


# ---------------------------------------------------------------- tables from the fixture

def test_table2_reads_the_papers_rounds_at_the_same_fraction_and_shows_percent_of_each_client(built):
    folder, _ = built
    table = {row[0]: row for row in rows(folder / "table2.md")}
    # paper round 10 -> ours 2: minority (240 + 260) / 2 of 300 = 83 %, the paper's 1137 of 1200 = 95 %
    assert table["10"][1] == "2 (n=2)"
    assert table["10"][2] == "83 / 95" and table["10"][4] == "10 / 5"  # majority 30 of 300; the paper's 55
    assert table["100"][1] == "20 (n=2)" and table["100"][2] == "96 / 100"  # (285 + 291) / 2 of 300
    assert (folder / "table2.csv").is_file()
    assert "not run" in (folder / "table3.md").read_text()
    # aa and ff are different trainings: the note says so rather than calling them one
    assert "our two runs are two trainings too (aa, ff)" in (folder / "table2.md").read_text()


def test_table1_is_a_ratio_and_labelled_as_one(built):
    folder, claims = built
    table = {row[0]: row for row in rows(folder / "table1.md")}
    assert table["centralised"][1] == "110.0 ± 14.1 (n=2) / 4,044"
    assert table["federated"][1] == "245.0 ± 7.1 (n=2) / 80,437"
    # 250 / 100 = 2.5 and 240 / 120 = 2.0; the paper's "1989 %" is 80,437 / 4,044 = ×19.89
    assert table["federated / centralised (×)"][1] == "2.25 ± 0.35 (n=2) / ×19.89"
    text = (folder / "table1.md").read_text()
    assert "×19.89, printed 1989 %" in text and "increase (%)" not in text
    assert "mnist ×19.9" in claims["t1_increase"].published and "+1989" not in claims["t1_increase"].published
    # MNIST paired by seed (differences 150, 120: t = 9, df 1, p = 0.07); three datasets not run
    assert claims["t1_increase"].status == "inconclusive" and claims["t1_increase"].test == PAIRED
    assert "fashion_mnist's Table 1 pair not run in this profile" in claims["t1_increase"].power
    assert claims["t1_mnist_most"].status == "not run"


def test_top_and_average_and_the_mu_grid(built):
    folder, claims = built
    table = {row[0]: row for row in rows(folder / "table5_cifar10.md")}
    assert table["FedAvg"][1] == "70.0 ± 0.0 (n=2) / 61.28"
    assert table["FedAvg"][2] == "60.2 ± 0.2 (n=2) / 45.94"  # 60.0 and 60.33
    assert table["SCAFFOLD"][1] == "not run / 44.35"
    grid = (folder / "table_mu_grid.md").read_text()
    assert "| 0.1 (best) | mu | 50.0 (n=1) | 50.0 | 45.0 (n=1) |" in grid  # Top, and Top on the shared seed 0
    if fedwavg.TABLE_MU == 0.1:
        assert "the tables use μ = 0.1, the grid's best Top" in grid
    else:
        assert f"the tables use μ = {fedwavg.TABLE_MU:g}, but the grid's best Top is μ = 0.1" in grid
    # FedWAvg above FedAvg on both seeds, but 2:3:4 has no runs: not decided as a whole
    assert claims["t5_best_top"].status == "not run"
    assert claims["t45_scaffold_weakest_svhn"].status == "not run"


def test_long_runs_give_tables_6_to_8_figures_and_their_claims(built):
    folder, claims = built
    table8 = {row[0]: row for row in rows(folder / "table8_fedwavg.md")}
    # the paper's round 200 of its 500-round experiment = our 12 of 30; (150 + 148) / 2 of 300; 527 of 1200
    assert table8["200"][1] == "12 (n=2)" and table8["200"][2] == "50 / 44"
    assert table8["500"][1] == "30 (n=2)"
    # 50.0 and 49.3 % (rounds 11-12 alike) against 0.6 × FedAvg's 96.7 % = 58 % and 0.6 × FedProx's 98.3 % = 59 %
    assert claims["t8_halves"].status == "held"
    assert "round 12 of ours (of 30) = the paper's round 200 of its 500-round experiment" in claims["t8_halves"].evidence
    # round 20 (of 20) = the paper's 100 of its 100-round experiment; rounds 19-20: 95, 97 % vs 0, 1 % + 50
    assert claims["t2_minority_forgotten"].status == "held"
    assert "rounds 19-20" in claims["t2_minority_forgotten"].evidence
    assert claims["t3_minority_forgotten"].status == "not run"
    # Top − Average: FedWAvg 10, 10.5 against FedAvg 1, 0.5 (paired differences 9, 10: p = 0.034) and
    # FedProx 0.5, 0 (9.5, 10.5: p = 0.032)
    assert claims["fig2_oscillates"].status == "held"
    # Average: FedWAvg 70, 70.5; FedAvg 51, 50.5 + 15 -> differences 4, 5 (p = 0.07); FedProx 55.5, 55 + 15
    # -> -0.5, 0.5: not separated
    assert claims["fig2_better"].status == "inconclusive"
    # frozen: +2 and +2.1 points over the last 30 % of the rounds (paired: t = 2.05 / (0.0707 / sqrt 2) = 41,
    # df 1, p = 0.016), and under 10 (plain + 10 − frozen: 8, 7.9, t = 159, p = 0.004)
    freeze = claims["fig3_freeze"]
    assert freeze.status == "held" and freeze.test == PAIRED
    assert [c.p for c in freeze.comparisons] == [pytest.approx(p_paired([2.0, 2.1]), rel=1e-6),
                                                 pytest.approx(p_paired([8.0, 7.9]), rel=1e-6)]
    for name in ("figure2.png", "figure3.png", "forgettable_curves.png"):
        assert (folder / name).read_bytes().startswith(PNG_SIGNATURE)


def test_every_claim_that_runs_carries_its_comparisons_a_unit_and_a_test(built):
    _, claims = built
    ran = {k: c for k, c in claims.items() if c.status != "not run"}
    assert set(ran) >= {"t1_increase", "t2_minority_forgotten", "t8_halves", "fig2_oscillates", "fig2_better",
                        "fig3_freeze"}
    for key, claim in ran.items():
        assert claim.comparisons and claim.unit and claim.test != "—", key
        if claim.status == "inconclusive":
            assert claim.power and "no comparison to measure" not in claim.power, key
    # the seeds of both sides are 0 and 1: every comparison is paired
    assert claims["t8_halves"].test == PAIRED and claims["fig2_better"].test == PAIRED


# ---------------------------------------------------------------- the paper's rounds, by experiment

@pytest.mark.parametrize("paper_round, experiment_rounds, run_rounds, ours", [
    (200, 500, 20, 8),      # Tables 6-8: round 200 of the 500-round experiment, in a 20-round run
    (200, 1000, 20, 4),     # what reading it against the 1000-round run of Figures 2-3 gave (the old mapping)
    (500, 500, 20, 20),     # the experiment's last round is the run's last
    (200, 500, 1000, 200),  # the paper profile: the 1000-round run holds the 500-round experiment as its start
    (100, 100, 10, 10),     # Tables 2-3: round 100 of 100, in a 10-round run
    (10, 100, 10, 1),
    (30, 500, 20, 1),       # 1.2 -> round 1
    (10, 500, 20, 1),       # 0.4 -> never before round 1
])
def test_the_papers_round_is_read_at_the_same_fraction_of_its_own_experiment(paper_round, experiment_rounds,
                                                                            run_rounds, ours):
    assert fedwavg.experiment_round(paper_round, experiment_rounds, run_rounds) == ours


def test_tables_6_to_8_map_by_the_500_round_experiment_and_tables_2_3_by_the_100_round_one(tmp_path):
    # a 20-round stand-in for the 1000-round run and a 10-round one for Table 2's 100 rounds; every round counted
    every_round = [{r: counts(100 + r, 0) for r in range(1, 21)}]
    write_fedwavg_run(tmp_path, "long", "c28", FEDWAVG, 20, 1000, [[0.5] * 20], forgettable=every_round)
    write_fedwavg_run(tmp_path, "t2", "c28", {"name": "fedavg"}, 10, 100, [[0.5] * 10], forgettable=every_round)
    build(tmp_path, ["long", "t2"])
    folder = tmp_path / "reports" / "fedwavg"
    table8 = {row[0]: row for row in rows(folder / "table8_fedwavg.md")}
    # 100, 200, ..., 500 of 500 -> 4, 8, 12, 16, 20 of 20; the minority's count there is 100 + round of 300
    assert [table8[r][1] for r in ("100", "200", "300", "400", "500")] == ["4 (n=1)", "8 (n=1)", "12 (n=1)",
                                                                           "16 (n=1)", "20 (n=1)"]
    assert table8["200"][2] == "36 / 44"  # 108 of 300; the paper's 527 of 1200
    table2 = {row[0]: row for row in rows(folder / "table2.md")}
    assert [table2[r][1] for r in ("10", "50", "100")] == ["1 (n=1)", "5 (n=1)", "10 (n=1)"]
    assert table2["50"][2] == "35 / 100"  # 105 of 300; the paper's 1194 of 1200


# ---------------------------------------------------------------- the see-saw, read over a whole period

def see_saw(odd: int, even: int, majority: int = 6, last: int = 20) -> dict:
    """A 2:8 run's counts: the minority's at `odd` on odd rounds and `even` on even ones (of 300)."""
    return {r: counts(odd if r % 2 else even, majority) for r in range(1, last + 1)}


def test_a_share_is_read_over_a_whole_period_of_its_see_saw():
    # minority 285 of 300 (95 %) on odd rounds, 150 (50 %) on even ones; the majority at 6 (2 %)
    curve = {r: dict(enumerate(clients)) for r, clients in see_saw(285, 150).items()}  # round -> client -> count
    share = fedwavg.group_share_over_period
    assert share(curve, (2, 8), 300, True, at=8, width=1) == pytest.approx(50.0)  # one round: the trough
    assert share(curve, (2, 8), 300, True, at=7, width=1) == pytest.approx(95.0)  # one round: the crest
    assert share(curve, (2, 8), 300, True, at=8) == pytest.approx(72.5)  # rounds 7-8: (95 + 50) / 2
    assert share(curve, (2, 8), 300, True, at=7) == pytest.approx(72.5)  # rounds 6-7: the same, either phase
    assert share(curve, (2, 8), 300, False, at=8) == pytest.approx(2.0)
    del curve[7]
    assert share(curve, (2, 8), 300, True, at=8) is None  # a period with an uncounted round has no reading


def write_halving_runs(root: Path, fedwavg_odd: int, fedwavg_even: int) -> None:
    """FedAvg's and FedProx's minority steady at 276 + j of 300 (92 % at j = 0), FedWAvg's a see-saw; three
    seeds, j = 0, 3, -2; 20 rounds standing in for the paper's 1000."""
    jitter = (0, 3, -2)
    for key, algorithm, odd, even in (("avg", {"name": "fedavg"}, 276, 276), ("prox", FEDPROX, 276, 276),
                                      ("wavg", FEDWAVG, fedwavg_odd, fedwavg_even)):
        write_fedwavg_run(root, key, "c28", algorithm, 20, 1000, [[0.5, 0.5]] * 3,
                          forgettable=[see_saw(odd + j, even + j, majority=10) for j in jitter])


def test_halving_read_at_one_round_and_over_the_period_disagree_and_the_period_decides(tmp_path):
    """FedWAvg's minority at 285 + j on odd rounds, 150 + j on even ones. The paper's round 200 of 500 is our
    8 of 20. At round 8 alone FedWAvg's share is 50.0, 51.0, 49.3 %, under 0.6 × FedAvg's 92.0, 93.0, 91.3 =
    55.2, 55.8, 54.8: a halving. Over the period (rounds 7-8) it is 72.5, 73.5, 71.8 %: above them, failed."""
    write_halving_runs(tmp_path, 285, 150)
    results, claims = build(tmp_path, ["avg", "prox", "wavg"])
    halves = claims["t8_halves"]
    assert halves.status == "failed", halves.evidence
    assert halves.test == PAIRED and halves.unit
    assert "round 8 of ours (of 20) = the paper's round 200 of its 500-round experiment" in halves.evidence
    assert "rounds 7-8" in halves.evidence
    over_period = fedwavg.group_shares(results["wavg"], 8, True)
    one_round = fedwavg.group_shares(results["wavg"], 8, True, width=1)
    assert list(over_period) == pytest.approx([72.5, 73.5, 71.0 + 5 / 6])
    assert list(one_round) == pytest.approx([50.0, 51.0, 49.0 + 1 / 3])
    bound = fedwavg.group_shares(results["avg"], 8, True).map(lambda v: 0.6 * v)
    assert list(bound) == pytest.approx([55.2, 55.8, 54.8])
    assert compare(one_round, bound, "lower").status == HELD  # what the one-round reading would have said


@pytest.mark.parametrize("odd, even, status", [(150, 120, "held"),   # (50 + 40) / 2 = 45 % < 55.2
                                               (200, 200, "failed"),  # 66.7 %: lower, but no halving
                                               (140, 140, "held")])   # 46.7 %
def test_halving_means_at_most_six_tenths_over_the_period(tmp_path, odd, even, status):
    write_halving_runs(tmp_path, odd, even)
    _, claims = build(tmp_path, ["avg", "prox", "wavg"])
    assert claims["t8_halves"].status == status, claims["t8_halves"].evidence


# ---------------------------------------------------------------- "around 20 % better"

def write_long_trio(root: Path, averages: dict, seeds: dict | None = None) -> None:
    """The three 2:8 long runs with flat curves at the given per-seed Average accuracy (%)."""
    algorithms = {"wavg": FEDWAVG, "avg": {"name": "fedavg"}, "prox": FEDPROX}
    for key, values in averages.items():
        write_fedwavg_run(root, key, "c28", algorithms[key], 2, 1000, [[v / 100, v / 100] for v in values],
                          seeds=(seeds or {}).get(key))


@pytest.mark.parametrize("wavg, avg, prox, status", [
    # 20, 20.5, 20 and 18, 19, 18 points above: at least 15 on every seed, separated -> held
    ([70, 71, 69], [50, 50.5, 49], [52, 52, 51], "held"),
    # 60 against 50: 20 % better relatively, but 10 points: separated below the 15-point lower end -> failed
    # (-5, -4.5, -5 and -5, -5.5, -5 from it: no difference the same on every seed, which would be the exact
    # sign-flip test, p = 2/2^3 = 0.25)
    ([60, 61, 59], [50, 50.5, 49], [50, 51.5, 49], "failed"),
    # 15, 16.5, 13.5 points: around the lower end, not separated from it -> inconclusive
    ([65, 66.5, 63.5], [50, 50, 50], [50, 50, 50], "inconclusive"),
])
def test_around_20_percent_better_is_read_in_points_with_15_as_its_lower_end(tmp_path, wavg, avg, prox, status):
    write_long_trio(tmp_path, {"wavg": wavg, "avg": avg, "prox": prox})
    _, claims = build(tmp_path, ["wavg", "avg", "prox"])
    better = claims["fig2_better"]
    assert better.status == status, better.evidence
    assert "percentage points" in better.text and "at least 15 points" in better.text
    assert better.test == PAIRED and better.unit == "points"
    # by hand: FedWAvg − (each other + 15) per seed, p = 2 t.sf(|t|, 2)
    for other, comparison in zip((avg, prox), better.comparisons):
        differences = [w - (o + 15) for w, o in zip(wavg, other)]
        assert comparison.p == pytest.approx(p_paired(differences), rel=1e-6)
    if status == "inconclusive":
        assert better.power


def test_shared_seeds_are_paired_and_different_seeds_fall_back_to_welch(tmp_path, tmp_path_factory):
    """FedWAvg 70, 80, 60; FedAvg and FedProx 50, 61, 40 (+ 15 = 65, 76, 55). Paired by seed the differences
    are 5, 4, 5 (mean 4.67, sd 0.58, t = 14, p = 0.005): held. On other seeds (3, 4, 5) Welch sees means 70
    and 65.3 with sds of 10 and 10.5 (t = 0.56): inconclusive."""
    values = {"wavg": [70, 80, 60], "avg": [50, 61, 40], "prox": [50, 61, 40]}
    write_long_trio(tmp_path, values)
    _, claims = build(tmp_path, ["wavg", "avg", "prox"])
    assert claims["fig2_better"].status == "held" and claims["fig2_better"].test == PAIRED
    other = tmp_path_factory.mktemp("other")
    write_long_trio(other, values, seeds={"avg": [3, 4, 5], "prox": [3, 4, 5]})
    _, claims = build(other, ["wavg", "avg", "prox"])
    assert claims["fig2_better"].status == "inconclusive" and claims["fig2_better"].test == WELCH


# ---------------------------------------------------------------- oscillation: the Top − Average gap

def test_top_average_gap_by_hand():
    rising = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]  # Top 80, Average 50
    swinging = [0.5, 0.7, 0.5, 0.7, 0.5, 0.7, 0.5]  # Top 70, Average 4.1 / 7 = 58.57
    assert list(fedwavg.top_average_gap(one_run(rising, swinging))) == pytest.approx([30.0, 70.0 - 410 / 7])
    top, average = fedwavg.top_average(one_run([0.5, 0.7, 0.6]))
    assert list(top) == [pytest.approx(70.0)] and list(average) == [pytest.approx(60.0)]


@pytest.mark.parametrize("wavg, other, status", [
    # FedWAvg swings 40 points (Top 80 + s, Average 60 + s/2: gaps 20, 20.5, 21) against steady curves
    ([[0.4, 0.8 + s / 100] * 5 for s in range(3)], [[0.5, 0.52] * 5, [0.5, 0.51] * 5, [0.5, 0.5] * 5], "held"),
    # FedWAvg swings 10 points a round (gaps 5, 5.5, 6) while the others climb 5 a round from 35 to 80 (Top 80,
    # Average 57.5: gap 22.5): FedWAvg changes more between rounds, yet its Top - Average gap is smaller
    ([[0.6, 0.7 + s / 100] * 5 for s in range(3)], [[0.35 + 0.05 * k for k in range(10)]] * 3, "failed"),
])
def test_the_oscillation_claim_is_the_gap_between_top_and_average(tmp_path, wavg, other, status):
    write_fedwavg_run(tmp_path, "wavg", "c28", FEDWAVG, 10, 1000, wavg)
    write_fedwavg_run(tmp_path, "avg", "c28", {"name": "fedavg"}, 10, 1000, other)
    write_fedwavg_run(tmp_path, "prox", "c28", FEDPROX, 10, 1000, other)
    _, claims = build(tmp_path, ["wavg", "avg", "prox"])
    oscillates = claims["fig2_oscillates"]
    assert oscillates.status == status, oscillates.evidence
    assert "Top − Average" in oscillates.evidence and oscillates.test == PAIRED


# ---------------------------------------------------------------- Tables 2 and 6: one training or two

def test_file_is_prefix(tmp_path):
    short, long, other = tmp_path / "s", tmp_path / "l", tmp_path / "o"
    short.write_text("step\tv\n1\t0.5\n2\t0.6\n")
    long.write_text("step\tv\n1\t0.5\n2\t0.6\n3\t0.7\n")
    other.write_text("step\tv\n1\t0.5\n2\t0.61\n3\t0.7\n")
    assert fedwavg.file_is_prefix(short, long) and not fedwavg.file_is_prefix(short, other)
    assert not fedwavg.file_is_prefix(tmp_path / "missing", long)


@pytest.mark.parametrize("t2_curve, one_training", [([0.5, 0.6], True), ([0.5, 0.61], False)])
def test_table2_says_when_it_is_the_start_of_table_6s_run(tmp_path, t2_curve, one_training):
    curve, forgettable = [0.5, 0.6, 0.7, 0.8], {r: counts(280 - r, 5) for r in range(1, 5)}
    write_fedwavg_run(tmp_path, "long", "c28", {"name": "fedavg"}, 4, 1000, [curve] * 2, forgettable=[forgettable] * 2)
    write_fedwavg_run(tmp_path, "t2", "c28", {"name": "fedavg"}, 2, 100, [t2_curve] * 2,
                      forgettable=[{r: forgettable[r] for r in (1, 2)}] * 2)
    build(tmp_path, ["long", "t2"])
    for name in ("table2.md", "table6_fedavg.md"):
        text = (tmp_path / "reports" / "fedwavg" / name).read_text()
        assert "its text describes two experiments" in text
        said = "in this profile they are one training: t2 is the first 2 rounds of long byte for byte"
        assert (said in text) == one_training and ("two trainings too" in text) != one_training
        # the paper's round 100: 2 × 100 / 100 = our 2 in Table 2, 4 × 100 / 500 = 0.8 -> 1 in Table 6
        assert ("the paper's round 100 is our round 2 in Table 2 and 1 in Table 6" in text) == one_training


# ---------------------------------------------------------------- the rest

def test_the_grids_best_is_the_highest_mean_top_and_keeps_ties():
    from pipeline.report.common import RunResult, SeededRun

    def run(*curves):
        return SeededRun("x", [RunResult("x", s, {}, {"status": "ok"}, [1, 2], c) for s, c in enumerate(curves)])

    # Top per seed: 0.001 -> 60, 70 (mean 65); 0.01 -> 66, 64 (65); 0.1 -> 64, 64.5 (64.25)
    grid = {0.001: run([0.5, 0.6], [0.7, 0.2]), 0.01: run([0.66, 0.1], [0.64, 0.1]),
            0.1: run([0.64, 0.6], [0.645, 0.3])}
    assert fedwavg.grid_best(grid) == [0.001, 0.01]
    assert fedwavg.grid_best({0.1: run([0.5, 0.9])}) == [0.1] and fedwavg.grid_best({}) == []
    # A μ with more seeds is compared on the seeds every μ ran: 0.01 over all three of its seeds would be
    # (66 + 64 + 80) / 3 = 70, above 0.001's 65; on seeds 0-1 it is 65, a tie.
    grid[0.01] = run([0.66, 0.1], [0.64, 0.1], [0.8, 0.1])
    assert fedwavg.grid_best(grid) == [0.001, 0.01]
    assert fedwavg.seeds_words(fedwavg.grid_shared_tops(grid)[0]) == "seeds 0, 1"


def test_freezing_that_helps_by_ten_points_or_more_fails_the_claim(tmp_path):
    # two rounds: the last 30 % is round 2 alone: 50.0 / 50.5 against 70.0 / 70.6
    write_fedwavg_run(tmp_path, "plain", "c28", FEDWAVG, 2, 1000, [[0.5, 0.5], [0.5, 0.505]])
    write_fedwavg_run(tmp_path, "frozen", "c28", FEDWAVG, 2, 1000, [[0.7, 0.7], [0.7, 0.706]], freeze="classifier")
    _, claims = build(tmp_path, ["plain", "frozen"])
    freeze = claims["fig3_freeze"]
    assert freeze.status == "failed"  # helps by 20 points
    assert len(freeze.comparisons) == 2
    helps, small = freeze.comparisons
    # helps: frozen − plain = 20, 20.1 (t = 401, df 1, p = 0.0016); under 10: plain + 10 − frozen = −10, −10.1
    # (t = −201, p = 0.0032): separated the other way
    assert (helps.status, helps.test) == ("held", PAIRED) and (small.status, small.test) == ("failed", PAIRED)
    assert helps.p == pytest.approx(p_paired([20.0, 20.1]), rel=1e-6)
    assert small.p == pytest.approx(p_paired([-10.0, -10.1]), rel=1e-6)


def test_a_long_curve_label_with_the_seeds_note_stays_inside_the_figure():
    # Figure 2's label beside the seeds' note ran off the figure's left edge when it was one line.
    import matplotlib.pyplot as plt

    from pipeline.report.common import RunResult, SeededRun, curves_figure
    from pipeline.report.fedwavg import CURVE_LABEL

    seeds = [RunResult("fedwavg_long_c28_fedwavg", s, {}, {}, [1, 2, 3], [0.4, 0.45 + s / 100, 0.43]) for s in range(3)]
    fig = curves_figure("FedWAvg Figure 2: test accuracy, 2:8 clusters", [("FedWAvg", SeededRun("r", seeds))], [],
                        (0.0, 1.0), CURVE_LABEL)
    try:
        fig.canvas.draw()
        label = fig.axes[0].yaxis.label
        assert "band: min" in label.get_text()
        box, frame = label.get_window_extent(), fig.bbox
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1, (box, frame)
    finally:
        plt.close(fig)
