"""The TCE report: runs placed by their settings, Tables 1-2, the sweeps and the claims over their declared
readings (docs/claims-spec.md §4 and its amendments A2-A4, A6, A7, A10), built from constructed run results;
and the paper profile's TCE runs against the settings the paper and its authors' code give.

Every expected verdict and number is worked by hand: a paired t-test over the per-seed differences
(t = mean / (sd / sqrt n), p = 2 t.sf(|t|, n - 1); over 3 seeds, df = 2, the closed form
p = 1 - t / sqrt(t^2 + 2)), or, where every seed differs by the same amount (sd 0, t undefined), the exact
sign-flip test: p = 2/2^n, 0.25 over 3 seeds, never separated. Holm (1979) over m comparisons is worked by its
step-down rule: the i-th smallest p is multiplied by m - i + 1, and an adjusted p is never below the one before
it (two equal p's over 2 both become 2p; over 3, 3p)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from test_report import PNG_SIGNATURE, report_context, write_run

from pipeline.config import derive_grid, load_params
from pipeline.report import tce
from pipeline.report.common import RunResult, SeededRun, claim_of_readings, load_results
from pipeline.report.confirmation import build_with_confirmations
from pipeline.report.readings import NOT_MEASURED, READING_DEPENDENT
from pipeline.report.seeds import PerSeed
from pipeline.runs import resolve_run

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = yaml.safe_load((ROOT / "pipeline" / "report" / "published.yaml").read_text())["tce"]
PARAMS = load_params((ROOT / "params.yaml"))


def write_partitions(root: Path, alphas: dict[str, float | None], dataset: str = "cifar10") -> dict:
    """Each partition's label counts on disk (its record, for Figure 4); returns the partitions as params.yaml
    has them (where the report reads alpha)."""
    counts = [[45 + (c + k) % 3 for k in range(10)] for c in range(100)]
    for name in alphas:
        folder = root / "reports" / "partitions" / name
        folder.mkdir(parents=True)
        (folder / "label_counts.json").write_text(json.dumps({"train": counts, "val": counts}))
    return {
        name: {
            "dataset": "femnist" if alpha is None else dataset,
            "scheme": "dirichlet" if alpha else "natural",
            "clients": 100,
            **({"alpha": alpha} if alpha else {}),
        }
        for name, alpha in alphas.items()
    }


def write_tce_run(
    root,
    key,
    loss,
    norm,
    lr,
    finals,
    partition="cifar10_dirichlet_alpha01",
    fraction=0.1,
    probe=False,
    forgetting=None,
    dataset="cifar10",
    seeds=None,
    scaled=None,
):
    """A TCE run on disk; each seed's validation curve is [final - 0.1, final], so that VAL (its mean) moves with
    the last model (LM) and, with no test-set mean written, T5 falls back to the last model too."""
    for seed, final in zip(seeds or range(len(finals)), finals):
        summary_extra = {"probe_rounds": [1, 20, 28, 40] if probe else [], "rounds": 40}
        folder = write_run(
            root,
            key,
            {"name": "fedavg"},
            1,
            paper="tce",
            seed=seed,
            accuracy=[final - 0.1, final],
            scaled=scaled,
            extra={
                "loss": loss,
                "norm": norm,
                "lr": lr,
                "dataset": dataset,
                "partition": partition,
                "client_fraction": fraction,
                **summary_extra,
            },
        )
        metrics = json.loads((folder / "metrics.json").read_text())
        metrics["final_test_accuracy"] = final
        if forgetting is not None:
            metrics["mean_local_forgetting"] = {f"round_{r}": forgetting[seed] for r in (1, 20, 28, 40)}
        (folder / "metrics.json").write_text(json.dumps(metrics))


@pytest.fixture
def built(tmp_path):
    partitions = write_partitions(
        tmp_path,
        {
            "cifar10_dirichlet_alpha001": 0.01,
            "cifar10_dirichlet_alpha01": 0.1,
            "cifar10_dirichlet_alpha05": 0.5,
            "cifar10_dirichlet_alpha100": 100.0,
        },
    )
    # Main runs: TCE (GN) 10, 11, 9 points above FedAvg (GN) on seeds 0-2, and 20, 21, 19 points less forgetting;
    # TCE (BN) 4, 6, 5 points below FedAvg (GN). No difference is the same on every seed (that would take the
    # exact sign-flip test, p = 2/2^3 = 0.25 over 3 seeds: never separated).
    write_tce_run(
        tmp_path, "main_ce", "ce", "group", 0.1, [0.30, 0.31, 0.32], probe=True, forgetting=[-0.3, -0.32, -0.31]
    )
    write_tce_run(
        tmp_path, "main_tce", "tce", "group", 0.1, [0.40, 0.42, 0.41], probe=True, forgetting=[-0.1, -0.11, -0.12]
    )
    write_tce_run(tmp_path, "main_tce_bn", "tce", "batch", 0.1, [0.26, 0.25, 0.27], probe=True)
    # The lr grid: one NC seed (near chance) and a lower lr.
    write_tce_run(tmp_path, "ce_lr03", "ce", "group", 0.3, [0.11])
    write_tce_run(tmp_path, "tce_lr03", "tce", "group", 0.3, [0.35])
    # The alpha sweep, two seeds each: a margin of 20, 20 points at 0.01; 1, 1.1 at 100.
    write_tce_run(tmp_path, "a001_ce", "ce", "group", 0.1, [0.20, 0.21], partition="cifar10_dirichlet_alpha001")
    write_tce_run(tmp_path, "a001_tce", "tce", "group", 0.1, [0.40, 0.41], partition="cifar10_dirichlet_alpha001")
    write_tce_run(tmp_path, "a100_ce", "ce", "group", 0.1, [0.50, 0.52], partition="cifar10_dirichlet_alpha100")
    write_tce_run(tmp_path, "a100_tce", "tce", "group", 0.1, [0.51, 0.531], partition="cifar10_dirichlet_alpha100")
    claims = build_from(
        tmp_path,
        ["main_ce", "main_tce", "main_tce_bn", "ce_lr03", "tce_lr03", "a001_ce", "a001_tce", "a100_ce", "a100_tce"],
        partitions,
    )
    return tmp_path / "reports" / "tce", claims


def table_rows(path: Path, label: str = "CIFAR-10") -> list[list[str]]:
    """The rows of a table whose first cell (the dataset trained) is `label`."""
    rows = [line.strip("|").split(" | ") for line in path.read_text().splitlines() if line.startswith("| ")]
    return [row for row in rows if row[0].strip() == label]


def statuses(claim) -> list[str]:
    """Each declared reading's verdict, in the declared order."""
    return [r.status for r in claim.readings]


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
    # a dataset with no runs is labelled as the paper's, not run; never by a bare key
    assert table_rows(folder / "table1.md", "CIFAR-100 (the paper's; not run)")
    assert not any(
        row[0].strip() in ("cifar10", "cifar100", "femnist")
        for row in (
            line.strip("|").split(" | ")
            for line in (folder / "table1.md").read_text().splitlines()
            if line.startswith("| ")
        )
    )


def test_table2_best_and_within_by_hand():
    means = {0.3: 0.80, 0.1: 0.79, 0.03: 0.76, 0.01: 0.70, 0.007: None}
    assert tce.within(means, 2) == (0.80, 0.3, [0.3, 0.1])
    assert tce.within(means, 5) == (0.80, 0.3, [0.3, 0.1, 0.03])
    assert tce.within({0.1: None}, 2) == (None, None, [])


def test_claims_decided_on_the_main_runs_and_the_sweep(built):
    _, claims = built
    # TCE (GN) - FedAvg (GN): 10, 11, 9 points (mean 10, sd 1, t = 17.3, p = 0.0033) on LM, T5 (no test-set mean:
    # the last model) and VAL (each curve's mean is its last model - 0.05); R4: the best lr is 0.1 for both (TCE's
    # 0.3 has a lower mean, FedAvg's 0.3 an NC seed), the same comparison
    gn = claims["tce_gn_beats_fedavg_cifar10"]
    assert gn.status == "held" and gn.test == "paired t"
    assert [r.label for r in gn.readings] == ["R1 LM ★", "R2 T5", "R3 VAL", "R4 each at its best lr, LM"]
    assert statuses(gn) == ["held"] * 4
    assert gn.comparisons[0].p == pytest.approx(p_paired([10, 11, 9]), rel=1e-6)
    assert [r.comparisons[0].p for r in gn.readings] == [pytest.approx(p_paired([10, 11, 9]), rel=1e-6)] * 4
    assert (
        "best lr by mean LM (an lr with an NC seed is no candidate): FedAvg + TCE (GN) 0.1; FedAvg (GN) 0.1"
        in gn.evidence
    )
    assert "CIFAR-10 (the paper's)" in gn.text and "cifar10" not in gn.text
    # TCE (BN) - FedAvg (GN): -4, -6, -5 points (mean -5, sd 1, t = -8.66, p = 0.013)
    bn = claims["tce_bn_beats_fedavg_cifar10"]
    assert bn.status == "failed" and bn.test == "paired t"
    assert bn.comparisons[0].p == pytest.approx(p_paired([-4, -6, -5]), rel=1e-6)
    assert claims["tce_gn_beats_fedavg_cifar100"].status == "not run"
    # TCE's F_k 0.2, 0.21, 0.19 above CE's on seeds 0-2 at every probe round (t = 34.6, p = 0.00083 each): R1 at
    # round 28 (Figure 1's: 70 % of 40), R2 at 20, 28 and 40, Holm over 3 equal p's: 3 p each
    forgetting = claims["tce_less_forgetting"]
    assert forgetting.status == "held" and len(forgetting.comparisons) == 1
    assert forgetting.comparisons[0].p == pytest.approx(p_paired([0.2, 0.21, 0.19]), rel=1e-6)
    assert [c.p for c in forgetting.readings[1].comparisons] == [pytest.approx(3 * p_paired([0.2, 0.21, 0.19]))] * 3
    assert "rounds 28 of 40 (R1), 20, 28, 40 of 40 (R2)" in forgetting.text
    assert "round 1, reported and not part of the claim" in forgetting.evidence
    # margin 20, 20 points at α = 0.01 against 10, 11, 9 at 0.1 (seeds 0-1 vs 0-2: Welch, t = 17.3, df 2) and
    # 1, 1.1 at 100 (paired: 19, 18.9, mean 18.95, sd 0.0707, t = 379, df 1); Holm over the 2 below
    margin = claims["tce_margin_alpha"]
    assert margin.status == "held"
    assert [c.test for c in margin.comparisons] == ["Welch t", "paired t"]
    welch, paired = p_welch([20, 20], [10, 11, 9]), p_paired([19, 18.9])
    small, large = sorted([welch, paired])
    holm = {small: 2 * small, large: max(2 * small, large)}
    assert [c.p for c in margin.comparisons] == [pytest.approx(holm[welch]), pytest.approx(holm[paired])]
    assert claims["tce_margin_C"].status == "not run"
    # lr 0.1: GN held (3 vs 3), BN failed; lr 0.3: one seed each -> inconclusive. R1 (all of them): failed; R2 (per
    # norm more held than failed): GN 1 held, 0 failed, 1 open -> open, BN 0 held, 1 failed -> failed
    every = claims["tce_every_lr"]
    assert every.status == "failed" and statuses(every) == ["failed"] * 4
    assert "FedAvg + TCE (GN): 1 held, 0 failed, 1 open of 2 lrs, inconclusive" in every.evidence
    # BN + 2 points - GN: -12, -15, -12 (separated below: p = 0.0059): R1 (BN at least GN - 2) failed on LM and
    # T5; R2 (within 2) failed too: one side separated the other way is enough
    near = claims["tce_bn_near_gn"]
    assert near.status == "failed" and statuses(near) == ["failed"] * 4
    assert near.comparisons[0].p == pytest.approx(p_paired([-12, -15, -12]), rel=1e-6)
    assert [c.status for c in near.readings[1].comparisons] == ["failed", "held"]
    # α = 100, paired by seed: TCE 1 and 1.1 points above FedAvg. Within 2 (R1 LM, R2 T5): TCE + 2 above FedAvg by
    # 3, 3.1 (t = 61, df 1, p = 0.0104) and FedAvg + 2 above TCE by 1, 0.9 (t = 19, p = 0.0335): Holm, 0.0209 and
    # 0.0335, both held. Within 1 (R3 T5): FedAvg + 1 - TCE = 0, -0.1 (t = -1, p = 0.5): inconclusive. The
    # readings disagree: reading-dependent.
    equal = claims["tce_equal_at_high_alpha"]
    assert statuses(equal) == ["held", "held", "inconclusive"] and equal.status == READING_DEPENDENT
    assert equal.test == "paired t"
    assert equal.comparisons[0].p == pytest.approx(2 * p_paired([3, 3.1]), rel=1e-6)
    assert equal.comparisons[1].p == pytest.approx(p_paired([1, 0.9]), rel=1e-6)
    # lrs 0.3 and 0.1 both ran: fewer than 5, the counts are not decidable (A4); the shortfall from the best lr
    # reads seed 0 alone (TCE's 0.3 has one seed): inconclusive
    near_best = claims["tce_more_lrs_near_best"]
    assert statuses(near_best) == [NOT_MEASURED, NOT_MEASURED, "inconclusive"]
    assert near_best.status == "inconclusive" and "not decidable with 2 lrs" in near_best.evidence
    assert claims["tce_gn_beats_fedavg_femnist"].status == "not run"
    assert claims["tce_close_at_alpha05"].status == "not run"  # α = 0.5 has no runs here


def test_within_two_points_both_ways():
    near = tce.within_reading("x", [0.500, 0.502, 0.501], [0.490, 0.492, 0.491], 2, ("A", "B"))
    assert near.status == "held"  # 1 point apart, tight seeds: each + 2 points is separated above the other
    far = tce.within_reading("x", [0.600, 0.602, 0.601], [0.490, 0.492, 0.491], 2, ("A", "B"))
    assert far.status == "failed"  # B + 2 points is still separated below A


def test_figures_are_written(built):
    folder, _ = built
    for name in ("figure2_cifar10.png", "figure3a.png", "figure4.png"):
        assert (folder / name).read_bytes()[:8] == PNG_SIGNATURE, name
    assert "| alpha | 0.01 |" in (folder / "figure3.md").read_text()


def build_from(root: Path, keys: list[str], partitions: dict, profile: str = "default") -> dict:
    """TCE's claims on the runs `keys` under root, in a profile that builds `partitions`."""
    results = load_results(keys, root / "reports" / "runs", partitions)
    return {
        c.id: c
        for c in tce.build(report_context(root, "tce", results, PUBLISHED, profile, built_partitions=partitions))
    }


def test_femnist_writers_count_as_the_base_point_and_are_named_the_300_writer_subset(tmp_path):
    partitions = write_partitions(tmp_path, {"femnist_natural": None})
    write_tce_run(
        tmp_path, "femnist_ce", "ce", "group", 0.05, [0.7, 0.72], partition="femnist_natural", dataset="femnist"
    )
    build_from(tmp_path, ["femnist_ce"], partitions)
    (row,) = [
        r
        for r in table_rows(tmp_path / "reports" / "tce" / "table1.md", "FEMNIST (the mirror's 300-writer subset)")
        if r[1].strip() == "0.05"
    ]
    assert row[2].strip() == "0.710 ± 0.014 (n=2)" and row[3].strip() == "0.829"
    table2 = (tmp_path / "reports" / "tce" / "table2.md").read_text()
    assert "| FEMNIST (the mirror's 300-writer subset) | FedAvg (GN) |" in table2
    assert "| FEMNIST |" not in table2 and "| femnist |" not in table2


def test_no_table_or_title_calls_a_stand_in_cifar10(tmp_path):
    """Fashion-MNIST trained for CIFAR-10 (the default profile): every row and title names it (issue 51)."""
    partitions = {
        **write_partitions(tmp_path, {"cifar10_dirichlet_alpha01": 0.1}),
        "fmnist_alpha01": {"dataset": "fashion_mnist", "scheme": "dirichlet", "alpha": 0.1},
    }
    scaled = {"partition": {"paper": "cifar10_dirichlet_alpha01", "used": "fmnist_alpha01"}}
    for key, loss in (("ce", "ce"), ("tce", "tce")):
        write_tce_run(
            tmp_path,
            key,
            loss,
            "group",
            0.1,
            [0.6, 0.62, 0.61],
            partition="fmnist_alpha01",
            dataset="fashion_mnist",
            probe=True,
            scaled=scaled,
        )
    claims = build_from(tmp_path, ["ce", "tce"], partitions)
    folder = tmp_path / "reports" / "tce"
    label = "Fashion-MNIST (standing in for CIFAR-10)"
    for name in ("table1.md", "table2.md"):
        text = folder / name
        assert table_rows(text, label), name
        assert not table_rows(text, "CIFAR-10") and not table_rows(text, "cifar10"), name
    assert f"TCE Figure 3: heterogeneity (α) and participation (C), {label}" in (folder / "figure3.md").read_text()
    gn = claims["tce_gn_beats_fedavg_cifar10"]
    assert gn.setting.startswith("Fashion-MNIST standing in for CIFAR-10") and "CIFAR-10 (the paper's)" in gn.text


def test_a_fedavg_that_did_not_converge_leaves_the_margin_claim_inconclusive(tmp_path):
    """FedAvg NC at alpha = 0.01 is no margin at all: inconclusive, not 'failed' for lack of values."""
    partitions = write_partitions(
        tmp_path,
        {"cifar10_dirichlet_alpha01": 0.1, "cifar10_dirichlet_alpha001": 0.01, "cifar10_dirichlet_alpha100": 100.0},
    )
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
    assert (partition["clients"], partition["alpha"], partition["equal_size"], partition["val_fraction"]) == (
        100,
        0.1,
        True,
        0.1,
    )


def test_paper_profile_covers_table1s_grid_and_the_sweeps():
    runs = paper_runs()
    cells = {
        (s["dataset"], s["loss"], s["norm"], s["lr"])
        for s in runs.values()
        if s["partition"].endswith(("alpha01", "natural")) and s["client_fraction"] == 0.1
    }
    lrs = [float(x) for x in PUBLISHED["table1"]["lrs"]]
    for dataset in ("cifar10", "cifar100", "femnist"):
        for loss, norm in (("ce", "group"), ("tce", "group"), ("tce", "batch")):
            assert {lr for d, lo, n, lr in cells if (d, lo, n) == (dataset, loss, norm)} >= set(lrs), (
                dataset,
                loss,
                norm,
            )
    alphas = {PARAMS["partitions"][s["partition"]]["alpha"] for s in runs.values() if s["dataset"] == "cifar10"}
    assert alphas == {0.01, 0.1, 0.2, 0.5, 1.0, 10.0, 100.0}
    probed = {k: s["probe_rounds"] for k, s in runs.items() if s["probe_rounds"]}
    assert probed and all(rounds == [1, 2000, 2800, 4000] for rounds in probed.values())


# ---------------------------------------------------------------- claims on runs built in memory (issue 37)

PAPER_PROBES = {"probe_rounds": {"paper": [1, 2000, 2800, 4000], "used": [1, 20, 28, 40]}}
# The base partition (α = 0.1) as params.yaml has it, where the report reads a run's α.
BASE_PARTITION = {"dataset": "cifar10", "scheme": "dirichlet", "clients": 100, "alpha": 0.1}
FEMNIST_PARTITION = {"dataset": "femnist", "scheme": "natural", "max_clients": 100}


def seed_result(
    key: str,
    seed: int,
    loss: str,
    norm: str,
    lr: float,
    final: float,
    forgetting: dict | None = None,
    probe_rounds=(1, 20, 28, 40),
    scaled: dict | None = None,
    t5: float | None = None,
    dataset: str = "cifar10",
    partition_name: str = "cifar10_dirichlet_alpha01",
    fraction: float = 0.1,
) -> RunResult:
    """One seed of a TCE run as load_results would give it (α = 0.1, C = 0.1, 40 rounds): its last model `final`
    (LM), its test-set mean `t5` (T5; absent: the report falls back to the last model) and a validation curve
    [final - 0.1, final] at rounds 20 and 40 (VAL, its mean, moves with the last model)."""
    settings = {
        "paper": "tce",
        "loss": loss,
        "norm": norm,
        "lr": lr,
        "dataset": dataset,
        "partition": partition_name,
        "client_fraction": fraction,
        "rounds": 40,
        "probe_rounds": list(probe_rounds),
        "scaled": scaled or {},
        "seed": seed,
    }
    summary = {
        "status": "ok",
        "final_test_accuracy": final,
        "mean_local_forgetting": {f"round_{r}": v for r, v in (forgetting or {}).items()},
    }
    if t5 is not None:
        summary["test_set_accuracy_mean"] = t5
    return RunResult(key, seed, settings, summary, [20, 40], [final - 0.1, final])


def seeded(
    key: str,
    loss: str,
    norm: str,
    lr: float,
    finals: list,
    seeds=None,
    forgetting: list | None = None,
    t5: list | None = None,
    partition: dict | None = None,
    **kwargs,
) -> SeededRun:
    """A run over its seeds; `forgetting` is one {round: F_k} per seed, `t5` one test-set mean per seed."""
    seeds = list(seeds if seeds is not None else range(len(finals)))
    return SeededRun(
        key,
        [
            seed_result(
                key,
                s,
                loss,
                norm,
                lr,
                f,
                (forgetting or [None] * len(seeds))[i],
                t5=(t5 or [None] * len(seeds))[i],
                **kwargs,
            )
            for i, (s, f) in enumerate(zip(seeds, finals))
        ],
        partition=partition or BASE_PARTITION,
    )


def p_paired(differences: list[float]) -> float:
    """The paired t-test's two-sided p by hand: t = mean / (sd / sqrt n), p = 2 t.sf(|t|, n - 1)."""
    from scipy.stats import t as t_distribution

    n = len(differences)
    mean = sum(differences) / n
    sd = (sum((d - mean) ** 2 for d in differences) / (n - 1)) ** 0.5
    return float(2 * t_distribution.sf(abs(mean / (sd / n**0.5)), n - 1))


def p_welch(first: list[float], second: list[float]) -> float:
    """Welch's two-sided p by hand: t = (m1 - m2) / sqrt(v1/n1 + v2/n2), Welch-Satterthwaite df."""
    from scipy.stats import t as t_distribution

    def mean_var(values):
        mean = sum(values) / len(values)
        return mean, sum((v - mean) ** 2 for v in values) / (len(values) - 1), len(values)

    (m1, v1, n1), (m2, v2, n2) = mean_var(first), mean_var(second)
    se2 = v1 / n1 + v2 / n2
    df = se2**2 / ((v1 / n1) ** 2 / (n1 - 1) + (v2 / n2) ** 2 / (n2 - 1))
    return float(2 * t_distribution.sf(abs(m1 - m2) / se2**0.5, df))


def p_paired_three_seeds(differences: list[float]) -> float:
    """The paired t-test's two-sided p over 3 seeds by hand: t = mean / (sd / sqrt 3), df = 2."""
    mean = sum(differences) / 3
    sd = (sum((d - mean) ** 2 for d in differences) / 2) ** 0.5
    t = mean / (sd / 3**0.5)
    return 1 - abs(t) / (t * t + 2) ** 0.5


def build_in_memory(root: Path, runs: list[SeededRun], profile: str = "default") -> dict:
    return {c.id: c for c in tce.build(report_context(root, "tce", {r.run: r for r in runs}, PUBLISHED, profile))}


def test_p_by_hand_for_three_seeds():
    # differences 2.0, 2.5, 3.0 points: mean 2.5, sd 0.5, t = 2.5 / (0.5 / sqrt 3) = 8.660, p = 0.01307
    assert p_paired_three_seeds([2.0, 2.5, 3.0]) == pytest.approx(0.01307, abs=1e-5)
    assert p_paired([2.0, 2.5, 3.0]) == pytest.approx(p_paired_three_seeds([2.0, 2.5, 3.0]), rel=1e-9)


# TCE (BN) 40 / 45 / 50 % against FedAvg (BN) 38 / 42.5 / 47 %: 2, 2.5 and 3 points more on the same seed
# (paired: p = 0.013, held) while the seeds' spread (5 and 4.5 points) hides it from Welch's test (p ~ 0.56).
TCE_BN, FEDAVG_BN = [0.40, 0.45, 0.50], [0.38, 0.425, 0.47]


def test_tce_bn_against_fedavg_bn_is_its_own_claim_paired_by_seed(tmp_path):
    claims = build_in_memory(
        tmp_path, [seeded("tce_bn", "tce", "batch", 0.1, TCE_BN), seeded("fedavg_bn", "ce", "batch", 0.1, FEDAVG_BN)]
    )
    claim = claims["tce_bn_beats_fedavg_bn_cifar10"]
    # relabelled (docs/claims-spec.md claim 25): TCE mitigating BN's degradation, not the premise
    assert claim.text.startswith(
        "TCE mitigates BN's degradation: FedAvg + TCE (BN) is more accurate than FedAvg (BN) on CIFAR-10 (the paper's)"
    )
    assert claim.status == "held" and claim.test == "paired t" and claim.seeds == "3 vs 3"
    assert [r.label for r in claim.readings] == ["R1 LM ★", "R2 T5", "R3 VAL"] and statuses(claim) == ["held"] * 3
    (comparison,) = claim.comparisons
    assert comparison.p == pytest.approx(0.01307, abs=1e-4)
    assert (comparison.effect, comparison.sd) == (pytest.approx(2.5), pytest.approx(0.5))  # points
    assert claim.unit == "points"
    assert "helps to mitigate performance degradation typically observed when using BN" in claim.published
    assert "known to yield poor performance [17]" in claim.published
    assert "on the last model's test accuracy (LM, the paper's Table 1)" in claim.evidence
    assert claims["tce_bn_beats_fedavg_bn_cifar100"].status == "not run"


def test_seeds_that_differ_are_not_paired(tmp_path):
    claims = build_in_memory(
        tmp_path,
        [
            seeded("tce_bn", "tce", "batch", 0.1, TCE_BN),
            seeded("fedavg_bn", "ce", "batch", 0.1, FEDAVG_BN, seeds=[0, 1, 3]),
        ],
    )
    claim = claims["tce_bn_beats_fedavg_bn_cifar10"]
    assert claim.test == "Welch t" and claim.status == "inconclusive"  # 2.5 points under a 5-point spread
    assert "seeds 0, 1, 2 vs 0, 1, 3 differ" in claim.evidence
    assert claim.power.startswith("effect +2.5 points")


def test_every_run_tce_claim_carries_its_comparisons_and_a_unit(tmp_path):
    # F_k 0, 0.02, 0.01 apart on seeds 0-2 (not the same on every seed of both: that tie is the exact test's)
    forgetting = [{r: f for r in (1, 20, 28, 40)} for f in (-0.1, -0.12, -0.11)]
    claims = build_in_memory(
        tmp_path,
        [
            seeded("gn", "ce", "group", 0.1, [0.30, 0.33, 0.31], forgetting=forgetting),
            seeded("tce", "tce", "group", 0.1, [0.32, 0.34, 0.35], forgetting=[{r: -0.1 for r in (1, 20, 28, 40)}] * 3),
            seeded("tce_bn", "tce", "batch", 0.1, TCE_BN),
            seeded("fedavg_bn", "ce", "batch", 0.1, FEDAVG_BN),
            seeded("gn_lr03", "ce", "group", 0.3, [0.28, 0.30, 0.29], probe_rounds=()),
            seeded("tce_lr03", "tce", "group", 0.3, [0.31, 0.30, 0.33], probe_rounds=()),
        ],
    )
    run = [c for c in claims.values() if c.status != "not run"]
    assert {c.id for c in run} >= {
        "tce_gn_beats_fedavg_cifar10",
        "tce_bn_beats_fedavg_cifar10",
        "tce_bn_beats_fedavg_bn_cifar10",
        "fedavg_bn_below_fedavg_gn_cifar10",
        "tce_less_forgetting",
        "tce_bn_near_gn",
        "tce_every_lr",
        "tce_more_lrs_near_best",
    }
    for claim in run:
        assert [c for r in claim.readings for c in r.comparisons] and claim.unit, claim.id
        assert claim.test == "paired t", claim.id  # every side ran seeds 0, 1, 2
        assert claim.seeds == "3 vs 3", claim.id
        if any(r.status == "inconclusive" for r in claim.readings):  # what more seeds would decide
            assert "no comparison to measure" not in claim.power, claim.id
        assert claim.setting == "CIFAR-10; the paper's settings", claim.id
        assert any(r.primary for r in claim.readings), claim.id
    for claim in claims.values():  # every claim names its declared readings, measured or not
        assert claim.readings and all(r.name for r in claim.readings), claim.id


# ---------------------------------------------------------------- declared readings: flips and Holm


def test_a_claim_whose_readings_disagree_is_reading_dependent(tmp_path):
    # TCE (GN) 10, 11, 9 points above FedAvg (GN) on the last model (LM) and on VAL (each curve's mean moves with
    # it), but 5, 5.5 and 6 points *below* it on the mean of the last 5 test evaluations (T5: mean -5.5, sd 0.5,
    # t = -19.05, p = 0.0027): held on R1, R3, R4, failed on R2
    claims = build_in_memory(
        tmp_path,
        [
            seeded("ce", "ce", "group", 0.1, [0.30, 0.31, 0.32], t5=[0.35, 0.36, 0.37]),
            seeded("tce", "tce", "group", 0.1, [0.40, 0.42, 0.41], t5=[0.30, 0.305, 0.31]),
        ],
    )
    claim = claims["tce_gn_beats_fedavg_cifar10"]
    assert statuses(claim) == ["held", "failed", "held", "held"]
    assert claim.status == READING_DEPENDENT
    assert claim.readings[1].comparisons[0].p == pytest.approx(p_paired([-5, -5.5, -6]), rel=1e-6)
    assert claim.comparisons[0].p == pytest.approx(p_paired([10, 11, 9]), rel=1e-6)  # the paper's own reading's
    assert claim.evidence.startswith("**R1 LM ★**: held")


def alpha05_runs(tce_finals: list[float], record: Path | None = None) -> list[SeededRun]:
    """The base pair (needed for the sweep's lr) and the α = 0.5 pair; FedAvg at 50 / 52 / 54 % at α = 0.5."""
    partition = {"dataset": "cifar10", "scheme": "dirichlet", "clients": 100, "alpha": 0.5}
    return [
        seeded("ce", "ce", "group", 0.1, [0.30, 0.31, 0.32]),
        seeded("tce", "tce", "group", 0.1, [0.3, 0.3, 0.3]),
        seeded(
            "a05_ce",
            "ce",
            "group",
            0.1,
            [0.50, 0.52, 0.54],
            probe_rounds=(),
            partition=partition,
            partition_name="cifar10_dirichlet_alpha05",
        ),
        seeded(
            "a05_tce",
            "tce",
            "group",
            0.1,
            tce_finals,
            probe_rounds=(),
            partition=partition,
            partition_name="cifar10_dirichlet_alpha05",
        ),
    ]


def test_within_claim_holm_turns_two_comparisons_that_pass_alone_into_an_undecided_reading(tmp_path):
    # N6 at α = 0.5: TCE - FedAvg = -0.7, 0, +0.7 points on seeds 0-2. Within 2 points (R1 LM, R2 T5): TCE + 2 -
    # FedAvg = 1.3, 2, 2.7 and FedAvg + 2 - TCE = 2.7, 2, 1.3, each mean 2, sd 0.7, t = 2 / (0.7 / sqrt 3) = 4.949,
    # p = 1 - 4.949 / sqrt(4.949^2 + 2) = 0.0385 < 0.05 alone; Holm over the 2 equal p's: 2 x 0.0385 = 0.0770,
    # neither held. Within 3 points (R3 LM): 2.3, 3, 3.7 each way, t = 7.423, p = 0.0177, Holm 0.0354: held.
    claims = build_in_memory(tmp_path, alpha05_runs([0.493, 0.52, 0.547]))
    claim = claims["tce_close_at_alpha05"]
    r1 = claim.readings[0]
    raw = p_paired_three_seeds([1.3, 2.0, 2.7])
    assert raw == pytest.approx(0.0385, abs=1e-4) and raw < 0.05
    assert [c.p for c in r1.comparisons] == [pytest.approx(2 * raw, rel=1e-6)] * 2
    assert [c.status for c in r1.comparisons] == ["inconclusive"] * 2 and r1.status == "inconclusive"
    assert "Holm over 2: p = 0.077, inconclusive (was held)" in r1.evidence
    assert [c.p for c in claim.readings[2].comparisons] == [pytest.approx(2 * p_paired_three_seeds([2.3, 3, 3.7]))] * 2
    assert statuses(claim) == ["inconclusive", "inconclusive", "held"] and claim.status == READING_DEPENDENT


def test_the_alpha05_claim_holds_when_close_and_fails_when_apart_and_reports_its_precondition(tmp_path):
    # the partition's record: 60 of 100 clients hold all 10 classes, 40 hold 9 (mean 9.6): most do, as L86 says
    record = tmp_path / "reports" / "partitions" / "cifar10_dirichlet_alpha05" / "label_counts.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"train": [[5] * 10] * 60 + [[5] * 9 + [0]] * 40, "val": []}))
    # 0, 0.2, 0.1 points apart: TCE + 2 - FedAvg = 2, 2.2, 2.1 (t = 36.4), FedAvg + 2 - TCE = 2, 1.8, 1.9 (t = 32.9)
    close = build_in_memory(tmp_path, alpha05_runs([0.500, 0.522, 0.541]))["tce_close_at_alpha05"]
    assert close.status == "held" and statuses(close) == ["held"] * 3
    assert (
        "60 of 100 clients hold all 10 classes in cifar10_dirichlet_alpha05's training split (mean 9.6 classes a "
        "client): met" in close.evidence
    )
    assert [r.label for r in close.readings] == [
        "R1 within 2 points, LM ★",
        "R2 within 2 points, T5",
        "R3 within 3 points, LM",
    ]
    # 5, 5.2, 5.1 points apart: FedAvg + 2 (or + 3) is still separated below TCE on every reading
    apart = build_in_memory(tmp_path / "apart", alpha05_runs([0.55, 0.572, 0.591]))["tce_close_at_alpha05"]
    assert apart.status == "failed" and "not reported: no record" in apart.evidence


def test_the_premise_is_its_own_claim(tmp_path):
    # FedAvg (GN) 2, 2.5 and 3 points above FedAvg (BN) on seeds 0-2 (p = 0.013): held; the other way round, failed
    gn, bn = [0.40, 0.45, 0.50], [0.38, 0.425, 0.47]
    held = build_in_memory(tmp_path, [seeded("gn", "ce", "group", 0.1, gn), seeded("bn", "ce", "batch", 0.1, bn)])
    claim = held["fedavg_bn_below_fedavg_gn_cifar10"]
    assert claim.status == "held" and claim.comparisons[0].p == pytest.approx(p_paired([2, 2.5, 3]), rel=1e-6)
    assert claim.text.startswith(
        "The paper's premise: vanilla FedAvg does poorly with BN, FedAvg (GN) more accurate than FedAvg (BN)"
    )
    assert "typically do poorly when using BN' (§3.2, L78)" in claim.published and "L148" in claim.published
    failed = build_in_memory(
        tmp_path / "b", [seeded("gn", "ce", "group", 0.1, bn), seeded("bn", "ce", "batch", 0.1, gn)]
    )
    assert failed["fedavg_bn_below_fedavg_gn_cifar10"].status == "failed"
    assert held["fedavg_bn_below_fedavg_gn_cifar100"].status == "not run"


def test_bn_near_gn_reads_each_norm_at_its_best_lr(tmp_path):
    # TCE (BN)'s best lr is 0.3 (46 % mean), not its main run's 0.1 (41 %); TCE (GN)'s is 0.1. BN 0.3 + 2 - GN 0.1 =
    # 1.5, 2, 1.5 points (t = 10.0, p = 0.0098); GN + 2 - BN = 2.5, 2, 2.5 (t = 14.0, p = 0.0051); Holm over the 2:
    # 0.0101 and max(0.0101, 0.0098) = 0.0101, both held. At the main run's lr 0.1 BN would be 2-4.5 points short.
    claims = build_in_memory(
        tmp_path,
        [
            seeded("bn", "tce", "batch", 0.1, [0.40, 0.42, 0.41]),
            seeded("bn_lr03", "tce", "batch", 0.3, [0.45, 0.46, 0.47], probe_rounds=()),
            seeded("gn", "tce", "group", 0.1, [0.455, 0.46, 0.475]),
        ],
    )
    claim = claims["tce_bn_near_gn"]
    assert statuses(claim) == ["held"] * 4 and claim.status == "held"
    assert claim.comparisons[0].p == pytest.approx(p_paired_three_seeds([1.5, 2, 1.5]), rel=1e-6)
    assert [c.p for c in claim.readings[1].comparisons] == [pytest.approx(2 * p_paired_three_seeds([2.5, 2, 2.5]))] * 2
    assert (
        "best lr by mean LM (an lr with an NC seed is no candidate): FedAvg + TCE (BN) 0.3; FedAvg + TCE (GN) 0.1"
        in claim.evidence
    )


def test_cifar100_and_the_narrowing_gap_are_not_run_in_the_default_profile_with_why(tmp_path):
    claims = build_in_memory(tmp_path, [seeded("gn", "ce", "group", 0.1, [0.3, 0.31, 0.32])])
    for claim_id in (
        "tce_gn_beats_fedavg_cifar100",
        "tce_bn_beats_fedavg_cifar100",
        "tce_bn_beats_fedavg_bn_cifar100",
        "fedavg_bn_below_fedavg_gn_cifar100",
    ):
        claim = claims[claim_id]
        assert claim.status == "not run" and "docs/claims-spec.md A3" in claim.evidence, claim_id
        assert {r.status for r in claim.readings} == {NOT_MEASURED}, claim_id
    gap = claims["tce_gap_narrows_with_C"]
    assert gap.status == "not run" and "A7" in gap.evidence and "a C = 0.2" in gap.evidence
    assert "A7" not in build_in_memory(tmp_path / "paper", [], "paper")["tce_gap_narrows_with_C"].evidence


# ---------------------------------------------------------------- N7: the gap narrows as C grows


def c_sweep(margins_by_c: dict[float, list[float]]) -> list[SeededRun]:
    """FedAvg (GN) at 50 / 52 / 54 % at every C, TCE (GN) that plus the margin (points) per seed; C = 0.1 the
    main runs."""
    runs = []
    for fraction, margin in margins_by_c.items():
        probes = (1, 20, 28, 40) if fraction == 0.1 else ()
        ce = [0.50, 0.52, 0.54]
        runs += [
            seeded(f"ce_{fraction}", "ce", "group", 0.1, ce, probe_rounds=probes, fraction=fraction),
            seeded(
                f"tce_{fraction}",
                "tce",
                "group",
                0.1,
                [c + m / 100 for c, m in zip(ce, margin)],
                probe_rounds=probes,
                fraction=fraction,
            ),
        ]
    return runs


def test_the_gap_narrows_with_c_on_three_values(tmp_path):
    # margins 6, 7, 8 at C = 0.05; 3, 4, 4.5 at 0.1; 1, 1.5, 2 at 0.2 (points). R1: m(0.05) - m(0.1) = 3, 3, 3.5
    # (t = 19.05), m(0.1) - m(0.2) = 2, 2.5, 2.5 (t = 14.0), Holm over 2: held. R2: with ln C at -ln 2, 0, +ln 2
    # about ln 0.1, the slope is (m(0.2) - m(0.05)) / (2 ln 2), so minus the slope is 5, 5.5, 6 over 2 ln 2 (the
    # t-test does not see the scale): p = p_paired([5, 5.5, 6]).
    claim = build_in_memory(tmp_path, c_sweep({0.05: [6, 7, 8], 0.1: [3, 4, 4.5], 0.2: [1, 1.5, 2]}), "paper")[
        "tce_gap_narrows_with_C"
    ]
    assert statuses(claim) == ["held"] * 3 and claim.status == "held"
    first, second = p_paired([3, 3, 3.5]), p_paired([2, 2.5, 2.5])
    small, large = sorted([first, second])
    assert sorted(c.p for c in claim.readings[0].comparisons) == [
        pytest.approx(2 * small),
        pytest.approx(max(2 * small, large)),
    ]
    assert claim.readings[1].comparisons[0].p == pytest.approx(p_paired([5, 5.5, 6]), rel=1e-6)
    # the gap widening instead (the margins swapped between C = 0.05 and 0.2): failed on every reading
    widening = build_in_memory(tmp_path / "w", c_sweep({0.05: [1, 1.5, 2], 0.1: [3, 4, 4.5], 0.2: [6, 7, 8]}), "paper")[
        "tce_gap_narrows_with_C"
    ]
    assert statuses(widening) == ["failed"] * 3 and widening.status == "failed"


def test_the_margin_at_low_c_reads_c_005_against_c_01_only(tmp_path):
    claim = build_in_memory(tmp_path, c_sweep({0.05: [6, 7, 8], 0.1: [3, 4, 4.5], 0.2: [10, 11, 12]}), "paper")[
        "tce_margin_C"
    ]
    (comparison,) = claim.comparisons  # m(0.05) above m(0.1): 3, 3, 3.5; C = 0.2 is not part of claim 37
    assert claim.status == "held" and comparison.p == pytest.approx(p_paired([3, 3, 3.5]), rel=1e-6)


# ---------------------------------------------------------------- claims 29-30: FEMNIST's 300-writer subset


def femnist_runs(tce_by_lr: dict, fedavg_by_lr: dict) -> list[SeededRun]:
    def run(key, loss, lr, finals):
        return seeded(
            key,
            loss,
            "group",
            lr,
            finals,
            probe_rounds=(),
            partition=FEMNIST_PARTITION,
            dataset="femnist",
            partition_name="femnist_natural",
        )

    return [run(f"tce_{lr}", "tce", lr, v) for lr, v in tce_by_lr.items()] + [
        run(f"ce_{lr}", "ce", lr, v) for lr, v in fedavg_by_lr.items()
    ]


def test_femnist_reads_each_method_at_its_best_lr_on_the_300_writer_subset(tmp_path):
    # TCE best at 0.1 (81 % mean), FedAvg best at 0.1 (76.3 %): 5, 6, 3 points on seeds 0-2 (p = 0.040)
    runs = femnist_runs(
        {0.3: [0.70, 0.71, 0.72], 0.1: [0.80, 0.82, 0.81]}, {0.3: [0.60, 0.62, 0.61], 0.1: [0.75, 0.76, 0.78]}
    )
    claim = build_in_memory(tmp_path, runs)["tce_gn_beats_fedavg_femnist"]
    assert statuses(claim) == ["held"] * 3 and claim.status == "held"
    assert claim.comparisons[0].p == pytest.approx(p_paired([5, 6, 3]), rel=1e-6)
    assert "the mirror's 300-writer subset" in claim.text and "the mirror's 300-writer subset" in claim.setting
    assert (
        "best lr by mean LM (an lr with an NC seed is no candidate): FedAvg + TCE (GN) 0.1; FedAvg (GN) 0.1"
        in claim.evidence
    )
    assert "the paper contradicts itself" in claim.published  # its Table 1 has TCE (GN) 0.814 below FedAvg 0.829
    # FedAvg's best is now 0.3 (85 %), 4, 3, 5 points above TCE's best (0.1): R1 and R2 failed; at lr 0.1 alone
    # TCE is still above (R3 held): reading-dependent
    runs = femnist_runs(
        {0.3: [0.70, 0.71, 0.72], 0.1: [0.80, 0.82, 0.81]}, {0.3: [0.84, 0.85, 0.86], 0.1: [0.75, 0.76, 0.78]}
    )
    claim = build_in_memory(tmp_path / "b", runs)["tce_gn_beats_fedavg_femnist"]
    assert statuses(claim) == ["failed", "failed", "held"] and claim.status == READING_DEPENDENT
    assert "FedAvg + TCE (GN) 0.1; FedAvg (GN) 0.3" in claim.evidence


def test_femnist_not_run_names_the_subset_never_femnist_alone(tmp_path):
    claim = build_in_memory(tmp_path, [])["tce_bn_beats_fedavg_femnist"]
    assert claim.status == "not run" and "300-writer subset" in claim.text and "300-writer subset" in claim.evidence


# ---------------------------------------------------------------- confirmatory samples: every reading on its seeds


def as_sample(run: SeededRun, key: str, confirms: str, claims: list[str]) -> SeededRun:
    for result in run.results:
        result.settings["confirms"] = {"run": confirms, "claims": claims}
    return SeededRun(key, run.results, partition=run.partition)


def test_a_claim_decided_on_its_sample_reads_every_reading_there_and_says_which_are_new_looks(tmp_path):
    # own seeds 0-2 and an lr 0.3 grid; the sample's seeds 8-11: TCE 1, 2, 1.5, 2.5 points above FedAvg on LM and
    # VAL, and on T5 (the sample's planned reading) 0.5, 1, 1.5, 1 points
    claim_id = "tce_gn_beats_fedavg_cifar10"
    runs = {
        "ce": seeded("ce", "ce", "group", 0.1, [0.30, 0.31, 0.32]),
        "tce": seeded("tce", "tce", "group", 0.1, [0.40, 0.42, 0.41]),
        "ce_lr03": seeded("ce_lr03", "ce", "group", 0.3, [0.28, 0.29, 0.30], probe_rounds=()),
        "tce_lr03": seeded("tce_lr03", "tce", "group", 0.3, [0.33, 0.35, 0.34], probe_rounds=()),
    }
    fresh = {
        "ce": ([0.50, 0.51, 0.52, 0.53], [0.50, 0.50, 0.51, 0.52]),
        "tce": ([0.51, 0.53, 0.535, 0.555], [0.505, 0.51, 0.525, 0.53]),
    }
    for key, loss in (("ce", "ce"), ("tce", "tce")):
        lm, t5 = fresh[key]
        runs[f"{key}_confirm"] = as_sample(
            seeded(key, loss, "group", 0.1, lm, seeds=[8, 9, 10, 11], t5=t5), f"{key}_confirm", key, [claim_id]
        )
    claim = {c.id: c for c in build_with_confirmations(tce, report_context(tmp_path, "tce", runs, PUBLISHED))}[claim_id]
    assert claim.sample == "confirmatory sample, seeds 8-11" and claim.seeds == "4 vs 4"
    assert claim.comparisons[0].p == pytest.approx(p_paired([1, 2, 1.5, 2.5]), rel=1e-6)
    r1, r2, r3, r4 = claim.readings
    assert "new look" in r1.evidence and "planned under T5, not LM" in r1.evidence
    assert "new look" not in r2.evidence and r2.comparisons[0].p == pytest.approx(p_paired([0.5, 1, 1.5, 1]))
    assert "planned under T5, not VAL" in r3.evidence and r3.comparisons[0].n_first == 4
    assert r4.status == NOT_MEASURED and "seeds 0-7" in r4.evidence  # A2: the best-lr reading is the runs' own
    assert claim.status == "held"  # every measured reading held on the sample
    assert "Before it, on the runs' own seeds (3 vs 3): held" in claim.evidence


# ---------------------------------------------------------------- claim 34: lrs near the best (Table 2)


def test_the_counts_are_made_where_table2_shows_tce_ahead():
    assert tce.table2_tolerances_where_tce_leads(PUBLISHED) == [3, 5] == list(tce.COUNT_TOLERANCES)  # 2 vs 2: a tie
    claim = tce.near_best_claim({}, PUBLISHED)
    assert claim.status == "not run" and "within 3 points and within 5 points of its best" in claim.text
    assert (
        "Table 2, lrs listed TCE (GN) vs FedAvg: within 2: 2 vs 2, within 3: 5 vs 3, within 5: 6 vs 4"
        in claim.published
    )


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


def counted(tce_lrs: dict, fedavg_lrs: dict, relative: bool = False):
    """The count reading (R1, or R2 relative) on two methods' lr grids (fractions), each at its best lr."""
    by_lr = {
        m: {lr: tce.in_points(v) for lr, v in lr_grid(g).items()}
        for m, g in (("tce_gn", tce_lrs), ("fedavg_gn", fedavg_lrs))
    }
    best = {m: tce.best_lr(g) for m, g in by_lr.items()}
    return tce.count_reading("R1", by_lr, best, relative=relative)


def holm_rejections(pvalues: list[float], alpha: float = 0.05) -> list[bool]:
    """Holm's step-down procedure by its rejection rule (Holm 1979): order the p's; reject while the k-th smallest
    is at most alpha / (m - k + 1); stop at the first that is not."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    rejected = [False] * len(pvalues)
    for k, i in enumerate(order):
        if pvalues[i] > alpha / (len(pvalues) - k):
            break
        rejected[i] = True
    return rejected


def test_more_lrs_near_the_best_at_3_and_5_points_by_hand():
    count = counted(TCE_LRS, FEDAVG_LRS)
    assert count.status == "held"  # 2 > 1 at 3 points, 3 > 2 at 5
    assert "within 3: TCE 2 vs FedAvg 1 of 3 lrs, held" in count.evidence
    assert "within 5: TCE 3 vs FedAvg 2 of 3 lrs, held" in count.evidence
    assert "TCE 0.3 in" in count.evidence and "0.01 out" in count.evidence
    assert {c.test for c in count.comparisons} == {"paired t"}
    assert len(count.comparisons) == 8  # two other lrs per method, two tolerances
    # as decided (an lr that is out is tested as best > lr + x): at 3 points TCE 0.3 +1 (in), 0.01 -0.5 (out:
    # best - (lr + 3) = 0.4, 0.5, 0.6, t = 8.66, p = 0.013, the closest call), FedAvg 0.3 -1 (out), 0.01 -7
    # (out); at 5 points TCE +3, +1.5 (in), FedAvg +1 (in), -5 (out). Holm over the 8: every one is rejected by
    # the step-down rule, so every membership stays decided.
    by_hand = [
        spread(1.0),
        [0.4, 0.5, 0.6],
        [0.9, 1.0, 1.1],
        [6.9, 7.0, 7.1],
        spread(3.0),
        spread(1.5),
        spread(1.0),
        [4.9, 5.0, 5.1],
    ]
    raw = [p_paired(d) for d in by_hand]
    assert holm_rejections(raw) == [True] * 8
    assert [c.status for c in count.comparisons] == ["held"] * 8
    assert all(c.p >= p for c, p in zip(count.comparisons, raw))  # adjusted, never below the raw p
    # by hand, Holm's largest adjusted p: in order of p, t = 121 (6.9, 7, 7.1), 87 (4.9, 5, 5.1), 52 (spread 3),
    # 26 (spread 1.5), then three at t = 17.3 (p = 0.0033: the 1-point spreads) and one at t = 8.66 (p = 0.0131);
    # the first 0.0033 is the 5th smallest, x (8 - 5 + 1) = 4 gives 0.0133, above 0.0131 x 1, so it is the largest
    assert max(c.p for c in count.comparisons) == pytest.approx(4 * p_paired_three_seeds([1.1, 1.0, 0.9]), rel=1e-6)
    assert max(raw) == pytest.approx(0.01307, abs=1e-4)


def test_fewer_lrs_near_the_best_fails():
    count = counted(FEDAVG_LRS, TCE_LRS)
    assert count.status == "failed"  # the methods swapped: 1 < 2 and 2 < 3
    assert "within 3: TCE 1 vs FedAvg 2 of 3 lrs, failed" in count.evidence
    assert "within 5: TCE 2 vs FedAvg 3 of 3 lrs, failed" in count.evidence


def test_a_decided_tie_fails_the_count():
    # FedAvg's 0.01 now 4.4, 4.5, 4.6 points below its best: out at 3, in at 5: 1 and 3 lrs; TCE 2 and 3 -> a
    # tie at 5
    count = counted(TCE_LRS, {**FEDAVG_LRS, 0.01: [0.356, 0.375, 0.394]})
    assert "within 3: TCE 2 vs FedAvg 1 of 3 lrs, held" in count.evidence
    assert "within 5: TCE 3 vs FedAvg 3 of 3 lrs, failed" in count.evidence
    assert count.status == "failed"
    # FedAvg 0.01 + 3 - best: -1.4, -1.5, -1.6 (out: t = 26, p = 0.0015); + 5: 0.6, 0.5, 0.4 (in: t = 8.66, p = 0.013)
    out_at_3, in_at_5 = count.comparisons[3], count.comparisons[7]
    assert out_at_3.test == in_at_5.test == "paired t"
    assert out_at_3.p >= p_paired([1.4, 1.5, 1.6]) and in_at_5.p >= p_paired([0.6, 0.5, 0.4])
    assert out_at_3.status == in_at_5.status == "held"


def test_an_open_lr_leaves_the_count_inconclusive_with_a_power_line():
    # TCE's 0.3 at 45 / 53 / 50 %: + 3 points against 50 / 52 / 54 gives -2, +4, -1 (open); + 5: 0, +6, +1 (open).
    # TCE then has 1-2 lrs at 3 points against FedAvg's 1, and 2-3 at 5 against 2: neither side decided.
    count = counted({**TCE_LRS, 0.3: [0.45, 0.53, 0.50]}, FEDAVG_LRS)
    assert count.status == "inconclusive"
    assert "within 3: TCE 1–2 vs FedAvg 1 of 3 lrs, inconclusive" in count.evidence
    assert "within 5: TCE 2–3 vs FedAvg 2 of 3 lrs, inconclusive" in count.evidence
    claim = claim_of_readings(
        "tce", "x", "t", "p", [dataclasses.replace(count, primary=True)], unit="points", one_failure_fails=False
    )
    assert claim.power.startswith("2 comparisons undecided; the hardest: effect +0.333 points")


def test_relative_tolerance_reads_a_share_of_the_best():
    # TCE's best 50 / 52 / 54 %: within 3 % is 48.5 / 50.44 / 52.38; 0.3 at 48.1 / 50 / 51.9 is 0.4-0.48 points below
    # that on every seed (out), and within 5 % (47.5 / 49.4 / 51.3) 0.6 points above (in)
    count = counted(TCE_LRS, FEDAVG_LRS, relative=True)
    assert "within 3%: TCE" in count.evidence and "within 5%: TCE" in count.evidence
    tce_03_at_3 = count.comparisons[0]  # as decided: the threshold above the lr, 0.4, 0.44, 0.48 points
    assert tce_03_at_3.p >= p_paired([0.4, 0.44, 0.48])


def test_an_lr_without_values_is_out_alone_but_open_after_holm():
    # Six seeds. TCE's 0.3 has no value (diverged) on seeds 0, 2, 4 and sits 20 points below its best on the
    # others: + 3 or + 5 points it is still below on every seed, out by the signed-rank test alone (p = 2/2^6 =
    # 0.03125). FedAvg's 0.3 is 1 point below its best (0.9, 1, 1.1 on seeds 0-2 and again on 3-5): in at both,
    # p < 0.0001. Holm over the 4 memberships: FedAvg's two first (x 4, x 3), then TCE's two equal 0.03125 x 2 =
    # 0.0625: TCE's 0.3 is open after the correction. TCE then has 1-2 lrs, FedAvg 2: still failed (2 does not
    # exceed 2).
    six = list(range(6))
    best_tce, best_fedavg = [50.0, 52.0, 54.0] * 2, [40.0, 42.0, 44.0] * 2
    diverged = [None, 32.0, None, 31.0, None, 35.0]
    by_lr = {
        "tce_gn": {0.1: PerSeed(best_tce, six), 0.3: PerSeed(diverged, six, [True] * 6, "higher")},
        "fedavg_gn": {0.1: PerSeed(best_fedavg, six), 0.3: PerSeed([39.1, 41.0, 42.9] * 2, six)},
    }
    count = tce.count_reading("R1", by_lr, {"tce_gn": 0.1, "fedavg_gn": 0.1})
    assert count.status == "failed"
    assert holm_rejections([2 / 2**6, 2 / 2**6, 1e-5, 1e-5]) == [False, False, True, True]
    assert (
        "within 3: TCE 1–2 vs FedAvg 2 of 2 lrs, failed (TCE 0.3 open (Wilcoxon signed-rank p = 0.0625)"
        in count.evidence
    )


def five_lr_grid(gap: float) -> dict:
    """Both methods at 5 lrs, the k-th `k * gap` points below the method's best (TCE) or 2 k gap (FedAvg), nearer
    on seed 0 and further on seed 2 by 0.1 k points (TCE) or 0.2 k (FedAvg). Mean shortfall over the 5 lrs
    (k = 0-4): TCE 2.2, 2, 1.8 points, FedAvg 4.4, 4, 3.6: TCE's smaller by 2.2, 2, 1.8 (t = 17.3, p = 0.0033)."""

    def grid(step, wobble):
        best = [0.50, 0.52, 0.54]
        return {
            lr: PerSeed([b - k * step / 100 + (s - 1) * wobble * k / 100 for s, b in enumerate(best)], [0, 1, 2])
            for k, lr in enumerate((0.1, 0.3, 0.03, 0.01, 0.007))
        }

    return {("cifar10", "tce_gn"): grid(gap, 0.1), ("cifar10", "fedavg_gn"): grid(2 * gap, 0.2)}


def test_counts_are_decided_from_five_lrs_and_the_shortfall_always():
    claim = tce.near_best_claim(five_lr_grid(1.0), PUBLISHED)
    assert [r.status for r in claim.readings[:2]] != [NOT_MEASURED, NOT_MEASURED]
    assert claim.readings[2].status == "held"  # TCE's lrs sit half as far below its best as FedAvg's
    assert claim.readings[2].comparisons[0].p == pytest.approx(p_paired([2.2, 2.0, 1.8]), rel=1e-6)


def test_the_shortfall_from_the_best_lr_by_hand():
    # TCE: best 0.1 (50, 52, 54); 0.3 2, 2, 1.5 below; 0.01 3, 3.5, 3 below: mean shortfall over the 3 lrs 5/3,
    # 5.5/3, 4.5/3. FedAvg: best 0.1 (40, 42, 44); 0.3 4 below, 0.01 10 below: 14/3 on every seed. TCE - FedAvg =
    # -9/3, -8.5/3, -9.5/3: TCE's smaller, p = p_paired([9, 8.5, 9.5]) (the test does not see the scale)
    tce_grid = {0.1: [0.50, 0.52, 0.54], 0.3: [0.48, 0.50, 0.525], 0.01: [0.47, 0.485, 0.51]}
    fedavg_grid = {0.1: [0.40, 0.42, 0.44], 0.3: [0.36, 0.38, 0.40], 0.01: [0.30, 0.32, 0.34]}
    claim = tce.near_best_claim(
        {("cifar10", "tce_gn"): lr_grid(tce_grid), ("cifar10", "fedavg_gn"): lr_grid(fedavg_grid)}, PUBLISHED
    )
    assert statuses(claim) == [NOT_MEASURED, NOT_MEASURED, "held"] and claim.status == "held"
    assert claim.readings[2].comparisons[0].p == pytest.approx(p_paired([9, 8.5, 9.5]), rel=1e-6)
    assert "not decidable with 3 lrs" in claim.evidence and claim.seeds == "3 vs 3"
    swapped = tce.near_best_claim(
        {("cifar10", "tce_gn"): lr_grid(fedavg_grid), ("cifar10", "fedavg_gn"): lr_grid(tce_grid)}, PUBLISHED
    )
    assert swapped.status == "failed"


def test_within_points_with_seeds_is_paired_and_holm_corrected():
    # A 0.9, 1, 1.1 points above B on seeds 0-2, under a 10-point spread across seeds: A + 2 - B = 2.9, 3, 3.1
    # (t = 52, p = 0.00037), B + 2 - A = 1.1, 1, 0.9 (t = 17.3, p = 0.0033); Holm over 2: 2 x 0.00037 = 0.00074,
    # and max(0.00074, 0.0033) = 0.0033
    near = tce.within_reading(
        "x", PerSeed([0.50, 0.60, 0.70], [0, 1, 2]), PerSeed([0.491, 0.59, 0.689], [0, 1, 2]), 2, ("A", "B")
    )
    assert near.status == "held" and {c.test for c in near.comparisons} == {"paired t"}
    up, down = near.comparisons
    assert up.p == pytest.approx(2 * p_paired([2.9, 3.0, 3.1]), rel=1e-6)
    assert down.p == pytest.approx(p_paired([1.1, 1.0, 0.9]), rel=1e-6)
    # exactly 1 point apart on every seed: sd 0, the exact sign-flip test over 3 seeds, p = 2/2^3 = 0.25 both ways
    # (Holm: 0.5, then max(0.5, 0.25))
    same = tce.within_reading(
        "x", PerSeed([0.50, 0.60, 0.70], [0, 1, 2]), PerSeed([0.49, 0.59, 0.69], [0, 1, 2]), 2, ("A", "B")
    )
    assert same.status == "inconclusive" and {c.test for c in same.comparisons} == {"exact sign-flip"}
    assert [c.p for c in same.comparisons] == [pytest.approx(0.5)] * 2


# ---------------------------------------------------------------- forgetting: Figure 1's round, and the later ones

ROUNDS = (1, 20, 28, 40)
TCE_F = [{r: f for r in ROUNDS} for f in (-0.10, -0.12, -0.11)]


def forgetting_claim(ce_forgetting: list[dict]):
    first = seeded("tce", "tce", "group", 0.1, [0.3] * 3, forgetting=TCE_F, scaled=PAPER_PROBES)
    second = seeded("ce", "ce", "group", 0.1, [0.3] * 3, forgetting=ce_forgetting, scaled=PAPER_PROBES)
    return tce.forgetting_claim_of(first, second, "TCE reduces forgetting", "p")


def ce_below_tce(by: list[float], at: dict | None = None) -> list[dict]:
    """CE's F_k = TCE's minus `by` (one per seed) at every round, except the rounds of `at` {round: per-seed}."""
    at = at or {}
    return [{r: TCE_F[s][r] - at.get(r, by)[s] for r in ROUNDS} for s in range(3)]


def test_less_forgetting_at_figure_1s_round_and_after_holds():
    # CE 4, 5 and 6 points of F_k below TCE on seeds 0-2 at every round: paired, p = 0.013 each; R1 at round 28
    # alone; R2 at 20, 28, 40, Holm over 3 equal p's: 3 x 0.01307 = 0.0392, still held
    claim = forgetting_claim(ce_below_tce([0.04, 0.05, 0.06]))
    assert claim.status == "held" and claim.test == "paired t"
    assert [r.label for r in claim.readings] == [
        "R1 Figure 1's round (28) ★",
        "R2 every probe after round 1 (20, 28, 40)",
    ]
    (comparison,) = claim.comparisons
    assert comparison.p == pytest.approx(0.01307, abs=1e-4)
    assert [c.p for c in claim.readings[1].comparisons] == [pytest.approx(3 * p_paired_three_seeds([4, 5, 6]))] * 3
    assert claim.text.endswith(
        "rounds 28 of 40 (the paper's 2,800) (R1), 20, 28, 40 of 40 (the paper's 2,000, 2,800, 4,000) (R2)"
    )
    # CE per seed: -0.14, -0.17, -0.17 (mean -0.16, sd sqrt(0.0003) = 0.017)
    assert "round 28: TCE -0.110 ± 0.010 (n=3), CE -0.160 ± 0.017 (n=3)" in claim.evidence


def test_figure_1s_round_the_other_way_fails_it():
    # at round 28 CE forgets 4, 5 and 6 points less than TCE on seeds 0-2: TCE - CE = -0.04, -0.05, -0.06
    # (t = -8.66, p = 0.013): R1 failed; R2 failed too (one failure fails the all-of reading, 3 x 0.013 = 0.039)
    claim = forgetting_claim(ce_below_tce([0.04, 0.05, 0.06], {28: [-0.04, -0.05, -0.06]}))
    assert claim.comparisons[0].p == pytest.approx(p_paired([-0.04, -0.05, -0.06]), rel=1e-6)
    assert [c.status for c in claim.readings[1].comparisons] == ["held", "failed", "held"]
    assert statuses(claim) == ["failed", "failed"] and claim.status == "failed"


def test_a_later_round_the_other_way_makes_it_reading_dependent():
    # Figure 1's round (28) as claimed, the last probe (40) the other way: R1 held, R2 failed
    claim = forgetting_claim(ce_below_tce([0.04, 0.05, 0.06], {40: [-0.04, -0.05, -0.06]}))
    assert statuses(claim) == ["held", "failed"] and claim.status == READING_DEPENDENT


def test_round_1_is_reported_but_not_part_of_the_claim():
    # at round 1 the seeds disagree (+1, -1, 0 points): the paper exempts that round ('not as much accuracy to
    # destroy', L204), so the claim is decided on rounds 20-40 alone and says what round 1 gave
    claim = forgetting_claim(ce_below_tce([0.04, 0.05, 0.06], {1: [0.01, -0.01, 0.0]}))
    assert claim.status == "held"
    assert "round 1, reported and not part of the claim" in claim.evidence
    assert claim.evidence.endswith("inconclusive (paired t-test over 3 seeds: p = 1 (not < 0.05))")


# ---------------------------------------------------------------- FEMNIST: the paper against itself


def test_femnist_tce_gn_published_cell_says_the_paper_contradicts_itself():
    gn = tce.femnist_published(PUBLISHED, "tce_gn")
    assert "Table 1 best: 0.814 (lr 0.007) vs FedAvg 0.829 (lr 0.05); the paper contradicts itself" in gn
    assert gn.startswith("'We see a similar performance increase when using the FEMNIST dataset (Table 1)")
    assert "L78" in gn
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


def test_each_measure_reads_its_own_number_and_nc_is_the_worst_under_all():
    run = seeded("r", "ce", "group", 0.1, [0.50, 0.55, 0.12], t5=[0.47, 0.52, 0.40])
    assert list(tce.values_of(run, tce.LM)) == [0.50, 0.55, None]
    assert list(tce.values_of(run, tce.T5)) == [0.47, 0.52, None]
    assert list(tce.values_of(run, tce.VAL)) == [pytest.approx(0.45), pytest.approx(0.50), None]  # [final - 0.1, final]
    assert all(tce.values_of(run, m).worst == (False, False, True) for m in (tce.LM, tce.T5, tce.VAL))


def test_a_stand_in_run_is_placed_at_the_dataset_it_stands_for(tmp_path):
    partitions = {
        "cifar10_dirichlet_alpha01": {"dataset": "cifar10", "scheme": "dirichlet", "alpha": 0.1},
        "fmnist_alpha01": {"dataset": "fashion_mnist", "scheme": "dirichlet", "alpha": 0.1},
    }
    scaled = {"partition": {"paper": "cifar10_dirichlet_alpha01", "used": "fmnist_alpha01"}}
    write_tce_run(
        tmp_path,
        "standin",
        "tce",
        "group",
        0.1,
        [0.6, 0.62],
        partition="fmnist_alpha01",
        dataset="fashion_mnist",
        scaled=scaled,
    )
    run = load_results(["standin"], tmp_path / "reports" / "runs", partitions)["standin"]
    assert run.paper_dataset == "cifar10" and run.settings["dataset"] == "fashion_mnist"
    assert tce.point_of(run) == ("cifar10", "tce_gn", 0.1, 0.1, 0.1)
    assert tce.stand_ins({"standin": run}) == [("Fashion-MNIST", "CIFAR-10")]
    assert tce.trained_label({"standin": run}, "cifar10") == "Fashion-MNIST (standing in for CIFAR-10)"
    assert "on Fashion-MNIST standing in for CIFAR-10" in tce.accuracy_words(run)


def test_femnist_is_the_subset_unless_its_record_says_it_is_no_stand_in(tmp_path):
    assert tce.femnist_is_subset(None) and tce.femnist_is_subset(tmp_path)
    (tmp_path / "femnist.json").write_text(json.dumps({"copy": "FEMNIST, a 300-writer subset", "stand_in": True}))
    assert tce.femnist_is_subset(tmp_path)
    (tmp_path / "femnist.json").write_text(
        json.dumps({"copy": "downloaded from the dataset's own source", "stand_in": False})
    )
    assert not tce.femnist_is_subset(tmp_path) and tce.data_name("femnist", False) == "FEMNIST"


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
    assert claim.comparisons[0].p == pytest.approx(2 / 2**6)
    assert "3 of 6 vs 0 of 6 seeds without a value" in claim.evidence
    three = tmp_path / "three"
    partitions = write_partitions(three, {"cifar10_dirichlet_alpha01": 0.1})
    write_tce_run(three, "ce_lr03", "ce", "group", 0.3, [0.40, 0.41, 0.42])
    write_tce_run(three, "tce_lr03", "tce", "group", 0.3, [0.11, 0.11, 0.37])
    claim = build_from(three, ["ce_lr03", "tce_lr03"], partitions)["tce_every_lr"]
    assert claim.status == "inconclusive" and "6 seeds a side would decide it" in claim.power
