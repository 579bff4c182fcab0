"""A run: one training job, as params.yaml describes it under runs.<key>, resolved for a profile.

Every run holds the paper's exact settings. Its `scaled` mapping holds what the default profile
changes to fit a laptop CPU (fewer rounds, smaller model, ...); its `gpu_day` mapping, if any, what the
one-GPU-day profile changes (fewer rounds or seeds on the papers' models) and that the run belongs to that
profile; the paper profile ignores both. The resolved settings record which keys the active profile
changed (under `scaled`, whichever block it was), so every report can say so. The resolve stage
(pipeline/resolve.py) writes them for the train stages.
"""

from __future__ import annotations

import copy

from pipeline.algorithms import check_algorithm, resolve_hyperparams
from pipeline.checks import (
    PROFILE_BLOCKS,
    check_choice,
    check_fraction,
    check_int,
    check_keys,
    check_mapping,
    check_nonnegative,
    check_positive,
    check_profiles,
    check_unique_ints,
    is_number,
    profile_overrides,
)
from pipeline.errors import UserError
from pipeline.inputs import dataset_spec
from pipeline.papers import PAPERS
from pipeline.settings import MODEL_NAMES, MODEL_NORMS, RUN_DEFAULTS, RUN_REQUIRED, allowed_values, model_fits

PROFILE_BLOCK_KEYS = tuple(block for block in PROFILE_BLOCKS.values() if block)  # "scaled", "gpu_day"
# `confirms` (a confirmatory sample of another run: confirmed_run below) has no default, so that a run
# without one resolves to the same file as before it existed.
RUN_KEYS = set(RUN_REQUIRED) | set(RUN_DEFAULTS) | {"profiles", "confirms", *PROFILE_BLOCK_KEYS}


def deep_merge(base: dict, overrides: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def expand_templates(params: dict) -> dict:
    """params with every run's `template: <name>` chain expanded (the run's own keys win; `scaled`
    blocks merge key by key over the template's). Templates are how runs share settings in params.yaml:
    not YAML anchors, which `dvc exp run -S` would write through into every run sharing one."""
    templates = params.get("templates") or {}
    if not isinstance(templates, dict):
        raise UserError(
            f"templates: {type(templates).__name__} is not allowed; expected a mapping of names to settings"
        )

    def expanded(path: str, entry, chain: tuple[str, ...]):
        if not isinstance(entry, dict) or "template" not in entry:
            return entry
        name = entry["template"]
        if not isinstance(name, str) or name not in templates:
            raise UserError(f"{path}.template: {name!r} is not a template; expected one of {', '.join(templates)}")
        if name in chain:
            raise UserError(
                f"{path}.template: {name!r} names itself through {' -> '.join(chain + (name,))}; "
                "templates must not form a cycle"
            )
        base = expanded(f"templates.{name}", templates[name], chain + (name,))
        if not isinstance(base, dict):
            raise UserError(
                f"templates.{name}: {type(base).__name__} is not allowed; expected a mapping of run settings"
            )
        return inherit(base, {k: v for k, v in entry.items() if k != "template"})

    runs = params.get("runs")
    if not isinstance(runs, dict):
        return params
    runs = {key: expanded(f"runs.{key}", run, ()) for key, run in runs.items()}
    return {**params, "runs": {key: confirmed_run(f"runs.{key}", run, runs) for key, run in runs.items()}}


# A confirmatory sample trains another run again on fresh seeds, for the claims named (docs/methodology.md,
# "A confirmatory sample"): so it may change nothing but the seeds (and where it is run), and no seed of
# the run it confirms, or its verdict would rest on seeds that were already read.
CONFIRMATION_KEYS = {"confirms", "seeds", "profiles", "note", *PROFILE_BLOCK_KEYS}


def confirmed_run(path: str, entry, runs: dict):
    """A run with `confirms: {run: <key>, claims: [<claim id>, ...]}`: the settings of the run it confirms,
    with its own seeds (and profiles); anything else is a one-line error."""
    if not isinstance(entry, dict) or entry.get("confirms") is None:
        return entry
    plan = entry["confirms"]
    if not isinstance(plan, dict) or set(plan) != {"run", "claims"}:
        raise UserError(
            f"{path}.confirms: {plan!r} is not allowed; expected a mapping with `run` (the run it "
            "confirms) and `claims` (the claim ids whose verdict it decides)"
        )
    target, claims = plan["run"], plan["claims"]
    if not isinstance(target, str) or target not in runs or target == path.split(".", 1)[1]:
        raise UserError(f"{path}.confirms.run: {target!r} is not another run of params.yaml")
    if isinstance(runs[target], dict) and runs[target].get("confirms") is not None:
        raise UserError(f"{path}.confirms.run: {target} is itself a confirmatory sample; name the run it confirms")
    if not isinstance(claims, list) or not claims or not all(isinstance(c, str) and c for c in claims):
        raise UserError(f"{path}.confirms.claims: {claims!r} is not allowed; expected a non-empty list of claim ids")
    # A key set to the run's own value changes nothing (and an expanded sample expands to itself).
    theirs = runs[target]
    extra = sorted(k for k in set(entry) - CONFIRMATION_KEYS if entry[k] != theirs.get(k)) + sorted(
        f"{block}.{k}"
        for block in PROFILE_BLOCK_KEYS
        for k, v in (entry.get(block) or {}).items()
        if k != "seeds" and v != (theirs.get(block) or {}).get(k)
    )
    if extra:
        raise UserError(
            f"{path}: {', '.join(extra)} not allowed in a confirmatory sample; it trains "
            f"{target}'s settings and may set only seeds (also under scaled / gpu_day), profiles and note"
        )
    merged = inherit(runs[target], {k: v for k, v in entry.items() if k not in PROFILE_BLOCK_KEYS})
    for block in PROFILE_BLOCK_KEYS:
        if entry.get(block):
            merged[block] = {**(merged.get(block) or {}), **entry[block]}
    for profile, block in PROFILE_BLOCKS.items():  # a block also enrols a run (gpu_day): only where it runs
        if block and "profiles" in entry and profile not in entry["profiles"]:
            merged.pop(block, None)
    return merged


def inherit(template: dict, own: dict) -> dict:
    """A run's settings over its template's: own keys replace the template's, except the profile blocks
    (`scaled`, `gpu_day`), whose keys are merged one by one (a run that scales one more key keeps the
    template's other scalings)."""
    merged = {**copy.deepcopy(template), **copy.deepcopy(own)}
    for block in PROFILE_BLOCK_KEYS:
        if isinstance(template.get(block), dict) and isinstance(own.get(block), dict):
            merged[block] = {**copy.deepcopy(template[block]), **copy.deepcopy(own[block])}
    return merged


def scaled_keys(overrides: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in overrides.items():
        keys += scaled_keys(value, f"{prefix}{key}.") if isinstance(value, dict) else [f"{prefix}{key}"]
    return keys


def check_run_values(path: str, run: dict, params: dict) -> list[str]:
    problems = check_choice(f"{path}.paper", run["paper"], PAPERS) if run.get("paper") is not None else []
    partitions = params.get("partitions") or {}
    if "partition" in run and (not isinstance(run["partition"], str) or run["partition"] not in partitions):
        problems += check_choice(f"{path}.partition", run["partition"], list(partitions))
    if "model" in run:
        problems += check_choice(
            f"{path}.model", run["model"] if isinstance(run["model"], str) else repr(run["model"]), MODEL_NAMES
        )
        if (
            isinstance(run["model"], str)
            and run["model"] in MODEL_NAMES
            and isinstance(run.get("partition"), str)
            and run["partition"] in partitions
        ):
            dataset = partitions[run["partition"]]["dataset"]
            why = model_fits(run["model"], dataset_spec(dataset).image_shape)
            if why:
                problems.append(f"{path}.model: {run['model']!r} does not fit dataset {dataset}: {why}")
    if "algorithm" in run:
        problems += check_algorithm(f"{path}.algorithm", run["algorithm"])
    for key in ("rounds", "local_epochs", "batch_size", "eval_every", "checkpoint_every", "probe_clients"):
        if key in run:
            problems += check_int(f"{path}.{key}", run[key], 1)
    if "seeds" in run:
        problems += check_unique_ints(f"{path}.seeds", run["seeds"], 0)
    if "probe_rounds" in run:
        problems += check_unique_ints(f"{path}.probe_rounds", run["probe_rounds"], 1, allow_empty=True)
        rounds = run.get("rounds")
        late = [r for r in run["probe_rounds"] if isinstance(r, int) and isinstance(rounds, int) and r > rounds]
        if late and not problems:
            problems.append(
                f"{path}.probe_rounds: {late!r} after the last round ({rounds}); expected rounds in [1, {rounds}]"
            )
    if "forgettable_every" in run:
        problems += check_int(f"{path}.forgettable_every", run["forgettable_every"], 0)
    if "example_events" in run and not isinstance(run["example_events"], bool):
        problems.append(f"{path}.example_events: {run['example_events']!r} is not allowed; expected true or false")
    problems += check_norm(path, run)
    if (
        run.get("evaluate_on") == "validation"
        and isinstance(run.get("partition"), str)
        and not (partitions.get(run["partition"]) or {}).get("val_fraction")
    ):
        problems.append(
            f"{path}.evaluate_on: 'validation' needs a partition with a validation split; "
            f"partition {run['partition']} has no val_fraction"
        )
    for key, choices in allowed_values().items():
        if key in run and key != "model":
            problems += check_choice(f"{path}.{key}", run[key], choices)
    if "eps" in run:
        problems += check_positive(f"{path}.eps", run["eps"])
    if "betas" in run:
        betas = run["betas"]
        if not isinstance(betas, list) or len(betas) != 2 or not all(is_number(b) and 0 <= b < 1 for b in betas):
            problems.append(f"{path}.betas: {betas!r} is not allowed; expected a list of two numbers in [0, 1)")
    if run.get("optimizer") == "adam" and run.get("momentum"):
        problems.append(
            f"{path}.momentum: {run['momentum']!r} is not allowed with optimizer adam; "
            "momentum applies to sgd only (adam's are `betas`)"
        )
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


def check_norm(path: str, run: dict) -> list[str]:
    norm, model = run.get("norm"), run.get("model")
    if norm is None or not isinstance(model, str):
        return []
    if model not in MODEL_NORMS:
        return [
            f"{path}.norm: model {model} has no norm option; leave norm out, or use one of the models "
            f"{', '.join(MODEL_NORMS)}"
        ]
    return check_choice(f"{path}.norm", norm, MODEL_NORMS[model])


def check_run(path: str, run, params: dict) -> list[str]:
    problems = check_mapping(path, run)
    if problems:
        return problems
    problems = check_keys(path, run, RUN_KEYS, required=RUN_REQUIRED)
    if "profiles" in run:
        problems += check_profiles(f"{path}.profiles", run["profiles"])
    problems += check_run_values(path, run, params)
    for block in PROFILE_BLOCK_KEYS:
        if problems:
            return problems
        problems = check_profile_block(path, run, block, params)
    return problems


def check_profile_block(path: str, run: dict, block: str, params: dict) -> list[str]:
    """A profile's block (`scaled`, `gpu_day`): a mapping of run settings, valid once merged."""
    if block in run and not isinstance(run[block], dict):
        return check_mapping(f"{path}.{block}", run[block])
    overrides = run.get(block, {})
    if not overrides:
        return []
    problems = check_keys(f"{path}.{block}", overrides, RUN_KEYS - {*PROFILE_BLOCK_KEYS, "profiles", "paper"})
    if problems:
        return problems
    merged = deep_merge(run, overrides)
    return [
        p.replace(f"{path}.", f"{path}.{block}.", 1)
        for p in check_run_values(path, merged, params)
        if any(p.startswith(f"{path}.{k}") for k in scaled_keys(overrides))
    ]


def resolve_run(params: dict, key: str) -> dict:
    """The settings a run trains with under the active profile, defaults filled in."""
    run = params["runs"][key]
    profile = params["profile"]
    scaled = profile_overrides(run, profile)
    settings = {
        **RUN_DEFAULTS,
        **deep_merge({k: v for k, v in run.items() if k not in (*PROFILE_BLOCK_KEYS, "profiles")}, scaled),
    }
    settings["algorithm"] = {"name": settings["algorithm"]["name"], **resolve_hyperparams(settings["algorithm"])}
    settings["key"] = key
    settings["run"] = key
    settings["profile"] = profile
    settings["dataset"] = params["partitions"][settings["partition"]]["dataset"]
    settings["scaled"] = {k: {"paper": lookup(run, k), "used": lookup(settings, k)} for k in scaled_keys(scaled)}
    settings["dataset_options"] = (params.get("datasets") or {}).get(settings["dataset"]) or {}
    return settings


def lookup(mapping: dict, dotted: str):
    for part in dotted.split("."):
        mapping = mapping.get(part) if isinstance(mapping, dict) else None
    return mapping


def changed_scalings(scaled: dict) -> dict:
    """The entries of a run's resolved `scaled` record whose value differs from the paper's. A scaled
    block may repeat a paper value to undo one it inherits (fedwavg_long keeps the paper's E = 10 over
    fedwavg_scaled's 2); that is no scaling, and the plan and the reports do not list it as one."""
    return {k: v for k, v in scaled.items() if v["paper"] != v["used"]}
