"""Issue 54: a stage that DVC starts and that then refuses its input leaves the committed outputs as they
were. DVC deletes a stage's outputs before its command runs unless they are `persist` (dvc.yaml), and the
stages build their outputs aside and swap them in only when they succeed. Through `dvc repro` in a git
repository, each case: a non-zero exit, the stage's own one-line error, no traceback, and `git status`
showing nothing deleted or changed.

- the download stage forced with a mirror that does not exist (it deleted reports/datasets/mnist.json);
- a train stage forced with FEDFORGET_THREADS=0 (it deleted the seed's committed files);
- two `dvc repro` at once: the second is refused by DVC's lock and changes nothing, the first finishes."""

from __future__ import annotations

import subprocess
import time

import pytest

from support.helpers import tiny_fedcurv_params, train_stage

pytestmark = pytest.mark.e2e

PARAMS = tiny_fedcurv_params({"fedavg": {"name": "fedavg"}})
# Long enough (a few seconds, more than DVC takes to start) to be running while a second `dvc repro`
# starts; a run of no paper's.
PARAMS["runs"]["slow_fedavg"] = {
    **{k: v for k, v in PARAMS["runs"]["fedcurv_e10_fedavg"].items() if k != "paper"},
    "rounds": 150,
    "seeds": [0],
}
STAGE = train_stage("fedcurv_e10_fedavg")
SLOW_STAGE = train_stage("slow_fedavg")


@pytest.fixture(scope="module")
def built(pipeline_repo):
    repo = pipeline_repo(PARAMS)
    repo.run("dvc", "repro", timeout=300)
    repo.commit("results")
    return repo


def dvc_repro(repo, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["dvc", "repro", *args], cwd=repo.root, env={**repo.env, **env}, capture_output=True, text=True, timeout=300
    )


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    """The stage's own error lines (DVC adds its ERROR line naming the stage and the exit code)."""
    return [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("error: ")]


def assert_refused_and_nothing_changed(repo, result: subprocess.CompletedProcess, *needles: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output, output
    [line] = error_lines(result)
    for needle in needles:
        assert needle in line, (needle, line)
    assert repo.run("git", "status", "--porcelain", "--untracked-files=no") == "", "a committed file changed"
    assert "up to date" in repo.run("dvc", "status"), repo.run("dvc", "status")


def test_a_download_refused_for_a_missing_mirror_keeps_the_dataset_record(built):
    record = built.root / "reports" / "datasets" / "mnist.json"
    assert record.is_file()
    result = dvc_repro(built, "-f", "-s", "download@mnist", FEDFORGET_DATA_MIRROR="/nonexistent")
    assert_refused_and_nothing_changed(built, result, "FEDFORGET_DATA_MIRROR", "/nonexistent")
    assert record.is_file()


def test_a_train_stage_refused_for_zero_threads_keeps_the_seeds_files(built):
    seeds = built.root / "reports" / "runs" / "fedcurv_e10_fedavg"
    before = sorted(p.relative_to(seeds) for p in seeds.rglob("*") if p.is_file())
    assert any(p.name == "metrics.json" for p in before)
    result = dvc_repro(built, "-f", "-s", STAGE, FEDFORGET_THREADS="0")
    assert_refused_and_nothing_changed(built, result, "FEDFORGET_THREADS", "0")
    assert sorted(p.relative_to(seeds) for p in seeds.rglob("*") if p.is_file()) == before


def test_a_second_dvc_repro_while_one_runs_is_refused_and_leaves_the_state_consistent(built):
    """The issue saw both fail and resolved/ updated with dvc.lock not. Now the second is refused by DVC in
    one line without a traceback while the first is still running, the first finishes, and `dvc status`
    then agrees with every file."""
    log = built.root.parent / "first.log"
    with open(log, "w") as handle:
        # The first retrains the slow run from round 1 (no kept results in a fresh checkpoint folder).
        first = subprocess.Popen(
            ["dvc", "repro", "-f", "-s", SLOW_STAGE],
            cwd=built.root,
            env={**built.env, "FEDFORGET_CHECKPOINTS": str(built.root.parent / "fresh-checkpoints")},
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while "Running stage" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "Running stage" in log.read_text(), log.read_text()
        # The case: the second follows an edit of params.yaml, so that it would rewrite resolved/.
        params = built.root / "params.yaml"
        params.write_text(params.read_text().replace("rounds: 150", "rounds: 149", 1))
        assert "rounds: 149" in params.read_text()
        second = dvc_repro(built)
        still_running = first.poll() is None
    finally:
        first.wait(timeout=300)
    assert still_running, "the first dvc repro finished before the second was refused: nothing was tested"
    assert first.returncode == 0, log.read_text()
    combined = second.stdout + second.stderr
    assert second.returncode != 0 and "Traceback" not in combined, combined
    # DVC 3.67: "ERROR: failed to reproduce '<stage>': '<path>' is busy, it is being blocked by: ..."
    errors = [line for line in combined.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and ("is busy" in errors[0] or "lock" in errors[0].lower()), combined
    # The refused second wrote nothing: resolved/ is as committed, so the edit is still pending (resolve is
    # behind params.yaml), and the first ran its stage alone (-s): the report is behind its new timing
    # records. Nothing else is.
    status = built.run("dvc", "status")
    assert sorted(s for s in status.splitlines() if s and not s.startswith("\t")) == ["report:", "resolve:"], status
    # Only the edit, the retrain's own timing records and dvc.lock moved; results are the same bytes on this CPU.
    changed = built.run("git", "status", "--porcelain", "--untracked-files=no").splitlines()
    assert any(line.endswith("params.yaml") for line in changed), changed
    assert all(line.endswith(("timing.json", "dvc.lock", "params.yaml")) for line in changed), changed
    built.run("git", "checkout", "params.yaml")
