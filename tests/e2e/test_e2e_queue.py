"""A sweep on DVC's experiment queue: two `-S` variations queued, `dvc queue start -j 2` runs them in two
workers, both finish, `dvc exp show` lists their headline metrics (reports/summary.json), and each
equals the same variation run on its own with `dvc exp run`. Only the varied run's stages and the report
rerun in a queued experiment (DVC restores the rest from its run-cache)."""

from __future__ import annotations

import copy
import json
import time

import pytest

from support.helpers import STAGE_LINE, tiny_fedcurv_run, train_stage

pytestmark = pytest.mark.e2e

RUN = tiny_fedcurv_run()
PARAMS = {
    "profile": "default",
    "datasets": {"mnist": {"train_size": 300, "test_size": 60}},
    "partitions": {"shards": {"dataset": "mnist", "scheme": "shards", "clients": 6, "shards_per_client": 2, "seed": 0}},
    "runs": {
        "fedcurv_e10_fedavg": copy.deepcopy({**RUN, "algorithm": {"name": "fedavg"}}),
        # A small lr, so that the curve is not at 100 % after a round and a strong pull (mu) slows it.
        "fedcurv_e10_fedprox": copy.deepcopy({**RUN, "lr": 0.005, "algorithm": {"name": "fedprox", "mu": 0.01}}),
    },
}
SWEEP = ("runs.fedcurv_e10_fedprox.algorithm.mu=0.5", "runs.fedcurv_e10_fedprox.algorithm.mu=100.0")


# The headline columns of `dvc exp show` (docs/scaling.md): reports/claims.json's totals and every
# paper's claim totals from reports/summary.json.
TOTALS = ("held", "failed", "inconclusive", "not_run", "decided_share")
HEADLINE_COLUMNS = "^(Experiment|" + "|".join(TOTALS) + r")$|\.claims\."


def experiments(repo) -> dict[str, dict]:
    """`dvc exp show --json`: experiment name -> {"mu": ..., "summary": reports/summary.json, "state": ...}."""
    found = {}
    for commit in json.loads(repo.run("dvc", "exp", "show", "--json")):
        for exp in commit.get("experiments") or []:
            for rev in exp.get("revs", []):
                data = rev.get("data") or {}
                params = data.get("params", {}).get("params.yaml", {}).get("data", {})
                mu = params.get("runs", {}).get("fedcurv_e10_fedprox", {}).get("algorithm", {}).get("mu")
                summary = data.get("metrics", {}).get("reports/summary.json", {}).get("data")
                found[rev.get("name") or rev["rev"]] = {"mu": mu, "summary": summary, "state": rev.get("status")}
    return found


def wait_for_queue(repo, timeout: float = 600) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = repo.run("dvc", "queue", "status")
        if not any(word in status for word in ("Queued", "Running")):
            return status
        time.sleep(3)
    raise AssertionError(f"the queue did not finish in {timeout} s:\n{repo.run('dvc', 'queue', 'status')}")


def test_a_queued_sweep_runs_in_two_workers_and_equals_sequential_runs(pipeline_repo):
    repo = pipeline_repo(PARAMS)
    repo.run("dvc", "repro", timeout=300)
    repo.commit("baseline results")
    for setting in SWEEP:
        repo.run("dvc", "exp", "run", "--queue", "-S", setting)
    try:
        repo.start("dvc", "queue", "start", "-j", "2")
        status = wait_for_queue(repo)
    finally:
        repo.run("dvc", "queue", "stop", "--kill", check=False)
    assert "Failed" not in status, status
    queued = {e["mu"]: e for e in experiments(repo).values() if e["mu"] in (0.5, 100.0)}
    assert set(queued) == {0.5, 100.0}, experiments(repo)
    for name in [name for name, e in experiments(repo).items() if e["mu"] in (0.5, 100.0)]:
        # Each queued experiment ran the varied run's stage, resolve and the report; the rest came from
        # DVC's run-cache, the train stages' per-paper files included.
        ran = set(STAGE_LINE.findall(repo.run("dvc", "queue", "logs", name)))
        assert ran == {"resolve", train_stage("fedcurv_e10_fedprox"), "report"}, (name, ran)
    for mu, exp in queued.items():
        runs = exp["summary"]["fedcurv"]["runs"]
        assert set(runs) == {"fedcurv_e10_fedavg", "fedcurv_e10_fedprox"}
        assert runs["fedcurv_e10_fedprox"]["final"] is not None

    # The same variation on its own, in the workspace: the same numbers as the queued one.
    trained = repo.stages_run("dvc", "exp", "run", "-S", SWEEP[1], timeout=300)
    assert trained == {"resolve", train_stage("fedcurv_e10_fedprox"), "report"}
    alone = json.loads((repo.root / "reports" / "summary.json").read_text())
    assert alone["fedcurv"]["runs"] == queued[100.0]["summary"]["fedcurv"]["runs"]
    # The sweep moved the varied run and left the other alone.
    baseline = json.loads(repo.run("git", "show", "HEAD:reports/summary.json"))
    assert alone["fedcurv"]["runs"]["fedcurv_e10_fedavg"] == baseline["fedcurv"]["runs"]["fedcurv_e10_fedavg"]
    assert alone["fedcurv"]["runs"]["fedcurv_e10_fedprox"] != baseline["fedcurv"]["runs"]["fedcurv_e10_fedprox"]

    # The narrowed view docs/scaling.md documents: the ledger's totals and each paper's. DVC 3.67 names a
    # metric column by its key alone (the file only when two files share a key), so the filter matches keys;
    # an empty header (the filter matched nothing) fails here.
    narrow = repo.run("dvc", "exp", "show", "--csv", "--drop", ".*", "--keep", HEADLINE_COLUMNS)
    header = narrow.splitlines()[0].split(",")
    assert header[0] == "Experiment" and {"held", "failed", "inconclusive", "not_run"} <= set(header[1:]), header
    assert all(c in TOTALS or ".claims." in c for c in header[1:]), header
