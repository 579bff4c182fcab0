"""Validation helpers: small checks that each return a list of one-line problems (and grid.yaml's reader,
for the train stage's check of its run and seed).

A leaf module (it imports nothing from the pipeline), so config, runs and every algorithm can use it
without an import cycle.
"""

from __future__ import annotations

import difflib
import math
import numbers
from pathlib import Path

import yaml

PROFILES = ("default", "paper", "gpu_day")
# The block of a run that each profile merges over the paper's settings: `scaled` fits the default
# profile to a laptop CPU, `gpu_day` fits the papers' models and datasets into one GPU-day; the paper
# profile takes the paper's settings as they are.
PROFILE_BLOCKS = {"default": "scaled", "paper": None, "gpu_day": "gpu_day"}


def is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value) -> bool:
    """A finite real number (not a bool): NaN and infinities are refused wherever a number is asked for."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def check_int(path, value, low=None, high=None):
    if not is_int(value) or (low is not None and value < low) or (high is not None and value > high):
        bounds = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
        return [f"{path}: {value!r} is not allowed; expected {bounds}"]
    return []


def check_positive(path, value):
    if not is_number(value) or not value > 0:
        return [f"{path}: {value!r} is not allowed; expected a finite number > 0"]
    return []


def check_nonnegative(path, value):
    if not is_number(value) or value < 0:
        return [f"{path}: {value!r} is not allowed; expected a finite number >= 0"]
    return []


def check_fraction(path, value, low_open=True, high=1.0):
    if not is_number(value) or not ((0 < value) if low_open else (0 <= value)) or value > high:
        interval = f"(0, {high}]" if low_open else f"[0, {high}]"
        return [f"{path}: {value!r} is not allowed; expected a number in {interval}"]
    return []


def check_choice(path, value, choices):
    if value not in choices:
        return [f"{path}: {value!r} is not allowed; expected one of {', '.join(map(str, choices))}"]
    return []


def check_keys(path, mapping, allowed, required=()):
    """Unknown keys (with a "did you mean") and missing required keys of one mapping."""
    problems, suggested = [], set()
    for key in mapping:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), list(allowed), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(sorted(allowed))}"
            problems.append(f"{path}.{key}: unknown key{hint}")
            suggested.update(close)
    # A misspelt required key is one problem: its "did you mean" line already names the missing key.
    problems += [f"{path}.{key}: missing; required" for key in required if key not in mapping and key not in suggested]
    return problems


def check_profiles(path, value):
    if not isinstance(value, list) or not value or any(p not in PROFILES for p in value):
        return [f"{path}: {value!r} is not allowed; expected a list drawn from {', '.join(PROFILES)}"]
    return []


def in_profile(settings: dict, profile: str) -> bool:
    """Runs and partitions belong to the default and the paper profile unless their `profiles` list says
    otherwise; to the one-GPU-day profile only a run with a `gpu_day` block (its changes to the paper's
    settings; `{}` for none), or one whose `profiles` list names it: a thinned grid is opt-in."""
    if profile == "gpu_day" and isinstance(settings.get("gpu_day"), dict):
        return True
    return profile in settings.get("profiles", ("default", "paper"))


def profile_overrides(run: dict, profile: str) -> dict:
    """What `profile` merges over a run's paper settings: its block (`scaled`, `gpu_day`), or nothing."""
    block = PROFILE_BLOCKS[profile]
    overrides = run.get(block) if block else None
    return overrides if isinstance(overrides, dict) else {}


def check_mapping(path, value):
    return [] if isinstance(value, dict) else [f"{path}: {value!r} is not allowed; expected a mapping"]


def check_unique_ints(path, value, low=0, allow_empty=False):
    """A list of distinct integers >= low (seeds, probe rounds)."""
    if not isinstance(value, list) or (not value and not allow_empty) or not all(is_int(v) and v >= low for v in value):
        what = "a list" if allow_empty else "a non-empty list"
        return [f"{path}: {value!r} is not allowed; expected {what} of integers >= {low}"]
    duplicates = sorted({v for v in value if value.count(v) > 1})
    if duplicates:
        return [f"{path}: {value!r} is not allowed; {', '.join(map(str, duplicates))} listed twice"]
    return []


def read_grid(path: Path = Path("grid.yaml")) -> dict | None:
    """grid.yaml's `grid` mapping (written by `python -m pipeline.profile`), None where there is none or it
    does not parse (the stages that depend on it say so). With libyaml where PyYAML has it: 0.06 s
    against 0.4 s, and every train stage reads it."""
    try:
        document = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError):
        return None
    return document.get("grid") if isinstance(document, dict) else None


def run_problems(run: str, grid: dict | None) -> list[str]:
    """Why `python -m pipeline.train RUN` has nothing to train (empty: it has). The runs are grid.yaml's:
    the active profile's, one train stage each. Without a grid (none written yet) nothing is said here;
    the resolved file's absence is reported next."""
    if not isinstance(grid, dict) or not isinstance(grid.get("runs"), dict):
        return []
    runs = sorted(grid["runs"])
    if run in runs:
        return []
    close = difflib.get_close_matches(run, runs, n=3)
    hint = f"did you mean {', '.join(map(repr, close))}?" if close else "allowed: the keys of `runs` in params.yaml"
    return [f"runs.{run}: no run named {run!r} in profile {grid.get('profile')} (grid.yaml); {hint}"]
