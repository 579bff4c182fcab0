"""The README's everyday commands, run as written: every line of its "Everyday DVC" block, in a small
repository with this pipeline and runs of the names the commands use, exits 0 and does what its comment
says (a variation retrains that run's seeds; `-f -s` retrains one stage from round 1)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from support.helpers import tiny_fedcurv_run, train_stage

pytestmark = pytest.mark.e2e

README = Path(__file__).resolve().parents[2] / "README.md"

# The tiny FedCurv run without its paper: each run below names its own.
RUN = {k: v for k, v in tiny_fedcurv_run(rounds=3).items() if k != "paper"}
PARAMS = {
    "profile": "default",
    "datasets": {"mnist": {"train_size": 300, "test_size": 60}},
    "partitions": {"shards": {"dataset": "mnist", "scheme": "shards", "clients": 6, "shards_per_client": 2, "seed": 0}},
    # The README's commands name these runs; tce_cifar10_tce_gn inherits its scaled lr from a template.
    "templates": {"tce_main": {**RUN, "paper": "tce", "algorithm": {"name": "fedavg"}, "scaled": {"lr": 0.1}}},
    "runs": {
        "fedcurv_e50_fedcurv": {**RUN, "paper": "fedcurv", "algorithm": {"name": "fedcurv", "lambda": 1.0}},
        "fedcurv_e10_fedavg": {**RUN, "paper": "fedcurv", "algorithm": {"name": "fedavg"}},
        "tce_cifar10_tce_gn": {"template": "tce_main"},
    },
}


def everyday_commands() -> list[str]:
    text = README.read_text()
    block = text.split("## Everyday DVC", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_the_readme_everyday_block_is_what_this_test_runs():
    commands = everyday_commands()
    assert commands[0] == "dvc repro" and any(c.startswith("dvc exp run -S") for c in commands)
    assert len(commands) >= 6


def test_every_everyday_command_of_the_readme_runs_as_written(pipeline_repo):
    repo = pipeline_repo(PARAMS)
    for command in everyday_commands():
        output = repo.run(*shlex.split(command), timeout=300)
        ran = set(re.findall(r"Running stage '([^']+)'", output))
        if command.startswith("dvc exp run -S"):
            run = shlex.split(command)[-1].lstrip("+").split(".")[1]
            assert {s for s in ran if "train@" in s} == {train_stage(run)}, (command, ran)
            assert "report" in ran, (command, ran)
        if command.startswith("dvc repro -f -s"):
            assert ran == {shlex.split(command)[-1]}, (command, ran)
            assert "resuming" not in output, output  # -f retrains from round 1
        if command.startswith("dvc exp show"):
            assert_readable_table(output, command)


def assert_readable_table(output: str, command: str) -> None:
    """Issue 54: `dvc exp show` on this project's params printed "…" in every column. The README's narrowed
    command must name its columns and print every cell whole (rich truncates a cell with "…")."""
    assert "…" not in output, (command, output)
    header = next((line for line in output.splitlines() if "Experiment" in line), "")
    for column in ("held", "failed", "reading_dependent", "inconclusive"):
        assert column in header, (command, output)
    rows = [line for line in output.splitlines() if line.strip().startswith(("workspace", "│ workspace"))]
    assert rows and re.search(r"\d", rows[0]), (command, output)
