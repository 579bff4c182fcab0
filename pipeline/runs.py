"""A run: one training job, as params.yaml describes it under runs.<key>, resolved for a profile.

Every run holds the paper's exact settings. Its `scaled` mapping holds what the default profile
changes to fit a laptop CPU (fewer rounds, smaller model, ...); the paper profile ignores it. The
resolved settings record which keys were scaled, so every report can say so.
"""
from __future__ import annotations

import copy
import hashlib
import json

from pipeline.config import (check_choice, check_fraction, check_int, check_keys, check_mapping,
                             check_nonnegative, check_positive, check_profiles, is_number)

RUN_DEFAULTS = {
    "momentum": 0.0,
    "weight_decay": 0.0,
    "seed": 0,
    "eval_every": 1,
    "targets": [],
    "checkpoint_every": 10,
    "note": "",
}
RUN_REQUIRED = ("paper", "partition", "model", "algorithm", "rounds", "client_fraction", "local_epochs",
                "batch_size", "lr")
RUN_KEYS = set(RUN_REQUIRED) | set(RUN_DEFAULTS) | {"profiles", "scaled"}
PAPERS = ("fedcurv", "importance", "tce", "fedwavg")


def deep_merge(base: dict, overrides: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def scaled_keys(overrides: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in overrides.items():
        keys += scaled_keys(value, f"{prefix}{key}.") if isinstance(value, dict) else [f"{prefix}{key}"]
    return keys


def check_run_values(path: str, run: dict, params: dict) -> list[str]:
    from pipeline.algorithms import check_algorithm
    from pipeline.datasets import dataset_spec
    from pipeline.models import MODELS, model_fits

    problems = check_choice(f"{path}.paper", run.get("paper"), PAPERS) if "paper" in run else []
    partitions = params.get("partitions") or {}
    if "partition" in run and (not isinstance(run["partition"], str) or run["partition"] not in partitions):
        problems += check_choice(f"{path}.partition", run["partition"], list(partitions))
    if "model" in run:
        problems += check_choice(f"{path}.model", run["model"] if isinstance(run["model"], str) else repr(run["model"]),
                                 list(MODELS))
        if isinstance(run["model"], str) and run["model"] in MODELS and isinstance(run.get("partition"), str) \
                and run["partition"] in partitions:
            dataset = partitions[run["partition"]]["dataset"]
            why = model_fits(run["model"], dataset_spec(dataset).image_shape)
            if why:
                problems.append(f"{path}.model: {run['model']!r} does not fit dataset {dataset}: {why}")
    if "algorithm" in run:
        problems += check_algorithm(f"{path}.algorithm", run["algorithm"])
    for key in ("rounds", "local_epochs", "batch_size", "eval_every", "checkpoint_every"):
        if key in run:
            problems += check_int(f"{path}.{key}", run[key], 1)
    if "seed" in run:
        problems += check_int(f"{path}.seed", run["seed"], 0)
    if "client_fraction" in run:
        problems += check_fraction(f"{path}.client_fraction", run["client_fraction"])
    if "lr" in run:
        problems += check_positive(f"{path}.lr", run["lr"])
    for key in ("momentum", "weight_decay"):
        if key in run:
            problems += check_nonnegative(f"{path}.{key}", run[key])
    if "momentum" in run and is_number(run["momentum"]) and run["momentum"] >= 1:
        problems.append(f"{path}.momentum: {run['momentum']!r} is not allowed; expected a number in [0, 1)")
    targets = run.get("targets", [])
    if not isinstance(targets, list) or not all(is_number(t) and 0 < t <= 1 for t in targets):
        problems.append(f"{path}.targets: {targets!r} is not allowed; expected a list of accuracies in (0, 1]")
    return problems


def check_run(path: str, run, params: dict) -> list[str]:
    problems = check_mapping(path, run)
    if problems:
        return problems
    problems = check_keys(path, run, RUN_KEYS, required=RUN_REQUIRED)
    if "profiles" in run:
        problems += check_profiles(f"{path}.profiles", run["profiles"])
    problems += check_run_values(path, run, params)
    if "scaled" in run and not isinstance(run["scaled"], dict):
        return problems + check_mapping(f"{path}.scaled", run["scaled"])
    scaled = run.get("scaled", {})
    if problems or not scaled:
        return problems
    problems = check_keys(f"{path}.scaled", scaled, RUN_KEYS - {"scaled", "profiles", "paper"})
    if problems:
        return problems
    merged = deep_merge(run, scaled)
    return [p.replace(f"{path}.", f"{path}.scaled.", 1) for p in check_run_values(path, merged, params)
            if any(p.startswith(f"{path}.{k}") for k in scaled_keys(scaled))]


def resolve_run(params: dict, key: str) -> dict:
    """The settings a run trains with under the active profile, defaults filled in."""
    from pipeline.algorithms import resolve_hyperparams

    run = params["runs"][key]
    profile = params["profile"]
    scaled = run.get("scaled", {}) if profile == "default" else {}
    settings = {**RUN_DEFAULTS, **deep_merge({k: v for k, v in run.items() if k not in ("scaled", "profiles")},
                                             scaled)}
    settings["algorithm"] = {"name": settings["algorithm"]["name"], **resolve_hyperparams(settings["algorithm"])}
    settings["key"] = key
    settings["profile"] = profile
    settings["dataset"] = params["partitions"][settings["partition"]]["dataset"]
    settings["scaled"] = {k: {"paper": lookup(run, k), "used": lookup(settings, k)} for k in scaled_keys(scaled)}
    return settings


def lookup(mapping: dict, dotted: str):
    for part in dotted.split("."):
        mapping = mapping.get(part) if isinstance(mapping, dict) else None
    return mapping


def settings_hash(settings: dict, extra: dict | None = None) -> str:
    """A short hash of everything that determines a run's numbers (checkpoints are keyed by it)."""
    payload = {k: v for k, v in settings.items() if k not in ("note", "checkpoint_every")}
    text = json.dumps({"settings": payload, "extra": extra or {}}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
