"""The one-GPU-day profile (issue 40): the papers' models and mirror datasets, the headline runs only
(a run joins by its `gpu_day` block), and `pipeline.plan`'s estimate of it within 24 hours of one GPU at
the committed device benchmark's rates."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import check_params, derive_grid, load_checked_params
from pipeline.runs import expand_templates, resolve_run

REPO = Path(__file__).resolve().parents[2]
MIRROR_DATASETS = {"mnist", "fashion_mnist", "cifar10", "cifar100", "femnist"}  # what ../shared/datasets holds


@pytest.fixture(scope="module")
def params():
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        return load_checked_params(grid_path=None)
    finally:
        os.chdir(cwd)


def test_a_run_joins_the_gpu_day_profile_by_its_block_and_takes_its_changes(params):
    gpu_day = {**params, "profile": "gpu_day"}
    grid = derive_grid(gpu_day)
    members = {key for key, run in params["runs"].items() if isinstance(run.get("gpu_day"), dict)}
    assert set(list(grid["runs"])) == members and members < set(params["runs"])
    settings = resolve_run(gpu_day, "tce_cifar10_tce_gn")
    paper = resolve_run({**params, "profile": "paper"}, "tce_cifar10_tce_gn")
    assert (paper["rounds"], settings["rounds"]) == (4000, 400)
    assert settings["scaled"]["rounds"] == {"paper": 4000, "used": 400}
    assert settings["model"] == paper["model"] == "resnet18" and settings["profile"] == "gpu_day"
    # the default profile still applies `scaled` (its stand-in), not `gpu_day`, which keeps CIFAR-10
    default = resolve_run({**params, "profile": "default"}, "tce_cifar10_tce_gn")
    assert (default["rounds"], default["partition"]) == (60, "fashion_mnist_dirichlet_alpha01")
    assert settings["partition"] == paper["partition"] == "cifar10_dirichlet_alpha01"


def test_the_gpu_day_profile_keeps_the_papers_models_and_uses_only_the_mirrors_datasets(params):
    gpu_day, paper = {**params, "profile": "gpu_day"}, {**params, "profile": "paper"}
    grid = derive_grid(gpu_day)
    assert set(grid["datasets"]) <= MIRROR_DATASETS
    papers = set()
    for key in list(grid["runs"]):
        ours, theirs = resolve_run(gpu_day, key), resolve_run(paper, key)
        changed = {name for name in ours if ours[name] != theirs[name]} - {"profile", "scaled"}
        assert changed <= {"rounds", "probe_rounds"}, (key, changed)
        assert len(ours["seeds"]) >= 3, key
        papers.add(ours["paper"])
    assert papers == {"fedcurv", "importance", "tce", "fedwavg"}


def test_a_gpu_day_block_that_moves_the_rounds_before_a_probe_is_one_line_naming_it(params):
    raw = expand_templates(copy.deepcopy(params))
    raw["runs"]["tce_cifar10_tce_gn"]["gpu_day"] = {"rounds": 100}
    problems = check_params(raw)
    assert problems == [
        "runs.tce_cifar10_tce_gn.probe_rounds: [2000, 2800, 4000] after the last round (100); "
        "expected rounds in [1, 100] (with the gpu_day profile's rounds)"
    ]
    raw["runs"]["tce_cifar10_tce_gn"]["gpu_day"] = {"roundz": 100}
    assert any(
        p.startswith("runs.tce_cifar10_tce_gn.gpu_day.roundz: unknown key; did you mean 'rounds'")
        for p in check_params(raw)
    )


def test_plan_puts_the_gpu_day_profile_within_24_hours_of_one_gpu_and_names_its_rates():
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.plan", "--profile", "gpu_day"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    total = result.stdout.splitlines()[-1]
    hours = float(re.search(r"GPU ([0-9.]+) h", total).group(1))
    assert 0 < hours <= 24, total
    assert "without" not in total.split("; GPU")[1].split("(measured CPU")[0], total  # every run sized and rated
    assert "at its measured TFLOP/s by model (benchmarks/results/gpu/device_speed.json" in total
