"""The train stages live in one dvc.yaml (and one dvc.lock) per paper: the committed files are what
pipeline/stagefiles.py writes, each iterates over its own group of grid.yaml, and every run of
params.yaml lands in exactly one group."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from pipeline.config import derive_grid, grid_runs, load_params
from pipeline.papers import PAPERS
from pipeline.stagefiles import STAGE_GROUPS, stage_file, stage_group, stage_text

REPO = Path(__file__).resolve().parents[1]


def test_the_committed_stage_files_are_the_ones_pipeline_profile_writes():
    for group in STAGE_GROUPS:
        assert stage_file(group, REPO).read_text() == stage_text(group), f"run `python -m pipeline.profile` ({group})"
    assert {path.parent.name for path in (REPO / "stages").glob("*/dvc.yaml")} == set(STAGE_GROUPS)


PLACEHOLDER = re.compile(r"\$\{(key|item(?:\.(\w+))?)\}")


def interpolate(value, key, item):
    """DVC's foreach templating of one entry, for `${key}`, `${item}` and `${item.<field>}`."""
    if isinstance(value, dict):
        return {interpolate(k, key, item): interpolate(v, key, item) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, key, item) for v in value]
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda m: str(key if m[1] == "key" else item[m[2]] if m[2] else item), value)
    return value


def paths(entries) -> list[str]:
    """The paths of a stage's deps/outs/metrics/plots list (plain strings or {path: options})."""
    return [entry if isinstance(entry, str) else next(iter(entry)) for entry in entries or []]


def root_outputs(dvc_yaml: dict, grid: dict) -> dict[str, str]:
    """path -> stage, for every output the root dvc.yaml's stages write, their foreach expanded on `grid`."""
    found = {}
    for name, stage in dvc_yaml["stages"].items():
        if "foreach" in stage:
            items = grid[stage["foreach"].removeprefix("${grid.").removesuffix("}")]
            entries = items.items() if isinstance(items, dict) else ((item, item) for item in items)
            stages = [interpolate(stage["do"], key, item) for key, item in entries]
        else:
            stages = [stage]
        for one in stages:
            found.update({path: name for path in paths(one.get("outs")) + paths(one.get("metrics"))})
    return found


def test_every_train_stage_runs_from_the_root_on_the_root_stages_outputs():
    """Each committed stage file, expanded over a grid with runs in every group as DVC would expand it:
    every placeholder is a field the grid gives, the command runs from the repository's root, every
    dependency is a file in the repository or an output of a root stage, every output lies in its run's
    folder under reports/runs (which the report stage reads) or is its model, named by the grid's key."""
    run = {"partition": "p", "algorithm": {"name": "fedavg"}, "seeds": [0, 2]}
    params = {"profile": "default", "partitions": {"p": {"dataset": "mnist"}},
              "runs": {**{group: {**run, "paper": group} for group in PAPERS}, "mine": run}}
    grid = derive_grid(params)
    dvc_yaml = yaml.safe_load((REPO / "dvc.yaml").read_text())
    produced = root_outputs(dvc_yaml, grid)
    assert "reports/runs" in dvc_yaml["stages"]["report"]["deps"]
    for group in STAGE_GROUPS:
        path = stage_file(group, REPO)
        text = yaml.safe_load(path.read_text())
        assert [(path.parent / v).resolve() for v in text["vars"]] == [REPO / "grid.yaml"], group
        assert list(text["stages"]) == ["train"], group
        train = text["stages"]["train"]
        top, *where = train["foreach"].removeprefix("${").removesuffix("}").split(".")
        entries = {"grid": grid}[top]
        for name in where:
            entries = entries[name]
        assert entries == grid["runs"][group] != {}, f"{group} iterates over another group's runs"
        assert (path.parent / train["do"]["wdir"]).resolve() == REPO, group
        for key, item in entries.items():
            stage = interpolate(train["do"], key, item)
            assert "${" not in str(stage), (group, key, stage)
            assert key == f"{item['run']}-seed{item['seed']}"
            assert stage["cmd"].split()[:3] == ["python", "-m", "pipeline.train"]
            for dep in paths(stage["deps"]):
                assert (REPO / dep).is_file() or any(dep == out or dep.startswith(out + "/") for out in produced), \
                    f"{group}: {key} depends on {dep}, which no root stage writes"
            run_folder = f"reports/runs/{item['run']}/seed{item['seed']}/"
            for out in paths(stage["outs"]) + paths(stage["metrics"]) + paths(stage["plots"]):
                assert out.startswith(run_folder) or out == f"data/models/{key}.pt", (group, key, out)


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
