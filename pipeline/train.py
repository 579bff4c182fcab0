"""Train stage: one run, all its seeds -> reports/runs/<run>/seed<s>/ for each (pipeline.outputs).

    python -m pipeline.train RUN                 # every seed the run lists (resolved/<run>.json)
    python -m pipeline.train RUN --seed S        # one of them
    python -m pipeline.train RUN --retrain       # train again even where a kept result exists
    FEDFORGET_TORCHRUN="--nproc-per-node N" python -m pipeline.train RUN   # each cohort split over N processes

A run's seeds train in FEDFORGET_WORKERS worker processes (default: the CPUs this process may use), each
with FEDFORGET_THREADS torch threads (default 1; pipeline.options says why), taking the next seed as they
finish one. Each seed's numbers depend on its own seed and the run's settings only, not on which worker or
how many trained it. Start-up (importing torch, reading the data) is paid once a worker, not once a seed.

A seed whose result is kept (pipeline.results: the engine and settings unchanged, only the code that
writes outputs changed) is written again without training.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path

# Before torch loads OpenMP: a thread that has nothing to do sleeps rather than spins, so that a worker
# beside other busy processes does not lose its core to spinning threads (docs/performance.md).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from pipeline.errors import UserError, exit_on_user_error  # noqa: E402
from pipeline.inputs import read_resolved, resolved_path  # noqa: E402
from pipeline.options import RuntimeOptions  # noqa: E402


def resolved_settings(run: str) -> dict:
    """resolved/<run>.json, refused in one line when it is not there, cut short or missing a setting the
    engine reads (the resolve stage writes it whole: `dvc repro resolve` writes it again)."""
    import json

    from pipeline.settings import RUN_REQUIRED

    path = resolved_path(run)
    try:
        resolved = read_resolved(run)
    except json.JSONDecodeError as error:
        raise UserError(
            f"{path}: not readable JSON ({error.msg} at line {error.lineno}); run `dvc repro resolve` to write it again"
        ) from None
    missing = [
        key
        for key in (*RUN_REQUIRED, "seeds", "run", "dataset")
        if not isinstance(resolved, dict) or key not in resolved
    ]
    if missing:
        raise UserError(f"{path}: missing {', '.join(missing)}; run `dvc repro resolve` to write it again")
    seeds = resolved["seeds"]
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise UserError(f"{path}: seeds {seeds!r} is not a list of integers >= 0; run `dvc repro resolve`")
    problems = resolved_value_problems(run, resolved)
    if problems:
        raise UserError(
            "\n".join(f"{path}: {problem}; run `dvc repro resolve` to write it again" for problem in problems)
        )
    return resolved


def resolved_value_problems(run: str, resolved: dict) -> list[str]:
    """The types of the resolved file's values (issue 54): a file edited by hand or written by another
    version would otherwise fail deep inside a round, as a traceback. Each setting is checked against its
    field in pipeline.settings (its allowed values, or its type: every integer setting is >= 1 but those
    whose default is 0, every number setting is finite and >= 0), the algorithm as params.yaml's is. The
    ranges params.yaml allows were checked by the resolve stage. pipeline.runs, which checks params.yaml,
    is not imported here: the train command's imports are its fingerprint (pipeline/fingerprint.py), and
    that module would join the engine's. One problem a line: "<key>: <value> is not allowed; expected ..."."""
    import dataclasses

    from pipeline.algorithms import check_algorithm
    from pipeline.checks import check_choice, check_mapping, is_int, is_number
    from pipeline.inputs import DATASETS
    from pipeline.settings import PARTS, RESOLVED_ONLY

    if resolved.get("run") != run:
        return [f"run: {resolved.get('run')!r} is not allowed; expected {run!r}, the run this file is named for"]
    problems = check_choice("dataset", resolved.get("dataset"), list(DATASETS))
    problems += check_mapping("dataset_options", resolved.get("dataset_options"))
    for part in PARTS:
        for item in dataclasses.fields(part):
            name = item.metadata.get("key")
            if name is None or name in RESOLVED_ONLY or name not in resolved:  # a missing key: seed_settings
                continue
            value, kind, allowed = resolved[name], str(item.type), item.metadata.get("allowed")
            low = 0 if item.metadata.get("default") == 0 else 1
            expected = (
                f"one of {', '.join(allowed)}"
                if allowed
                else {
                    "int": f"an integer >= {low}",
                    "float": "a finite number >= 0",
                    "bool": "true or false",
                    "str": "a string",
                    "str | None": "a string or null",
                }.get(kind, "a list of numbers")
            )
            fits = (
                value in allowed
                if allowed
                else is_int(value) and value >= low
                if kind == "int"
                else is_number(value) and value >= 0
                if kind == "float"
                else isinstance(value, bool)
                if kind == "bool"
                else isinstance(value, str)
                if kind == "str"
                else value is None or isinstance(value, str)
                if kind == "str | None"
                else isinstance(value, list) and all(is_number(v) for v in value)
            )
            if not fits:
                problems.append(f"{name}: {value!r} is not allowed; expected {expected}")
    return problems or check_algorithm("algorithm", resolved.get("algorithm"))


def seed_settings(run: str, seed: int):
    from pipeline.settings import RunSettings

    try:
        return RunSettings.from_resolved(resolved_settings(run), seed)
    except KeyError as error:
        raise UserError(
            f"{resolved_path(run)}: missing {error.args[0]}; run `dvc repro resolve` to write it again"
        ) from None


def writing_failed(error: OSError) -> UserError:
    """A file the stage could not write (a full disk, a read-only folder) as one line; what was being written
    is left whole or not at all (pipeline.io's atomic writes)."""
    return UserError(
        f"{error.filename or 'an output'}: cannot be written ({error.strerror or error}); free space "
        "or make the folder writable, then rerun (training resumes from its last checkpoint)"
    )


def train_one(
    run: str,
    seed: int,
    options: RuntimeOptions,
    figures: bool,
    retrain: bool = False,
    vectorized: bool | None = None,
    ranks=None,
) -> dict | None:
    """Train (or take the kept result of) one seed and write its outputs; its headline metrics, or None
    on a rank other than torchrun's rank 0."""
    import torch

    from pipeline import distributed, outputs, training
    from pipeline.cohort import tune_allocator
    from pipeline.results import Store

    torch.set_num_threads(options.threads)
    tune_allocator()
    # FEDFORGET_DETERMINISTIC in every process that trains, torchrun's ranks (distributed.start) or not
    distributed.apply_kernel_settings(options.deterministic)
    settings = seed_settings(run, seed)
    store = Store(options.checkpoints)
    try:
        if retrain:
            store.forget(settings.key)
        before = kept_files(store, settings.key)
        result = training.train_seed(settings, options, vectorized=vectorized, ranks=ranks)
        if result is None:
            return None
        # Taken from its kept result: the seed's kept result is the same file as before (a trained seed's is
        # written anew, atomically, under a new inode).
        untrained = bool(before) and kept_files(store, settings.key) == before
        summary = outputs.write_seed(result, options.speed_record(), figures)
    except OSError as error:
        raise writing_failed(error) from None
    print(
        f"{settings.key}: {summary['status']}, final accuracy {summary['final_accuracy']}, "
        f"rounds to target {summary['rounds_to_accuracy']}"
        + (" (from its kept result, not trained again)" if untrained else ""),
        flush=True,
    )
    return summary


def kept_files(store, key: str) -> dict[str, tuple[int, int]]:
    """The (run, seed) `key`'s kept results in `store`: name -> (inode, mtime)."""
    found = {}
    for path in store.folder.glob(f"{key}-*.result.pt"):
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        found[path.name] = (stat.st_ino, stat.st_mtime_ns)
    return found


def _worker(run: str, seed: int, options: RuntimeOptions, figures: bool, retrain: bool) -> int:
    train_one(run, seed, replace(options, progress=False), figures, retrain)  # one bar a worker would interleave
    return seed


def train_seeds(run: str, seeds: list[int], options: RuntimeOptions, first_seed: int, retrain: bool = False) -> None:
    """Every seed of `seeds`, in `options.workers` processes (here, when one is enough)."""
    workers = min(options.workers, len(seeds))
    if workers <= 1:
        for seed in seeds:
            train_one(run, seed, options, seed == first_seed, retrain)
        return
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))
    try:
        futures = [pool.submit(_worker, run, seed, options, seed == first_seed, retrain) for seed in seeds]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for future in futures:  # the first failure, in seed order, is the one to report
            if future.done() and future.exception() is not None:
                raise future.exception()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def train_under_torchrun(
    run: str, seeds: list[int], options: RuntimeOptions, first_seed: int, path: str, retrain: bool
) -> None:
    """This process is one rank of a torchrun launch: every seed in turn, its cohorts split over the ranks."""
    from pipeline import distributed

    ranks = distributed.start(options)
    try:
        cohort = resolved_settings(run)
        for seed in seeds:
            distributed.check_cohort_size(ranks, cohort_clients(cohort, seed), run)
            train_one(
                run,
                seed,
                options,
                seed == first_seed,
                retrain and (ranks is None or ranks.is_main),
                {"auto": None, "vectorized": True, "sequential": False}[path],
                ranks,
            )
    finally:
        distributed.stop(ranks)


def cohort_clients(resolved: dict, seed: int) -> int:
    """How many clients one of the run's rounds samples."""
    from pipeline.clientdata import cohort_size
    from pipeline.inputs import load_partition

    return cohort_size(len(load_partition(resolved["partition"])["train"]), resolved["client_fraction"])


def chosen_seeds(run: str, resolved: dict, seed: int | None) -> list[int]:
    seeds = list(resolved["seeds"])
    if seed is not None and seed not in seeds:
        raise UserError(
            f"--seed {seed}: not a seed of run {run} (its seeds: {', '.join(map(str, seeds))}, {resolved_path(run)})"
        )
    return seeds if seed is None else [seed]


@exit_on_user_error
def main(argv=None) -> None:
    from pipeline import distributed

    try:
        train_command(argv)
    except distributed.PeerLost:
        if os.environ.get(distributed.QUIET_PEERS_VARIABLE):  # the launcher names the rank that failed
            sys.exit(distributed.PEER_LOST_EXIT)
        raise
    except UserError:
        if distributed.quiet_worker():  # rank 0 says it, once
            sys.exit(distributed.USER_ERROR_EXIT)
        raise


def train_command(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a key of `runs` in params.yaml")
    parser.add_argument("--seed", type=int, help="train this one of the run's seeds only")
    parser.add_argument("--retrain", action="store_true", help="train even where a kept result exists")
    parser.add_argument(
        "--path",
        choices=("auto", "vectorized", "sequential"),
        default="auto",
        help="how a cohort is trained: auto picks the faster for the model and device",
    )
    args = parser.parse_args(argv)
    options = RuntimeOptions.from_environment()
    if not (Path("dvc.yaml").is_file() and Path("params.yaml").is_file()):
        raise UserError(
            f"{Path.cwd()}: not the repository's root (no dvc.yaml and params.yaml here); run the "
            "train stage from the root, as `dvc repro` does"
        )
    from pipeline.checks import read_grid, run_problems

    problems = run_problems(args.run, read_grid())  # a run no train stage has: refused
    if problems:
        raise UserError("\n".join(problems))
    resolved = resolved_settings(args.run)
    seeds = chosen_seeds(args.run, resolved, args.seed)
    first_seed = resolved["seeds"][0]
    from pipeline import distributed, launch, outputs

    if distributed.inside_torchrun():
        train_under_torchrun(args.run, seeds, options, first_seed, args.path, args.retrain)
        return
    if options.torchrun:
        per_round = min(cohort_clients(resolved, seed) for seed in seeds)
        fitted = launch.fit_launch(options.torchrun, per_round, args.run, options)
        if fitted is not None:
            launch.relaunch_under_torchrun(fitted, sys.argv[1:] if argv is None else list(argv))
            return
    if args.path != "auto":
        for seed in seeds:
            train_one(
                args.run,
                seed,
                options,
                seed == first_seed,
                args.retrain,
                {"vectorized": True, "sequential": False}[args.path],
            )
    else:
        train_seeds(args.run, seeds, options, first_seed, args.retrain)
    if args.seed is None:
        outputs.remove_other_seeds(args.run, resolved["seeds"])


if __name__ == "__main__":
    main()
