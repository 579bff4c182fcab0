"""The torchrun launcher: FEDFORGET_TORCHRUN set, `python -m pipeline.train RUN` relaunches itself under
torchrun with those options, in this process (torch.distributed.run), so that a failed rank becomes one
line naming it. How the ranks then share a run's cohort is pipeline.distributed's.

    FEDFORGET_TORCHRUN="--nproc-per-node 2" dvc repro
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shlex
import signal
import sys

import torch

from pipeline.distributed import (
    PEER_LOST_EXIT,
    QUIET_PEERS_VARIABLE,
    USER_ERROR_EXIT,
    Ranks,
    backend_for,
    check_cohort_size,
    device_type,
    processes_exceed_gpus,
)
from pipeline.errors import UserError
from pipeline.options import TORCHRUN, RuntimeOptions

LAUNCH_VARIABLE = TORCHRUN


def launch_arguments(options: str, argv: list[str]):
    from torch.distributed.run import parse_args

    try:
        words = shlex.split(options)
    except ValueError as error:  # an unclosed quote: one line, not shlex's traceback (issue 54)
        raise UserError(
            f"{LAUNCH_VARIABLE}: {options!r} cannot be read as options ({error}); e.g. "
            "'--nproc-per-node 2' (see `torchrun --help`)"
        ) from None
    complaint = io.StringIO()
    try:
        with contextlib.redirect_stderr(complaint):  # argparse's usage text: one line of it is enough
            parsed = parse_args([*words, "--module", "pipeline.train", *argv])
    except SystemExit:
        reason = (complaint.getvalue().strip().splitlines() or ["not understood"])[-1].split("error: ")[-1]
        raise UserError(
            f"{LAUNCH_VARIABLE}: {options!r} are not torchrun options ({reason}); e.g. "
            "'--nproc-per-node 2' (see `torchrun --help`)"
        ) from None
    if not parsed.module or parsed.training_script != "pipeline.train":
        # A word that is no option becomes torchrun's script, which each rank would then try to run (issue 54).
        raise UserError(
            f"{LAUNCH_VARIABLE}: {parsed.training_script!r} in {options!r} is not a torchrun option; "
            "expected options only, e.g. '--nproc-per-node 2' (see `torchrun --help`)"
        )
    return parsed


def fit_launch(options: str, cohort_size: int, run: str, runtime: RuntimeOptions = RuntimeOptions()) -> str | None:
    """FEDFORGET_TORCHRUN's options for a run whose cohort is `cohort_size` a round. It applies to every
    train stage of a `dvc repro`, and some runs have smaller cohorts than others (FedWAvg's centralised
    runs: one client): on one node the process count is cut to the cohort, with a note, and to one plain
    process (None) for a cohort of one. Across nodes it cannot be cut: too many processes is an error."""
    args = launch_arguments(options, [])
    check_counts(options, args)
    per_node, nodes = str(args.nproc_per_node), str(args.nnodes).split(":")[0]  # elastic "1:2": its minimum
    if not (per_node.isdigit() and nodes.isdigit()):  # "auto", "gpu": the workers check (check_cohort_size)
        return options
    if int(per_node) < 1:
        raise UserError(f"{LAUNCH_VARIABLE}: --nproc-per-node {per_node} is not allowed; expected >= 1")
    device = device_type(runtime.device)
    problem = device == "cuda" and processes_exceed_gpus(
        int(per_node), torch.cuda.device_count(), backend_for(device, runtime.dist_backend)
    )
    if problem:  # said once, here, before any worker starts
        raise UserError(f"{LAUNCH_VARIABLE}: {problem}")
    if int(nodes) > 1 or int(per_node) <= cohort_size:
        check_cohort_size(Ranks(0, int(per_node) * int(nodes), 0), cohort_size, run)
        return options
    print(
        f"note: run {run} trains {cohort_size} client{'s' * (cohort_size > 1)} a round: "
        f"{cohort_size} process{'es' * (cohort_size > 1)}, not the {per_node} {LAUNCH_VARIABLE} asks for",
        flush=True,
    )
    return None if cohort_size == 1 else f"{options} --nproc-per-node {cohort_size}"  # argparse: the last wins


def check_counts(options: str, args) -> None:
    """--nproc-per-node and --nnodes as torchrun reads them, refused here in one line: torchrun itself
    raises a ValueError with a traceback for a value it cannot read (issue 54)."""
    from torch.distributed.run import determine_local_world_size, parse_min_max_nnodes

    per_node = str(args.nproc_per_node)
    try:
        if not per_node.isdigit():  # "auto", "cpu", "gpu": torchrun counts the devices ("gpu" needs CUDA)
            determine_local_world_size(per_node)
    except ValueError as error:
        raise UserError(
            f"{LAUNCH_VARIABLE}: --nproc-per-node {per_node} is not allowed ({error}); expected an "
            "integer >= 1, or auto, cpu or gpu"
        ) from None
    try:
        parse_min_max_nnodes(str(args.nnodes))
    except (ValueError, RuntimeError) as error:
        raise UserError(
            f"{LAUNCH_VARIABLE}: --nnodes {args.nnodes} is not allowed ({error}); expected N or MIN:MAX, integers >= 1"
        ) from None


def relaunch_under_torchrun(options: str, argv: list[str]) -> None:
    """Run `python -m pipeline.train argv` under torchrun with `options` (FEDFORGET_TORCHRUN), in this
    process (torch.distributed.run), so a failed rank becomes one line naming it."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousError
    from torch.distributed.run import run

    args = launch_arguments(options, argv)
    # torchrun's own log lines (a warning per start, one per stopped worker) would bury the one line
    # that matters; workers that only lost their peers stay quiet too (PeerLost).
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    logging.getLogger("torch.distributed.run").setLevel(logging.CRITICAL)
    os.environ[QUIET_PEERS_VARIABLE] = "1"
    try:
        run(args)
    except ChildFailedError as error:
        codes = {rank: failure.exitcode for rank, failure in error.failures.items()}
        if codes.get(0) == USER_ERROR_EXIT:  # rank 0 printed the user's mistake; the others kept quiet
            sys.exit(USER_ERROR_EXIT)
        raise UserError(
            f"torchrun: {first_failure(codes)}; no outputs were written (a rerun resumes from the last checkpoint)"
        ) from None
    except RendezvousError as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise UserError(
            f"torchrun: the rendezvous at {args.rdzv_endpoint or 'this node'} ({args.rdzv_backend}) "
            f"did not complete: {first}"
        ) from None
    finally:
        os.environ.pop(QUIET_PEERS_VARIABLE, None)
    sys.stdout.flush()


def first_failure(codes: dict[int, int]) -> str:
    """The rank to blame. When one rank fails, torchrun stops the others with SIGTERM, and a worker that
    saw its peers go exits with PEER_LOST_EXIT; torch orders failures by whole seconds only, so one of
    those could come first. Blame a rank that failed on its own (the lowest, if several)."""
    stopped = (PEER_LOST_EXIT, -signal.SIGTERM)
    own = {rank: code for rank, code in codes.items() if code not in stopped} or codes
    rank = min(own)
    others = " (the other ranks were stopped)" if len(codes) > 1 or rank != 0 else ""
    if own[rank] == USER_ERROR_EXIT:
        return f"rank {rank} exited with code 2, an error in its input{others}"
    return f"rank {rank} {describe_exit(own[rank])}{others}"


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"
