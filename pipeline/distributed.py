"""One run's cohort on many processes: torch.distributed, launched by torchrun (gloo on CPU, NCCL on GPUs).

    torchrun --nproc-per-node 2 -m pipeline.train RUN --seed S
    FEDFORGET_TORCHRUN="--nproc-per-node 2" dvc repro      # the train stages relaunch themselves so

Every rank holds the whole server state and takes every server step itself. Only local training and
each client's upload (FedCurv's Fisher, SCAFFOLD's control-variate step, ...) are split: a rank trains
one contiguous block of the round's cohort (`positions_of_rank`), with the randomness keyed by
(seed, round, client) as in one process. The ranks then all-gather their clients' results, and every
rank finishes the round, in cohort order, exactly as one process would.

Why an all-gather of per-client results, not an all-reduce of weighted sums: the server's sums are then
taken in one fixed order, the same on every rank and in one process, so a run's numbers do not depend on
how many processes trained it (a ring all-reduce adds in an order set by the ring). The price is K
model-sized messages a round instead of one, small next to local training for the models here.
Rank 0 alone evaluates, probes, checkpoints and writes the outputs (pipeline.train).
"""
from __future__ import annotations

import contextlib
import datetime
import io
import logging
import os
import shlex
import socket
import sys
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from pipeline.errors import UserError

LAUNCH_VARIABLE = "FEDFORGET_TORCHRUN"  # torchrun's options; set, the train command relaunches itself under it
QUIET_PEERS_VARIABLE = "FEDFORGET_LAUNCHED"  # set for the workers of relaunch_under_torchrun
TIMEOUT_VARIABLE = "FEDFORGET_DIST_TIMEOUT"  # seconds to wait for the rendezvous and for each collective


@dataclass(frozen=True)
class Ranks:
    rank: int
    size: int
    local_rank: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def inside_torchrun() -> bool:
    """torchrun (and any env:// launcher) sets WORLD_SIZE and RANK for its workers."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def timeout() -> datetime.timedelta:
    text = os.environ.get(TIMEOUT_VARIABLE, "300")
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if seconds <= 0:
        raise UserError(f"{TIMEOUT_VARIABLE}: {text!r} is not allowed; expected a number of seconds > 0")
    return datetime.timedelta(seconds=seconds)


def start() -> Ranks | None:
    """Join the process group torchrun set up (None when this is a plain single process)."""
    if not inside_torchrun():
        return None
    size, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if size == 1:
        return None
    address = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    try:
        if rank != 0 and "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ:
            wait_for_rank_0(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), timeout().total_seconds())
        dist.init_process_group(backend, timeout=timeout())
    except (ValueError, RuntimeError) as error:  # no MASTER_ADDR, nobody listening, a rank that never came
        first = (str(error).strip().splitlines() or ["no reason given"])[0]
        raise UserError(f"torch.distributed: rank {rank} of {size} found no rendezvous at {address} within "
                        f"{timeout().total_seconds():g} s ({first}); start every rank with torchrun, "
                        f"or set MASTER_ADDR/MASTER_PORT to a reachable rank 0") from None
    return Ranks(rank, size, local_rank)


def wait_for_rank_0(host: str, port: int, seconds: float) -> None:
    """Knock at rank 0's store until it answers: torch's own timeout would print pages of C++ frames
    before its exception, where a user needs one line."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection((host, port), timeout=1.0).close()
            return
        except OSError as error:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing answered: {error}") from None
            time.sleep(0.2)


def stop(ranks: Ranks | None) -> None:
    if ranks is not None and dist.is_initialized():
        dist.destroy_process_group()


def device_for(ranks: Ranks | None) -> torch.device:
    if not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", ranks.local_rank) if ranks else torch.device("cuda")


def check_cohort_size(ranks: Ranks | None, cohort_size: int, run: str) -> None:
    """Each rank must train at least one client of every round."""
    if ranks is not None and ranks.size > cohort_size:
        raise UserError(f"torchrun: {ranks.size} processes exceed run {run}'s cohort of {cohort_size} clients a "
                        f"round; allowed: 1 to {cohort_size} processes (--nproc-per-node x --nnodes)")


def positions_of_rank(count: int, ranks: Ranks | None) -> list[int]:
    """The cohort positions a rank trains: contiguous blocks, sizes differing by at most one."""
    if ranks is None:
        return list(range(count))
    base, extra = divmod(count, ranks.size)
    start = ranks.rank * base + min(ranks.rank, extra)
    return list(range(start, start + base + (ranks.rank < extra)))


def _to(tree, device: torch.device):
    if isinstance(tree, dict):
        return {k: _to(v, device) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_to(v, device) for v in tree)
    return tree.to(device) if torch.is_tensor(tree) else tree


class PeerLost(UserError):
    """A collective failed: another rank died or the network did. Under `relaunch_under_torchrun` the
    launcher names the rank that failed first, so the survivors exit without a message of their own."""


def lost_contact(ranks: Ranks, what: str, error: Exception) -> PeerLost:
    first = (str(error).strip().splitlines() or ["no reason given"])[0]
    return PeerLost(f"torch.distributed: rank {ranks.rank} lost the other ranks while {what} (a rank died, or "
                     f"the network failed: {first}); no outputs were written, rerun to resume from the checkpoint")


def all_gather(ranks: Ranks, mine, device: torch.device, what: str) -> list:
    """Every rank's `mine` (any picklable tree of tensors), in rank order, on `device`. Tensors travel
    through the CPU, so that an unpickled CUDA tensor never lands on another rank's GPU."""
    gathered = [None] * ranks.size
    try:
        dist.all_gather_object(gathered, _to(mine, torch.device("cpu")))
    except (RuntimeError, dist.DistError) as error:
        raise lost_contact(ranks, what, error) from None
    return [_to(item, device) for item in gathered]


def broadcast_from_main(ranks: Ranks | None, value, device: torch.device, what: str):
    """Rank 0's `value` on every rank (the others pass anything)."""
    if ranks is None:
        return value
    box = [_to(value, torch.device("cpu")) if ranks.is_main else None]
    try:
        dist.broadcast_object_list(box, src=0)
    except (RuntimeError, dist.DistError) as error:
        raise lost_contact(ranks, what, error) from None
    return _to(box[0], device)


def launch_arguments(options: str, argv: list[str]):
    from torch.distributed.run import parse_args

    complaint = io.StringIO()
    try:
        with contextlib.redirect_stderr(complaint):  # argparse's usage text: one line of it is enough
            return parse_args([*shlex.split(options), "--module", "pipeline.train", *argv])
    except SystemExit:
        reason = (complaint.getvalue().strip().splitlines() or ["not understood"])[-1].split("error: ")[-1]
        raise UserError(f"{LAUNCH_VARIABLE}: {options!r} are not torchrun options ({reason}); e.g. "
                        "'--nproc-per-node 2' (see `torchrun --help`)") from None


def check_launch(options: str, cohort_size: int, run: str) -> None:
    """Before starting any process: a fixed process count larger than the cohort is refused here, once."""
    args = launch_arguments(options, [])
    per_node, nodes = str(args.nproc_per_node), str(args.nnodes).split(":")[-1]
    if per_node.isdigit() and nodes.isdigit():
        if int(per_node) < 1:
            raise UserError(f"{LAUNCH_VARIABLE}: --nproc-per-node {per_node} is not allowed; expected >= 1")
        check_cohort_size(Ranks(0, int(per_node) * int(nodes), 0), cohort_size, run)


def relaunch_under_torchrun(options: str, argv: list[str]) -> None:
    """Run `python -m pipeline.train argv` under torchrun with `options` (FEDFORGET_TORCHRUN), in this
    process (torch.distributed.run), so a failed rank becomes one line naming it."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
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
        rank, failure = error.get_first_failure()
        others = " (the other ranks were stopped)" if args.nproc_per_node != "1" else ""
        raise UserError(f"torchrun: rank {rank} {describe_exit(failure.exitcode)}{others}; no outputs were "
                        "written (a rerun resumes from the last checkpoint)") from None
    finally:
        os.environ.pop(QUIET_PEERS_VARIABLE, None)
    sys.stdout.flush()


def describe_exit(code: int) -> str:
    if code < 0:
        import signal
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"
