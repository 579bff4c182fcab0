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
from dataclasses import replace
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from multiprocessing import get_context

# Before torch loads OpenMP: a thread that has nothing to do sleeps rather than spins, so that a worker
# beside other busy processes does not lose its core to spinning threads (docs/performance.md).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from pipeline.errors import UserError, exit_on_user_error  # noqa: E402
from pipeline.inputs import read_resolved, resolved_path  # noqa: E402
from pipeline.options import RuntimeOptions  # noqa: E402


def seed_settings(run: str, seed: int):
    from pipeline.settings import RunSettings

    return RunSettings.from_resolved(read_resolved(run), seed)


def train_one(run: str, seed: int, options: RuntimeOptions, figures: bool, retrain: bool = False,
              vectorized: bool | None = None, ranks=None) -> dict | None:
    """Train (or take the kept result of) one seed and write its outputs; its headline metrics, or None
    on a rank other than torchrun's rank 0."""
    import torch

    from pipeline import outputs, training
    from pipeline.cohort import tune_allocator
    from pipeline.results import Store

    torch.set_num_threads(options.threads)
    tune_allocator()
    settings = seed_settings(run, seed)
    if retrain:
        Store(options.checkpoints).forget(settings.key)
    result = training.train_seed(settings, options, vectorized=vectorized, ranks=ranks)
    if result is None:
        return None
    summary = outputs.write_seed(result, options.speed_record(), figures)
    print(f"{settings.key}: {summary['status']}, final accuracy {summary['final_accuracy']}, "
          f"rounds to target {summary['rounds_to_accuracy']}", flush=True)
    return summary


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


def train_under_torchrun(run: str, seeds: list[int], options: RuntimeOptions, first_seed: int, path: str,
                         retrain: bool) -> None:
    """This process is one rank of a torchrun launch: every seed in turn, its cohorts split over the ranks."""
    from pipeline import distributed

    ranks = distributed.start(options)
    try:
        cohort = read_resolved(run)
        for seed in seeds:
            distributed.check_cohort_size(ranks, cohort_clients(cohort, seed), run)
            train_one(run, seed, options, seed == first_seed, retrain and (ranks is None or ranks.is_main),
                      {"auto": None, "vectorized": True, "sequential": False}[path], ranks)
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
        raise UserError(f"--seed {seed}: not a seed of run {run} (its seeds: {', '.join(map(str, seeds))}, "
                        f"{resolved_path(run)})")
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
    parser.add_argument("--path", choices=("auto", "vectorized", "sequential"), default="auto",
                        help="how a cohort is trained: auto picks the faster for the model and device")
    args = parser.parse_args(argv)
    options = RuntimeOptions.from_environment()
    from pipeline.checks import read_grid, run_problems

    problems = run_problems(args.run, read_grid())  # a run no train stage has: refused
    if problems:
        raise UserError("\n".join(problems))
    resolved = read_resolved(args.run)
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
            train_one(args.run, seed, options, seed == first_seed, args.retrain,
                      {"vectorized": True, "sequential": False}[args.path])
    else:
        train_seeds(args.run, seeds, options, first_seed, args.retrain)
    if args.seed is None:
        outputs.remove_other_seeds(args.run, resolved["seeds"])


if __name__ == "__main__":
    main()
