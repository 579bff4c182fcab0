"""The train stages' dvc.yaml files: one per paper (and `other` for runs that name none), each with
its own dvc.lock, all written from TRAIN_STAGE below by `python -m pipeline.profile`.

Why not one `train` stage in the root dvc.yaml: after every stage it runs, DVC parses and rewrites
the whole dvc.lock of that stage's dvc.yaml (ruamel, round trip). With the 117 train stages of the
default profile in one lock of 208 KB that was about 2 s a stage (parse 1.3 s, dump 0.7 s, measured
with cProfile), a quarter of each stage's start-up. Split by paper, a stage rewrites a lock of at
most 58 KB (FedWAvg's 38 stages). The stage names gain their file:
`stages/fedwavg/dvc.yaml:train@fedwavg_long_c28_fedavg-seed0`, and `dvc repro stages/fedwavg/dvc.yaml`
builds one paper's runs (with the data stages they need). A plain `dvc repro` still builds
everything: the root dvc.yaml's report stage depends on all of reports/runs.

The files are written, not hand-kept, so that the five copies cannot drift apart;
tests/test_stagefiles.py checks that the committed ones are what TRAIN_STAGE gives.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.io import write_text
from pipeline.papers import PAPERS

STAGES_DIR = Path("stages")
STAGE_GROUPS = (*PAPERS, "other")

TRAIN_STAGE = """\
# Written by `python -m pipeline.profile` from pipeline/stagefiles.py (TRAIN_STAGE); edit it there.
# The train stages of the {whose}: one per (run, seed), listed in grid.yaml under
# grid.runs.{group}. The commands run from the repository's root (wdir), so every path
# below is relative to it, as in the root dvc.yaml.
vars:
  - ../../grid.yaml

stages:
  train:
    foreach: ${{grid.runs.{group}}}
    do:
      wdir: ../..
      cmd: python -m pipeline.train ${{item.run}} --seed ${{item.seed}}
      deps:
        - resolved/${{item.run}}.json
        # The engine's modules, through their fingerprint (the root dvc.yaml's fingerprint stage), and
        # only this run's algorithm: adding or changing another algorithm's module retrains none of this
        # run's seeds (an algorithm module imports nothing else from its package but common.py;
        # tests/test_algorithms_fedwavg.py checks it).
        - fingerprint/engine.json
        - pipeline/algorithms/${{item.algorithm}}.py
        # The data through its records in git (each holds its file's sha256, which the loader checks),
        # not the arrays in DVC's cache: a fresh clone without the cache has every train stage up to date.
        - reports/datasets/${{item.dataset}}.json
        - reports/partitions/${{item.partition}}/meta.json
      # The trained model (data/models/<run>-seed<s>.pt) is written but is not an out, for the same
      # reason: `dvc repro -f` of this stage or `python -m pipeline.train` rebuilds it bit for bit.
      outs:
        - reports/runs/${{item.run}}/seed${{item.seed}}/settings.json:
            cache: false
        - reports/runs/${{item.run}}/seed${{item.seed}}/timing.json:
            cache: false
        # forgetting/ (the probes' files) is written with the rest of the run folder but is not an out:
        # for a run without probes it is empty, git keeps no empty folder, and DVC would take the folder
        # missing from a fresh clone for a deleted output and retrain the run. It is in git, and the
        # report stage depends on all of reports/runs.
      metrics:
        - reports/runs/${{item.run}}/seed${{item.seed}}/metrics.json:
            cache: false
      plots:
        - reports/runs/${{item.run}}/seed${{item.seed}}/plots/metrics:
            cache: false
            x: step
"""


def stage_group(run: dict) -> str:
    """Which stages/<group>/dvc.yaml trains a run: its paper's, or `other`."""
    return run.get("paper") or "other"


def stage_file(group: str, root: Path = Path(".")) -> Path:
    return root / STAGES_DIR / group / "dvc.yaml"


def stage_text(group: str) -> str:
    whose = "runs that name no `paper`" if group == "other" else f"runs whose `paper` is {group}"
    return TRAIN_STAGE.format(group=group, whose=whose)


def write_stage_files(root: Path = Path(".")) -> None:
    for group in STAGE_GROUPS:
        stage_file(group, root).parent.mkdir(parents=True, exist_ok=True)
        write_text(stage_file(group, root), stage_text(group))
