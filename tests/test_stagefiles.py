"""The train stages live in one dvc.yaml (and one dvc.lock) per paper: the committed files are what
pipeline/stagefiles.py writes, each iterates over its own group of grid.yaml, and every run of
params.yaml lands in exactly one group."""
from __future__ import annotations

from pathlib import Path

import yaml

from pipeline.config import derive_grid, grid_runs, load_params
from pipeline.runs import PAPERS
from pipeline.stagefiles import STAGE_GROUPS, stage_file, stage_group, stage_text

REPO = Path(__file__).resolve().parents[1]


def test_the_committed_stage_files_are_the_ones_pipeline_profile_writes():
    for group in STAGE_GROUPS:
        assert stage_file(group, REPO).read_text() == stage_text(group), f"run `python -m pipeline.profile` ({group})"
    assert {path.parent.name for path in (REPO / "stages").glob("*/dvc.yaml")} == set(STAGE_GROUPS)


def test_each_stage_file_iterates_over_its_own_group_from_the_repository_root():
    for group in STAGE_GROUPS:
        text = yaml.safe_load(stage_text(group))
        assert text["vars"] == ["../../grid.yaml"]
        assert list(text["stages"]) == ["train"]
        train = text["stages"]["train"]
        assert train["foreach"] == "${grid.runs.%s}" % group
        assert train["do"]["wdir"] == "../.."  # the paths below are the root dvc.yaml's
        assert train["do"]["cmd"] == "python -m pipeline.train ${item.run} --seed ${item.seed}"


def test_the_root_dvc_yaml_has_no_train_stage_left():
    assert "train" not in yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]


def test_runs_are_grouped_by_their_paper_and_a_run_without_one_goes_to_other():
    run = {"partition": "p", "algorithm": {"name": "fedavg"}, "seeds": [0, 2]}
    params = {"profile": "default", "partitions": {"p": {"dataset": "mnist"}},
              "runs": {"a": {**run, "paper": "fedwavg"}, "b": {**run, "paper": "tce"}, "mine": run}}
    grid = derive_grid(params)
    assert set(grid["runs"]) == {*PAPERS, "other"}  # every group, empty or not: each stage file needs its key
    assert set(grid["runs"]["fedwavg"]) == {"a-seed0", "a-seed2"}
    assert set(grid["runs"]["tce"]) == {"b-seed0", "b-seed2"}
    assert set(grid["runs"]["other"]) == {"mine-seed0", "mine-seed2"}
    assert grid["runs"]["fedcurv"] == {} and grid["runs"]["importance"] == {}
    assert sorted(grid_runs(grid)) == ["a-seed0", "a-seed2", "b-seed0", "b-seed2", "mine-seed0", "mine-seed2"]
    assert grid["run_ids"] == ["a", "b", "mine"]


def test_the_committed_grid_puts_each_run_in_its_papers_file():
    runs = load_params(REPO / "params.yaml")["runs"]
    grid = yaml.safe_load((REPO / "grid.yaml").read_text())["grid"]
    assert {group for group, entries in grid["runs"].items() if entries} == {"fedcurv", "importance", "tce", "fedwavg"}
    for group, entries in grid["runs"].items():
        for key, entry in entries.items():
            assert stage_group(runs[entry["run"]]) == group, key


def test_each_lock_holds_the_train_stages_of_its_own_file_only():
    """Moving a stage between files (a run whose `paper` changed) leaves its old entry behind: DVC never
    prunes a lock. The committed locks hold exactly the grid's stages, each in its group's lock."""
    grid = yaml.safe_load((REPO / "grid.yaml").read_text())["grid"]
    root_lock = yaml.safe_load((REPO / "dvc.lock").read_text())["stages"]
    assert not [name for name in root_lock if name.startswith("train@")]
    for group in STAGE_GROUPS:
        lock = REPO / "stages" / group / "dvc.lock"
        names = set(yaml.safe_load(lock.read_text())["stages"]) if lock.is_file() else set()
        assert names == {f"train@{key}" for key in grid["runs"][group]}, group
