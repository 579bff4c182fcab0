"""A run's typed settings (pipeline.settings) are built from its resolved settings without changing what a
train stage writes (settings.json, the checkpoint key), and every resolved setting reaches the engine
through exactly the part that reads it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.inputs import seed_settings, settings_hash
from pipeline.settings import DataSettings, ModelSettings, ProbeSettings, RoundSettings, RunSettings, Schedule

REPO = Path(__file__).resolve().parents[1]
RESOLVED = sorted((REPO / "resolved").glob("*.json"))
PARTS = (DataSettings, ModelSettings, RoundSettings, Schedule, ProbeSettings)
READ_BY_RUN_SETTINGS = {"run", "key", "seed", "algorithm"}  # RunSettings' own fields
REPORTS_ONLY = {"paper", "profile", "scaled", "confirms"}  # in settings.json for the reports; no number depends on them


class ReadsRecorded(dict):
    """A dict that remembers which keys were read."""

    def __init__(self, *args):
        super().__init__(*args)
        self.read: set[str] = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)


def resolved(path: Path) -> dict:
    return json.loads(path.read_text())


def test_there_are_resolved_settings_to_check():
    assert len(RESOLVED) > 10


@pytest.mark.parametrize("path", RESOLVED, ids=lambda path: path.stem)
def test_the_record_written_and_hashed_is_the_resolved_settings_with_seed_and_key(path):
    settings = RunSettings.from_resolved(resolved(path), 3)
    expected = seed_settings(resolved(path), 3)
    assert json.dumps(settings.record) == json.dumps(expected)  # same keys, same order, same values
    assert settings_hash(settings.record, {"x": 1}) == settings_hash(expected, {"x": 1})
    assert (settings.key, settings.seed, settings.run) == (f"{path.stem}-seed3", 3, path.stem)
    assert settings.algorithm == expected["algorithm"]


@pytest.mark.parametrize("path", RESOLVED, ids=lambda path: path.stem)
def test_every_resolved_setting_but_the_reports_own_reaches_one_part_of_the_engine(path):
    record = ReadsRecorded(seed_settings(resolved(path), 0))
    for part in PARTS:
        part.from_resolved(record)
    assert record.read | READ_BY_RUN_SETTINGS == set(record) - REPORTS_ONLY

