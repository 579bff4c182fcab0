"""The TCE report: runs placed by their settings, Tables 1-2, the sweeps and the claims, built from
constructed run results; and the paper profile's TCE runs against the settings the paper and its
authors' code give."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pipeline.config import load_params
from pipeline.config import derive_grid
from pipeline.report import tce
from pipeline.report.common import load_results
from pipeline.runs import resolve_run

from test_report import PNG_SIGNATURE, report_context, write_run

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = yaml.safe_load((ROOT / "pipeline" / "report" / "published.yaml").read_text())["tce"]
PARAMS = load_params((ROOT / "params.yaml"))


def write_partitions(root: Path, alphas: dict[str, float | None]) -> dict:
    """Each partition's label counts on disk (its record, for Figure 4); returns the partitions as params.yaml
    has them (where the report reads alpha)."""
    counts = [[45 + (c + k) % 3 for k in range(10)] for c in range(100)]
    for name in alphas:
        folder = root / "reports" / "partitions" / name
        folder.mkdir(parents=True)
        (folder / "label_counts.json").write_text(json.dumps({"train": counts, "val": counts}))
    return {name: {"dataset": "cifar10", "scheme": "dirichlet" if alpha else "natural", "clients": 100,
                   **({"alpha": alpha} if alpha else {})} for name, alpha in alphas.items()}


def write_tce_run(root, key, loss, norm, lr, finals, partition="cifar10_dirichlet_alpha01", fraction=0.1, probe=False,
                  forgetting=None, dataset="cifar10", seeds=None):
    for seed, final in zip(seeds or range(len(finals)), finals):
        summary_extra = {"probe_rounds": [1, 20, 28, 40] if probe else [], "rounds": 40}
        folder = write_run(root, key, {"name": "fedavg"}, 1, paper="tce", seed=seed, accuracy=[0.2, 0.3],
                           extra={"loss": loss, "norm": norm, "lr": lr, "dataset": dataset, "partition": partition,
                                  "client_fraction": fraction, **summary_extra})
        metrics = json.loads((folder / "metrics.json").read_text())
        metrics["final_test_accuracy"] = final
        if forgetting is not None:
            metrics["mean_local_forgetting"] = {f"round_{r}": forgetting[seed] for r in (1, 20, 28, 40)}
        (folder / "metrics.json").write_text(json.dumps(metrics))


@pytest.fixture
def built(tmp_path):
    partitions = write_partitions(tmp_path, {"cifar10_dirichlet_alpha001": 0.01, "cifar10_dirichlet_alpha01": 0.1,
                                             "cifar10_dirichlet_alpha05": 0.5, "cifar10_dirichlet_alpha100": 100.0})
    # Main runs: TCE (GN) 10, 11, 9 points above FedAvg (GN) on seeds 0-2, and 20, 21, 19 points less forgetting;
    # TCE (BN) 4, 6, 5 points below FedAvg (GN). No difference is the same on every seed (that would take the
    # exact sign-flip test, p = 2/2^3 = 0.25 over 3 seeds: never separated).
    write_tce_run(tmp_path, "main_ce", "ce", "group", 0.1, [0.30, 0.31, 0.32], probe=True, forgetting=[-0.3, -0.32, -0.31])
    write_tce_run(tmp_path, "main_tce", "tce", "group", 0.1, [0.40, 0.42, 0.41], probe=True, forgetting=[-0.1, -0.11, -0.12])
    write_tce_run(tmp_path, "main_tce_bn", "tce", "batch", 0.1, [0.26, 0.25, 0.27], probe=True)
    # The lr grid: one NC seed (near chance) and a lower lr.
    write_tce_run(tmp_path, "ce_lr03", "ce", "group", 0.3, [0.11])
    write_tce_run(tmp_path, "tce_lr03", "tce", "group", 0.3, [0.35])
    # The alpha sweep, two seeds each: a margin of 20, 20 points at 0.01; 1, 1.1 at 100.
    write_tce_run(tmp_path, "a001_ce", "ce", "group", 0.1, [0.20, 0.21], partition="cifar10_dirichlet_alpha001")
    write_tce_run(tmp_path, "a001_tce", "tce", "group", 0.1, [0.40, 0.41], partition="cifar10_dirichlet_alpha001")
    write_tce_run(tmp_path, "a100_ce", "ce", "group", 0.1, [0.50, 0.52], partition="cifar10_dirichlet_alpha100")
    write_tce_run(tmp_path, "a100_tce", "tce", "group", 0.1, [0.51, 0.531], partition="cifar10_dirichlet_alpha100")
    claims = build_from(tmp_path, ["main_ce", "main_tce", "main_tce_bn", "ce_lr03", "tce_lr03", "a001_ce", "a001_tce",
                                   "a100_ce", "a100_tce"], partitions)
    return tmp_path / "reports" / "tce", claims


def table_rows(path: Path) -> list[list[str]]:
    return [line.strip("|").split(" | ") for line in path.read_text().splitlines() if line.startswith("| cifar10 |")]


def test_table1_places_runs_by_their_settings_beside_the_published_cells(built):
    folder, _ = built
    rows = {row[1].strip(): row for row in table_rows(folder / "table1.md")}
    assert rows["0.1"][2].strip() == "0.310 ± 0.010 (n=3)"  # FedAvg GN main, seeds 0.30/0.31/0.32
    assert rows["0.1"][3].strip() == "0.79 ± 0.017"  # the paper's cell at lr 0.1
    assert rows["0.1"][4].strip() == "0.410 ± 0.010 (n=3)"
    assert rows["0.3"][2].strip() == "NC"  # 0.11 is within 1.5x chance (0.15)
    assert rows["0.3"][4].strip() == "0.350 (n=1)"
    assert rows["0.7"][2].strip() == "not run" and rows["0.7"][3].strip() == "NC"
    assert (folder / "table1.csv").is_file()


def test_table2_best_and_within_by_hand():
    means = {0.3: 0.80, 0.1: 0.79, 0.03: 0.76, 0.01: 0.70, 0.007: None}
    assert tce.within(means, 2) == (0.80, 0.3, [0.3, 0.1])
    assert tce.within(means, 5) == (0.80, 0.3, [0.3, 0.1, 0.03])
    assert tce.within({0.1: None}, 2) == (None, None, [])


def test_claims_decided_on_the_main_runs_and_the_sweep(built):
    _, claims = built
    # TCE (GN) - FedAvg (GN): 10, 11, 9 points (mean 10, sd 1, t = 17.3, p = 0.0033)
    gn = claims["tce_gn_beats_fedavg_cifar10"]
    assert gn.status == "held" and gn.test == "paired t"
    assert gn.comparisons[0].p == pytest.approx(p_paired([10, 11, 9]), rel=1e-6)
    # TCE (BN) - FedAvg (GN): -4, -6, -5 points (mean -5, sd 1, t = -8.66, p = 0.013)
    bn = claims["tce_bn_beats_fedavg_cifar10"]
    assert bn.status == "failed" and bn.test == "paired t"
    assert bn.comparisons[0].p == pytest.approx(p_paired([-4, -6, -5]), rel=1e-6)
    assert claims["tce_gn_beats_fedavg_cifar100"].status == "not run"
    # TCE's F_k 0.2, 0.21, 0.19 above CE's on seeds 0-2, at every probe round (t = 34.6, p = 0.00083 each)
    forgetting = claims["tce_less_forgetting"]
    assert forgetting.status == "held" and len(forgetting.comparisons) == 4
    assert all(c.p == pytest.approx(p_paired([0.2, 0.21, 0.19]), rel=1e-6) for c in forgetting.comparisons)
    assert "rounds 1, 20, 28, 40 of 40" in claims["tce_less_forgetting"].text
    # margin 20, 20 points at α = 0.01 against 10, 11, 9 at 0.1 (seeds 0-1 vs 0-2: Welch) and 1, 1.1 at 100
    # (paired: 19, 18.9, mean 18.95, sd 0.0707, t = 379, df 1, p = 0.0017)
    margin = claims["tce_margin_alpha"]
    assert margin.status == "held"
    assert [c.test for c in margin.comparisons] == ["Welch t", "paired t"]
    assert margin.comparisons[1].p == pytest.approx(p_paired([19, 18.9]), rel=1e-6)
    assert claims["tce_margin_C"].status == "not run"
    # lr 0.1: held (3 vs 3); lr 0.3: one seed each -> inconclusive; BN at 0.1: failed -> failed overall
    assert claims["tce_every_lr"].status == "failed"
    # BN + 2 points - GN: -12, -15, -12 (separated below: p = 0.0059); GN + 2 - BN: 16, 19, 16 (above)
    near = claims["tce_bn_near_gn"]
    assert near.status == "failed" and [c.status for c in near.comparisons] == ["failed", "held"]
    assert near.comparisons[0].p == pytest.approx(p_paired([-12, -15, -12]), rel=1e-6)
    assert near.comparisons[1].p == pytest.approx(p_paired([16, 19, 16]), rel=1e-6)
    # paired by seed: TCE 1 and 1.1 points above FedAvg, so TCE + 2 is above FedAvg by 3, 3.1 (t = 61, df 1,
    # p = 0.010) and FedAvg + 2 above TCE by 1, 0.9 (t = 19, p = 0.033)
    equal = claims["tce_equal_at_high_alpha"]
    assert equal.status == "held" and equal.test == "paired t"
    assert equal.comparisons[0].p == pytest.approx(p_paired([3, 3.1]), rel=1e-6)
    assert equal.comparisons[1].p == pytest.approx(p_paired([1, 0.9]), rel=1e-6)
    assert claims["tce_more_lrs_near_best"].status == "inconclusive"  # lr 0.3 has one seed: open for both methods
    assert "0.3 open" in claims["tce_more_lrs_near_best"].evidence
    assert claims["tce_gn_beats_fedavg_femnist"].status == "not run"


def test_within_two_points_both_ways():
    near = tce.within_points("x", "t", "p", ("A", "B"), [0.500, 0.502, 0.501], [0.490, 0.492, 0.491], 2)
    assert near.status == "held"  # 1 point apart, tight seeds: each + 2 points is separated above the other
    far = tce.within_points("x", "t", "p", ("A", "B"), [0.600, 0.602, 0.601], [0.490, 0.492, 0.491], 2)
    assert far.status == "failed"  # B + 2 points is still separated below A


def test_figures_are_written(built):
    folder, _ = built
    for name in ("figure2_cifar10.png", "figure3a.png", "figure4.png"):
        assert (folder / name).read_bytes()[:8] == PNG_SIGNATURE, name
    assert "| alpha | 0.01 |" in (folder / "figure3.md").read_text()


def build_from(root: Path, keys: list[str], partitions: dict) -> dict:
    """TCE's claims on the runs `keys` under root, in a profile that builds `partitions`."""
    results = load_results(keys, root / "reports" / "runs", partitions)
    return {c.id: c for c in tce.build(report_context(root, "tce", results, PUBLISHED, built_partitions=partitions))}


def test_femnist_writers_count_as_the_base_point(tmp_path):
    partitions = write_partitions(tmp_path, {"femnist_natural": None})
    write_tce_run(tmp_path, "femnist_ce", "ce", "group", 0.05, [0.7, 0.72], partition="femnist_natural",
                  dataset="femnist")
    build_from(tmp_path, ["femnist_ce"], partitions)
    rows = [line for line in (tmp_path / "reports" / "tce" / "table1.md").read_text().splitlines()
            if line.startswith("| femnist | 0.05 |")]
    assert rows and "0.710 ± 0.014 (n=2) | 0.829" in rows[0]


def test_a_fedavg_that_did_not_converge_leaves_the_margin_claim_inconclusive(tmp_path):
    """FedAvg NC at alpha = 0.01 is no margin at all: inconclusive, not 'failed' for lack of values."""
    partitions = write_partitions(tmp_path, {"cifar10_dirichlet_alpha01": 0.1, "cifar10_dirichlet_alpha001": 0.01,
                                             "cifar10_dirichlet_alpha100": 100.0})
    write_tce_run(tmp_path, "main_ce", "ce", "group", 0.1, [0.30, 0.31], probe=True)
    write_tce_run(tmp_path, "main_tce", "tce", "group", 0.1, [0.40, 0.41], probe=True)
    write_tce_run(tmp_path, "a001_ce", "ce", "group", 0.1, [0.05, 0.06], partition="cifar10_dirichlet_alpha001")
    write_tce_run(tmp_path, "a001_tce", "tce", "group", 0.1, [0.40, 0.41], partition="cifar10_dirichlet_alpha001")
    write_tce_run(tmp_path, "a100_ce", "ce", "group", 0.1, [0.50, 0.52], partition="cifar10_dirichlet_alpha100")
    write_tce_run(tmp_path, "a100_tce", "tce", "group", 0.1, [0.51, 0.53], partition="cifar10_dirichlet_alpha100")
    claims = build_from(tmp_path, ["main_ce", "main_tce", "a001_ce", "a001_tce", "a100_ce", "a100_tce"], partitions)
    assert claims["tce_margin_alpha"].status == "inconclusive"
    assert "no margin" in claims["tce_margin_alpha"].evidence


def test_margins_pair_seeds_by_seed_number(tmp_path):
    write_tce_run(tmp_path, "first", "tce", "group", 0.1, [0.5, 0.9], seeds=[0, 2])
    write_tce_run(tmp_path, "second", "ce", "group", 0.1, [0.3, 0.4, 0.6])
    results = load_results(["first", "second"], tmp_path / "reports" / "runs")
    assert [round(m, 6) for m in tce.margins(results["first"], results["second"])] == [0.2, 0.3]


def test_two_runs_at_one_point_are_an_error(tmp_path):
    from pipeline.errors import UserError

    partitions = write_partitions(tmp_path, {"cifar10_dirichlet_alpha01": 0.1})
    write_tce_run(tmp_path, "one", "ce", "group", 0.3, [0.5])
    write_tce_run(tmp_path, "two", "ce", "group", 0.3, [0.6])
    with pytest.raises(UserError, match="runs one and two both sit at cifar10, FedAvg \\(GN\\), lr 0.3"):
        build_from(tmp_path, ["one", "two"], partitions)


def test_published_best_reads_the_column_maximum():
    assert tce.published_best(PUBLISHED, "cifar10", "tce_gn") == "0.859 ± 0.004 (lr 0.03)"
    assert tce.published_best(PUBLISHED, "cifar100", "fedavg_gn").startswith("0.486 ± 0.036 (lr 0.07)")


# ---------------------------------------------------------------- the paper profile's settings

def paper_runs() -> dict:
    params = {**PARAMS, "profile": "paper"}
    return {key: resolve_run(params, key) for key in derive_grid(params)["runs"] if key.startswith("tce_")}


def test_paper_profile_tce_runs_have_the_papers_and_the_authors_settings():
    runs = paper_runs()
    for key, s in runs.items():
        assert (s["model"], s["rounds"], s["local_epochs"], s["batch_size"]) == ("resnet18", 4000, 3, 64), key
        assert (s["optimizer"], s["momentum"], s["weight_decay"]) == ("sgd", 0.0, 0.0001), key
        assert s["evaluate_on"] == "validation" and s["seeds"] == [0, 1, 2], key
        assert s["augment"] == ("none" if s["dataset"] == "femnist" else "crop_flip"), key
        assert s["scaled"] == {}, key
    partition = PARAMS["partitions"]["cifar10_dirichlet_alpha01"]
    assert (partition["clients"], partition["alpha"], partition["equal_size"], partition["val_fraction"]) == \
        (100, 0.1, True, 0.1)


def test_paper_profile_covers_table1s_grid_and_the_sweeps():
    runs = paper_runs()
    cells = {(s["dataset"], s["loss"], s["norm"], s["lr"]) for s in runs.values()
             if s["partition"].endswith(("alpha01", "natural")) and s["client_fraction"] == 0.1}
    lrs = [float(x) for x in PUBLISHED["table1"]["lrs"]]
    for dataset in ("cifar10", "cifar100", "femnist"):
        for loss, norm in (("ce", "group"), ("tce", "group"), ("tce", "batch")):
            assert {lr for d, lo, n, lr in cells if (d, lo, n) == (dataset, loss, norm)} >= set(lrs), (dataset, loss, norm)
    alphas = {PARAMS["partitions"][s["partition"]]["alpha"] for s in runs.values() if s["dataset"] == "cifar10"}
    assert alphas == {0.01, 0.1, 0.2, 0.5, 1.0, 10.0, 100.0}
    probed = {k: s["probe_rounds"] for k, s in runs.items() if s["probe_rounds"]}
    assert probed and all(rounds == [1, 2000, 2800, 4000] for rounds in probed.values())


# ---------------------------------------------------------------- claims on runs built in memory (issue 37)
#
# Every expected verdict and number below is worked by hand: a paired t-test over the per-seed differences
# (t = mean / (sd / sqrt n), p = 2 t.sf(|t|, n - 1); over 3 seeds, df = 2, the closed form
# p = 1 - t / sqrt(t^2 + 2)), or, where every seed differs by the same amount (sd 0, t undefined), the
# exact sign-flip test: p = 2/2^n, 0.25 over 3 seeds, never separated.

from pipeline.report.common import RunResult, SeededRun  # noqa: E402
from pipeline.report.seeds import PerSeed  # noqa: E402

PAPER_PROBES = {"probe_rounds": {"paper": [1, 2000, 2800, 4000], "used": [1, 20, 28, 40]}}
# The base partition (α = 0.1) as params.yaml has it, where the report reads a run's α.
BASE_PARTITION = {"dataset": "cifar10", "scheme": "dirichlet", "clients": 100, "alpha": 0.1}


def seed_result(key: str, seed: int, loss: str, norm: str, lr: float, final: float, forgetting: dict | None = None,
                probe_rounds=(1, 20, 28, 40), scaled: dict | None = None) -> RunResult:
    """One seed of a CIFAR-10 TCE run as load_results would give it (α = 0.1, C = 0.1, 40 rounds)."""
    settings = {"paper": "tce", "loss": loss, "norm": norm, "lr": lr, "dataset": "cifar10",
                "partition": "cifar10_dirichlet_alpha01", "client_fraction": 0.1, "rounds": 40,
                "probe_rounds": list(probe_rounds), "scaled": scaled or {}, "seed": seed}
    summary = {"status": "ok", "final_test_accuracy": final,
               "mean_local_forgetting": {f"round_{r}": v for r, v in (forgetting or {}).items()}}
    return RunResult(key, seed, settings, summary, [20, 40], [0.2, 0.3])


def seeded(key: str, loss: str, norm: str, lr: float, finals: list, seeds=None, forgetting: list | None = None,
           **kwargs) -> SeededRun:
    """A run over its seeds; `forgetting` is one {round: F_k} per seed."""
    seeds = list(seeds if seeds is not None else range(len(finals)))
    return SeededRun(key, [seed_result(key, s, loss, norm, lr, f, (forgetting or [None] * len(seeds))[i], **kwargs)
                           for i, (s, f) in enumerate(zip(seeds, finals))], partition=BASE_PARTITION)


def p_paired(differences: list[float]) -> float:
    """The paired t-test's two-sided p by hand: t = mean / (sd / sqrt n), p = 2 t.sf(|t|, n - 1)."""
    from scipy.stats import t as t_distribution

    n = len(differences)
    mean = sum(differences) / n
    sd = (sum((d - mean) ** 2 for d in differences) / (n - 1)) ** 0.5
    return float(2 * t_distribution.sf(abs(mean / (sd / n ** 0.5)), n - 1))


def p_paired_three_seeds(differences: list[float]) -> float:
    """The paired t-test's two-sided p over 3 seeds by hand: t = mean / (sd / sqrt 3), df = 2."""
    mean = sum(differences) / 3
    sd = (sum((d - mean) ** 2 for d in differences) / 2) ** 0.5
    t = mean / (sd / 3 ** 0.5)
    return 1 - abs(t) / (t * t + 2) ** 0.5


def build_in_memory(root: Path, runs: list[SeededRun]) -> dict:
    return {c.id: c for c in tce.build(report_context(root, "tce", {r.run: r for r in runs}, PUBLISHED))}


def test_p_by_hand_for_three_seeds():
    # differences 2.0, 2.5, 3.0 points: mean 2.5, sd 0.5, t = 2.5 / (0.5 / sqrt 3) = 8.660, p = 0.01307
    assert p_paired_three_seeds([2.0, 2.5, 3.0]) == pytest.approx(0.01307, abs=1e-5)
    assert p_paired([2.0, 2.5, 3.0]) == pytest.approx(p_paired_three_seeds([2.0, 2.5, 3.0]), rel=1e-9)


# TCE (BN) 40 / 45 / 50 % against FedAvg (BN) 38 / 42.5 / 47 %: 2, 2.5 and 3 points more on the same seed
# (paired: p = 0.013, held) while the seeds' spread (5 and 4.5 points) hides it from Welch's test (p ~ 0.56).
TCE_BN, FEDAVG_BN = [0.40, 0.45, 0.50], [0.38, 0.425, 0.47]


def test_tce_bn_against_fedavg_bn_is_its_own_claim_paired_by_seed(tmp_path):
    claims = build_in_memory(tmp_path, [seeded("tce_bn", "tce", "batch", 0.1, TCE_BN),
                                              seeded("fedavg_bn", "ce", "batch", 0.1, FEDAVG_BN)])
    claim = claims["tce_bn_beats_fedavg_bn_cifar10"]
    assert claim.text.startswith("FedAvg + TCE (BN) is more accurate than FedAvg (BN), cifar10")
    assert claim.status == "held" and claim.test == "paired t" and claim.seeds == "3 vs 3"
    (comparison,) = claim.comparisons
    assert comparison.p == pytest.approx(0.01307, abs=1e-4)
    assert (comparison.effect, comparison.sd) == (pytest.approx(2.5), pytest.approx(0.5))  # points
    assert claim.unit == "points"
    # the paper's premise, cited: no FedAvg (BN) numbers, the sentence and the caption
    assert "typically do poorly when using BN' (§3.2, L78)" in claim.published
    assert "known to yield poor performance [17]" in claim.published
    assert "test accuracy, each seed's mean over its last 5 evaluated rounds of 40)" in claim.evidence
    assert claims["tce_bn_beats_fedavg_bn_cifar100"].status == "not run"


def test_seeds_that_differ_are_not_paired(tmp_path):
    claims = build_in_memory(tmp_path, [seeded("tce_bn", "tce", "batch", 0.1, TCE_BN),
                                              seeded("fedavg_bn", "ce", "batch", 0.1, FEDAVG_BN, seeds=[0, 1, 3])])
    claim = claims["tce_bn_beats_fedavg_bn_cifar10"]
    assert claim.test == "Welch t" and claim.status == "inconclusive"  # 2.5 points under a 5-point spread
    assert "seeds 0, 1, 2 vs 0, 1, 3 differ" in claim.evidence
    assert claim.power.startswith("effect +2.5 points")


def test_every_run_tce_claim_carries_its_comparisons_and_a_unit(tmp_path):
    # F_k 0, 0.02, 0.01 apart on seeds 0-2 (not the same on every seed of both: that tie is the exact test's)
    forgetting = [{r: f for r in (1, 20, 28, 40)} for f in (-0.1, -0.12, -0.11)]
    claims = build_in_memory(tmp_path, [
        seeded("gn", "ce", "group", 0.1, [0.30, 0.33, 0.31], forgetting=forgetting),
        seeded("tce", "tce", "group", 0.1, [0.32, 0.34, 0.35], forgetting=[{r: -0.1 for r in (1, 20, 28, 40)}] * 3),
        seeded("tce_bn", "tce", "batch", 0.1, TCE_BN), seeded("fedavg_bn", "ce", "batch", 0.1, FEDAVG_BN),
        seeded("gn_lr03", "ce", "group", 0.3, [0.28, 0.30, 0.29], probe_rounds=()),
        seeded("tce_lr03", "tce", "group", 0.3, [0.31, 0.30, 0.33], probe_rounds=())])
    run = [c for c in claims.values() if c.status != "not run"]
    assert {c.id for c in run} >= {"tce_gn_beats_fedavg_cifar10", "tce_bn_beats_fedavg_cifar10",
                                   "tce_bn_beats_fedavg_bn_cifar10", "tce_less_forgetting", "tce_bn_near_gn",
                                   "tce_every_lr", "tce_more_lrs_near_best"}
    for claim in run:
        assert claim.comparisons and claim.unit, claim.id
        assert claim.test == "paired t", claim.id  # every side ran seeds 0, 1, 2
        assert "no comparison to measure" not in claim.power, claim.id


# ---------------------------------------------------------------- lrs within 3 and 5 points of the best

def test_the_claim_is_made_where_table2_shows_tce_ahead():
    assert tce.table2_tolerances_where_tce_leads(PUBLISHED) == [3, 5]  # 2 vs 2 at 2 points: a tie
    claim = tce.near_best_claim({}, PUBLISHED)
    assert "within 3 points and within 5 points of its best" in claim.text
    assert claim.published.startswith("Table 2, lrs listed TCE (GN) vs FedAvg: within 2: 2 vs 2, within 3: 5 vs 3, "
                                      "within 5: 6 vs 4")


def lr_grid(by_lr: dict) -> dict:
    return {lr: PerSeed(values, [0, 1, 2]) for lr, values in by_lr.items()}


# Every other lr sits below its method's best by a distance that varies by 0.1 point across seeds 0-2
# (distance - 0.1, distance, distance + 0.1: sd 0.1), so each membership is a paired t-test (the same
# distance on every seed would be the exact sign-flip test: p = 0.25 over 3 seeds, open).
# TCE: best lr 0.1; 0.3 is 1.9, 2, 2.1 points below it (in at 3 and 5), 0.01 is 3.4, 3.5, 3.6 below (out at 3,
# in at 5): 2 lrs within 3 points, 3 within 5.
TCE_LRS = {0.1: [0.50, 0.52, 0.54], 0.3: [0.481, 0.50, 0.519], 0.01: [0.466, 0.485, 0.504]}
# FedAvg: best lr 0.1; 0.3 is 3.9, 4, 4.1 below (out at 3, in at 5), 0.01 is 9.9, 10, 10.1 below (out at both):
# 1 and 2.
FEDAVG_LRS = {0.1: [0.40, 0.42, 0.44], 0.3: [0.361, 0.38, 0.399], 0.01: [0.301, 0.32, 0.339]}


def spread(distance: float) -> list[float]:
    """lr + tolerance - best on seeds 0-2 for an lr above whose mean is `distance`: every lr above sits 0.1 point
    nearer its best on seed 0 and 0.1 further on seed 2."""
    return [distance + 0.1, distance, distance - 0.1]


def near_best(tce_lrs: dict, fedavg_lrs: dict):
    return tce.near_best_claim({("cifar10", "tce_gn"): lr_grid(tce_lrs), ("cifar10", "fedavg_gn"): lr_grid(fedavg_lrs)},
                               PUBLISHED)


def test_more_lrs_near_the_best_at_3_and_5_points_by_hand():
    claim = near_best(TCE_LRS, FEDAVG_LRS)
    assert claim.status == "held"  # 2 > 1 at 3 points, 3 > 2 at 5
    assert "within 3: TCE 2 vs FedAvg 1 of 3 lrs, held" in claim.evidence
    assert "within 5: TCE 3 vs FedAvg 2 of 3 lrs, held" in claim.evidence
    assert "TCE 0.3 in" in claim.evidence and "0.01 out" in claim.evidence
    assert claim.test == "paired t" and claim.unit == "points"
    assert len(claim.comparisons) == 8  # two other lrs per method, two tolerances
    # as decided (an lr that is out is tested as best > lr + x): at 3 points TCE 0.3 +1 (in), 0.01 -0.5 (out:
    # best - (lr + 3) = 0.4, 0.5, 0.6, t = 8.66, p = 0.013, the closest call), FedAvg 0.3 -1 (out), 0.01 -7
    # (out); at 5 points TCE +3, +1.5 (in), FedAvg +1 (in), -5 (out)
    by_hand = [spread(1.0), [0.4, 0.5, 0.6], [0.9, 1.0, 1.1], [6.9, 7.0, 7.1],
               spread(3.0), spread(1.5), spread(1.0), [4.9, 5.0, 5.1]]
    assert [c.status for c in claim.comparisons] == ["held"] * 8
    assert [c.p for c in claim.comparisons] == [pytest.approx(p_paired(d), rel=1e-6) for d in by_hand]
    assert max(c.p for c in claim.comparisons) == pytest.approx(0.01307, abs=1e-4)


def test_fewer_lrs_near_the_best_fails():
    claim = near_best(FEDAVG_LRS, TCE_LRS)
    assert claim.status == "failed"  # the methods swapped: 1 < 2 and 2 < 3
    assert "within 3: TCE 1 vs FedAvg 2 of 3 lrs, failed" in claim.evidence
    assert "within 5: TCE 2 vs FedAvg 3 of 3 lrs, failed" in claim.evidence
    assert claim.test == "paired t"  # every membership decided by the paired t-test (p <= 0.013, by hand above)


def test_a_decided_tie_fails_the_claim():
    # FedAvg's 0.01 now 4.4, 4.5, 4.6 points below its best: out at 3, in at 5: 1 and 3 lrs; TCE 2 and 3 -> a
    # tie at 5
    claim = near_best(TCE_LRS, {**FEDAVG_LRS, 0.01: [0.356, 0.375, 0.394]})
    assert "within 3: TCE 2 vs FedAvg 1 of 3 lrs, held" in claim.evidence
    assert "within 5: TCE 3 vs FedAvg 3 of 3 lrs, failed" in claim.evidence
    assert claim.status == "failed"
    # FedAvg 0.01 + 3 - best: -1.4, -1.5, -1.6 (out: t = 26, p = 0.0015); + 5: 0.6, 0.5, 0.4 (in: t = 8.66, p = 0.013)
    out_at_3, in_at_5 = claim.comparisons[3], claim.comparisons[7]
    assert out_at_3.test == in_at_5.test == "paired t"
    assert out_at_3.p == pytest.approx(p_paired([1.4, 1.5, 1.6]), rel=1e-6)
    assert in_at_5.p == pytest.approx(p_paired([0.6, 0.5, 0.4]), rel=1e-6) == pytest.approx(0.01307, abs=1e-4)


def test_an_open_lr_leaves_it_inconclusive_with_a_power_line():
    # TCE's 0.3 at 45 / 53 / 50 %: + 3 points against 50 / 52 / 54 gives -2, +4, -1 (open); + 5: 0, +6, +1 (open).
    # TCE then has 1-2 lrs at 3 points against FedAvg's 1, and 2-3 at 5 against 2: neither side decided.
    claim = near_best({**TCE_LRS, 0.3: [0.45, 0.53, 0.50]}, FEDAVG_LRS)
    assert claim.status == "inconclusive"
    assert "within 3: TCE 1–2 vs FedAvg 1 of 3 lrs, inconclusive" in claim.evidence
    assert "within 5: TCE 2–3 vs FedAvg 2 of 3 lrs, inconclusive" in claim.evidence
    assert claim.power.startswith("2 comparisons undecided; the hardest: effect +0.333 points")


def test_within_points_with_seeds_is_paired():
    # A 0.9, 1, 1.1 points above B on seeds 0-2, under a 10-point spread across seeds: A + 2 - B = 2.9, 3, 3.1
    # (t = 52, p = 0.00037), B + 2 - A = 1.1, 1, 0.9 (t = 17.3, p = 0.0033)
    near = tce.within_points("x", "t", "p", ("A", "B"), PerSeed([0.50, 0.60, 0.70], [0, 1, 2]),
                             PerSeed([0.491, 0.59, 0.689], [0, 1, 2]), 2)
    assert near.status == "held" and near.test == "paired t"  # about 1 point apart on every seed, whatever the spread
    assert len(near.comparisons) == 2 and near.unit == "points"
    up, down = near.comparisons
    assert up.p == pytest.approx(p_paired([2.9, 3.0, 3.1]), rel=1e-6)
    assert down.p == pytest.approx(p_paired([1.1, 1.0, 0.9]), rel=1e-6)
    # exactly 1 point apart on every seed: sd 0, the exact sign-flip test over 3 seeds, p = 2/2^3 = 0.25 both ways
    same = tce.within_points("x", "t", "p", ("A", "B"), PerSeed([0.50, 0.60, 0.70], [0, 1, 2]),
                             PerSeed([0.49, 0.59, 0.69], [0, 1, 2]), 2)
    assert same.status == "inconclusive" and same.test == "exact sign-flip"
    assert [c.p for c in same.comparisons] == [pytest.approx(2 / 2 ** 3)] * 2


# ---------------------------------------------------------------- forgetting at every probed round

ROUNDS = (1, 20, 28, 40)
TCE_F = [{r: f for r in ROUNDS} for f in (-0.10, -0.12, -0.11)]


def forgetting_claim(ce_forgetting: list[dict]):
    first = seeded("tce", "tce", "group", 0.1, [0.3] * 3, forgetting=TCE_F, scaled=PAPER_PROBES)
    second = seeded("ce", "ce", "group", 0.1, [0.3] * 3, forgetting=ce_forgetting, scaled=PAPER_PROBES)
    return tce.forgetting_claim_of(first, second, "TCE reduces forgetting at every probed round", "p")


def ce_below_tce(by: list[float], at: dict | None = None) -> list[dict]:
    """CE's F_k = TCE's minus `by` (one per seed) at every round, except the rounds of `at` {round: per-seed}."""
    at = at or {}
    return [{r: TCE_F[s][r] - at.get(r, by)[s] for r in ROUNDS} for s in range(3)]


def test_less_forgetting_at_every_probed_round_holds():
    # CE 4, 5 and 6 points of F_k below TCE on seeds 0-2 at every round: paired, p = 0.013 each
    claim = forgetting_claim(ce_below_tce([0.04, 0.05, 0.06]))
    assert claim.status == "held" and claim.test == "paired t" and len(claim.comparisons) == 4
    assert all(c.p == pytest.approx(0.01307, abs=1e-4) for c in claim.comparisons)
    assert claim.text.endswith("rounds 1, 20, 28, 40 of 40 (the paper's 1, 2,000, 2,800, 4,000)")
    # CE per seed: -0.14, -0.17, -0.17 (mean -0.16, sd sqrt(0.0003) = 0.017)
    assert "round 28: TCE -0.110 ± 0.010 (n=3), CE -0.160 ± 0.017 (n=3), held" in claim.evidence


def test_one_round_the_other_way_fails_it():
    # at round 28 CE forgets 4, 5 and 6 points less than TCE on seeds 0-2: TCE - CE = -0.04, -0.05, -0.06
    # (t = -8.66, p = 0.013)
    claim = forgetting_claim(ce_below_tce([0.04, 0.05, 0.06], {28: [-0.04, -0.05, -0.06]}))
    assert [c.status for c in claim.comparisons] == ["held", "held", "failed", "held"]
    assert claim.comparisons[2].p == pytest.approx(p_paired([-0.04, -0.05, -0.06]), rel=1e-6)
    assert claim.status == "failed"


def test_one_round_undecided_leaves_it_inconclusive():
    # at round 1 the seeds disagree: +1, -1, 0 points (mean 0)
    claim = forgetting_claim(ce_below_tce([0.04, 0.05, 0.06], {1: [0.01, -0.01, 0.0]}))
    assert [c.status for c in claim.comparisons] == ["inconclusive", "held", "held", "held"]
    assert claim.status == "inconclusive" and claim.power and "no comparison" not in claim.power


# ---------------------------------------------------------------- FEMNIST: the paper against itself

def test_femnist_tce_gn_published_cell_says_the_paper_contradicts_itself():
    gn = tce.femnist_published(PUBLISHED, "tce_gn")
    assert gn.startswith("Table 1 best: 0.814 (lr 0.007) vs FedAvg 0.829 (lr 0.05); the paper contradicts itself")
    assert "'We see a similar performance increase when using the FEMNIST dataset (Table 1)" in gn and "L78" in gn
    assert "contradicts" not in tce.femnist_published(PUBLISHED, "tce_bn")  # 0.850 above 0.829: no contradiction


def test_figure4_is_drawn_from_the_committed_records_and_a_missing_one_is_an_error(tmp_path):
    """A partition the profile builds whose record is missing stops the report with one line (it used to
    drop the figure, exit 0); partitions the profile does not build are left out (a test grid)."""
    from pipeline.errors import UserError

    name, records = tce.FIGURE4_PARTITIONS[0.1], tmp_path / "reports" / "partitions"
    assert tce.figure4_mixes(set(), records) == {}
    with pytest.raises(UserError, match=rf"reports/partitions/{name}/label_counts.json: missing") as error:
        tce.figure4_mixes({name}, records)
    assert "\n" not in str(error.value)
    record = records / name / "label_counts.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"train": [[3, 1], [0, 4]], "val": []}')
    assert tce.figure4_mixes({name}, records) == {0.1: [[3, 1], [0, 4]]}


# ---------------------------------------------------------------- the accuracy a seed counts with

def test_a_seed_counts_its_last_five_rounds_mean_and_is_nc_when_its_last_model_is_near_chance():
    run = seeded("r", "ce", "group", 0.1, [0.50, 0.55, 0.12])
    run.results[0].summary["test_set_accuracy_mean"] = 0.47  # the mean over rounds replaces the last model
    run.results[2].summary["test_set_accuracy_mean"] = 0.40  # a fine mean, a last model within 1.5x chance
    assert tce.accuracy_by_seed(run) == {0: 0.47, 1: 0.55, 2: None}


def test_a_stand_in_run_is_placed_at_the_dataset_it_stands_for(tmp_path):
    partitions = {"cifar10_dirichlet_alpha01": {"dataset": "cifar10", "scheme": "dirichlet", "alpha": 0.1},
                  "fmnist_alpha01": {"dataset": "fashion_mnist", "scheme": "dirichlet", "alpha": 0.1}}
    scaled = {"partition": {"paper": "cifar10_dirichlet_alpha01", "used": "fmnist_alpha01"}}
    write_tce_run(tmp_path, "standin", "tce", "group", 0.1, [0.6, 0.62], partition="fmnist_alpha01",
                  dataset="fashion_mnist")
    for seed in (0, 1):  # the stand-in's settings record what the profile scaled
        path = tmp_path / "reports" / "runs" / "standin" / f"seed{seed}" / "settings.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "scaled": scaled}))
    run = load_results(["standin"], tmp_path / "reports" / "runs", partitions)["standin"]
    assert run.paper_dataset == "cifar10" and run.settings["dataset"] == "fashion_mnist"
    assert tce.point_of(run) == ("cifar10", "tce_gn", 0.1, 0.1, 0.1)
    assert tce.stand_ins({"standin": run}) == [("Fashion-MNIST", "CIFAR-10")]
    assert tce.stand_in_words({"standin": run}) == " (Fashion-MNIST standing in)"
    assert "on Fashion-MNIST standing in for CIFAR-10" in tce.accuracy_words(run)


# ---------------------------------------------------------------- seeds without a value in the lr claims

def test_an_lr_that_diverges_on_some_seeds_is_decided_by_the_worst_rank_rule(tmp_path):
    # TCE (GN) at lr 0.3 ends near chance (0.11 <= 1.5 x 0.1: NC) on seeds 0-2 and 5-7 points below FedAvg on
    # seeds 3-5; FedAvg trained on every seed. Every seed is against TCE: signed-rank p = 2/2^6, failed.
    # Three seeds would be p = 2/2^3 = 0.25, open, with 6 seeds a side in the power line.
    partitions = write_partitions(tmp_path, {"cifar10_dirichlet_alpha01": 0.1})
    write_tce_run(tmp_path, "ce_lr03", "ce", "group", 0.3, [0.40, 0.41, 0.42, 0.43, 0.44, 0.45])
    write_tce_run(tmp_path, "tce_lr03", "tce", "group", 0.3, [0.11, 0.11, 0.11, 0.37, 0.38, 0.40])
    claim = build_from(tmp_path, ["ce_lr03", "tce_lr03"], partitions)["tce_every_lr"]
    assert claim.status == "failed" and claim.test == "Wilcoxon signed-rank"
    assert claim.comparisons[0].p == pytest.approx(2 / 2 ** 6)
    assert "3 of 6 vs 0 of 6 seeds without a value" in claim.evidence
    three = tmp_path / "three"
    partitions = write_partitions(three, {"cifar10_dirichlet_alpha01": 0.1})
    write_tce_run(three, "ce_lr03", "ce", "group", 0.3, [0.40, 0.41, 0.42])
    write_tce_run(three, "tce_lr03", "tce", "group", 0.3, [0.11, 0.11, 0.37])
    claim = build_from(three, ["ce_lr03", "tce_lr03"], partitions)["tce_every_lr"]
    assert claim.status == "inconclusive" and "6 seeds a side would decide it" in claim.power


def test_an_lr_without_values_is_out_when_every_seed_ranks_below_the_best():
    # Six seeds. TCE's 0.3 has no value (diverged) on seeds 0, 2, 4 and sits 20 points below its best on the
    # others: + 3 or + 5 points it is still below on every seed, out (p = 2/2^6). FedAvg's 0.3 is 1 point
    # below its best (0.9, 1, 1.1 on seeds 0-2 and again on 3-5): in at both. TCE then has 1 lr, FedAvg 2:
    # failed. Left unmarked (a value missing for no known reason) the same seeds keep TCE's 0.3 open (TCE 1-2:
    # still failed here, since 2 lrs do not exceed FedAvg's 2).
    six = list(range(6))
    best_tce, best_fedavg = [0.50, 0.52, 0.54] * 2, [0.40, 0.42, 0.44] * 2
    diverged = [None, 0.32, None, 0.31, None, 0.35]
    grids = {
        "tce_gn": {0.1: PerSeed(best_tce, six), 0.3: PerSeed(diverged, six, [True] * 6, "higher")},
        "fedavg_gn": {0.1: PerSeed(best_fedavg, six), 0.3: PerSeed([0.391, 0.41, 0.429] * 2, six)}}
    claim = tce.near_best_claim({("cifar10", m): g for m, g in grids.items()}, PUBLISHED)
    assert claim.status == "failed"
    assert "within 3: TCE 1 vs FedAvg 2 of 2 lrs, failed (TCE 0.3 out (Wilcoxon signed-rank p = 0.0312)" \
        in claim.evidence
    grids["tce_gn"][0.3] = PerSeed(diverged, six)
    open_claim = tce.near_best_claim({("cifar10", m): g for m, g in grids.items()}, PUBLISHED)
    assert "within 3: TCE 1–2 vs FedAvg 2 of 2 lrs" in open_claim.evidence and "TCE 0.3 open" in open_claim.evidence
