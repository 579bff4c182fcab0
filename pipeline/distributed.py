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

The device a run trains on is chosen here too (`device_type`, FEDFORGET_DEVICE), with its kernels
(`apply_kernel_settings`, FEDFORGET_DETERMINISTIC) and its description in timing.json (`describe_device`);
docs/scaling.md says what is reproducible bit for bit on which device.
"""

from __future__ import annotations

import datetime
import os
import platform
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from pipeline.errors import UserError
from pipeline.options import RuntimeOptions

# Exit codes the torchrun launcher (pipeline.launch) reads from its workers.
USER_ERROR_EXIT = 2  # pipeline.errors.exit_on_user_error's code
PEER_LOST_EXIT = 3  # a worker that only lost its peers
QUIET_PEERS_VARIABLE = "FEDFORGET_LAUNCHED"  # set by pipeline.launch for the workers it starts
BACKEND_VARIABLE, DEVICE_VARIABLE = "FEDFORGET_DIST_BACKEND", "FEDFORGET_DEVICE"  # named in messages


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


def start(options: RuntimeOptions = RuntimeOptions()) -> Ranks | None:
    """Set the kernels `options` ask for (every rank alike: their states must agree), then join the
    process group torchrun set up (None when this is a plain single process)."""
    apply_kernel_settings(options.deterministic)
    if not inside_torchrun():
        return None
    size, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if size == 1:
        return None
    address = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
    device = device_type(options.device)
    backend = backend_for(device, options.dist_backend)
    timeout = datetime.timedelta(seconds=options.dist_timeout)
    if device == "cuda":
        gpus = torch.cuda.device_count()
        problem = processes_exceed_gpus(local_rank + 1, gpus, backend)
        if problem:
            raise UserError(f"torchrun: local rank {local_rank}: {problem}")
        torch.cuda.set_device(local_rank % gpus)
    try:
        if rank != 0 and "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ:
            wait_for_rank_0(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), options.dist_timeout)
        dist.init_process_group(backend, timeout=timeout)
    except (ValueError, RuntimeError) as error:  # no MASTER_ADDR, nobody listening, a rank that never came
        first = (str(error).strip().splitlines() or ["no reason given"])[0]
        raise UserError(
            f"torch.distributed: rank {rank} of {size}: the rendezvous at {address} did not complete "
            f"within {options.dist_timeout:g} s ({first}); start every rank with torchrun, "
            f"or set MASTER_ADDR/MASTER_PORT to a reachable rank 0"
        ) from None
    return Ranks(rank, size, local_rank)


def device_type(requested: str | None = None) -> str:
    """The kind of device a run trains on: `requested` (RuntimeOptions.device), else CUDA where available."""
    if not requested:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise UserError(f"{DEVICE_VARIABLE}: cuda, but CUDA is not available here; use cpu")
    return requested


def backend_for(device: str, requested: str | None = None) -> str:
    """torch.distributed's backend for ranks training on `device` (cpu or cuda): `requested`
    (RuntimeOptions.dist_backend), else NCCL on CUDA and gloo on the CPU."""
    if not requested:
        return "nccl" if device == "cuda" else "gloo"
    if requested == "nccl" and device != "cuda":
        raise UserError(
            f"{BACKEND_VARIABLE}: nccl needs ranks training on CUDA (this run trains on {device}); use gloo"
        )
    return requested


def processes_exceed_gpus(per_node: int, gpus: int, backend: str) -> str | None:
    """Why `per_node` processes cannot train on a node with `gpus` GPUs over `backend`, or None: NCCL
    needs a GPU per process; gloo lets processes share GPUs (round-robin)."""
    if backend == "nccl" and per_node > gpus:
        return (
            f"{per_node} processes on a node with {gpus} GPU{'s' * (gpus != 1)}: NCCL needs a GPU of its own "
            f"for each; allowed: --nproc-per-node up to {gpus}, or {BACKEND_VARIABLE}=gloo to share them"
        )
    return None


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


def quiet_worker() -> bool:
    """Under torchrun, a mistake every rank meets (a bad setting, a missing file) is said once per node,
    by its local rank 0; the others exit with the same code and no message."""
    return inside_torchrun() and os.environ.get("LOCAL_RANK", "0") != "0"


def state_digest(state: dict) -> str:
    """sha256 over the server state's tensors (names sorted), to check that the ranks agree."""
    import hashlib

    digest = hashlib.sha256()

    def add(prefix, tree):
        if isinstance(tree, dict):
            for key in sorted(tree, key=str):
                add(f"{prefix}/{key}", tree[key])
        elif isinstance(tree, (list, tuple)):
            for i, item in enumerate(tree):
                add(f"{prefix}/{i}", item)
        elif torch.is_tensor(tree):
            digest.update(prefix.encode())
            digest.update(tree.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())

    add("", state)
    return digest.hexdigest()


def check_agreement(ranks: Ranks | None, state: dict, round_: int, device: torch.device) -> None:
    """Every rank holds its own copy of the server state, equal only if every rank computes bit for bit
    the same (true on CPU; on GPUs only with deterministic kernels): a drift is stopped, not trained on."""
    if ranks is None:
        return
    digests = all_gather(ranks, state_digest(state), device, f"comparing the ranks' states after round {round_}")
    if len(set(digests)) > 1:
        raise UserError(
            f"torch.distributed: the ranks' server states differ after round {round_} "
            "(non-deterministic kernels on this device?); set FEDFORGET_DETERMINISTIC=1 "
            "(use_deterministic_kernels), or train this run in one process"
        )


def stop(ranks: Ranks | None) -> None:
    if ranks is not None and dist.is_initialized():
        dist.destroy_process_group()


def device_for(ranks: Ranks | None, requested: str | None = None) -> torch.device:
    """The device this process trains on (`device_type`); under torchrun a rank's own GPU, shared
    round-robin when gloo lets more processes than GPUs run on a node."""
    if device_type(requested) == "cpu":
        return torch.device("cpu")
    return torch.device("cuda", ranks.local_rank % torch.cuda.device_count()) if ranks else torch.device("cuda")


def use_deterministic_kernels() -> None:
    """Deterministic kernels where torch has them: torch.use_deterministic_algorithms(True, warn_only=True),
    cuDNN without its autotuner, and cuBLAS with a fixed workspace (must be set before cuBLAS starts).

    warn_only, not the strict setting: torch has no deterministic CUDA backward for AdaptiveAvgPool2d,
    which ResNet-18, the shallow ResNet and DenseNet-121 end with, and the strict setting makes their
    first backward pass raise ("adaptive_avg_pool2d_backward_cuda does not have a deterministic
    implementation"). With warn_only torch warns and runs its atomic-add kernel; for these models'
    global pooling (a 1x1 output) every input element receives a single addition, so the bits do not
    depend on the order of the atomics."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def apply_kernel_settings(deterministic: bool) -> None:
    """The kernel settings the options ask for (RuntimeOptions.deterministic, FEDFORGET_DETERMINISTIC)."""
    if deterministic:
        use_deterministic_kernels()


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_device(device: torch.device) -> dict:
    """The device a run trained on, its software and the flags that decide its rounding: what a
    reader needs to know which numbers to expect bit for bit (docs/scaling.md)."""
    info = {"type": device.type, "torch": torch.__version__}
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        info.update(
            {
                "name": torch.cuda.get_device_name(index),
                "capability": ".".join(map(str, torch.cuda.get_device_capability(index))),
                "cuda": torch.version.cuda,  # type: ignore[dict-item]
                "cudnn": torch.backends.cudnn.version(),
            }
        )
    else:
        info.update(
            {
                "name": cpu_model(),
                "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                "threads": torch.get_num_threads(),  # type: ignore[dict-item]
            }
        )
    info.update(
        {
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "tf32_cudnn": torch.backends.cudnn.allow_tf32,  # type: ignore[dict-item]
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),  # type: ignore[dict-item]
            "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),  # type: ignore[dict-item]
            "cudnn_deterministic": torch.backends.cudnn.deterministic,  # type: ignore[dict-item]
            "cudnn_benchmark": torch.backends.cudnn.benchmark,  # type: ignore[dict-item]
        }
    )
    return info


def check_cohort_size(ranks: Ranks | None, cohort_size: int, run: str) -> None:
    """Each rank must train at least one client of every round."""
    if ranks is not None and ranks.size > cohort_size:
        raise UserError(
            f"torchrun: {ranks.size} processes exceed run {run}'s cohort of {cohort_size} clients a "
            f"round; allowed: 1 to {cohort_size} processes (--nproc-per-node x --nnodes)"
        )


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
    return PeerLost(
        f"torch.distributed: rank {ranks.rank} lost the other ranks while {what} (a rank died, or "
        f"the network failed: {first}); no outputs were written, rerun to resume from the checkpoint"
    )


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
