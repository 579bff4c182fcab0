"""Fixtures shared by several test files."""
from __future__ import annotations

import pytest


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A fresh directory made the working directory (the report reads and writes relative paths)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
