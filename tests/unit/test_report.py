"""The report stage: published numbers against the paper text, and the FedCurv report (Table 1, the grid
search, Figures 1-2, the claims ledger) built from constructed run results."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pytest
import yaml

from pipeline.config import load_params
from pipeline.errors import UserError
from pipeline.papers import PAPERS
from pipeline.report import __main__ as report_main
from pipeline.report import fedcurv
from pipeline.report.common import NO_DIFF, ReportContext, load_results
from support.helpers import PNG_SIGNATURE, REPO, require_paper

PAPERS_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "papers"
FEDCURV_PAPER = PAPERS_DIR / "000_b91613fb63fd152f.txt"
PUBLISHED = yaml.safe_load((Path(fedcurv.__file__).with_name("published.yaml")).read_text())
TARGET_COLUMNS = [("E50", "0.95"), ("E50", "0.9"), ("E50", "0.85"), ("E10", "0.95"), ("E10", "0.9"), ("E10", "0.85")]
TABLE1_KEYS = {
    (algorithm, epochs): f"fedcurv_e{epochs}_{algorithm}"
    for algorithm in ("fedcurv", "fedprox", "fedavg")
    for epochs in (50, 10)
}


# ---------------------------------------------------------------- published.yaml against the paper


def paper_table1_rows() -> list[tuple[str, list[str]]]:
    """(label, six cells) of each row of the paper's Table 1 (tab-separated in the text)."""
    lines = require_paper(FEDCURV_PAPER).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Table 1"))
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("**") or line.startswith("#"):
            break
        if line.startswith(("FedCurv", "FedProx", "FedAvg")):
            cells = line.split("\t")
            assert len(cells) == 7, f"unexpected Table 1 row: {line!r}"
            rows.append((cells[0], [c.strip() for c in cells[1:]]))
    return rows


def test_published_table1_matches_the_paper():
    rows = paper_table1_rows()
    assert [label.split(",")[0] for label, _ in rows] == ["FedCurv", "FedProx", "FedProx", "FedAvg"]
    expected: dict[str, dict] = {}
    for label, cells in rows:
        algorithm = label.split(",")[0].lower()
        for (epochs, target), cell in zip(TARGET_COLUMNS, cells):
            if cell:
                slot = expected.setdefault(algorithm, {}).setdefault(epochs, {})
                assert target not in slot, f"{algorithm} {epochs} {target} given twice in the paper"
                slot[target] = int(cell)
    # Every algorithm has all six numbers (FedProx's E=50 and E=10 halves come from two rows).
    for algorithm, per_epochs in expected.items():
        assert {e: sorted(v) for e, v in per_epochs.items()} == {
            e: sorted(["0.95", "0.9", "0.85"]) for e in ("E50", "E10")
        }, algorithm
    assert PUBLISHED["fedcurv"]["table1"] == expected


def test_published_hyperparameters_match_the_paper_rows():
    rows = paper_table1_rows()
    values = {}
    for label, cells in rows:
        match = re.search(r"\\(lambda|mu) = ([0-9.]+)", label)
        if not match:
            continue
        epochs = [e for (e, _), cell in zip(TARGET_COLUMNS, cells) if cell]
        for e in sorted(set(epochs)):
            values.setdefault(label.split(",")[0].lower(), {})[e] = {match.group(1): float(match.group(2))}
    # FedCurv's single row holds both E; its lambda applies to both.
    assert PUBLISHED["fedcurv"]["hyperparameters"] == values


def test_published_fedprox_mu_matches_the_params_runs():
    params = load_params((Path(__file__).resolve().parents[2] / "params.yaml"))
    hyper = PUBLISHED["fedcurv"]["hyperparameters"]
    for epochs in (50, 10):
        assert params["runs"][f"fedcurv_e{epochs}_fedprox"]["algorithm"]["mu"] == hyper["fedprox"][f"E{epochs}"]["mu"]
        assert (
            params["runs"][f"fedcurv_e{epochs}_fedcurv"]["algorithm"]["lambda"]
            == hyper["fedcurv"][f"E{epochs}"]["lambda"]
        )


# ---------------------------------------------------------------- constructed run results


def write_run(
    root: Path,
    key: str,
    algorithm: dict,
    local_epochs: int,
    reached: dict | None = None,
    status: str = "ok",
    accuracy: list[float] | None = None,
    final_accuracy: float | None = None,
    scaled: dict | None = None,
    paper: str | None = "fedcurv",
    seed: int = 0,
    seconds: float = 1.5,
    extra: dict | None = None,
) -> Path:
    """reports/runs/<key>/seed<seed>/ as the train stage leaves it (metrics, settings, timing, one curve).
    paper=None writes settings without a "paper" key (a researcher's own run)."""
    accuracy = accuracy if accuracy is not None else [0.6, 0.8, 0.9]
    folder = root / "reports" / "runs" / key / f"seed{seed}"
    folder.mkdir(parents=True)
    final = final_accuracy if final_accuracy is not None else (accuracy[-1] if accuracy else None)
    summary = {
        "status": status,
        "diverged": int(status == "diverged"),
        "rounds_completed": len(accuracy),
        "final_accuracy": final,
        "best_accuracy": max(accuracy) if accuracy else None,
        "bytes_down_total": 0,
        "bytes_up_total": 0,
        "rounds_to_accuracy": reached or {},
        "step": len(accuracy),
    }
    (folder / "metrics.json").write_text(json.dumps(summary))
    settings = {
        "algorithm": algorithm,
        "local_epochs": local_epochs,
        "key": key,
        "client_fraction": 1.0,
        "targets": [0.95, 0.9, 0.85],
        "scaled": scaled or {},
        "seed": seed,
    }
    if paper is not None:
        settings["paper"] = paper
    settings.update(extra or {})
    (folder / "settings.json").write_text(json.dumps(settings))
    (folder / "timing.json").write_text(json.dumps({"seconds_total": seconds, "seconds_per_round": []}))
    rows = "".join(f"{step}\t{value}\n" for step, value in enumerate(accuracy, start=1))
    (folder / "test_accuracy.tsv").write_text("step\ttest_accuracy\n" + rows)
    (folder / "forgetting").mkdir()  # may be there; the report ignores it
    return folder


# The paper's λ and μ (published.yaml) at each E: these runs' settings are the paper's.
PAPER_ALGORITHMS = {
    ("fedcurv", 50): {"name": "fedcurv", "lambda": 1.0},
    ("fedcurv", 10): {"name": "fedcurv", "lambda": 1.0},
    ("fedprox", 50): {"name": "fedprox", "mu": 0.00025},
    ("fedprox", 10): {"name": "fedprox", "mu": 1e-5},
    ("fedavg", 50): {"name": "fedavg"},
    ("fedavg", 10): {"name": "fedavg"},
}
ALGORITHMS = {
    "fedcurv": {"name": "fedcurv", "lambda": 1.0},
    "fedprox": {"name": "fedprox", "mu": 0.00025},
    "fedavg": {"name": "fedavg"},
}


def write_table1_run(root: Path, algorithm: str, epochs: int, reached=None, seeds: int = 1, **kwargs) -> str:
    """A Table 1 run at the paper's λ / μ; `reached` is one {target: rounds} for every seed or a list of
    them, one per seed (then `seeds` is its length)."""
    key = TABLE1_KEYS[(algorithm, epochs)]
    per_seed = reached if isinstance(reached, list) else [reached] * seeds
    for seed, reached_by_seed in enumerate(per_seed):
        write_run(root, key, PAPER_ALGORITHMS[(algorithm, epochs)], epochs, reached_by_seed, seed=seed, **kwargs)
    return key


def report_context(
    root: Path, paper: str, results: dict, published: dict, profile: str = "default", built_partitions=()
) -> ReportContext:
    """A paper's report context in a test's folder: its report goes to root/reports/<paper>, the partition
    records are read from root/reports/partitions."""
    return ReportContext(
        profile,
        results,
        published,
        root / "reports" / paper,
        root / "reports" / "partitions",
        frozenset(built_partitions),
    )


def build(root: Path, keys=None, profile: str = "paper"):
    """fedcurv.build on whatever runs exist under root/reports/runs; returns (claims by id, out dir)."""
    runs_dir = root / "reports" / "runs"
    keys = keys if keys is not None else sorted(p.name for p in runs_dir.iterdir()) if runs_dir.is_dir() else []
    context = report_context(root, "fedcurv", load_results(keys, runs_dir), PUBLISHED["fedcurv"], profile)
    return {c.id: c for c in fedcurv.build(context)}, context.out_dir


def read_csv(path: Path) -> list[dict]:
    with open(path) as handle:
        return list(csv.DictReader(handle))


def table1_row(rows: list[dict], algorithm: str) -> dict:
    label = {"fedcurv": "FedCurv", "fedprox": "FedProx", "fedavg": "FedAvg"}[algorithm]
    (row,) = [r for r in rows if r["algorithm"].startswith(label)]
    return row


# ---------------------------------------------------------------- loading: one run, its seeds


def test_load_results_reads_one_seed_as_train_writes_it(tmp_path):
    write_run(tmp_path, "a", ALGORITHMS["fedavg"], 10, {"0.9": 3}, accuracy=[0.5, 0.7, 0.91])
    results = load_results(["a", "absent"], tmp_path / "reports" / "runs")
    assert list(results) == ["a"]
    run = results["a"]
    assert (run.run, run.seeds, run.n) == ("a", [0], 1)
    (seed,) = run.results
    assert seed.rounds == [1, 2, 3] and seed.accuracy == [0.5, 0.7, 0.91]
    assert seed.rounds_to(0.9) == 3 and seed.rounds_to(0.95) is None
    assert run.rounds_to(0.9) == [3] and run.rounds_to(0.95) == [None]
    assert run.accuracy_means(k=2) == [pytest.approx(100 * (0.7 + 0.91) / 2)]
    assert run.accuracy_means(at=2, k=1) == [pytest.approx(70.0)]
    assert run.accuracy_means(at=7) == [None]  # never evaluated round 7
    assert seed.seconds == 1.5


def test_a_loaded_run_knows_its_seed_folders_and_its_partitions_settings(tmp_path):
    from pipeline.errors import UserError

    runs_dir = tmp_path / "reports" / "runs"
    for key, partition in (("a", "p"), ("b", "absent")):
        write_run(tmp_path, key, ALGORITHMS["fedavg"], 10, extra={"partition": partition})
    results = load_results(["a", "b"], runs_dir, {"p": {"clients": 3}})
    assert results["a"].results[0].folder == runs_dir / "a" / "seed0"  # where a report reads the seed's other files
    assert results["a"].partition_settings("a test run") == {"clients": 3}
    with pytest.raises(UserError, match="partition 'absent', which a test run names, is not under partitions"):
        results["b"].partition_settings("a test run")


def test_load_results_groups_the_seeds_of_a_run(tmp_path):
    for seed, accuracy in zip((0, 1, 2), ([0.5, 0.9], [0.6, 0.8], [0.7, float("nan")])):
        write_run(
            tmp_path,
            "b",
            ALGORITHMS["fedavg"],
            10,
            accuracy=accuracy,
            seed=seed,
            status="diverged" if seed == 2 else "ok",
        )
    run = load_results(["b"], tmp_path / "reports" / "runs")["b"]
    assert run.seeds == [0, 1, 2] and run.n == 3 and run.missing_seeds == []  # by name: what is on disk
    # the run lists seed 3 and has results for the others: a comparison would silently lose it, so refused
    with pytest.raises(UserError, match=r"no results for seed 3, which the run lists \(resolved/b.json\)"):
        load_results({"b": [0, 1, 2, 3]}, tmp_path / "reports" / "runs")
    assert run.diverged_count == 1 and run.diverged
    assert run.final_accuracies() == [0.9, 0.8, None]
    assert run.accuracy_means(k=1) == [pytest.approx(90.0), pytest.approx(80.0), None]


def test_load_results_takes_only_the_seeds_each_run_lists(tmp_path):
    for seed in (0, 1, 2):
        write_run(tmp_path, "c", ALGORITHMS["fedavg"], 10, seed=seed)
    write_run(tmp_path, "d", ALGORITHMS["fedavg"], 10, seed=5)
    wanted = {"c": [0, 2], "d": [5], "e": [0]}  # each run's seeds (resolved/<run>.json); e is not trained
    results = load_results(wanted, tmp_path / "reports" / "runs")
    assert sorted(results) == ["c", "d"]
    assert results["c"].seeds == [0, 2]  # seed 1 is on disk but not in this grid
    assert results["d"].seeds == [5]


# ---------------------------------------------------------------- FedCurv Table 1


def test_table1_cells_with_one_seed_ours_paper_diff(tmp_path):
    write_table1_run(tmp_path, "fedcurv", 50, {"0.95": 40, "0.9": 5, "0.85": 3})
    write_table1_run(tmp_path, "fedavg", 50, {"0.9": 9, "0.85": 22})
    write_table1_run(tmp_path, "fedprox", 50, {}, status="diverged", accuracy=[0.6, float("nan")])
    write_table1_run(tmp_path, "fedcurv", 10, {"0.95": 99, "0.9": 35, "0.85": 27})
    # fedcurv_e10_fedprox and fedcurv_e10_fedavg are not written: "not run".
    _, out = build(tmp_path)
    rows = read_csv(out / "table1.csv")
    assert [r["algorithm"].split(",")[0] for r in rows] == ["FedCurv", "FedProx", "FedAvg"]
    assert len(rows[0]) == 1 + 2 * 3 * 3

    curv = table1_row(rows, "fedcurv")
    assert (curv["E=50 95% ours"], curv["E=50 95% paper"], curv["E=50 95% diff"]) == ("40 (n=1)", "38", "2")
    assert (curv["E=50 90% ours"], curv["E=50 90% paper"], curv["E=50 90% diff"]) == ("5 (n=1)", "9", "-4")
    assert (curv["E=50 85% ours"], curv["E=50 85% paper"], curv["E=50 85% diff"]) == ("3 (n=1)", "6", "-3")
    assert [curv[f"E=10 {t} diff"] for t in ("95%", "90%", "85%")] == ["0", "0", "0"]

    avg = table1_row(rows, "fedavg")
    # Never reached 95 %: NC, the paper's number beside it, no difference.
    assert (avg["E=50 95% ours"], avg["E=50 95% paper"], avg["E=50 95% diff"]) == ("NC", "76", "NC")
    assert (avg["E=50 90% ours"], avg["E=50 90% paper"], avg["E=50 90% diff"]) == ("9 (n=1)", "30", "-21")
    assert (avg["E=50 85% ours"], avg["E=50 85% diff"]) == ("22 (n=1)", "0")
    # A run that was never made: "not run", the paper's number still shown.
    assert (avg["E=10 90% ours"], avg["E=10 90% paper"], avg["E=10 90% diff"]) == ("not run", "51", "")

    prox = table1_row(rows, "fedprox")
    # Diverged: NC at every target.
    assert [prox[f"E=50 {t} ours"] for t in ("95%", "90%", "85%")] == ["NC", "NC", "NC"]
    assert [prox[f"E=50 {t} paper"] for t in ("95%", "90%", "85%")] == ["140", "22", "16"]
    assert [prox[f"E=10 {t} ours"] for t in ("95%", "90%", "85%")] == ["not run"] * 3
    assert [prox[f"E=10 {t} paper"] for t in ("95%", "90%", "85%")] == ["115", "46", "33"]

    # The markdown table holds the same cells.
    markdown = (out / "table1.md").read_text()
    assert markdown.startswith("# FedCurv Table 1")
    assert "| FedCurv, λ = 1 | 40 (n=1) | 38 | 2 | 5 (n=1) | 9 | -4 |" in markdown
    assert "not run" in markdown and "NC" in markdown
    assert "profile: paper" in markdown
    assert "4 run(s) with 1 seed(s)" in markdown


def test_table1_cells_with_three_seeds_are_mean_sd_n(tmp_path):
    write_table1_run(tmp_path, "fedcurv", 50, [{"0.9": 5, "0.85": 3}, {"0.9": 7, "0.85": 3}, {"0.9": 9, "0.85": 4}])
    write_table1_run(tmp_path, "fedavg", 50, [{"0.9": 20}, {}, {"0.9": 30}])
    _, out = build(tmp_path)
    rows = read_csv(out / "table1.csv")
    curv = table1_row(rows, "fedcurv")
    assert curv["E=50 90% ours"] == "7.0 ± 2.0 (n=3)"  # 5, 7, 9
    assert curv["E=50 90% diff"] == "-2.0"  # 7 − 9
    assert curv["E=50 85% ours"] == "3.3 ± 0.6 (n=3)"
    assert curv["E=50 95% ours"] == "NC (n=3)"
    avg = table1_row(rows, "fedavg")
    # One seed of three never reached 90 %: said so, no difference.
    assert avg["E=50 90% ours"] == "NC on 1 of 3 (others 25.0 ± 7.1 (n=2))"
    assert avg["E=50 90% diff"] == "NC"
    assert "2 run(s) with 3 seed(s)" in (out / "table1.md").read_text()


def test_table1_has_no_diff_where_the_setting_is_not_the_papers(tmp_path):
    scaled = {"local_epochs": {"paper": 50, "used": 5}, "model": {"paper": "cnn_mnist", "used": "mlp_200"}}
    write_table1_run(tmp_path, "fedcurv", 50, {"0.9": 5}, scaled=scaled)
    # Not scaled, but another μ than the paper's at E = 10 (1e-5): no difference either.
    write_run(tmp_path, "fedcurv_e10_fedprox", {"name": "fedprox", "mu": 0.00025}, 10, {"0.9": 40})
    _, out = build(tmp_path, profile="default")
    rows = read_csv(out / "table1.csv")
    curv = table1_row(rows, "fedcurv")
    assert (curv["E=50 90% ours"], curv["E=50 90% paper"], curv["E=50 90% diff"]) == ("5 (n=1)", "9", NO_DIFF)
    prox = table1_row(rows, "fedprox")
    assert (prox["E=10 90% ours"], prox["E=10 90% diff"]) == ("40 (n=1)", NO_DIFF)
    markdown = (out / "table1.md").read_text()
    assert "local_epochs 50 -> 5, model cnn_mnist -> mlp_200" in markdown
    assert "profile: default" in markdown
    assert f"{NO_DIFF} = our setting differs" in markdown


def test_a_scaled_block_that_repeats_the_papers_value_is_not_called_a_scaling(tmp_path):
    # A scaled block may repeat the paper's value (one that overrides an inherited scaling, say).
    scaled = {"local_epochs": {"paper": 50, "used": 50}, "model": {"paper": "cnn_mnist", "used": "mlp_200"}}
    write_table1_run(tmp_path, "fedcurv", 50, {"0.9": 5}, scaled=scaled)
    _, out = build(tmp_path, profile="default")
    markdown = (out / "table1.md").read_text()
    assert "scaled (default profile) for 1 run(s): model cnn_mnist -> mlp_200\n" in markdown
    assert "local_epochs 50 -> 50" not in markdown


def test_a_run_whose_scaled_block_only_repeats_the_papers_values_is_compared_with_the_paper(tmp_path):
    write_table1_run(tmp_path, "fedcurv", 50, {"0.9": 5}, scaled={"local_epochs": {"paper": 50, "used": 50}})
    _, out = build(tmp_path, profile="default")
    curv = table1_row(read_csv(out / "table1.csv"), "fedcurv")
    assert (curv["E=50 90% ours"], curv["E=50 90% paper"], curv["E=50 90% diff"]) == ("5 (n=1)", "9", "-4")


def test_table1_labels_come_from_the_runs_settings(tmp_path):
    write_run(tmp_path, "fedcurv_e50_fedprox", {"name": "fedprox", "mu": 0.00025}, 50, {"0.9": 5})
    write_run(tmp_path, "fedcurv_e10_fedprox", {"name": "fedprox", "mu": 0.003}, 10, {"0.9": 5})
    write_run(tmp_path, "fedcurv_e50_fedcurv", {"name": "fedcurv", "lambda": 0.5}, 50, {"0.9": 5})
    _, out = build(tmp_path)
    labels = [r["algorithm"] for r in read_csv(out / "table1.csv")]
    assert labels[1] == "FedProx, μ = 0.00025 (E = 50) / μ = 0.003 (E = 10)"
    # FedCurv's E = 10 run is absent: the paper's λ, marked so.
    assert labels[0] == "FedCurv, λ = 0.5 (E = 50) / λ = 1 (E = 10, the paper’s: not run)"
    assert labels[2] == "FedAvg"


def test_table1_ignores_runs_of_other_papers_and_of_none(tmp_path):
    write_run(tmp_path, "fedcurv_e50_fedcurv", ALGORITHMS["fedcurv"], 50, {"0.9": 5}, paper="importance")
    write_run(tmp_path, "fedcurv_e50_fedavg", ALGORITHMS["fedavg"], 50, {"0.9": 5}, paper=None)
    _, out = build(tmp_path)
    rows = read_csv(out / "table1.csv")
    assert table1_row(rows, "fedcurv")["E=50 90% ours"] == "not run"
    assert table1_row(rows, "fedavg")["E=50 90% ours"] == "not run"


# The grid search's "best" (by the mean over seeds, separated or a tie) and the FedCurv claims' verdicts
# (paired by seed, the runs' ceiling, the gain ratio) are tested in test_report_fedcurv.py, on runs built
# in memory.


def table1_runs(root: Path, rounds_to_90: dict) -> None:
    """The six Table 1 runs, each seed's 5-round moving mean reaching 90 % at the given round (>= 5; None:
    never); a list gives one number per seed. A seed reaching it at r: 0.5 up to round r - 5, then 0.9
    (the claims read the moving mean from the curve)."""
    for (algorithm, epochs), rounds in rounds_to_90.items():
        per_seed = rounds if isinstance(rounds, list) else [rounds]
        for seed, r in enumerate(per_seed):
            curve = [0.6, 0.8, 0.9] if r is None else [0.5] * (r - 5) + [0.9] * 5
            write_run(
                root,
                TABLE1_KEYS[(algorithm, epochs)],
                PAPER_ALGORITHMS[(algorithm, epochs)],
                epochs,
                {} if r is None else {"0.9": r - 4},
                accuracy=curve,
                seed=seed,
            )


# ---------------------------------------------------------------- figures


def test_figures_are_pngs(tmp_path):
    write_table1_run(tmp_path, "fedcurv", 50, {"0.9": 2}, accuracy=[0.7, 0.9, 0.95])
    write_table1_run(tmp_path, "fedavg", 50, {}, accuracy=[0.6, 0.7, 0.8], seeds=3)
    write_table1_run(tmp_path, "fedprox", 50, {}, status="diverged", accuracy=[0.6])
    write_table1_run(tmp_path, "fedcurv", 10, {"0.9": 3})
    _, out = build(tmp_path)
    from PIL import Image

    for name in ("figure1.png", "figure2.png"):
        path = out / name
        assert path.read_bytes()[:8] == PNG_SIGNATURE, name
        with Image.open(path) as image:
            image.verify()
        with Image.open(path) as image:
            assert image.format == "PNG" and image.size == (600, 400), name


def test_figure_legends_come_from_the_runs_settings(tmp_path, monkeypatch):
    drawn = {}
    monkeypatch.setattr(
        fedcurv, "plot_curves", lambda path, title, series, *args, **kwargs: drawn.setdefault(path.name, series)
    )
    # The E = 10 FedProx run used μ = 1e-5 (not E = 50's 0.00025), with three seeds, one diverged.
    for seed in range(3):
        write_run(
            tmp_path,
            "fedcurv_e10_fedprox",
            {"name": "fedprox", "mu": 1e-5},
            10,
            {"0.9": 4},
            seed=seed,
            status="diverged" if seed == 1 else "ok",
        )
    write_run(tmp_path, "fedcurv_e10_fedcurv", {"name": "fedcurv", "lambda": 0.5}, 10, {"0.9": 4})
    write_run(tmp_path, "fedcurv_e50_fedprox", {"name": "fedprox", "mu": 0.00025}, 50, {"0.9": 4})
    build(tmp_path)
    assert [label for label, _ in drawn["figure2.png"]] == ["FedCurv, λ = 0.5", "FedProx, μ = 1e-05"]
    assert [label for label, _ in drawn["figure1.png"]] == ["FedProx, μ = 0.00025"]
    from pipeline.report.common import mean_curve, seeds_label

    prox = drawn["figure2.png"][1][1]
    assert seeds_label(prox) == " (n=3, 1 of 3 diverged)"
    rounds, mean, low, high = mean_curve(prox)
    assert rounds == [1, 2, 3] and mean == pytest.approx([0.6, 0.8, 0.9])


def test_figures_without_any_run(tmp_path):
    _, out = build(tmp_path, keys=[])
    for name in ("figure1.png", "figure2.png"):
        assert (out / name).read_bytes()[:8] == PNG_SIGNATURE


# ---------------------------------------------------------------- python -m pipeline.report as a whole


def test_every_paper_has_its_report_module_and_its_published_numbers_under_its_key_and_no_other_key():
    assert list(PUBLISHED) == list(PAPERS)
    assert all(callable(report_main.report_module(paper).build) for paper in PAPERS)


def write_grid(root: Path, runs: dict[str, list[int]]) -> None:
    """grid.yaml as the profile stage writes it (one entry per run) and each run's resolved settings as the
    resolve stage does (here only what the report reads of them: the run's seeds)."""
    entries = {run: {"run": run, "dataset": "mnist", "partition": "p", "algorithm": "fedavg"} for run in runs}
    (root / "grid.yaml").write_text(
        yaml.safe_dump(
            {
                "grid": {
                    "profile": "paper",
                    "datasets": ["mnist"],
                    "partitions": {"p": {"dataset": "mnist"}},
                    "runs": entries,
                }
            }
        )
    )
    (root / "resolved").mkdir(exist_ok=True)
    for run, seeds in runs.items():
        (root / "resolved" / f"{run}.json").write_text(json.dumps({"run": run, "seeds": seeds}))


def test_report_main_writes_index_and_claims_ledger(workdir, monkeypatch):
    # params.yaml's checks belong to pipeline.config; the report only needs the profile from it.
    monkeypatch.setattr(report_main, "load_checked_params", lambda: {"profile": "paper"})
    # E = 50: FedCurv separated below FedAvg (held), FedProx separated above it (failed), no seed reached 95 %
    # (inconclusive); E = 10: FedCurv and FedAvg one seed each (inconclusive); FedProx never run (not run).
    # FedProx − FedAvg per seed: 5, 6, 4 rounds (not the same on every seed, which 3 seeds cannot decide):
    # mean 5, sd 1, t = 5 / (1 / sqrt(3)) = 8.66, p = 2·P(T_2 > 8.66) = 1 − 8.66/sqrt(77) = 0.0131.
    table1_runs(
        workdir,
        {
            ("fedcurv", 50): [5, 6, 5],
            ("fedavg", 50): [9, 10, 11],
            ("fedprox", 50): [14, 16, 15],
            ("fedcurv", 10): [None],
            ("fedavg", 10): [7],
        },
    )
    write_run(workdir, "my_idea", {"name": "fedavg"}, 3, paper=None, seed=0, seconds=2.0)
    write_run(
        workdir,
        "my_idea",
        {"name": "fedavg"},
        3,
        paper=None,
        seed=1,
        seconds=3.0,
        status="diverged",
        accuracy=[0.6, float("nan")],
        final_accuracy=0.6,
    )
    runs = {key: [0, 1, 2] for key in TABLE1_KEYS.values()}
    runs.update({"fedcurv_e10_fedcurv": [0], "fedcurv_e10_fedavg": [0], "my_idea": [0, 1]})
    write_grid(workdir, runs)
    report_main.main([])

    ledger = json.loads((workdir / "reports" / "claims.json").read_text())
    assert ledger["claims"]["fedcurv"] == {
        "fedcurv-e50-90-faster-than-fedavg": "held",
        "fedcurv-e50-95-faster-than-fedavg": "inconclusive",
        "fedprox-e50-90-faster-than-fedavg": "failed",
        "fedprox-e50-95-slower-than-fedavg": "inconclusive",
        "fedcurv-e10-90-faster-than-fedprox": "not run",
        "fedcurv-e10-90-faster-than-fedavg": "inconclusive",
        "gain-larger-at-e50": "inconclusive",
        "fedprox-stiffness-costs-accuracy": "not run",  # needs fedcurv_e10_fedprox too
    }
    # Importance From Agent's, TCE's and FedWAvg's claims are all "not run": none of their runs is in this grid.
    not_run = sum(len(ledger["claims"][paper]) for paper in ("importance", "tce", "fedwavg"))
    for paper in ("importance", "tce", "fedwavg"):
        assert set(ledger["claims"][paper].values()) == {"not run"} and ledger["claims"][paper], paper
    assert (
        ledger["held"],
        ledger["failed"],
        ledger["reading_dependent"],
        ledger["inconclusive"],
        ledger["not_run"],
    ) == (1, 1, 0, 4, 2 + not_run)

    claims_md = (workdir / "reports" / "claims.md").read_text()
    # The seeds written here name no machine: the ledger says it cannot show one regeneration trained them.
    assert "**Trained by** (not shown to be one regeneration)" in claims_md
    assert ledger["trained_by"] == {"cpu_kinds": 1, "commits": 1, "seeds_without_machine": 13}  # 3 × 3 + 1 + 1 + 2
    assert (
        f": 1 held, 1 failed, 0 reading-dependent, 4 inconclusive, {2 + not_run} not run; decided 2 of 6" in claims_md
    )
    from pipeline.report.seeds import RULE

    assert claims_md.count("Welch") >= 1 and claims_md.count(RULE) == 1  # the rule, stated once
    (curv_row,) = [
        line
        for line in claims_md.splitlines()
        if line.startswith("| fedcurv | At E = 50, FedCurv reaches 90 % in fewer rounds than FedAvg |")
    ]
    assert "| 9 vs 30 | 3 vs 3 | paired t | **held** |" in curv_row
    # The readings column: FedAvg − FedCurv per seed 4, 4, 6 rounds on FC and MM alike: mean 14/3, sd 2/sqrt(3),
    # t = (14/3) / ((2/sqrt(3)) / sqrt(3)) = 7, p = 1 − 7/sqrt(51) = 0.0198.
    assert "R1 FC(0.90) ★: held (p = 0.0198); R2 MM(0.90): held (p = 0.0198)" in curv_row
    assert "| 1 vs 1 | — | **inconclusive** |" in claims_md
    from scipy.stats import t as student_t

    t = 5 / (1 / math.sqrt(3))
    expected_p = 2 * student_t.sf(t, 2)
    assert expected_p == pytest.approx(1 - t / math.sqrt(t * t + 2)) and expected_p == pytest.approx(0.0131, abs=1e-4)
    (fedprox_row,) = [
        line
        for line in claims_md.splitlines()
        if line.startswith("| fedcurv | At E = 50, FedProx reaches 90 % in fewer rounds than FedAvg |")
    ]
    assert "| 3 vs 3 | paired t | **failed** |" in fedprox_row
    assert "paired t-test over 3 seeds: p = 0.0131" in fedprox_row

    index = (workdir / "reports" / "README.md").read_text()
    for name in ("table1.md", "grid_search.md", "figure1.png", "figure2.png"):
        assert f"(fedcurv/{name})" in index
    # "trained on": these hand-made runs record no dataset
    assert "| fedcurv_e50_fedcurv | fedcurv | — | 3 (0, 1, 2) | ok | 0.9000 ± 0.0000 (n=3) |" in index
    assert "| fedcurv_e10_fedcurv | fedcurv | — | 1 (0) | ok | 0.9000 (n=1) |" in index
    # A researcher's own run: no paper, listed like any other; a diverged seed makes its accuracy NC.
    assert (
        "| my_idea | — | — | 2 (0, 1) | 1 of 2 diverged | NC (1 of 2 diverged) | NC (1 of 2 diverged) | 2–3 | 5.0 |"
        in index
    )
    assert "0.6000" not in index  # the diverged seed's last accuracy is never shown as its final accuracy
    assert "fedcurv_e10_fedprox" not in index.split("## Runs")[1]  # never run: no row
    seeds_part = index.split("## Seeds")[1].split("## Runs")[0]
    assert "- 3 seeds (0, 1, 2), 3 run(s): fedcurv_e50_fedavg, fedcurv_e50_fedcurv, fedcurv_e50_fedprox" in seeds_part
    assert "- 2 seeds (0, 1), 1 run(s): my_idea" in seeds_part
    assert "- 1 seed (0), 2 run(s): fedcurv_e10_fedavg, fedcurv_e10_fedcurv" in seeds_part


def test_a_diverged_seed_is_marked_worst_only_where_its_divergence_explains_the_missing_value():
    """accuracy_means(at) marks a diverged seed as its worst outcome only if it diverged by round `at`; rounds
    to a target on the moving mean keep a round reached before the divergence."""
    from pipeline.report.common import RunResult, SeededRun

    nan = float("nan")
    ok = RunResult("x", 0, {}, {"status": "ok"}, [1, 2, 3, 4, 5, 6], [0.9] * 6)
    late = RunResult("x", 1, {}, {"status": "diverged"}, [1, 2, 3, 4, 5, 6], [0.9] * 5 + [nan])
    early = RunResult("x", 2, {}, {"status": "diverged"}, [1, 2], [0.9, nan])
    run = SeededRun("x", [ok, late, early])
    at_five = run.accuracy_means(at=5)
    # Seed 1 diverged after round 5: its missing mean (the old convention: a diverged seed has none) is
    # unknown, not worst; seed 2 diverged at round 2: worst.
    assert list(at_five)[0] == pytest.approx(90.0) and at_five.worst == (False, False, True)
    assert at_five.better == "higher" and run.accuracy_means().worst == (False, True, True)
    # Seed 1's 5-round moving mean reached 0.85 at round 5, before it diverged: that round stands.
    assert list(run.rounds_to_moving(0.85)) == [5, 5, None]
    assert run.rounds_to_moving(0.85).worst == (False, False, True)


def test_the_ledger_headline_counts_raw_and_after_holm_by_hand():
    """Four claims run (p = 0.01 held, 0.03 failed, 0.04 held, 0.2 inconclusive) and one not run. Holm by
    hand over the four: 0.01·4 = 0.04, 0.03·3 = 0.09, max(0.04·2, 0.09) = 0.09, 0.2·1 = 0.2; at α = 0.05 only
    the first keeps its verdict, the failed and the second held become inconclusive."""
    from types import SimpleNamespace

    from pipeline.report.readings import ledger_holm

    claims = [
        SimpleNamespace(id=i, status=s, p=p)
        for i, s, p in (
            ("a", "held", 0.01),
            ("b", "failed", 0.03),
            ("c", "held", 0.04),
            ("d", "inconclusive", 0.2),
            ("e", "not run", None),
        )
    ]
    corrected = ledger_holm(claims)
    assert {i: (round(p, 6), s) for i, (p, s) in corrected.items()} == {
        "a": (0.04, "held"),
        "b": (0.09, "inconclusive"),
        "c": (0.09, "inconclusive"),
        "d": (0.2, "inconclusive"),
    }
    assert report_main.totals_line(claims, corrected) == (
        "**Totals (5 claims, 4 run in this profile)**: 2 held, 1 failed, 0 reading-dependent, 1 inconclusive, "
        "1 not run; decided 3 of 4 (75%). **After Holm across the ledger** (α = 0.05 over the 4 claims with a "
        "p-value): 1 held, 0 failed, 0 reading-dependent, 3 inconclusive, 1 not run; decided 1 of 4."
    )


def test_after_holm_a_reading_dependent_claim_keeps_only_the_readings_whose_own_p_survives():
    """Worked by hand: a held (p = 0.001); b reading-dependent (a held reading at p = 0.04, an inconclusive one
    at 0.3: claim p 0.3); c reading-dependent (held at 0.002, failed at 0.003, inconclusive at 0.3: claim p
    0.3). Holm over the ledger's [0.001, 0.3, 0.3]: sorted 0.001·3 = 0.003, then max(0.3·2, 0.003) = 0.6, 0.6.
    Claim b's held reading (p = 0.04) put in its place: [0.001, 0.04, 0.3] gives it max(0.04·2, 0.003) =
    0.08, not below 0.05: inconclusive, and b (inconclusive + inconclusive) is inconclusive after Holm.
    Claim c's readings: held at 0.002 in its place, [0.001, 0.3, 0.002]: sorted 0.001·3 = 0.003,
    0.002·2 = 0.004 -> 0.004, kept; failed at 0.003: 0.003·2 = 0.006, kept: c stays reading-dependent."""
    from types import SimpleNamespace

    from pipeline.report.readings import Reading, ledger_holm
    from pipeline.report.seeds import Comparison

    def read(name, status, p):
        effect = {"held": 1.0, "failed": -1.0}.get(status, 0.0)
        return Reading(name, status, [Comparison(status, "", 3, 3, p=p, effect=effect)], "")

    b = [read("R1", "held", 0.04), read("R2", "inconclusive", 0.3)]
    c = [read("R1", "held", 0.002), read("R2", "failed", 0.003), read("R3", "inconclusive", 0.3)]
    claims = [
        SimpleNamespace(id="a", status="held", p=0.001, readings=[]),
        SimpleNamespace(id="b", status="reading-dependent", p=0.3, readings=b),
        SimpleNamespace(id="c", status="reading-dependent", p=0.3, readings=c),
    ]
    corrected = ledger_holm(claims)
    assert {i: s for i, (_, s) in corrected.items()} == {"a": "held", "b": "inconclusive", "c": "reading-dependent"}
    assert corrected["a"][0] == pytest.approx(0.003) and corrected["b"][0] == pytest.approx(0.6)


# TCE's partition without its dataset: 100 equal Dirichlet(0.1) clients, 10 % of each held out.
EQUAL_DIRICHLET = {
    "scheme": "dirichlet",
    "clients": 100,
    "alpha": 0.1,
    "equal_size": True,
    "val_fraction": 0.1,
    "seed": 0,
}


@pytest.mark.parametrize(
    "ours, theirs, cell",
    [
        # MNIST in 96 x 2 one-label blocks: 306 is the largest block size that cuts 192 blocks from the class
        # counts (5923 // 306 + 6742 // 306 + ... = 19 + 22 + 19 + 20 + 19 + 17 + 19 + 20 + 19 + 19 = 193;
        # at 307 only 191), so a client holds 612; the stand-in's blocks of 100, 200.
        (
            {
                "dataset": "mnist",
                "scheme": "shards",
                "clients": 96,
                "shards_per_client": 2,
                "shard_size": 100,
                "seed": 0,
            },
            {"dataset": "mnist", "scheme": "shards", "clients": 96, "shards_per_client": 2, "seed": 0},
            [("200 training samples a client", "612")],
        ),
        # 100 equal Dirichlet clients, 10 % held out: Fashion-MNIST's 60,000 -> 600 -> 540; CIFAR-10's 450.
        (
            {**EQUAL_DIRICHLET, "dataset": "fashion_mnist"},
            {**EQUAL_DIRICHLET, "dataset": "cifar10"},
            [("540 training samples a client", "450")],
        ),
        # The same clients and sizes: nothing to say (a shard size alone is not a difference).
        (
            {
                "dataset": "mnist",
                "scheme": "shards",
                "clients": 100,
                "shards_per_client": 2,
                "shard_size": 300,
                "seed": 0,
            },
            {"dataset": "mnist", "scheme": "shards", "clients": 100, "shards_per_client": 2, "seed": 0},
            [],
        ),
    ],
    ids=["fedcurv-shards", "tce-dirichlet", "same"],
)
def test_a_stand_in_partition_is_worded_as_clients_and_training_samples_a_client(ours, theirs, cell):
    from pipeline.report.readings import partition_changes

    assert partition_changes(ours, theirs) == cell


def test_a_setting_the_paper_does_not_give_is_not_set_beside_ours_as_the_papers():
    from types import SimpleNamespace

    from pipeline.report.readings import setting_of

    run = SimpleNamespace(
        scaled={"rounds": {"paper": 200, "used": 30}, "lr": {"paper": 0.01, "used": 0.05}},
        settings={"paper": "fedcurv", "dataset": "mnist"},
        paper_partition=None,
        partition=None,
    )
    assert setting_of([run]).cell() == (
        "MNIST; 30 rounds (paper: not given; our paper profile: 200 rounds); lr 0.05 (paper: lr 0.01)"
    )


def test_every_look_names_a_claim_of_the_ledger_and_holds_the_keys_the_report_reads():
    """pipeline/report/looks.yaml: each key a claim id of reports/claims.json, each entry's keys and values
    of the allowed kinds, a date, a commit of this repository's history, `planned` null only on a first look."""
    import datetime
    import json
    import subprocess

    looks = yaml.safe_load((REPO / "pipeline" / "report" / "looks.yaml").read_text())
    ids = {i for paper in json.loads((REPO / "reports" / "claims.json").read_text())["claims"].values() for i in paper}
    assert set(looks) <= ids, sorted(set(looks) - ids)
    verdicts = {"held", "failed", "reading-dependent", "inconclusive"}
    for claim, entries in looks.items():
        for n, entry in enumerate(entries or []):
            assert set(entry) == {"commit", "date", "kind", "what", "verdict", "planned"}, (claim, entry)
            assert entry["kind"] in {"stand-in", "seeds", "sample", "reading"}, (claim, entry)
            assert entry["verdict"] in verdicts, (claim, entry)
            assert isinstance(entry["date"], datetime.date) and isinstance(entry["what"], str), (claim, entry)
            assert (entry["planned"] is None) == (n == 0), (claim, entry)
            found = subprocess.run(
                ["git", "cat-file", "-e", f"{entry['commit']}^{{commit}}"], cwd=REPO, capture_output=True
            )
            assert found.returncode == 0, (claim, entry["commit"])
