"""Real `dvc repro` of the download and partition stages in a temporary git repository, on a tiny
generated MNIST mirror: outputs appear, a second repro does nothing, and a changed partition param
reruns that partition's stage only (also through `dvc exp run -S`)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
PARTITION_FILES = ("clients.npz", "label_counts.json", "meta.json", "label_mix.png")
PARTITIONS = {
    "shards": {"dataset": "mnist", "scheme": "shards", "clients": 10, "shards_per_client": 2, "seed": 0},
    "dirichlet": {"dataset": "mnist", "scheme": "dirichlet", "clients": 6, "alpha": 0.3, "equal_size": True,
                  "val_fraction": 0.1, "seed": 0},
    "clusters": {"dataset": "mnist", "scheme": "clusters", "cluster_sizes": [2, 3], "classes_per_cluster": 2,
                 "samples_per_client": 40, "seed": 0},
}
STAGE_LINE = re.compile(r"Running stage '([^']+)'")


def write_mirror(folder: Path) -> None:
    rng = np.random.default_rng(0)
    folder.mkdir()
    with open(folder / "mnist.npz", "wb") as handle:
        np.savez(handle,
                 x_train=rng.integers(0, 256, size=(600, 28, 28, 1), dtype=np.uint8),
                 y_train=rng.integers(0, 10, size=600).astype(np.int64),
                 x_test=rng.integers(0, 256, size=(100, 28, 28, 1), dtype=np.uint8),
                 y_test=rng.integers(0, 10, size=100).astype(np.int64))


def data_stages_only(dvc_yaml: dict) -> dict:
    """dvc.yaml with only the download and partition stages (later stages need training code and runs)."""
    stages = {name: stage for name, stage in dvc_yaml["stages"].items() if name in ("download", "partition")}
    assert set(stages) == {"download", "partition"}, f"dvc.yaml lacks a data stage: {sorted(stages)}"
    return {**dvc_yaml, "stages": stages}


class Repo:
    def __init__(self, root: Path, mirror: Path, home: Path):
        self.root = root
        self.env = {key: value for key, value in os.environ.items()
                    if key not in ("PYTHONPATH", "no_proxy", "NO_PROXY", "GIT_DIR", "GIT_WORK_TREE")}
        self.env.update({
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "FEDFORGET_DATA_MIRROR": str(mirror),
            "MPLBACKEND": "Agg",
            "DVC_NO_ANALYTICS": "1",
            "DVC_SITE_CACHE_DIR": str(home / "dvc-site-cache"),
            "HOME": str(home),  # a git and dvc global config of its own
            "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.com",
            "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.com",
            # Nothing here needs the network; refuse it at once rather than wait on it.
            "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
            "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
        })

    def run(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        result = subprocess.run(list(args), cwd=self.root, env=self.env, capture_output=True, text=True,
                                timeout=timeout)
        output = result.stdout + result.stderr
        if check:
            assert result.returncode == 0, f"{' '.join(args)} exited {result.returncode}:\n{output}"
        return output

    def stages_run(self, *args: str) -> set[str]:
        return set(STAGE_LINE.findall(self.run(*args)))

    def params(self) -> dict:
        return yaml.safe_load((self.root / "params.yaml").read_text())

    def write_params(self, params: dict) -> None:
        (self.root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.fixture
def repo(tmp_path) -> Repo:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(REPO / "pipeline", root / "pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root)
    dvc_yaml = yaml.safe_load((REPO / "dvc.yaml").read_text())
    (root / "dvc.yaml").write_text(yaml.safe_dump(data_stages_only(dvc_yaml), sort_keys=False))
    write_mirror(tmp_path / "mirror")
    (tmp_path / "home").mkdir()
    repo = Repo(root, tmp_path / "mirror", tmp_path / "home")
    repo.write_params({"profile": "default", "datasets": {"mnist": {"train_size": 600, "test_size": 100}},
                       "partitions": PARTITIONS, "runs": {}})
    repo.run(sys.executable, "-m", "pipeline.profile")
    repo.run("git", "init", "-q")
    repo.run("dvc", "init", "-q")
    repo.run("git", "add", "-A")
    repo.run("git", "commit", "-q", "-m", "pipeline")
    return repo


def test_dvc_repro_builds_partitions_and_reruns_only_what_changed(repo):
    first = repo.stages_run("dvc", "repro")
    assert first == {"download@mnist"} | {f"partition@{name}" for name in PARTITIONS}
    assert (repo.root / "data" / "prepared" / "mnist.npz").is_file()
    for name in PARTITIONS:
        folder = repo.root / "data" / "partitions" / name
        assert sorted(p.name for p in folder.iterdir()) == sorted(PARTITION_FILES), name
    repo.run("git", "add", "-A")
    repo.run("git", "commit", "-q", "-m", "first repro")

    # Nothing changed: nothing runs.
    output = repo.run("dvc", "repro")
    assert not STAGE_LINE.search(output), output
    assert "didn't change" in output or "up to date" in output, output

    # One partition's seed changed: only its stage runs, and its clients change.
    before = (repo.root / "data" / "partitions" / "shards" / "clients.npz").read_bytes()
    untouched = (repo.root / "data" / "partitions" / "clusters" / "clients.npz").read_bytes()
    params = repo.params()
    params["partitions"]["shards"]["seed"] = 1
    repo.write_params(params)
    assert repo.stages_run("dvc", "repro") == {"partition@shards"}
    assert (repo.root / "data" / "partitions" / "shards" / "clients.npz").read_bytes() != before
    assert (repo.root / "data" / "partitions" / "clusters" / "clients.npz").read_bytes() == untouched
    repo.run("git", "add", "-A")
    repo.run("git", "commit", "-q", "-m", "new seed")

    # An experiment on one partition's param reruns that partition only.
    assert repo.stages_run("dvc", "exp", "run", "-S", "partitions.dirichlet.alpha=0.5") == {"partition@dirichlet"}
    assert repo.params()["partitions"]["dirichlet"]["alpha"] == 0.5
    meta = (repo.root / "data" / "partitions" / "dirichlet" / "meta.json").read_text()
    assert '"alpha": 0.5' in meta
