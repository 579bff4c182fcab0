"""Real `dvc repro` of the whole pipeline (download -> partition -> train -> report) in a temporary git
repository, on a tiny learnable MNIST stand-in with the six FedCurv Table 1 runs made tiny (one with two
seeds and the forgetting probes): every report appears, a second repro does nothing, an experiment on
one run's lambda reruns that run's stage (its seeds) and the report only, adding a seed reruns that run's
stage but trains only the new seed (the others are taken from their kept results, byte-identical),
`dvc metrics diff` / `dvc plots diff` work on the outputs, and a retrained run is byte-identical."""

from __future__ import annotations

import copy
import json
import shutil
import sys

import pytest
import torch
import yaml

from support.helpers import REPO, STAGE_LINE, tiny_fedcurv_run, train_stage, trained_and_kept

pytestmark = pytest.mark.e2e

ALGORITHMS = {
    "fedcurv": {"name": "fedcurv", "lambda": 1.0},
    "fedprox": {"name": "fedprox", "mu": 0.00025},
    "fedavg": {"name": "fedavg"},
}
RUN_KEYS = [f"fedcurv_e{epochs}_{algorithm}" for epochs in (50, 10) for algorithm in ALGORITHMS]
TINY_RUN = tiny_fedcurv_run(targets=[0.95, 0.9, 0.85])
PROBED_KEY = "fedcurv_e50_fedcurv"  # two seeds, forgetting probes at both rounds
PARAMS = {
    "profile": "default",
    "datasets": {"mnist": {"train_size": 400, "test_size": 100}},
    "partitions": {"shards": {"dataset": "mnist", "scheme": "shards", "clients": 8, "shards_per_client": 2, "seed": 0}},
    # Each run its own objects: shared ones would be written as YAML anchors, which `dvc exp run -S` cannot
    # edit one run at a time.
    "runs": {key: copy.deepcopy({**TINY_RUN, "algorithm": ALGORITHMS[key.rsplit("_", 1)[1]]}) for key in RUN_KEYS},
}
PARAMS["runs"][PROBED_KEY].update(
    {"seeds": [0, 1], "probe_rounds": [1, 2], "probe_clients": 4, "forgettable_every": 1, "example_events": True}
)
STAGES = {train_stage(key) for key in RUN_KEYS}  # one stage a run, whatever its seeds
REPORT_FILES = [
    "reports/fedcurv/table1.md",
    "reports/fedcurv/table1.csv",
    "reports/fedcurv/figure1.png",
    "reports/fedcurv/figure2.png",
    "reports/fedcurv/grid_search.md",
    "reports/claims.md",
    "reports/claims.json",
    "reports/README.md",
]
DETERMINISM_KEY = "fedcurv_e10_fedavg"


def fedcurv_claim_ids() -> list[str]:
    """The claims FedCurv's report makes (every one of them is decided on the six runs here)."""
    from pipeline.report.confirmation import claim_ids

    return claim_ids(
        "fedcurv", yaml.safe_load((REPO / "pipeline" / "report" / "published.yaml").read_text())["fedcurv"]
    )


def run_folder(root, key: str, seed: int = 0):
    return root / "reports" / "runs" / key / f"seed{seed}"


def run_outputs(root, key: str) -> dict[str, bytes]:
    """metrics.json and every curve of one run, by path relative to the run folder."""
    folder = run_folder(root, key)
    files = [folder / "metrics.json", folder / "curves.tsv", folder / "test_accuracy.tsv"]
    return {str(path.relative_to(folder)): path.read_bytes() for path in files}


@pytest.fixture(scope="module")
def built(pipeline_repo):
    """The repository after its first `dvc repro`, the stages that ran, and a copy of one run's outputs."""
    repo = pipeline_repo(PARAMS)
    root = repo.root
    first = repo.stages_run("dvc", "repro", timeout=400)
    snapshot = run_outputs(root, DETERMINISM_KEY)
    model = torch.load(root / "data" / "models" / f"{DETERMINISM_KEY}-seed0.pt")
    return repo, first, snapshot, model


def test_first_repro_runs_every_stage_and_writes_every_report(built):
    repo, first, _, _ = built
    assert first == ({"download@mnist", "partition@shards", "resolve", "fingerprint", "report"} | STAGES)
    for name in REPORT_FILES:
        assert (repo.root / name).is_file(), name
    for name in ("figure1.png", "figure2.png"):
        assert (repo.root / "reports" / "fedcurv" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for key in RUN_KEYS:
        metrics = json.loads((run_folder(repo.root, key) / "metrics.json").read_text())
        assert metrics["status"] == "ok", (key, metrics)
        assert metrics["rounds_completed"] == 2 and metrics["step"] == 2
        assert 0 <= metrics["final_accuracy"] <= 1
        assert (repo.root / "data" / "models" / f"{key}-seed0.pt").is_file()
        settings = json.loads((run_folder(repo.root, key) / "settings.json").read_text())
        assert settings["key"] == f"{key}-seed0" and settings["run"] == key and settings["seed"] == 0
        assert settings["scaled"] == {}
    claims = json.loads((repo.root / "reports" / "claims.json").read_text())
    fedcurv_claims = fedcurv_claim_ids()
    assert sorted(claims["claims"]["fedcurv"]) == sorted(fedcurv_claims)
    assert set(claims["claims"]["fedcurv"].values()) <= {"held", "failed", "inconclusive"}  # every run exists
    assert set(claims["claims"]["importance"].values()) == {"not run"}  # none of its runs is in this repo
    assert claims["held"] + claims["failed"] + claims["inconclusive"] == len(fedcurv_claims)
    table = (repo.root / "reports" / "fedcurv" / "table1.csv").read_text()
    assert "not run" not in table
    index = (repo.root / "reports" / "README.md").read_text()
    assert all(key in index for key in RUN_KEYS)


def test_probed_run_writes_forgetting_heatmaps_and_forgettable_counts(built):
    repo = built[0]
    for seed in (0, 1):
        folder = run_folder(repo.root, PROBED_KEY, seed) / "forgetting"
        records = json.loads((folder / "rounds.json").read_text())
        assert sorted(records) == ["1", "2"]  # every probed round in one file
        assert sorted(p.name for p in folder.glob("*.json")) == ["rounds.json"]
        for round_ in (1, 2):
            record = records[str(round_)]
            assert record["round"] == round_
            assert len(record["clients"]) == 4 and len(record["post"]) == 4
            assert len(record["global_accuracy_per_client"]) == 8  # every client, not only the probed ones
            # The figures, those the reports show, for the run's first seed only.
            if seed == 0:
                assert (folder / f"round_{round_}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            else:
                assert not (folder / f"round_{round_}.png").exists()
        assert (folder / "forgettable.png").exists() == (seed == 0)
        rows = (folder / "forgettable.tsv").read_text().splitlines()
        assert rows[0] == "round\tclient\tforgettable" and len(rows) == 1 + 2 * 8
        metrics = json.loads((run_folder(repo.root, PROBED_KEY, seed) / "metrics.json").read_text())
        assert set(metrics["mean_local_forgetting"]) == {"round_1", "round_2"}
        assert metrics["forgettable_total"] == sum(int(r.split("\t")[2]) for r in rows[1:])
        timing = json.loads((run_folder(repo.root, PROBED_KEY, seed) / "timing.json").read_text())
        assert timing["probe_seconds_total"] > 0
        # The cohort's forgettable total as a DVCLive curve, one row per probed round, equal to the tsv's sum.
        curve = (run_folder(repo.root, PROBED_KEY, seed) / "forgetting" / "cohort_total.tsv").read_text().splitlines()
        assert len(curve) == 1 + 2
        assert sum(int(float(r.split("\t")[-1])) for r in curve[1:]) == metrics["forgettable_total"]
    # The index links the heatmaps and the forgettable curve of the probed run.
    index = (repo.root / "reports" / "README.md").read_text()
    assert "## Forgetting probes" in index
    for name in ("round_1.png", "round_2.png", "forgettable.png"):
        assert f"(runs/{PROBED_KEY}/seed0/forgetting/{name})" in index
    # Example-forgetting events over presentations: per round as a curve, totals in the metrics and the index.
    metrics = json.loads((run_folder(repo.root, PROBED_KEY, 0) / "metrics.json").read_text())
    events = metrics["example_events"]
    assert events["clients"] == 8
    held = sum(json.loads((repo.root / "reports" / "partitions" / "shards" / "meta.json").read_text())["train_sizes"])
    assert events["unforgettable_examples"] + events["never_learned_examples"] + events["forgotten_examples"] == held
    curve = repo.curve(PROBED_KEY, "example_forgetting_events")
    assert sum(int(value) for value in curve.values()) == events["forgetting_events"]
    assert "## Example-forgetting events" in index and f"| {PROBED_KEY} | MNIST | 2 | 8 | 2 × 1, C = 1 |" in index
    # The two seeds are two different trainings.
    assert (run_folder(repo.root, PROBED_KEY, 0) / "metrics.json").read_bytes() != (
        run_folder(repo.root, PROBED_KEY, 1) / "metrics.json"
    ).read_bytes()


def test_plan_lists_all_six_runs(built):
    repo = built[0]
    output = repo.run(sys.executable, "-m", "pipeline.plan")
    assert output.startswith("profile default: 6 runs (7 seeds), 1 partitions, datasets mnist"), output
    lines = [line for line in output.splitlines()[1:] if line.strip()]
    assert sorted(line.split()[0] for line in lines[:-1]) == sorted(RUN_KEYS)
    assert "fedcurv(lambda=1.0" in output and "fedprox(mu=0.00025" in output
    # The cost estimate reads the throughput the trained runs measured, so every run has CPU hours.
    assert lines[-1].startswith("total: ") and "mlp_200" in lines[-1] and "without" not in lines[-1]
    assert all("CPU ?" not in line for line in lines[:-1])


def test_second_repro_does_nothing_and_an_experiment_reruns_one_run(built):
    repo = built[0]
    output = repo.run("dvc", "repro", timeout=200)
    assert not STAGE_LINE.search(output), output
    repo.commit("first repro")

    # An experiment on one run's lambda: that run and the report, nothing else.
    output = repo.run("dvc", "exp", "run", "-S", "runs.fedcurv_e50_fedcurv.algorithm.lambda=0.5", timeout=300)
    assert set(STAGE_LINE.findall(output)) == {"resolve", train_stage("fedcurv_e50_fedcurv"), "report"}, output
    # Its settings changed: both its seeds trained, neither came from a kept result.
    assert trained_and_kept(output) == ({"fedcurv_e50_fedcurv-seed0", "fedcurv_e50_fedcurv-seed1"}, set()), output
    assert repo.params()["runs"]["fedcurv_e50_fedcurv"]["algorithm"]["lambda"] == 0.5
    settings = json.loads((run_folder(repo.root, "fedcurv_e50_fedcurv") / "settings.json").read_text())
    assert settings["algorithm"]["name"] == "fedcurv" and settings["algorithm"]["lambda"] == 0.5

    # The workspace (the experiment's results) against HEAD. The declared metrics are the report's
    # (reports/summary.json: each run's final accuracy and curve mean over its seeds; reports/claims.json):
    # a train stage's output is its run's folder, so a seed's metrics.json is read by naming it.
    diff = repo.run("dvc", "metrics", "diff", "--all", "--json", timeout=120)
    diff = json.loads(diff[diff.index("{") :])
    assert {"reports/summary.json", "reports/claims.json"} <= set(diff), diff
    assert "fedcurv.runs.fedcurv_e50_fedcurv.final" in diff["reports/summary.json"], diff
    seeds = [f"reports/runs/fedcurv_e50_fedcurv/seed{s}/metrics.json" for s in (0, 1)]
    text = repo.run("dvc", "metrics", "diff", "--all", "--targets", *seeds, timeout=120)
    assert all(seed in text for seed in seeds), text
    per_seed = repo.run("dvc", "metrics", "diff", "--json", "--targets", *seeds, timeout=120)
    per_seed = json.loads(per_seed[per_seed.index("{") :])
    assert set(per_seed) == set(seeds), per_seed  # both seeds retrained under the new lambda: both moved
    # Only what changed: of the runs, only the varied one (the others were not retrained).
    changed = repo.run("dvc", "metrics", "diff", "--json", timeout=120)
    changed = json.loads(changed[changed.index("{") :]) if "{" in changed else {}
    assert set(changed) <= {"reports/summary.json", "reports/claims.json"}, changed
    moved_runs = {key.split(".")[2] for key in changed.get("reports/summary.json", {}) if ".runs." in key}
    assert moved_runs <= {"fedcurv_e50_fedcurv"}, changed
    others = [f"reports/runs/{key}/seed0/metrics.json" for key in RUN_KEYS if key != "fedcurv_e50_fedcurv"]
    unchanged = repo.run("dvc", "metrics", "diff", "--json", "--targets", *others, timeout=120)
    assert "{" not in unchanged or json.loads(unchanged[unchanged.index("{") :]) == {}, unchanged
    plots_out = repo.root.parent / "plots-diff"
    plots = repo.run("dvc", "plots", "diff", "-o", str(plots_out), timeout=120)
    assert (plots_out / "index.html").is_file(), plots
    html = (plots_out / "index.html").read_text()
    assert "fedcurv_e50_fedcurv" in html


def seed_files(root, key: str, seed: int) -> dict[str, bytes]:
    """Every file of one seed's folder, by path relative to it."""
    folder = run_folder(root, key, seed)
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def kept_results(root, key: str, seed: int) -> dict[str, tuple[int, int, bytes]]:
    """A seed's kept results in .checkpoints/: name -> (inode, mtime, bytes), which a result written
    again (atomically, under a new inode) would change."""
    return {
        path.name: (path.stat().st_ino, path.stat().st_mtime_ns, path.read_bytes())
        for path in (root / ".checkpoints").glob(f"{key}-seed{seed}-*.result.pt")
    }


def test_adding_a_seed_reruns_the_stage_but_trains_only_that_seed(built):
    """One stage a run: adding a seed reruns train@<run>, whose seeds already trained under the same
    settings and code are taken from their kept results (.checkpoints/*.result.pt), untrained and
    byte-identical; only the new seed trains."""
    repo = built[0]
    repo.run("git", "checkout", "--", ".")  # back to the committed first repro
    repo.run("dvc", "checkout", "--force", timeout=120)
    before = seed_files(repo.root, DETERMINISM_KEY, 0)
    kept_before = kept_results(repo.root, DETERMINISM_KEY, 0)
    assert len(kept_before) == 1, kept_before  # the first repro kept seed 0's result
    params = repo.params()
    params["runs"][DETERMINISM_KEY]["seeds"] = [0, 3]
    repo.write_params(params)
    repo.run(sys.executable, "-m", "pipeline.profile")
    output = repo.run("dvc", "repro", timeout=300)
    assert set(STAGE_LINE.findall(output)) == {"resolve", train_stage(DETERMINISM_KEY), "report"}, output
    assert trained_and_kept(output) == ({f"{DETERMINISM_KEY}-seed3"}, {f"{DETERMINISM_KEY}-seed0"}), output
    # Seed 0 was not trained again: its folder is the same bytes (timing.json's measured seconds included),
    # but for settings.json's record of the run's seed list, and its kept result the same file, not
    # written again.
    after = seed_files(repo.root, DETERMINISM_KEY, 0)
    assert after.keys() == before.keys()
    assert {name for name in after if after[name] != before[name]} <= {"settings.json"}
    settings_before, settings_after = (json.loads(files["settings.json"]) for files in (before, after))
    assert settings_after["seeds"] == [0, 3] and {**settings_after, "seeds": [0]} == settings_before
    assert kept_results(repo.root, DETERMINISM_KEY, 0) == kept_before
    assert (run_folder(repo.root, DETERMINISM_KEY, 3) / "metrics.json").is_file()
    assert len(kept_results(repo.root, DETERMINISM_KEY, 3)) == 1  # the new seed trained and kept its result
    resolved = json.loads((repo.root / "resolved" / f"{DETERMINISM_KEY}.json").read_text())
    assert resolved["seeds"] == [0, 3]


def test_retraining_a_run_gives_identical_outputs(built):
    repo, _, snapshot, model = built
    for _ in range(2):
        shutil.rmtree(repo.root / ".checkpoints", ignore_errors=True)
        repo.run(sys.executable, "-m", "pipeline.train", DETERMINISM_KEY, "--seed", "0")
        assert run_outputs(repo.root, DETERMINISM_KEY) == snapshot
        again = torch.load(repo.root / "data" / "models" / f"{DETERMINISM_KEY}-seed0.pt")
        assert again.keys() == model.keys()
        assert all(torch.equal(again[name], model[name]) for name in model)


def test_a_run_of_no_paper_has_its_own_stage_and_a_target_builds_only_that_run(built):
    """A run of no paper is a stage like any other, train@<run> in the root dvc.yaml (there are no
    per-paper stage files); `dvc repro train@<run>` builds it and what it needs, not the report."""
    repo = built[0]
    repo.run("git", "checkout", "--", ".")  # back to the committed first repro
    repo.run("git", "clean", "-fdq", "--", "reports", "resolved")  # and without the seeds earlier tests added
    repo.run("dvc", "checkout", "--force", timeout=120)
    params = repo.params()
    params["runs"]["mine"] = {**{k: v for k, v in TINY_RUN.items() if k != "paper"}, "algorithm": {"name": "fedavg"}}
    repo.write_params(params)
    repo.run(sys.executable, "-m", "pipeline.profile")
    assert "train@mine" in repo.run("dvc", "stage", "list", timeout=120)
    # The run's stage as the target: it and what it needs (resolve), not the report nor any other run.
    ran = repo.stages_run("dvc", "repro", train_stage("mine"), timeout=300)
    assert ran == {"resolve", train_stage("mine")}, ran
    assert (run_folder(repo.root, "mine") / "metrics.json").is_file()
    assert repo.stages_run("dvc", "repro", timeout=300) == {"report"}
    assert "mine" in (repo.root / "reports" / "README.md").read_text()
