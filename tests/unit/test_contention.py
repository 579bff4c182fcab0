"""benchmarks.contention's acceptance checks and table on hand-worked numbers (the measurement itself is a
benchmark, run by hand with nothing else on the CPU: benchmarks/results/contention.md)."""

from __future__ import annotations

from benchmarks.contention import markdown, verdicts

ALONE, FIRST, DEFAULT, BESIDE, OLD = (
    "1 thread, alone",
    "1 thread, alone, first seed only",
    "default, alone",
    "default, beside one busy process",
    "one 2-thread process, OpenMP spinning, beside one busy process",
)
TESTS_ALONE, TESTS_BESIDE = "1 process of 1 thread, alone", "default (2 workers), beside one busy process"


def test_the_stage_check_allows_ten_percent_and_no_more():
    assert verdicts({ALONE: 100.0, BESIDE: 110.0}, {}) == {
        "stage beside one busy process <= 1-thread time + 10 %": True
    }
    assert verdicts({ALONE: 100.0, BESIDE: 110.5}, {}) == {
        "stage beside one busy process <= 1-thread time + 10 %": False
    }


def test_the_test_tier_check_compares_with_one_process():
    found = verdicts({ALONE: 1.0, BESIDE: 1.0}, {TESTS_ALONE: 400.0, TESTS_BESIDE: 401.0})
    assert found["test tier beside one busy process <= its 1-process time"] is False
    found = verdicts({ALONE: 1.0, BESIDE: 1.0}, {TESTS_ALONE: 400.0, TESTS_BESIDE: 320.0})
    assert found["test tier beside one busy process <= its 1-process time"] is True


def test_the_table_compares_seconds_a_seed():
    # 3 seeds in 120 s alone is 40 s a seed; the one-seed row is set beside the one-thread run of that seed
    # alone (50 s: its process's start-up and the first seed's figures are not shared): 80 s is 1.6 times it.
    record = {
        "when": "now",
        "cpu": "a CPU",
        "run": "r",
        "seeds": [0, 1, 2],
        "commit": "abc",
        "train": {
            ALONE: {"seeds": [0, 1, 2], "seconds": 120.0},
            FIRST: {"seeds": [0], "seconds": 50.0},
            DEFAULT: {"seeds": [0, 1, 2], "seconds": 90.0},
            BESIDE: {"seeds": [0, 1, 2], "seconds": 126.0},
            OLD: {"seeds": [0], "seconds": 80.0},
        },
        "tests": {},
        "verdicts": {"a check": True},
    }
    table = markdown(record)
    assert f"| {OLD} | [0] | 80.0 | 1.60 |" in table
    assert f"| {FIRST} | [0] | 50.0 | 1.00 |" in table
    assert f"| {BESIDE} | [0, 1, 2] | 126.0 | 1.05 |" in table
    assert "- a check: met" in table
