"""Fixtures shared by several test files."""

from __future__ import annotations

import sys

import pytest

from support.helpers import Repo, copy_project, write_mirror


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A fresh directory made the working directory (for code that reads and writes paths relative to the
    repository root, as `python -m pipeline.report` does)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def pipeline_repo(tmp_path_factory):
    """The end-to-end tests' repository, made by `pipeline_repo(params, dvc_yaml=None, build=())`: a git +
    DVC repository in a fresh temporary folder (its `root`) with a copy of this pipeline, `params` as its
    params.yaml, the root dvc.yaml (or `dvc_yaml`), and a learnable generated MNIST mirror of params'
    sizes (nothing is downloaded); grid.yaml written and everything committed; then `dvc repro` of the
    stages in `build`, if any. Progress bars off (CI=1) and one thread (2-core machines). A factory of
    session scope, so that module-scoped fixtures and tests alike can ask for one."""

    def make(params: dict, dvc_yaml: dict | None = None, build: tuple[str, ...] = ()) -> Repo:
        tmp = tmp_path_factory.mktemp("pipeline")
        root = tmp / "repo"
        copy_project(root, dvc_yaml)
        (root / ".gitignore").write_text("/.checkpoints/\n__pycache__/\n")
        sizes = params["datasets"]["mnist"]
        write_mirror(tmp / "mirror", train_size=sizes["train_size"], test_size=sizes["test_size"], learnable=True)
        (tmp / "home").mkdir()
        repo = Repo(root, tmp / "mirror", tmp / "home", {"CI": "1", "FEDFORGET_THREADS": "1"})
        repo.write_params(params)
        repo.run(sys.executable, "-m", "pipeline.profile")
        repo.init_git_dvc()
        if build:
            repo.run("dvc", "repro", *build, timeout=300)
        return repo

    return make


def pytest_configure(config):
    """Tests compute on one thread, as a train stage's workers do: two xdist workers of two threads each on
    two cores would wait on each other at every parallel op, and a single process (-n 0) at the default
    thread count sums in another order, enough to take resnet_shallow's vectorized-vs-sequential check past
    its tolerance on an Intel Xeon with AVX-512 (2026-12-07)."""
    import torch

    torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    """The tier is the folder: everything under tests/e2e is `e2e` (left out by `scripts/test.sh --fast`),
    everything under tests/gpu is `gpu`."""
    for item in items:
        parts = item.path.parts
        if "e2e" in parts:
            item.add_marker(pytest.mark.e2e)
        elif "gpu" in parts:
            item.add_marker(pytest.mark.gpu)
