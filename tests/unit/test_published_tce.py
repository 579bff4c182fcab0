"""The TCE paper's appendix Tables 1-2 in published.yaml against the paper text, value by value.

Table 1's text is garbled (its lr and norm cells sit on the wrong rows), so the reading is checked too:
every printed lr label and norm must fall in the block and row the reading assigns, and the method
column must cycle FedAvg, TCE, TCE."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from support.helpers import require_paper

PAPER = Path(__file__).resolve().parents[2].parent / "shared" / "papers" / "002_717454cd1d7d3160.txt"
PUBLISHED = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "pipeline" / "report" / "published.yaml").read_text()
)["tce"]
ROWS = ("fedavg_gn", "tce_gn", "tce_bn")
DATASETS = ("cifar10", "cifar100", "femnist")


def paper_lines() -> list[str]:
    return require_paper(PAPER).splitlines()


def table1_rows() -> list[list[str]]:
    """The 27 data rows of appendix Table 1 as tab-separated cells (LaTeX bold removed)."""
    lines = paper_lines()
    header = next(i for i, line in enumerate(lines) if line.startswith("Method\tlr\tnorm"))
    rows = []
    for line in lines[header + 1 :]:
        if not line.startswith("FEDAVG"):
            break
        line = re.sub(r"\$\\textbf\{([^}]*)\} \\pm \\textbf\{([^}]*)\}\$", r"\1 ± \2", line)
        rows.append(line.split("\t"))
    return rows


def test_table1_has_nine_blocks_of_fedavg_tce_tce():
    rows = table1_rows()
    assert len(rows) == 27
    assert [r[0] for r in rows] == ["FEDAVG", "FEDAVG+TCE (OURS)", "FEDAVG+TCE (OURS)"] * 9


def test_every_printed_lr_and_norm_label_falls_where_the_reading_puts_it():
    lrs = PUBLISHED["table1"]["lrs"]
    printed_lrs = []
    for k, row in enumerate(table1_rows()):
        labels = " ".join(row[1:3]).replace("aroun", "group").split()
        for label in labels:
            if label in ("group", "batch"):
                assert label == ("batch" if k % 3 == 2 else "group"), (k, row)
            else:
                assert label == lrs[k // 3], (k, row)
                printed_lrs.append(label)
    assert printed_lrs == lrs  # each block's label printed exactly once


def test_table1_values_match_the_paper_cell_by_cell():
    table = PUBLISHED["table1"]
    for k, row in enumerate(table1_rows()):
        cells = [c.strip() for c in row[-3:]]
        for dataset, cell in zip(DATASETS, cells):
            assert table[dataset][ROWS[k % 3]][k // 3] == cell, (dataset, ROWS[k % 3], table["lrs"][k // 3])


def test_table2_matches_the_paper_row_by_row():
    lines = paper_lines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("best acc (best lr)"))
    names = {"FedAvg": "fedavg_gn", "FedAvg+TCE (group)": "tce_gn", "FedAvg+TCE (batch)": "tce_bn"}
    sections = {"CIFAR-10": "cifar10", "CIFAR-100": "cifar100", "FEMNIST": "femnist"}
    seen = 0
    dataset = None
    for line in lines[start + 1 :]:
        if line.startswith("Table 2"):
            break
        cells = [c.strip() for c in line.split("\t")]
        if cells[0] in sections:
            dataset = sections[cells[0]]
            continue
        if cells[0] not in names:
            continue
        entry = PUBLISHED["table2"][dataset][names[cells[0]]]
        best = re.fullmatch(r"([0-9.]+)(?: \(([0-9.]+)\))?", cells[1])
        assert (best.group(1), best.group(2)) == (entry["best"], entry["best_lr"]), (dataset, cells[0])
        for column, key in zip(cells[2:5], ("within_2", "within_3", "within_5")):
            assert [v.strip() for v in column.split(",")] == entry[key], (dataset, cells[0], key)
        seen += 1
    assert seen == 9


def test_table2_best_lrs_are_table1_maxima_where_printed():
    """The cross-check behind the reading: each printed best lr is where Table 1's column peaks."""
    table1, table2 = PUBLISHED["table1"], PUBLISHED["table2"]
    for dataset in ("cifar10", "cifar100"):
        for row in ROWS:
            means = [float(v.split(" ± ")[0]) if v != "NC" else -1.0 for v in table1[dataset][row]]
            peak = max(means)
            best_lr = table2[dataset][row]["best_lr"]
            assert means[table1["lrs"].index(best_lr)] == peak, (dataset, row)
