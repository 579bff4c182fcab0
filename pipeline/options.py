"""The runtime options: how a train stage runs, never what it computes on a CPU. Read once from the
environment into one object (`RuntimeOptions`) that is passed down; a bad value is one line naming the
variable, before anything is read or trained.

| variable | default | what |
|---|---|---|
| FEDFORGET_WORKERS | the CPUs this process may use | processes a run's seeds are trained in (pipeline.train) |
| FEDFORGET_THREADS | 1 | torch threads in each of them |
| FEDFORGET_DEVICE | cuda where available, else cpu | the device training runs on |
| FEDFORGET_DETERMINISTIC | 0 | 1: deterministic GPU kernels (pipeline.distributed) |
| FEDFORGET_CHUNK | mmap | how many clients a cohort chunk stacks: mmap, or device (a GPU's memory) |
| FEDFORGET_COMPILE | off | torch.compile of the training step: off, on, cudagraphs |
| FEDFORGET_FOREACH | off | the client optimiser's step as multi-tensor operations: off, on |
| FEDFORGET_TORCHRUN | (unset) | torchrun options: a run's cohort split over processes (docs/scaling.md) |
| FEDFORGET_DIST_BACKEND | nccl on CUDA, else gloo | torch.distributed's backend |
| FEDFORGET_DIST_TIMEOUT | 1800 | seconds to wait for the rendezvous and each collective |
| FEDFORGET_CHECKPOINTS | .checkpoints | where checkpoints and kept results live |
| FEDFORGET_CACHE | .cache | where cached input statistics live |
| FEDFORGET_DATA_MIRROR | (unset) | a folder of prepared datasets the download stage takes instead of downloading |

Why one thread a process by default: on the 2-core machines this project is run on, two processes of one
thread each trained 2.2x (an MNIST MLP at B = 10) to 3.4x (TCE's CNN) the seeds per hour of one process
with two threads, whose OpenMP threads wait on each other at every small operation; beside another busy
process, two-thread processes slowed down up to 30x (docs/performance.md). A seed's numbers do not
depend on how many workers train a run's seeds, and, with one thread each, not on the machine's core
count either. No torch import here: `python -m pipeline.config --check` reads these without torch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import UserError

WORKERS = "FEDFORGET_WORKERS"
THREADS = "FEDFORGET_THREADS"
DEVICE = "FEDFORGET_DEVICE"
DETERMINISTIC = "FEDFORGET_DETERMINISTIC"
CHUNK = "FEDFORGET_CHUNK"
COMPILE = "FEDFORGET_COMPILE"
FOREACH = "FEDFORGET_FOREACH"
TORCHRUN = "FEDFORGET_TORCHRUN"
DIST_BACKEND = "FEDFORGET_DIST_BACKEND"
DIST_TIMEOUT = "FEDFORGET_DIST_TIMEOUT"
CHECKPOINTS = "FEDFORGET_CHECKPOINTS"
CACHE = "FEDFORGET_CACHE"
DATA_MIRROR = "FEDFORGET_DATA_MIRROR"

DEVICES = ("cpu", "cuda")
CHUNK_RULES = ("mmap", "device")
COMPILE_MODES = ("off", "on", "cudagraphs")
FOREACH_MODES = ("off", "on")
BACKENDS = ("gloo", "nccl")


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity, which a container or `taskset` narrows)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class RuntimeOptions:
    workers: int = 1
    threads: int = 1
    device: str | None = None  # None: cuda where available, else cpu (pipeline.distributed.device_type)
    deterministic: bool = False
    chunk: str = "mmap"
    compile: str = "off"
    foreach: str = "off"
    torchrun: str = ""
    dist_backend: str | None = None  # None: nccl on CUDA, else gloo
    dist_timeout: float = 1800.0
    checkpoints: Path = Path(".checkpoints")
    cache: Path = Path(".cache")
    data_mirror: Path | None = None
    progress: bool = True  # progress bars (off under CI)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> RuntimeOptions:
        """The options the environment sets; every bad value at once, one line each."""
        env = os.environ if environ is None else environ
        problems: list[str] = []

        def text(name: str) -> str:
            return env.get(name, "").strip()

        def whole(name: str, default: int) -> int:
            value = text(name)
            if not value:
                return default
            if not value.isdigit() or int(value) < 1:
                problems.append(f"{name}: {value!r} is not allowed; expected an integer >= 1")
                return default
            return int(value)

        def choice(name: str, allowed: tuple[str, ...], default: str | None) -> str | None:
            value = text(name)
            if not value:
                return default
            if value not in allowed:
                problems.append(f"{name}: {value!r} is not allowed; expected one of {', '.join(allowed)}")
                return default
            return value

        def folder(name: str, default: str | None) -> Path | None:
            value = env.get(name, "")
            if not value:
                return None if default is None else Path(default)
            path = Path(value)
            if path.exists() and not path.is_dir():
                problems.append(f"{name}: {value!r} is a file; expected a folder")
            return path

        deterministic = text(DETERMINISTIC) or "0"
        if deterministic not in ("0", "1"):
            problems.append(f"{DETERMINISTIC}: {deterministic!r} is not allowed; expected 0 or 1")
        timeout_text = text(DIST_TIMEOUT) or "1800"
        try:
            timeout = float(timeout_text)
        except ValueError:
            timeout = -1.0
        if not timeout > 0 or timeout == float("inf"):
            problems.append(f"{DIST_TIMEOUT}: {timeout_text!r} is not allowed; expected a number of seconds > 0")
            timeout = 1800.0
        mirror = folder(DATA_MIRROR, None)
        options = cls(
            workers=whole(WORKERS, available_cpus()),
            threads=whole(THREADS, 1),
            device=choice(DEVICE, DEVICES, None),
            deterministic=deterministic == "1",
            chunk=choice(CHUNK, CHUNK_RULES, "mmap") or "mmap",
            compile=choice(COMPILE, COMPILE_MODES, "off") or "off",
            foreach=choice(FOREACH, FOREACH_MODES, "off") or "off",
            torchrun=text(TORCHRUN),
            dist_backend=choice(DIST_BACKEND, BACKENDS, None),
            dist_timeout=timeout,
            checkpoints=folder(CHECKPOINTS, ".checkpoints") or Path(".checkpoints"),
            cache=folder(CACHE, ".cache") or Path(".cache"),
            data_mirror=mirror,
            progress=not env.get("CI"),
        )
        if problems:
            raise UserError("\n".join(problems))
        return options

    def speed_record(self) -> dict:
        """What timing.json records of how a seed was trained (speed levers; on a GPU they may move the
        last bits, so a reader knows which numbers to expect bit for bit)."""
        return {
            "workers": self.workers,
            "threads": self.threads,
            "chunk_rule": self.chunk,
            "compile": self.compile,
            "foreach_optimizer": self.foreach,
        }
