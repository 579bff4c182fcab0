"""mypy reads every engine module (pyproject.toml's [tool.mypy] files): the list and the engine cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

from pipeline import fingerprint

REPO = Path(__file__).resolve().parents[2]


def mypy_files() -> set[str]:
    text = (REPO / "pyproject.toml").read_text()
    block = re.search(r"^\[tool\.mypy\]$(.*?)^\[", text, re.M | re.S).group(1)
    listed = re.search(r"^files = \[(.*?)\]", block, re.M | re.S).group(1)
    return set(re.findall(r'"([^"]+)"', listed))


def test_mypy_reads_every_engine_module():
    engine = set(fingerprint.engine_modules(REPO))
    assert engine <= mypy_files(), sorted(engine - mypy_files())
    assert all((REPO / path).is_file() for path in mypy_files())
