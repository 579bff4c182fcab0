"""params.yaml: loading, validation, and the grid of stages it gives (grid.yaml).

    python -m pipeline.config --check     # validate params.yaml (and grid.yaml) without running anything

Every stage validates the params before it does any work. A problem is reported as one line naming the
key path, the bad value and what is allowed; all problems are reported at once.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

from pipeline.checks import (
    PROFILE_BLOCKS,
    PROFILES,
    check_choice,
    check_fraction,
    check_int,
    check_keys,
    check_mapping,
    check_positive,
    check_profiles,
    in_profile,
    is_int,
    profile_overrides,
)
from pipeline.errors import UserError, exit_on_user_error
from pipeline.inputs import DATASETS
from pipeline.partition_sizes import dropped_samples_warning, large_batch_warning, partition_sizes, training_split
from pipeline.partitioners import PartitionError
from pipeline.paths import GRID_FILE, PARAMS_FILE
from pipeline.runs import RUN_DEFAULTS, check_run, check_run_values, deep_merge, expand_templates, scaled_keys
from pipeline.yamlfile import load_yaml

SCHEMES = ("iid", "shards", "dirichlet", "clusters", "natural")


# ---------------------------------------------------------------- sections

PARTITION_KEYS = {
    "iid": ({"clients"}, set()),
    "shards": ({"clients", "shards_per_client"}, {"shard_size", "shard_cut"}),
    "dirichlet": ({"clients", "alpha"}, {"equal_size"}),
    "clusters": ({"cluster_sizes", "samples_per_client"}, {"classes_per_cluster", "cluster_classes"}),
    "natural": (set(), {"max_clients"}),
}
PARTITION_COMMON = {"dataset", "scheme", "seed", "val_fraction", "profiles"}


def check_partition(path, settings, datasets):
    problems = check_mapping(path, settings)
    if problems:
        return problems
    scheme = settings.get("scheme")
    if scheme not in PARTITION_KEYS:
        return check_choice(f"{path}.scheme", scheme, SCHEMES)
    required, optional = PARTITION_KEYS[scheme]
    problems += check_keys(
        path,
        settings,
        PARTITION_COMMON | required | optional,
        required=("dataset", "scheme", "seed") + tuple(sorted(required)),
    )
    if "dataset" in settings:
        problems += check_choice(f"{path}.dataset", settings["dataset"], datasets)
    if "seed" in settings:
        problems += check_int(f"{path}.seed", settings["seed"], 0)
    if "profiles" in settings:
        problems += check_profiles(f"{path}.profiles", settings["profiles"])
    if "val_fraction" in settings:
        problems += check_fraction(f"{path}.val_fraction", settings["val_fraction"], low_open=False, high=0.9)
    for key in (
        "clients",
        "shards_per_client",
        "shard_size",
        "samples_per_client",
        "classes_per_cluster",
        "max_clients",
    ):
        if key in settings and not (key in ("shard_size", "max_clients") and settings[key] is None):
            problems += check_int(f"{path}.{key}", settings[key], 1)
    if "shard_cut" in settings:
        problems += check_choice(f"{path}.shard_cut", settings["shard_cut"], ("one_label", "sorted"))
    if "alpha" in settings:
        problems += check_positive(f"{path}.alpha", settings["alpha"])
    if "equal_size" in settings and not isinstance(settings["equal_size"], bool):
        problems.append(f"{path}.equal_size: {settings['equal_size']!r} is not allowed; expected true or false")
    if "cluster_sizes" in settings:
        sizes = settings["cluster_sizes"]
        if not isinstance(sizes, list) or not sizes or not all(is_int(s) and s >= 1 for s in sizes):
            problems.append(f"{path}.cluster_sizes: {sizes!r} is not allowed; expected a list of integers >= 1")
    if settings.get("cluster_classes") is not None:
        groups = settings["cluster_classes"]
        if not isinstance(groups, list) or not all(
            isinstance(g, list) and g and all(is_int(c) for c in g) for g in groups
        ):
            problems.append(f"{path}.cluster_classes: {groups!r} is not allowed; expected a list of class lists")
        else:
            flat = [c for g in groups for c in g]
            if len(set(flat)) != len(flat):
                problems.append(
                    f"{path}.cluster_classes: {groups!r} overlap; each class may belong to one cluster only"
                )
    return problems


def check_datasets(params):
    datasets = params.get("datasets")
    problems = check_mapping("datasets", datasets)
    if problems:
        return problems
    for name, overrides in datasets.items():
        if name not in DATASETS:
            close = difflib.get_close_matches(str(name), list(DATASETS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(DATASETS)}"
            problems.append(f"datasets.{name}: unknown dataset{hint}")
            continue
        overrides = overrides or {}
        not_mapping = check_mapping(f"datasets.{name}", overrides)
        problems += not_mapping
        if not not_mapping:
            problems += check_keys(f"datasets.{name}", overrides, {"train_size", "test_size"})
            for key, value in overrides.items():
                if key in ("train_size", "test_size"):
                    problems += check_int(f"datasets.{name}.{key}", value, 1)
    return problems


ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]+$")


MAX_ID_LENGTH = 100  # a run's id names files (resolved/<id>.json, <id>-seed<s>-<digest>.result.pt): 255 bytes at most


def check_id(section, name):
    """Ids become DVC stage names, params key paths (where a dot would mean nesting) and file names."""
    if not isinstance(name, str) or not ID_PATTERN.match(name):
        return [
            f"{section}.{name}: the name {name!r} is not allowed; expected a string of letters, digits, _ and - only"
        ]
    if len(name) > MAX_ID_LENGTH:
        return [
            f"{section}.{name[:20]}...: a name of {len(name)} characters is not allowed; expected at most "
            f"{MAX_ID_LENGTH} (it names files)"
        ]
    return []


def check_partitions(params):
    partitions = params.get("partitions")
    problems = check_mapping("partitions", partitions)
    if problems:
        return problems
    datasets = list((params.get("datasets") or {}).keys())
    for name, settings in partitions.items():
        problems += check_id("partitions", name)
        found = check_partition(f"partitions.{name}", settings, datasets)
        problems += found or partition_feasibility(f"partitions.{name}", settings, params)
    return problems


def partition_feasibility(path: str, settings: dict, params: dict) -> list[str]:
    """What the partition stage would refuse, found from the dataset's size and class counts
    (pipeline/partition_sizes.py), so that `config --check` says it before any data is downloaded."""
    split = training_split(settings["dataset"], params["datasets"].get(settings["dataset"]))
    try:
        if split is not None:
            partition_sizes(settings, split)
    except PartitionError as error:
        return [f"{path}.{error}"]
    return []


def known_partition_sizes(params: dict) -> dict:
    """partition name -> (its dataset's TrainingSplit, its PartitionSizes), for the partitions whose
    dataset's size is known before download. For checked params: none of them raises."""
    known = {}
    for name, settings in params["partitions"].items():
        split = training_split(settings["dataset"], params["datasets"].get(settings["dataset"]))
        if split is not None:
            known[name] = (split, partition_sizes(settings, split))
    return known


def profile_views(run: dict) -> dict:
    """A run's settings under each profile it belongs to: the paper's own, merged with the profile's block
    (the default's `scaled`, the one-GPU-day's `gpu_day`)."""
    return {
        profile: deep_merge(run, profile_overrides(run, profile)) for profile in PROFILES if in_profile(run, profile)
    }


def check_warnings(params: dict) -> list[str]:
    """Settings that are allowed but do something a user may not expect, one line each: shards that
    leave data out, and a batch size above some clients' data (pipeline/partition_sizes.py says why
    these are warnings, not refusals). For valid params only."""
    known = known_partition_sizes(params)
    warnings = [
        dropped_samples_warning(
            f"partitions.{name}", params["partitions"][name], split.samples, split.samples - sizes.dropped
        )
        for name, (split, sizes) in known.items()
        if sizes.dropped is not None
    ]
    for key, run in (params.get("runs") or {}).items():
        for profile, view in profile_views(run).items():
            block = PROFILE_BLOCKS[profile] if "batch_size" in profile_overrides(run, profile) else None
            train_sizes = known[view["partition"]][1].train_sizes if view["partition"] in known else None
            if train_sizes is not None:
                warnings.append(
                    large_batch_warning(
                        f"runs.{key}{f'.{block}' if block else ''}.batch_size",
                        view["batch_size"],
                        view["partition"],
                        train_sizes,
                    )
                )
    return list(dict.fromkeys(w for w in warnings if w))  # in order, once (both profiles may say the same)


def check_runs(params):
    runs = params.get("runs")
    problems = check_mapping("runs", runs)
    if problems:
        return problems
    if not runs:
        return ["runs: empty; expected at least one run (a profile without runs would delete every run's results)"]
    for key, settings in runs.items():
        problems += check_id("runs", key)
        found = check_run(f"runs.{key}", settings, params)
        problems += found or scaled_conflicts(f"runs.{key}", settings, params)
    return problems or confirmation_problems(runs)


def confirmation_problems(runs: dict) -> list[str]:
    """A confirmatory sample (runs.confirmed_run) in a profile without the run it confirms, or sharing a
    seed with it there: its verdict would not be one on fresh seeds beside the run's own. And a second
    sample of one run for one claim: a claim gets one (docs/methodology.md)."""
    problems, first_sample = [], {}
    for key, run in runs.items():
        target = (run.get("confirms") or {}).get("run")
        if target is None:
            continue
        for claim in run["confirms"]["claims"]:
            if (target, claim) in first_sample:
                problems.append(
                    f"runs.{key}.confirms: a second sample of {target} for claim {claim!r} (the first: "
                    f"{first_sample[target, claim]}); a claim gets one"
                )
            first_sample.setdefault((target, claim), key)
        theirs = profile_views(runs[target])
        for profile, view in profile_views(run).items():
            if profile not in theirs:
                problems.append(
                    f"runs.{key}.profiles: {profile} is not allowed; {target}, which it confirms, "
                    f"is not in the {profile} profile"
                )
                continue
            shared = sorted(
                set(view.get("seeds", RUN_DEFAULTS["seeds"])) & set(theirs[profile].get("seeds", RUN_DEFAULTS["seeds"]))
            )
            if shared:
                problems.append(
                    f"runs.{key}.seeds: {shared} in the {profile} profile are {target}'s; a confirmatory "
                    "sample takes fresh seeds only"
                )
    return problems


# Settings whose validity depends on another key: a `scaled` block that changes the key on the right
# can make the one on the left invalid though neither is wrong alone (norm for a model without one).
DEPENDENT_SETTINGS = {
    "norm": ("model",),
    "evaluate_on": ("partition",),
    "model": ("partition",),
    "probe_rounds": ("rounds",),
}


def scaled_conflicts(path: str, run, params) -> list[str]:
    """Problems of a profile's merged settings (the default's `scaled`, the one-GPU-day's `gpu_day`) on a
    key that depends on one the block changes."""
    problems = []
    for profile, block in PROFILE_BLOCKS.items():
        overrides = run.get(block) if block and isinstance(run, dict) else None
        if not isinstance(overrides, dict) or not overrides:
            continue
        changed = set(scaled_keys(overrides))
        watched = [key for key, on in DEPENDENT_SETTINGS.items() if changed & set(on) and key not in changed]
        problems += [
            f"{p} (with the {profile} profile's {'scaled ' if block == 'scaled' else ''}"
            f"{', '.join(sorted(changed & set(DEPENDENT_SETTINGS[key])))})"
            for p in check_run_values(path, deep_merge(run, overrides), params)
            for key in watched
            if p.startswith(f"{path}.{key}:")
        ]
    return problems


def check_params(params) -> list[str]:
    """Every problem in params, one line each (empty when all is well)."""
    if not isinstance(params, dict):
        return [f"{PARAMS_FILE}: expected a mapping at the top level"]
    problems = check_keys(
        "params",
        params,
        {"profile", "datasets", "partitions", "runs", "templates"},
        required=("profile", "datasets", "partitions"),
    )
    problems = [p.replace("params.", "", 1) for p in problems]
    problems += check_choice("profile", params.get("profile"), PROFILES)
    problems += check_datasets(params)
    if not problems:
        problems += check_partitions(params)
    if not problems:
        problems += check_runs(params)
    return problems


# ---------------------------------------------------------------- the grid: what the dvc.yaml files iterate over


def derive_grid(params) -> dict:
    """The runs of the active profile, the partitions they use or that belong to the profile, and the
    datasets those partitions use.

    The dvc.yaml files cannot compute this (their templating has no expressions), so it lives in grid.yaml,
    written by `python -m pipeline.profile` and checked here against params.yaml before every stage. Each
    run is one train stage, `train@<run>`, which trains all its seeds (its seed list is in its resolved
    settings, not here: adding a seed changes the run's resolved file, and retrains that run alone).
    """
    profile = params["profile"]

    def resolved(run):  # a profile's block may put a run onto another partition
        return deep_merge(run, profile_overrides(run, profile))

    runs: dict[str, dict] = {}
    for key, settings in (params.get("runs") or {}).items():
        if not in_profile(settings, profile):
            continue
        run = resolved(settings)
        partition = run["partition"]
        # the algorithm names its fingerprint file: the train stage depends on that one (dvc.yaml)
        runs[key] = {
            "run": key,
            "partition": partition,
            "dataset": params["partitions"][partition]["dataset"],
            "algorithm": run["algorithm"]["name"],
        }
    used = {r["partition"] for r in runs.values()}
    partitions = {
        name: {"dataset": settings["dataset"]}
        for name, settings in params["partitions"].items()
        if name in used or in_profile(settings, profile)
    }
    datasets = sorted({p["dataset"] for p in partitions.values()})
    return {"profile": profile, "datasets": datasets, "partitions": partitions, "runs": dict(sorted(runs.items()))}


def read_yaml(path: Path):
    """The file's document; a syntax error or a key given twice is one line each (pipeline/yamlfile.py)."""
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    return load_yaml(path.read_text(), str(path))


def load_params(path: Path = PARAMS_FILE) -> dict:
    """params.yaml with every run's template expanded (pipeline/runs.py's expand_templates)."""
    params = read_yaml(path)
    if not isinstance(params, dict):
        raise UserError(f"{path}: expected a mapping at the top level")
    return expand_templates(params)


def load_checked_params(path: Path = PARAMS_FILE, grid_path: Path | None = GRID_FILE) -> dict:
    """params.yaml, validated, with grid.yaml checked to be the one these params give."""
    params = load_params(path)
    problems = check_params(params)
    if problems:
        raise UserError("\n".join(problems))
    if grid_path is not None:
        grid = read_yaml(grid_path) if grid_path.exists() else None
        if not isinstance(grid, dict) or grid.get("grid") != derive_grid(params):
            raise UserError(
                f"{grid_path}: out of date with {path} (profile {params['profile']}); "
                f"run `python -m pipeline.profile {params['profile']}`"
            )
    return params


@exit_on_user_error
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Validate params.yaml without running anything.")
    parser.add_argument("--check", action="store_true", help="validate and report (the default action)")
    parser.add_argument("--params", type=Path, default=PARAMS_FILE)
    args = parser.parse_args(argv)
    params = load_checked_params(args.params)
    grid = derive_grid(params)
    for warning in check_warnings(params):
        print(f"warning: {warning}", file=sys.stderr)
    print(
        f"{args.params}: ok (profile {params['profile']}: {len(grid['datasets'])} datasets, "
        f"{len(grid['partitions'])} partitions, {len(grid['runs'])} runs)"
    )


if __name__ == "__main__":
    main()
