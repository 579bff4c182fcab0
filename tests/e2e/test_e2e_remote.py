"""Results shared between machines through a DVC remote (here a local directory): one clone trains and
pushes; a fresh clone of the same commit pulls, and `dvc repro` then retrains nothing and every output
is the same file, byte for byte. The fresh clone has no dataset mirror: nothing is downloaded either."""

from __future__ import annotations

import hashlib
import shutil
import subprocess

import pytest

from support.helpers import Repo, tiny_fedcurv_params, train_stage

pytestmark = pytest.mark.e2e

PARAMS = tiny_fedcurv_params({"fedavg": {"name": "fedavg"}})


# The trained models (data/models/) are no DVC output, so no remote carries them (docs/commands.md).
def digests(root, folders=("data/prepared", "data/partitions", "reports", "resolved")) -> dict[str, str]:
    found = {}
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file():
                found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def test_a_fresh_clone_pulls_the_results_and_retrains_nothing(tmp_path, pipeline_repo):
    first = pipeline_repo(PARAMS)
    trained = first.stages_run("dvc", "repro", timeout=300)
    assert train_stage("fedcurv_e10_fedavg") in trained
    remote = tmp_path / "remote"
    first.run("dvc", "remote", "add", "-d", "shared", str(remote))
    first.commit("results and the shared remote")
    first.run("dvc", "push")
    assert any(remote.rglob("*")), "dvc push wrote nothing to the remote"

    clone_root = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(first.root), str(clone_root)], check=True, capture_output=True)
    home = tmp_path / "clone-home"
    home.mkdir()
    clone = Repo(clone_root, tmp_path / "no-mirror-here", home, {"CI": "1", "FEDFORGET_THREADS": "1"})
    clone.run("dvc", "pull")
    assert clone.stages_run("dvc", "repro", timeout=300) == set()
    assert "up to date" in clone.run("dvc", "status")
    assert digests(clone_root) == digests(first.root)

    # The same clone, its cache and data gone, pointed at a remote that is not there: DVC says which
    # files it could not get, in its own words, and exits non-zero.
    shutil.rmtree(clone_root / ".dvc" / "cache")
    shutil.rmtree(clone_root / "data")
    clone.run("dvc", "remote", "modify", "shared", "url", str(tmp_path / "missing" / "remote"))
    result = subprocess.run(["dvc", "pull"], cwd=clone_root, env=clone.env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "ERROR" in result.stdout + result.stderr
