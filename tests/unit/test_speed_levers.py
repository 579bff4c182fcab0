"""The speed benchmark's engine rounds run with the levers the environment sets, as a train stage does
(RuntimeOptions reads FEDFORGET_CHUNK, _COMPILE and _FOREACH once): the engine no longer reads them itself."""

from __future__ import annotations

import pytest

from benchmarks import speed
from pipeline.cohort import Levers


@pytest.mark.parametrize(
    "variables, expected",
    [
        ({}, Levers("mmap", "off", False)),
        ({"FEDFORGET_CHUNK": "device", "FEDFORGET_FOREACH": "on"}, Levers("device", "off", True)),
    ],
)
def test_engine_rounds_take_the_environments_levers(monkeypatch, variables, expected):
    for name in ("FEDFORGET_CHUNK", "FEDFORGET_COMPILE", "FEDFORGET_FOREACH"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    seen = []

    class Done:
        diverged = True  # keeps the state: nothing else of the result is read

    def spy(*args, levers=None, **kwargs):
        seen.append(levers)
        return Done()

    monkeypatch.setattr(speed, "run_round", spy)
    monkeypatch.setattr(speed, "initial_state", lambda *args: {})
    monkeypatch.setattr(speed, "build", lambda cls, settings: None)
    one_round = speed.engine_rounds(None, "fedavg", {}, type("Data", (), {"clients": [0, 1]})(), {}, vectorized=True)
    one_round(1)
    assert seen == [expected]
