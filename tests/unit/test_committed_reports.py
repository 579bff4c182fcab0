"""The committed reports as a reader meets them: every markdown table keeps its columns, and a run or a
sample trained on a stand-in names the data it trained (issue 51: no report labels a dataset it did not
train on)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline.report.common import markdown_row

REPO = Path(__file__).resolve().parents[2]
REPORTS = REPO / "reports"
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def cells(line: str) -> list[str]:
    return UNESCAPED_PIPE.split(line.strip())[1:-1]


def tables(text: str):
    """(header cells, [row lines]) for each markdown table of `text`."""
    lines = text.splitlines()
    for i in range(len(lines) - 1):
        if lines[i].startswith("|") and re.fullmatch(r"\|(-+\|)+", lines[i + 1].strip()):
            rows = []
            for line in lines[i + 2 :]:
                if not line.startswith("|"):
                    break
                rows.append(line)
            yield cells(lines[i]), rows


def test_a_pipe_inside_a_cell_stays_in_its_cell():
    assert markdown_row(["a | b", "c"]) == "| a \\| b | c |"
    assert cells(markdown_row(["a | b", "c"])) == [" a \\| b ", " c "]


@pytest.mark.parametrize("path", sorted(REPORTS.rglob("*.md")), ids=lambda p: str(p.relative_to(REPO)))
def test_every_committed_table_row_has_its_headers_columns(path):
    for header, rows in tables(path.read_text()):
        for row in rows:
            assert len(cells(row)) == len(header), (path.name, row[:160])


def runs_trained_on(dataset: str) -> set[str]:
    runs = set()
    for settings in REPORTS.glob("runs/*/seed*/settings.json"):
        if json.loads(settings.read_text()).get("dataset") == dataset:
            runs.add(settings.parent.parent.name)
    return runs


def test_the_runs_tables_name_the_data_a_stand_in_trained():
    """TCE's default runs are keyed `tce_cifar10_…` after the paper's experiment and train Fashion-MNIST: every
    row of reports/README.md for one says so."""
    stand_ins = {run for run in runs_trained_on("fashion_mnist") if "cifar10" in run}
    assert stand_ins
    for header, rows in tables((REPORTS / "README.md").read_text()):
        if "trained on" not in [h.strip() for h in header]:
            continue
        column = [h.strip() for h in header].index("trained on")
        for row in rows:
            run = cells(row)[0].strip()
            if run in stand_ins:
                assert cells(row)[column].strip() == "Fashion-MNIST (for CIFAR-10)", row[:160]


def test_the_samples_that_decide_a_tce_claim_name_the_data_they_trained():
    samples = sorted((REPORTS / "tce").glob("sample_*.md"))
    assert samples
    for path in samples:
        assert "Fashion-MNIST standing in for CIFAR-10" in path.read_text(), path.name
