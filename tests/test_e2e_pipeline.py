"""Real `dvc repro` of the whole pipeline (download -> partition -> train -> report) in a temporary git
repository, on a tiny learnable MNIST stand-in with the six FedCurv Table 1 runs made tiny: every report
appears, a second repro does nothing, an experiment on one run's lambda reruns that run and the report
only, `dvc metrics diff` / `dvc plots diff` work on the outputs, and a retrained run is byte-identical."""
from __future__ import annotations

import copy
import json
import shutil
import sys

import pytest
import torch

from helpers import STAGE_LINE, tiny_pipeline_repo

pytestmark = pytest.mark.e2e

ALGORITHMS = {"fedcurv": {"name": "fedcurv", "lambda": 1.0}, "fedprox": {"name": "fedprox", "mu": 0.00025},
              "fedavg": {"name": "fedavg"}}
RUN_KEYS = [f"fedcurv_e{epochs}_{algorithm}" for epochs in (50, 10) for algorithm in ALGORITHMS]
TINY_RUN = {"paper": "fedcurv", "partition": "shards", "model": "mlp_200", "rounds": 2, "client_fraction": 1.0,
            "local_epochs": 1, "batch_size": 32, "lr": 0.05, "seed": 0, "targets": [0.95, 0.9, 0.85]}
PARAMS = {
    "profile": "default",
    "datasets": {"mnist": {"train_size": 400, "test_size": 100}},
    "partitions": {"shards": {"dataset": "mnist", "scheme": "shards", "clients": 8, "shards_per_client": 2,
                              "seed": 0}},
    # Each run its own objects: shared ones would be written as YAML anchors, which `dvc exp run -S` cannot
    # edit one run at a time.
    "runs": {key: copy.deepcopy({**TINY_RUN, "algorithm": ALGORITHMS[key.rsplit("_", 1)[1]]}) for key in RUN_KEYS},
}
REPORT_FILES = ["reports/fedcurv/table1.md", "reports/fedcurv/table1.csv", "reports/fedcurv/figure1.png",
                "reports/fedcurv/figure2.png", "reports/fedcurv/grid_search.md", "reports/claims.md",
                "reports/claims.json", "reports/README.md"]
DETERMINISM_KEY = "fedcurv_e10_fedavg"


def run_outputs(root, key: str) -> dict[str, bytes]:
    """metrics.json and every curve of one run, by path relative to the run folder."""
    folder = root / "reports" / "runs" / key
    files = [folder / "metrics.json"] + sorted((folder / "plots" / "metrics").glob("*.tsv"))
    return {str(path.relative_to(folder)): path.read_bytes() for path in files}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The repository after its first `dvc repro`, the stages that ran, and a copy of one run's outputs."""
    repo = tiny_pipeline_repo(tmp_path_factory.mktemp("pipeline"), PARAMS, train_size=400, test_size=100)
    root = repo.root
    first = repo.stages_run("dvc", "repro", timeout=400)
    snapshot = run_outputs(root, DETERMINISM_KEY)
    model = torch.load(root / "data" / "models" / f"{DETERMINISM_KEY}.pt")
    return repo, first, snapshot, model


def test_first_repro_runs_every_stage_and_writes_every_report(built):
    repo, first, _, _ = built
    assert first == {"download@mnist", "partition@shards", "report"} | {f"train@{key}" for key in RUN_KEYS}
    for name in REPORT_FILES:
        assert (repo.root / name).is_file(), name
    for name in ("figure1.png", "figure2.png"):
        assert (repo.root / "reports" / "fedcurv" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for key in RUN_KEYS:
        metrics = json.loads((repo.root / "reports" / "runs" / key / "metrics.json").read_text())
        assert metrics["status"] == "ok", (key, metrics)
        assert metrics["rounds_completed"] == 2 and metrics["step"] == 2
        assert 0 <= metrics["final_accuracy"] <= 1
        assert (repo.root / "data" / "models" / f"{key}.pt").is_file()
        settings = json.loads((repo.root / "reports" / "runs" / key / "settings.json").read_text())
        assert settings["key"] == key and settings["scaled"] == {}
    claims = json.loads((repo.root / "reports" / "claims.json").read_text())
    assert len(claims["claims"]["fedcurv"]) == 7
    assert set(claims["claims"]["fedcurv"].values()) <= {"held", "failed", "inconclusive"}  # every run exists
    assert set(claims["claims"]["importance"].values()) == {"not run"}  # none of its runs is in this repo
    assert claims["held"] + claims["failed"] + claims["inconclusive"] == 7
    table = (repo.root / "reports" / "fedcurv" / "table1.csv").read_text()
    assert "not run" not in table
    index = (repo.root / "reports" / "README.md").read_text()
    assert all(f"| {key} | ok |" in index for key in RUN_KEYS)


def test_plan_lists_all_six_runs(built):
    repo = built[0]
    output = repo.run(sys.executable, "-m", "pipeline.plan")
    assert output.startswith("profile default: 6 runs, 1 partitions, datasets mnist"), output
    listed = [line.split()[0] for line in output.splitlines()[1:] if line.strip()]
    assert sorted(listed) == sorted(RUN_KEYS)
    assert "fedcurv(lambda=1.0" in output and "fedprox(mu=0.00025" in output


def test_second_repro_does_nothing_and_an_experiment_reruns_one_run(built):
    repo = built[0]
    output = repo.run("dvc", "repro", timeout=200)
    assert not STAGE_LINE.search(output), output
    repo.commit("first repro")

    # An experiment on one run's lambda: that run and the report, nothing else.
    ran = repo.stages_run("dvc", "exp", "run", "-S", "runs.fedcurv_e50_fedcurv.algorithm.lambda=0.5", timeout=300)
    assert ran == {"train@fedcurv_e50_fedcurv", "report"}
    assert repo.params()["runs"]["fedcurv_e50_fedcurv"]["algorithm"]["lambda"] == 0.5
    settings = json.loads((repo.root / "reports" / "runs" / "fedcurv_e50_fedcurv" / "settings.json").read_text())
    assert settings["algorithm"]["name"] == "fedcurv" and settings["algorithm"]["lambda"] == 0.5

    # The workspace (the experiment's results) against HEAD.
    diff = repo.run("dvc", "metrics", "diff", "--all", "--json", timeout=120)
    diff = json.loads(diff[diff.index("{"):])
    assert "reports/runs/fedcurv_e50_fedcurv/metrics.json" in diff, diff
    assert "reports/claims.json" in diff, diff
    text = repo.run("dvc", "metrics", "diff", "--all", timeout=120)
    assert "reports/runs/fedcurv_e50_fedcurv/metrics.json" in text
    # Only what changed: no other run's metrics (they were not retrained).
    changed = repo.run("dvc", "metrics", "diff", "--json", timeout=120)
    changed = json.loads(changed[changed.index("{"):]) if "{" in changed else {}
    assert set(changed) <= {"reports/runs/fedcurv_e50_fedcurv/metrics.json", "reports/claims.json"}, changed
    plots_out = repo.root.parent / "plots-diff"
    plots = repo.run("dvc", "plots", "diff", "-o", str(plots_out), timeout=120)
    assert (plots_out / "index.html").is_file(), plots
    html = (plots_out / "index.html").read_text()
    assert "fedcurv_e50_fedcurv" in html


def test_retraining_a_run_gives_identical_outputs(built):
    repo, _, snapshot, model = built
    for _ in range(2):
        shutil.rmtree(repo.root / ".checkpoints", ignore_errors=True)
        repo.run(sys.executable, "-m", "pipeline.train", DETERMINISM_KEY)
        assert run_outputs(repo.root, DETERMINISM_KEY) == snapshot
        again = torch.load(repo.root / "data" / "models" / f"{DETERMINISM_KEY}.pt")
        assert again.keys() == model.keys()
        assert all(torch.equal(again[name], model[name]) for name in model)
