"""`python -m pipeline.verify` on results committed by a real `dvc repro` in a temporary repository: an
untouched seed retrains to the same bytes; a tampered committed metric fails it (exit 1) on the CPU kind
that made it; the same tampering on a seed recorded as made by another CPU kind, or by other code, is
reported with its size and the claims' verdicts checked, exit 0; and a run that does not exist is one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.helpers import tiny_fedcurv_params

pytestmark = pytest.mark.e2e

PARAMS = tiny_fedcurv_params({"fedavg": {"name": "fedavg"}, "fedprox": {"name": "fedprox", "mu": 0.01}})
SEED = "reports/runs/fedcurv_e10_fedavg/seed0"


@pytest.fixture(scope="module")
def repo(pipeline_repo):
    made = pipeline_repo(PARAMS)
    made.run("dvc", "repro", timeout=300)
    made.commit("results")
    return made


@pytest.fixture
def committed(repo):
    """The repository, its committed reports restored after the test's edits."""
    yield repo
    repo.run("git", "checkout", "--", "reports")


def verify(repo, *args: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.verify", *args],
        cwd=repo.root,
        env=repo.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout + done.stderr


def edit_json(repo, path: str, change) -> dict:
    file = repo.root / path
    data = json.loads(file.read_text())
    change(data)
    file.write_text(json.dumps(data, indent=4) + "\n")
    return data


def tamper_final_accuracy(repo) -> tuple[float, float]:
    """Committed final accuracy moved by 0.25 (what a hand edit or a stale file would be): (old, new)."""
    old = json.loads((repo.root / SEED / "metrics.json").read_text())["final_accuracy"]
    new = round(old - 0.25, 4)
    edit_json(repo, f"{SEED}/metrics.json", lambda d: d.update(final_accuracy=new))
    return old, new


def test_an_untouched_seed_retrains_to_the_same_bytes(committed):
    code, output = verify(committed, "--stage", "train@fedcurv_e10_fedavg", "--seeds", "0")
    assert code == 0, output
    assert "fedcurv_e10_fedavg-seed0: identical bytes (same CPU kind" in output
    assert "verified 1 (run, seed): 1 identical, 0 differing" in output


def test_a_tampered_metric_fails_on_the_cpu_kind_that_made_it(committed):
    tamper_final_accuracy(committed)
    code, output = verify(committed, "--stage", "fedcurv_e10_fedavg", "--seeds", "0")
    assert code == 1, output
    assert "fedcurv_e10_fedavg-seed0: DIFFERS on the same CPU kind: metrics.json" in output
    assert "1 differing on the CPU kind that made them" in output


def test_a_difference_made_on_another_cpu_kind_is_reported_with_its_size_and_the_verdicts(committed):
    old, new = tamper_final_accuracy(committed)
    edit_json(
        committed, f"{SEED}/timing.json", lambda d: d["device"].update(name="Another CPU", cpu_capability="AVX512")
    )
    code, output = verify(committed, "--stage", "fedcurv_e10_fedavg", "--seeds", "0")
    assert code == 0, output
    # the committed (tampered) value, then the retrained one: the size of the difference
    assert f"files differ (another CPU kind); final_accuracy {new} -> {old}" in output
    assert "1 differing on another CPU kind" in output
    assert "no claim's verdict moves" in output or "verdicts moved:" in output


def test_a_result_committed_by_other_code_is_no_failure_and_says_so(committed):
    tamper_final_accuracy(committed)
    edit_json(committed, f"{SEED}/timing.json", lambda d: d.update(code="0" * 64))
    code, output = verify(committed, "--stage", "fedcurv_e10_fedavg", "--seeds", "0")
    assert code == 0, output
    assert "committed by other code" in output
    assert "1 differing and committed by other code" in output


def test_a_run_without_committed_outputs_is_one_line(committed):
    code, output = verify(committed, "--stage", "no_such_run")
    assert code != 0
    assert output.strip().splitlines() == [
        "error: --stage no_such_run: no committed outputs for no_such_run in reports/runs"
    ], output
