"""A run's typed settings (pipeline.settings) are built from its resolved settings without changing what a
train stage writes (settings.json, the checkpoint key), and every resolved setting reaches the engine
through exactly the part that reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.inputs import settings_hash
from pipeline.settings import (
    MODEL_NAMES,
    MODEL_NORMS,
    RUN_DEFAULTS,
    RUN_REQUIRED,
    DataSettings,
    ModelSettings,
    ProbeSettings,
    RoundSettings,
    RunSettings,
    Schedule,
    build,
    run_keys,
    seed_settings,
)

REPO = Path(__file__).resolve().parents[2]
RESOLVED = sorted((REPO / "resolved").glob("*.json"))
PARTS = (DataSettings, ModelSettings, RoundSettings, Schedule, ProbeSettings)
READ_BY_RUN_SETTINGS = {"run", "key", "seed", "algorithm"}  # RunSettings' own fields
READ_BY_THE_COMMAND = {"seeds"}  # pipeline.train: which seeds the stage trains
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
        build(part, record)
    assert record.read | READ_BY_RUN_SETTINGS == set(record) - REPORTS_ONLY - READ_BY_THE_COMMAND


def test_the_schema_is_one_list_of_keys_from_which_defaults_and_required_keys_follow():
    """A key is declared once, on the field of the part that reads it: its default (or none) and what it
    allows; RUN_DEFAULTS and RUN_REQUIRED are that list read two ways."""
    keys = run_keys()
    assert set(RUN_DEFAULTS) | set(RUN_REQUIRED) == set(keys) and not set(RUN_DEFAULTS) & set(RUN_REQUIRED)
    assert set(RUN_REQUIRED) == {
        "partition",
        "model",
        "algorithm",
        "rounds",
        "client_fraction",
        "local_epochs",
        "batch_size",
        "lr",
    }
    assert RUN_DEFAULTS["checkpoint_every"] == 10 and RUN_DEFAULTS["optimizer"] == "sgd"
    resolved_only = {"dataset", "dataset_options", "seed"}  # filled in by the resolve stage or per seed
    assert not resolved_only & set(keys)


def test_the_models_and_norms_settings_allow_are_the_ones_models_builds():
    from pipeline import models

    assert set(MODEL_NAMES) == set(models.MODELS)
    for name, norms in MODEL_NORMS.items():
        for norm in norms:  # each builds
            models.build_model(name, (32, 32, 3), 10, 0, norm)
