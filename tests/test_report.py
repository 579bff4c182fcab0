"""The report stage: published numbers against the paper text, and the FedCurv report (Table 1, the grid
search, Figures 1-2, the claims ledger) built from constructed run results."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import yaml

from pipeline.config import derive_grid
from pipeline.report import __main__ as report_main
from pipeline.report import fedcurv
from pipeline.report.common import load_results

PAPERS_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "papers"
FEDCURV_PAPER = PAPERS_DIR / "000_b91613fb63fd152f.txt"
PUBLISHED = yaml.safe_load((Path(fedcurv.__file__).with_name("published.yaml")).read_text())
TARGET_COLUMNS = [("E50", "0.95"), ("E50", "0.9"), ("E50", "0.85"), ("E10", "0.95"), ("E10", "0.9"), ("E10", "0.85")]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TABLE1_KEYS = {(algorithm, epochs): f"fedcurv_e{epochs}_{algorithm}"
               for algorithm in ("fedcurv", "fedprox", "fedavg") for epochs in (50, 10)}


# ---------------------------------------------------------------- published.yaml against the paper

def paper_table1_rows() -> list[tuple[str, list[str]]]:
    """(label, six cells) of each row of the paper's Table 1 (tab-separated in the text)."""
    if not FEDCURV_PAPER.is_file():
        pytest.skip(f"paper text not found: {FEDCURV_PAPER}")
    lines = FEDCURV_PAPER.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Table 1"))
    rows = []
    for line in lines[start + 1:]:
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
        assert {e: sorted(v) for e, v in per_epochs.items()} == {e: sorted(["0.95", "0.9", "0.85"])
                                                                 for e in ("E50", "E10")}, algorithm
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
    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    hyper = PUBLISHED["fedcurv"]["hyperparameters"]
    for epochs in (50, 10):
        assert params["runs"][f"fedcurv_e{epochs}_fedprox"]["algorithm"]["mu"] == hyper["fedprox"][f"E{epochs}"]["mu"]
        assert (params["runs"][f"fedcurv_e{epochs}_fedcurv"]["algorithm"]["lambda"]
                == hyper["fedcurv"][f"E{epochs}"]["lambda"])


# ---------------------------------------------------------------- constructed run results

def write_run(root: Path, key: str, algorithm: dict, local_epochs: int, reached: dict | None = None,
              status: str = "ok", accuracy: list[float] | None = None, final_accuracy: float | None = None,
              scaled: dict | None = None, paper: str = "fedcurv") -> None:
    """reports/runs/<key>/ as pipeline.train.write_outputs leaves it (metrics, settings, one curve)."""
    accuracy = accuracy if accuracy is not None else [0.6, 0.8, 0.9]
    folder = root / "reports" / "runs" / key
    (folder / "plots" / "metrics").mkdir(parents=True)
    final = final_accuracy if final_accuracy is not None else (accuracy[-1] if accuracy else None)
    summary = {"status": status, "diverged": int(status == "diverged"), "rounds_completed": len(accuracy),
               "final_accuracy": final, "best_accuracy": max(accuracy) if accuracy else None,
               "bytes_down_total": 0, "bytes_up_total": 0, "rounds_to_accuracy": reached or {},
               "step": len(accuracy)}
    (folder / "metrics.json").write_text(json.dumps(summary))
    settings = {"paper": paper, "algorithm": algorithm, "local_epochs": local_epochs, "key": key,
                "targets": [0.95, 0.9, 0.85], "scaled": scaled or {}}
    (folder / "settings.json").write_text(json.dumps(settings))
    (folder / "timing.json").write_text(json.dumps({"seconds_total": 1.5, "seconds_per_round": []}))
    rows = "".join(f"{step}\t{value}\n" for step, value in enumerate(accuracy, start=1))
    (folder / "plots" / "metrics" / "test_accuracy.tsv").write_text("step\ttest_accuracy\n" + rows)


ALGORITHMS = {"fedcurv": {"name": "fedcurv", "lambda": 1.0}, "fedprox": {"name": "fedprox", "mu": 0.00025},
              "fedavg": {"name": "fedavg"}}


def write_table1_run(root: Path, algorithm: str, epochs: int, reached: dict | None = None, **kwargs) -> str:
    key = TABLE1_KEYS[(algorithm, epochs)]
    write_run(root, key, ALGORITHMS[algorithm], epochs, reached, **kwargs)
    return key


def build(root: Path, keys=None, profile: str = "paper"):
    """fedcurv.build on whatever runs exist under root/reports/runs; returns (claims by id, out dir)."""
    runs_dir = root / "reports" / "runs"
    keys = keys if keys is not None else sorted(p.name for p in runs_dir.iterdir()) if runs_dir.is_dir() else []
    results = load_results(keys)
    out = Path("reports") / "fedcurv"
    claims = fedcurv.build(results, PUBLISHED["fedcurv"], out, profile)
    return {c.id: c for c in claims}, root / out


def read_csv(path: Path) -> list[dict]:
    with open(path) as handle:
        return list(csv.DictReader(handle))


def table1_row(rows: list[dict], algorithm: str) -> dict:
    label = {"fedcurv": "FedCurv", "fedprox": "FedProx", "fedavg": "FedAvg"}[algorithm]
    (row,) = [r for r in rows if r["algorithm"].startswith(label)]
    return row


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_load_results_reads_what_train_writes(workdir):
    write_run(workdir, "a", ALGORITHMS["fedavg"], 10, {"0.9": 3}, accuracy=[0.5, 0.7, 0.91])
    results = load_results(["a", "absent"])
    assert list(results) == ["a"]
    assert results["a"].rounds == [1, 2, 3]
    assert results["a"].accuracy == [0.5, 0.7, 0.91]
    assert results["a"].rounds_to(0.9) == 3
    assert results["a"].rounds_to(0.95) is None


def test_table1_cells_ours_paper_diff(workdir):
    write_table1_run(workdir, "fedcurv", 50, {"0.95": 40, "0.9": 5, "0.85": 3})
    write_table1_run(workdir, "fedavg", 50, {"0.9": 9, "0.85": 22})
    write_table1_run(workdir, "fedprox", 50, {}, status="diverged", accuracy=[0.6, float("nan")])
    write_table1_run(workdir, "fedcurv", 10, {"0.95": 99, "0.9": 35, "0.85": 27})
    # fedcurv_e10_fedprox and fedcurv_e10_fedavg are not written: "not run".
    _, out = build(workdir)
    rows = read_csv(out / "table1.csv")
    assert [r["algorithm"].split(",")[0] for r in rows] == ["FedCurv", "FedProx", "FedAvg"]
    assert len(rows[0]) == 1 + 2 * 3 * 3

    curv = table1_row(rows, "fedcurv")
    assert (curv["E=50 95% ours"], curv["E=50 95% paper"], curv["E=50 95% diff"]) == ("40", "38", "2")
    assert (curv["E=50 90% ours"], curv["E=50 90% paper"], curv["E=50 90% diff"]) == ("5", "9", "-4")
    assert (curv["E=50 85% ours"], curv["E=50 85% paper"], curv["E=50 85% diff"]) == ("3", "6", "-3")
    assert [curv[f"E=10 {t} diff"] for t in ("95%", "90%", "85%")] == ["0", "0", "0"]

    avg = table1_row(rows, "fedavg")
    # Never reached 95 %: NC, the paper's number beside it, no difference.
    assert (avg["E=50 95% ours"], avg["E=50 95% paper"], avg["E=50 95% diff"]) == ("NC", "76", "NC")
    assert (avg["E=50 90% ours"], avg["E=50 90% paper"], avg["E=50 90% diff"]) == ("9", "30", "-21")
    assert (avg["E=50 85% ours"], avg["E=50 85% diff"]) == ("22", "0")
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
    assert "| FedCurv, λ = 1.0 | 40 | 38 | 2 | 5 | 9 | -4 |" in markdown
    assert "not run" in markdown and "NC" in markdown
    assert "profile: paper" in markdown


def test_table1_notes_what_the_default_profile_scaled(workdir):
    scaled = {"local_epochs": {"paper": 50, "used": 5}, "model": {"paper": "cnn_mnist", "used": "mlp_200"}}
    write_table1_run(workdir, "fedcurv", 50, {"0.9": 5}, scaled=scaled)
    _, out = build(workdir, profile="default")
    markdown = (out / "table1.md").read_text()
    assert "local_epochs 50 -> 5, model cnn_mnist -> mlp_200" in markdown
    assert "profile: default" in markdown


def test_table1_ignores_runs_of_other_papers(workdir):
    write_run(workdir, "fedcurv_e50_fedcurv", ALGORITHMS["fedcurv"], 50, {"0.9": 5}, paper="importance")
    _, out = build(workdir)
    curv = table1_row(read_csv(out / "table1.csv"), "fedcurv")
    assert curv["E=50 90% ours"] == "not run"


def test_grid_search_marks_fewest_rounds_to_90(workdir):
    # E = 10 lambda: 0.1 reaches 90 % in 12, 1.0 in 8 (best), 10 never.
    write_run(workdir, "g_l01", {"name": "fedcurv", "lambda": 0.1}, 10, {"0.9": 12})
    write_run(workdir, "fedcurv_e10_fedcurv", {"name": "fedcurv", "lambda": 1.0}, 10, {"0.9": 8})
    write_run(workdir, "g_l10", {"name": "fedcurv", "lambda": 10.0}, 10, {})
    # E = 10 mu: a tie at 7 rounds, broken by the higher final accuracy (mu = 1e-4).
    write_run(workdir, "g_m1em6", {"name": "fedprox", "mu": 1e-6}, 10, {"0.9": 7}, final_accuracy=0.91)
    write_run(workdir, "g_m1em4", {"name": "fedprox", "mu": 1e-4}, 10, {"0.9": 7}, final_accuracy=0.93)
    # E = 50 (the paper's E, trained scaled to 5): neither mu reached 90 % -> no best.
    scaled = {"local_epochs": {"paper": 50, "used": 5}}
    write_run(workdir, "g50_m1", {"name": "fedprox", "mu": 0.00025}, 5, {}, scaled=scaled)
    write_run(workdir, "g50_m2", {"name": "fedprox", "mu": 0.0025}, 5, {}, scaled=scaled)
    # FedAvg has nothing to search.
    write_run(workdir, "fedcurv_e10_fedavg", ALGORITHMS["fedavg"], 10, {"0.9": 3})
    _, out = build(workdir)
    rows = read_csv(out / "grid_search.csv")
    assert [r["run"] for r in rows] == ["g50_m1", "g50_m2", "g_l01", "fedcurv_e10_fedcurv", "g_l10",
                                        "g_m1em6", "g_m1em4"]
    marks = {r["run"]: r[""] for r in rows}
    assert marks == {"g50_m1": "", "g50_m2": "", "g_l01": "", "fedcurv_e10_fedcurv": "best", "g_l10": "",
                     "g_m1em6": "", "g_m1em4": "best"}
    by_run = {r["run"]: r for r in rows}
    assert by_run["g50_m1"]["E"] == "E=50"
    assert by_run["g_l10"]["rounds to 90%"] == "NC"
    assert by_run["g_l01"]["value"] == "lambda = 0.1"
    assert by_run["g_m1em4"]["value"] == "mu = 0.0001"
    assert by_run["g_m1em4"]["final accuracy"] == "0.9300"
    assert "fedcurv_e10_fedavg" not in by_run


def table1_runs(root: Path, rounds_to_90: dict) -> None:
    """The six Table 1 runs, each reaching 90 % in the given rounds (None: never)."""
    for (algorithm, epochs), rounds in rounds_to_90.items():
        write_table1_run(root, algorithm, epochs, {} if rounds is None else {"0.9": rounds})


def test_claims_held(workdir):
    table1_runs(workdir, {("fedcurv", 50): 5, ("fedavg", 50): 9, ("fedprox", 50): 7,
                          ("fedcurv", 10): 6, ("fedprox", 10): 8, ("fedavg", 10): 7})
    claims, _ = build(workdir)
    assert claims["fedcurv-e50-90-faster-than-fedavg"].status == "held"
    assert "fedcurv_e50_fedcurv: 5, fedcurv_e50_fedavg: 9 rounds to 90%" in \
        claims["fedcurv-e50-90-faster-than-fedavg"].evidence
    assert claims["fedcurv-e50-90-faster-than-fedavg"].published == "9 vs 30"
    assert claims["fedprox-e50-90-faster-than-fedavg"].status == "held"
    assert claims["fedcurv-e10-90-faster-than-fedprox"].status == "held"
    assert claims["fedcurv-e10-90-faster-than-fedavg"].status == "held"
    # Gains: 9/5 = 1.80 at E = 50 vs 7/6 = 1.17 at E = 10.
    gain = claims["gain-larger-at-e50"]
    assert gain.status == "held"
    assert "gains 1.80x vs 1.17x" in gain.evidence
    assert gain.published == "3.33x vs 1.46x"  # 30/9 and 51/35


def test_claims_failed(workdir):
    table1_runs(workdir, {("fedcurv", 50): 9, ("fedavg", 50): 5, ("fedprox", 50): 5,
                          ("fedcurv", 10): 4, ("fedprox", 10): 8, ("fedavg", 10): 8})
    claims, _ = build(workdir)
    assert claims["fedcurv-e50-90-faster-than-fedavg"].status == "failed"
    assert claims["fedprox-e50-90-faster-than-fedavg"].status == "failed"  # a tie is not "fewer"
    assert claims["fedcurv-e10-90-faster-than-fedavg"].status == "held"
    # Gains: 5/9 = 0.56 at E = 50 vs 8/4 = 2.00 at E = 10.
    gain = claims["gain-larger-at-e50"]
    assert gain.status == "failed"
    assert "gains 0.56x vs 2.00x" in gain.evidence


def test_claims_never_reached_counts_as_slowest(workdir):
    table1_runs(workdir, {("fedcurv", 50): 20, ("fedavg", 50): None, ("fedprox", 50): None,
                          ("fedcurv", 10): None, ("fedprox", 10): 8, ("fedavg", 10): None})
    claims, _ = build(workdir)
    # Only FedCurv reached 90 %: it was faster.
    assert claims["fedcurv-e50-90-faster-than-fedavg"].status == "held"
    # Neither reached it: inconclusive.
    assert claims["fedprox-e50-90-faster-than-fedavg"].status == "inconclusive"
    assert "neither reached it" in claims["fedprox-e50-90-faster-than-fedavg"].evidence
    assert claims["fedcurv-e10-90-faster-than-fedavg"].status == "inconclusive"
    # Only the rival reached it: failed.
    assert claims["fedcurv-e10-90-faster-than-fedprox"].status == "failed"
    # A ratio needs all four counts.
    assert claims["gain-larger-at-e50"].status == "inconclusive"


def test_claims_95_percent_order(workdir):
    write_table1_run(workdir, "fedcurv", 50, {"0.95": 30})
    write_table1_run(workdir, "fedavg", 50, {"0.95": 60})
    write_table1_run(workdir, "fedprox", 50, {"0.95": 90})
    claims, _ = build(workdir)
    assert claims["fedcurv-e50-95-faster-than-fedavg"].status == "held"
    # The paper's claim that FedProx reaches 95 % *later* than FedAvg: FedAvg first holds it.
    assert claims["fedprox-e50-95-slower-than-fedavg"].status == "held"
    assert claims["fedprox-e50-95-slower-than-fedavg"].published == "140 vs 76"


def test_claims_not_run(workdir):
    write_table1_run(workdir, "fedcurv", 50, {"0.9": 5})
    claims, _ = build(workdir)
    claim = claims["fedcurv-e50-90-faster-than-fedavg"]
    assert claim.status == "not run"
    assert "fedcurv_e50_fedavg" in claim.evidence and "fedcurv_e50_fedcurv" not in claim.evidence
    assert claims["gain-larger-at-e50"].status == "not run"
    assert all(c.status == "not run" for c in claims.values())
    assert len(claims) == 7


def test_figures_are_pngs(workdir):
    write_table1_run(workdir, "fedcurv", 50, {"0.9": 2}, accuracy=[0.7, 0.9, 0.95])
    write_table1_run(workdir, "fedavg", 50, {}, accuracy=[0.6, 0.7, 0.8])
    write_table1_run(workdir, "fedprox", 50, {}, status="diverged", accuracy=[0.6])
    write_table1_run(workdir, "fedcurv", 10, {"0.9": 3})
    _, out = build(workdir)
    from PIL import Image

    for name in ("figure1.png", "figure2.png"):
        path = out / name
        assert path.read_bytes()[:8] == PNG_SIGNATURE, name
        with Image.open(path) as image:
            image.verify()
        with Image.open(path) as image:
            assert image.format == "PNG" and image.size == (600, 400), name


def test_figures_without_any_run(workdir):
    _, out = build(workdir, keys=[])
    for name in ("figure1.png", "figure2.png"):
        assert (out / name).read_bytes()[:8] == PNG_SIGNATURE


# ---------------------------------------------------------------- python -m pipeline.report as a whole

def test_report_main_writes_index_and_claims_ledger(workdir):
    runs = {key: {"paper": "fedcurv", "partition": "p", "model": "mlp_200",
                  "algorithm": ALGORITHMS[key.rsplit("_", 1)[1]], "rounds": 3, "client_fraction": 1.0,
                  "local_epochs": int(key.split("_")[1][1:]), "batch_size": 32, "lr": 0.05}
            for key in TABLE1_KEYS.values()}
    params = {"profile": "paper", "datasets": {"mnist": {}},
              "partitions": {"p": {"dataset": "mnist", "scheme": "iid", "clients": 4, "seed": 0}}, "runs": runs}
    (workdir / "params.yaml").write_text(yaml.safe_dump(params))
    (workdir / "grid.yaml").write_text(yaml.safe_dump({"grid": derive_grid(params)}))
    # E = 50: FedCurv 5 vs FedAvg 9 (held), FedProx 12 vs FedAvg 9 (failed), none reached 95 % (inconclusive);
    # E = 10: neither FedCurv nor FedAvg reached 90 % (inconclusive); FedProx was never run (not run).
    table1_runs(workdir, {("fedcurv", 50): 5, ("fedavg", 50): 9, ("fedprox", 50): 12,
                          ("fedcurv", 10): None, ("fedavg", 10): None})
    report_main.main()

    ledger = json.loads((workdir / "reports" / "claims.json").read_text())
    assert ledger["claims"]["fedcurv"] == {
        "fedcurv-e50-90-faster-than-fedavg": "held",
        "fedcurv-e50-95-faster-than-fedavg": "inconclusive",
        "fedprox-e50-90-faster-than-fedavg": "failed",
        "fedprox-e50-95-slower-than-fedavg": "inconclusive",
        "fedcurv-e10-90-faster-than-fedprox": "not run",
        "fedcurv-e10-90-faster-than-fedavg": "inconclusive",
        "gain-larger-at-e50": "inconclusive",
    }
    # Importance From Agent's claims are all "not run": none of its runs is in this params.yaml.
    not_run = len(ledger["claims"]["importance"])
    assert set(ledger["claims"]["importance"].values()) == {"not run"} and not_run > 0
    assert (ledger["held"], ledger["failed"], ledger["inconclusive"], ledger["not_run"]) == (1, 1, 4, 1 + not_run)

    claims_md = (workdir / "reports" / "claims.md").read_text()
    assert f"Totals: 1 held, 1 failed, 4 inconclusive, {1 + not_run} not run" in claims_md
    assert "| fedcurv | At E = 50, FedCurv reaches 90 % in fewer rounds than FedAvg | 9 vs 30 | **held** |" in claims_md

    index = (workdir / "reports" / "README.md").read_text()
    for name in ("table1.md", "grid_search.md", "figure1.png", "figure2.png"):
        assert f"(fedcurv/{name})" in index
    assert "| fedcurv_e50_fedcurv | ok | 0.9000 | 0.9000 | 3 | 1.5 |" in index
    assert "fedcurv_e10_fedprox" not in index  # never run: no row
