"""The TCE report: runs placed by their settings, Tables 1-2, the sweeps and the claims, built from
constructed run results; and the paper profile's TCE runs against the settings the paper and its
authors' code give."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pipeline.config import derive_grid
from pipeline.report import tce
from pipeline.report.common import load_results
from pipeline.runs import resolve_run

from test_report import PNG_SIGNATURE, write_run

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = yaml.safe_load((ROOT / "pipeline" / "report" / "published.yaml").read_text())["tce"]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())


def write_partition(root: Path, name: str, alpha: float | None) -> None:
    """The partition in params.yaml (where the report reads alpha) and its label counts on disk."""
    params_file = root / "params.yaml"
    params = yaml.safe_load(params_file.read_text()) if params_file.is_file() else {"partitions": {}}
    params["partitions"][name] = {"dataset": "cifar10", "scheme": "dirichlet" if alpha else "natural", "clients": 100,
                                  **({"alpha": alpha} if alpha else {})}
    params_file.write_text(yaml.safe_dump(params))
    folder = root / "data" / "partitions" / name
    folder.mkdir(parents=True)
    counts = [[45 + (c + k) % 3 for k in range(10)] for c in range(100)]
    (folder / "label_counts.json").write_text(json.dumps({"train": counts, "val": counts}))


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
def built(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, alpha in (("cifar10_dirichlet_alpha001", 0.01), ("cifar10_dirichlet_alpha01", 0.1), ("cifar10_dirichlet_alpha05", 0.5), ("cifar10_dirichlet_alpha100", 100.0)):
        write_partition(tmp_path, name, alpha)
    # Main runs: TCE (GN) above FedAvg (GN) on every seed, and less forgetting.
    write_tce_run(tmp_path, "main_ce", "ce", "group", 0.1, [0.30, 0.31, 0.32], probe=True, forgetting=[-0.3, -0.32, -0.31])
    write_tce_run(tmp_path, "main_tce", "tce", "group", 0.1, [0.40, 0.41, 0.42], probe=True, forgetting=[-0.1, -0.12, -0.11])
    write_tce_run(tmp_path, "main_tce_bn", "tce", "batch", 0.1, [0.25, 0.26, 0.27], probe=True)
    # The lr grid: one NC seed (near chance) and a lower lr.
    write_tce_run(tmp_path, "ce_lr03", "ce", "group", 0.3, [0.11])
    write_tce_run(tmp_path, "tce_lr03", "tce", "group", 0.3, [0.35])
    # The alpha sweep, two seeds each: a margin of 0.2 at 0.01, 0.01 at 100.
    write_tce_run(tmp_path, "a001_ce", "ce", "group", 0.1, [0.20, 0.21], partition="cifar10_dirichlet_alpha001")
    write_tce_run(tmp_path, "a001_tce", "tce", "group", 0.1, [0.40, 0.41], partition="cifar10_dirichlet_alpha001")
    write_tce_run(tmp_path, "a100_ce", "ce", "group", 0.1, [0.50, 0.52], partition="cifar10_dirichlet_alpha100")
    write_tce_run(tmp_path, "a100_tce", "tce", "group", 0.1, [0.51, 0.53], partition="cifar10_dirichlet_alpha100")
    results = load_results(["main_ce", "main_tce", "main_tce_bn", "ce_lr03", "tce_lr03", "a001_ce", "a001_tce",
                            "a100_ce", "a100_tce"], tmp_path / "reports" / "runs")
    claims = tce.build(results, PUBLISHED, tmp_path / "reports" / "tce", "default")
    return tmp_path / "reports" / "tce", {c.id: c for c in claims}


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
    assert claims["tce_gn_beats_fedavg_cifar10"].status == "held"
    assert claims["tce_bn_beats_fedavg_cifar10"].status == "failed"  # 0.26 vs 0.31 on every seed
    assert claims["tce_gn_beats_fedavg_cifar100"].status == "not run"
    assert claims["tce_less_forgetting"].status == "held"
    assert "after round 28" in claims["tce_less_forgetting"].evidence  # Figure 1 = 70 % through 40 rounds
    assert claims["tce_margin_alpha"].status == "held"  # 0.2 vs 0.01, two seeds each
    assert claims["tce_margin_C"].status == "not run"
    # lr 0.1: held (3 vs 3); lr 0.3: one seed each -> inconclusive; BN at 0.1: failed -> failed overall
    assert claims["tce_every_lr"].status == "failed"
    assert claims["tce_bn_near_gn"].status == "failed"  # 0.26 + 2 points is still below 0.41 on every seed
    assert claims["tce_equal_at_high_alpha"].status == "inconclusive"  # two seeds, 1 point apart: not separated
    assert claims["tce_more_lrs_near_best"].status == "inconclusive"  # lr 0.3 has one seed
    assert "cannot decide" in claims["tce_more_lrs_near_best"].evidence
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


def build_from(root: Path, keys: list[str]) -> dict:
    results = load_results(keys, root / "reports" / "runs")
    return {c.id: c for c in tce.build(results, PUBLISHED, root / "reports" / "tce", "default")}


def test_femnist_writers_count_as_the_base_point(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_partition(tmp_path, "femnist_natural", None)
    write_tce_run(tmp_path, "femnist_ce", "ce", "group", 0.05, [0.7, 0.72], partition="femnist_natural",
                  dataset="femnist")
    build_from(tmp_path, ["femnist_ce"])
    rows = [line for line in (tmp_path / "reports" / "tce" / "table1.md").read_text().splitlines()
            if line.startswith("| femnist | 0.05 |")]
    assert rows and "0.710 ± 0.014 (n=2) | 0.829" in rows[0]


def test_a_fedavg_that_did_not_converge_leaves_the_margin_claim_inconclusive(tmp_path, monkeypatch):
    """FedAvg NC at alpha = 0.01 is no margin at all: inconclusive, not 'failed' for lack of values."""
    monkeypatch.chdir(tmp_path)
    for name, alpha in (("cifar10_dirichlet_alpha01", 0.1), ("cifar10_dirichlet_alpha001", 0.01),
                        ("cifar10_dirichlet_alpha100", 100.0)):
        write_partition(tmp_path, name, alpha)
    write_tce_run(tmp_path, "main_ce", "ce", "group", 0.1, [0.30, 0.31], probe=True)
    write_tce_run(tmp_path, "main_tce", "tce", "group", 0.1, [0.40, 0.41], probe=True)
    write_tce_run(tmp_path, "a001_ce", "ce", "group", 0.1, [0.05, 0.06], partition="cifar10_dirichlet_alpha001")
    write_tce_run(tmp_path, "a001_tce", "tce", "group", 0.1, [0.40, 0.41], partition="cifar10_dirichlet_alpha001")
    write_tce_run(tmp_path, "a100_ce", "ce", "group", 0.1, [0.50, 0.52], partition="cifar10_dirichlet_alpha100")
    write_tce_run(tmp_path, "a100_tce", "tce", "group", 0.1, [0.51, 0.53], partition="cifar10_dirichlet_alpha100")
    claims = build_from(tmp_path, ["main_ce", "main_tce", "a001_ce", "a001_tce", "a100_ce", "a100_tce"])
    assert claims["tce_margin_alpha"].status == "inconclusive"
    assert "no margin" in claims["tce_margin_alpha"].evidence


def test_margins_pair_seeds_by_seed_number(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_partition(tmp_path, "cifar10_dirichlet_alpha01", 0.1)
    write_tce_run(tmp_path, "first", "tce", "group", 0.1, [0.5, 0.9], seeds=[0, 2])
    write_tce_run(tmp_path, "second", "ce", "group", 0.1, [0.3, 0.4, 0.6])
    results = load_results(["first", "second"], tmp_path / "reports" / "runs")
    assert [round(m, 6) for m in tce.margins(results["first"], results["second"])] == [0.2, 0.3]


def test_two_runs_at_one_point_are_an_error(tmp_path, monkeypatch):
    from pipeline.errors import UserError

    monkeypatch.chdir(tmp_path)
    write_partition(tmp_path, "cifar10_dirichlet_alpha01", 0.1)
    write_tce_run(tmp_path, "one", "ce", "group", 0.3, [0.5])
    write_tce_run(tmp_path, "two", "ce", "group", 0.3, [0.6])
    with pytest.raises(UserError, match="runs one and two both sit at cifar10, FedAvg \\(GN\\), lr 0.3"):
        build_from(tmp_path, ["one", "two"])


def test_published_best_reads_the_column_maximum():
    assert tce.published_best(PUBLISHED, "cifar10", "tce_gn") == "0.859 ± 0.004 (lr 0.03)"
    assert tce.published_best(PUBLISHED, "cifar100", "fedavg_gn").startswith("0.486 ± 0.036 (lr 0.07)")


# ---------------------------------------------------------------- the paper profile's settings

def paper_runs() -> dict:
    params = {**PARAMS, "profile": "paper"}
    return {key: resolve_run(params, key) for key in derive_grid(params)["run_ids"] if key.startswith("tce_")}


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
