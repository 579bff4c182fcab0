"""The device benchmark: images a second and peak memory of the engine's rounds on the papers' GPU-scale
models, on both training paths, so that the path and the chunk size on a GPU are chosen by measurement.

    python -m benchmarks.speed --suite device --device cuda [--repeats N] [--out benchmarks/results/gpu]
    python -m benchmarks.speed --suite device --device cpu --quick      # a smoke test of seconds

Workloads (synthetic images of the datasets' shapes: speed does not depend on the pixels, and the GPU
machine has no prepared datasets): ResNet-18 with GroupNorm and with BatchNorm (TCE), the shallow
ResNet with Adam (FedWAvg), DenseNet-121 on 28x28 images with Adam (FedWAvg's Table 1), the
dropout CNN at B = 256 (FedCurv), and FedAvg's CNN and the 200-200 MLP at B = 10 (the paper profile's small
runs), each one FedAvg round of a few clients. Per workload and path: one
untimed warm-up round (vmap's tracing, cuDNN's choices, the allocator), then `repeats` timed rounds,
the device synchronised around each; images a second = the round's samples (E x the cohort's) over its
median seconds; peak memory = torch.cuda.max_memory_allocated over the timed rounds (CUDA only). A path
that fails (out of memory, an operation vmap cannot batch) is reported with its error, not hidden.

With --levers, each workload's faster path is timed again under each speed lever of issue 40: TF32 for
float32 matrix products (cuDNN's convolutions already use TF32 by default), cuDNN's autotuner
(`cudnn.benchmark`), bf16 autocast around the whole round, the cohort stacked by the device-memory chunk
rule (FEDFORGET_CHUNK=device) instead of the CPU's mmap rule, the optimiser's step as multi-tensor
operations (FEDFORGET_FOREACH=on), and the training step compiled by torch.compile (FEDFORGET_COMPILE=on),
and replayed as CUDA graphs (FEDFORGET_COMPILE=cudagraphs); a lever's warm-up round holds its
compilation, and its seconds are reported. The engine's levers go to the rounds as
`run_round(levers=...)`: the environment's (RuntimeOptions, read once) with the lever's one field
changed; the backend flags and autocast are contexts around the rounds. These are speed measurements
only: no run trains with them, and what bf16 does to the Fisher, the BatchNorm statistics or a claim's
numbers is not measured here.

Writes <out>/device_speed.json and <out>/device_speed.md, with the device described as in a run's
timing.json (pipeline.distributed.describe_device).
"""

from __future__ import annotations

import contextlib
import datetime
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch
import torch._dynamo
from torch._dynamo.utils import counters

from benchmarks.flops import synchronize
from pipeline import distributed
from pipeline.algorithms import get_algorithm, resolve_hyperparams
from pipeline.clientdata import ClientData, channel_stats
from pipeline.cohort import Levers
from pipeline.cost import training_flops_per_sample
from pipeline.io import write_json, write_text
from pipeline.models import build_model
from pipeline.options import RuntimeOptions
from pipeline.rounds import initial_state, run_round
from pipeline.settings import RUN_DEFAULTS, RoundSettings, build

SEED = 0
CLASSES = 10


@dataclass(frozen=True)
class DeviceWorkload:
    key: str
    title: str
    model: str
    image_shape: tuple  # (H, W, C)
    clients: int
    samples_per_client: int
    batch_size: int
    optimizer: str = "sgd"
    lr: float = 0.01
    norm: str | None = None

    def tiny(self) -> "DeviceWorkload":
        """The same model, optimiser and path on 8x8 images, 2 clients of 8 samples: seconds on a CPU."""
        return DeviceWorkload(
            self.key,
            f"{self.title} [tiny: 8x8 images, 2 clients x 8, B=4]",
            self.model,
            (8, 8, self.image_shape[2]),
            2,
            8,
            4,
            self.optimizer,
            self.lr,
            self.norm,
        )


WORKLOADS = [
    DeviceWorkload(
        "resnet18_gn",
        "ResNet-18, GroupNorm (TCE), CIFAR-10 shape, 4 clients x 256, B=64, SGD 0.1",
        "resnet18",
        (32, 32, 3),
        4,
        256,
        64,
        lr=0.1,
        norm="group",
    ),
    DeviceWorkload(
        "resnet18_bn",
        "ResNet-18, BatchNorm (TCE), CIFAR-10 shape, 4 clients x 256, B=64, SGD 0.1",
        "resnet18",
        (32, 32, 3),
        4,
        256,
        64,
        lr=0.1,
        norm="batch",
    ),
    DeviceWorkload(
        "resnet_shallow_adam",
        "shallow ResNet, BatchNorm, Adam 0.001 (FedWAvg), CIFAR-10 shape, 4 clients x 256, B=64",
        "resnet_shallow",
        (32, 32, 3),
        4,
        256,
        64,
        optimizer="adam",
        lr=0.001,
    ),
    DeviceWorkload(
        "densenet121",
        "DenseNet-121, Adam 0.001 (FedWAvg Table 1), 28x28x1, 2 clients x 256, B=64",
        "densenet121",
        (28, 28, 1),
        2,
        256,
        64,
        optimizer="adam",
        lr=0.001,
    ),
    DeviceWorkload(
        "dropout_cnn",
        "dropout CNN (FedCurv's cnn_mnist), 28x28x1, 8 clients x 512, B=256, SGD 0.01",
        "cnn_mnist",
        (28, 28, 1),
        8,
        512,
        256,
    ),
    # the paper profile's small models at its B = 10 (Importance From Agent, FedAvg's MNIST runs): many tiny
    # steps, where the per-step overhead and the path matter more than the arithmetic
    DeviceWorkload(
        "cnn_fedavg",
        "FedAvg's CNN (cnn_fedavg), 28x28x1, 10 clients x 600, B=10, SGD 0.01",
        "cnn_fedavg",
        (28, 28, 1),
        10,
        600,
        10,
    ),
    DeviceWorkload(
        "mlp_200",
        "MLP 200-200 (mlp_200), 28x28x1, 10 clients x 600, B=10, SGD 0.01",
        "mlp_200",
        (28, 28, 1),
        10,
        600,
        10,
    ),
]


def synthetic_data(workload: DeviceWorkload, device: torch.device) -> ClientData:
    generator = torch.Generator().manual_seed(SEED)
    count = workload.clients * workload.samples_per_client
    x = torch.randint(0, 256, (count, *workload.image_shape), generator=generator, dtype=torch.uint8)
    y = torch.randint(0, CLASSES, (count,), generator=generator)
    clients = list(torch.arange(count).split(workload.samples_per_client))
    mean, std = channel_stats(x)
    return ClientData(
        x.to(device), y.to(device), [c.to(device) for c in clients], mean.to(device), std.to(device), classes=CLASSES
    )


def settings_for(workload: DeviceWorkload) -> RoundSettings:
    return build(
        RoundSettings,
        {
            **RUN_DEFAULTS,
            "seed": SEED,
            "client_fraction": 1.0,
            "local_epochs": 1,
            "lr": workload.lr,
            "momentum": 0.0,
            "weight_decay": 0.0,
            "batch_size": workload.batch_size,
            "optimizer": workload.optimizer,
            "norm": workload.norm,
        },
    )


def peak_memory(device: torch.device) -> int | None:
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


@contextlib.contextmanager
def backend_flags(module, **flags):
    """Set torch.backends flags for the block, then put them back."""
    before = {name: getattr(module, name) for name in flags}
    for name, value in flags.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(module, name, value)


def autocast_bf16(device: torch.device):
    return torch.autocast(device.type, dtype=torch.bfloat16)


def no_context(device: torch.device) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext()


@dataclass(frozen=True)
class Lever:
    """A speed lever: a context for the warm-up and the timed rounds, given the device (`lever(device)`),
    and the engine's levers it changes (pipeline.cohort.Levers' fields, passed to run_round)."""

    context: Callable[[torch.device], contextlib.AbstractContextManager] = no_context
    engine: dict = field(default_factory=dict)

    def __call__(self, device: torch.device) -> contextlib.AbstractContextManager:
        return self.context(device)

    def levers(self, base: Levers) -> Levers:
        """`base` (the environment's levers) with this lever's fields changed."""
        return replace(base, **self.engine)


def environment_levers() -> Levers:
    """The engine's levers as the environment sets them (FEDFORGET_CHUNK, _COMPILE, _FOREACH; read once by
    RuntimeOptions, as a train stage reads them): the baseline each engine lever changes one field of."""
    options = RuntimeOptions.from_environment()
    return Levers(options.chunk, options.compile, options.foreach == "on")


LEVERS = {
    "tf32_matmul": Lever(lambda device: backend_flags(torch.backends.cuda.matmul, allow_tf32=True)),
    "cudnn_benchmark": Lever(lambda device: backend_flags(torch.backends.cudnn, benchmark=True)),
    "bf16_autocast": Lever(autocast_bf16),
    # the cohort stacked by the device-memory rule instead of the mmap rule (pipeline.cohort.chunk_for_round;
    # on the vectorized path it stacks every client of these workloads at once): FEDFORGET_CHUNK=device
    "device_chunk": Lever(engine={"chunk": "device"}),
    # the training step compiled by torch.compile (pipeline.cohort.compiled), and replayed as CUDA graphs; the
    # warm-up round holds the compilation (its seconds are reported beside the rate): FEDFORGET_COMPILE=on,
    # =cudagraphs
    "compile": Lever(engine={"compile": "on"}),
    "compile_cudagraphs": Lever(engine={"compile": "cudagraphs"}),
    # the optimiser's step as multi-tensor operations (pipeline.optimizers): FEDFORGET_FOREACH=on
    "foreach_optimizer": Lever(engine={"foreach": True}),
}


def measure_path(
    workload: DeviceWorkload,
    device: torch.device,
    vectorized: bool,
    repeats: int,
    lever: str | None = None,
    base: Levers | None = None,
) -> dict:
    """Seconds a round (median of `repeats`), images a second and peak memory of one path (under a lever's
    context and with its engine levers for the warm-up and the timed rounds, if one is named). `base`: the
    engine's levers without the lever (the environment's when None)."""
    base = environment_levers() if base is None else base
    levers = LEVERS[lever].levers(base) if lever else base
    data = synthetic_data(workload, device)
    model = build_model(workload.model, workload.image_shape, CLASSES, SEED, workload.norm).to(device)
    algorithm = get_algorithm("fedavg")
    hp = resolve_hyperparams({"name": "fedavg"})
    settings = settings_for(workload)
    state = {"now": initial_state(model, algorithm, workload.clients, hp)}

    def one_round(round_: int) -> float:
        synchronize(device)
        start = time.perf_counter()
        result = run_round(
            model, algorithm, hp, state["now"], data, settings, round_, vectorized=vectorized, levers=levers
        )
        synchronize(device)
        if not result.diverged:
            state["now"] = result.state
        return time.perf_counter() - start

    counters.clear()
    with LEVERS[lever](device) if lever else contextlib.nullcontext():
        warmup = one_round(1)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        seconds = [one_round(2 + r) for r in range(repeats)]
    # what torch.compile made of the rounds (nothing without a compile lever): the graphs it compiled, and
    # how often it declined CUDA graphs for one (e.g. a graph that updates BatchNorm statistics in place)
    compiled = (
        {
            "compiled_graphs": counters["stats"]["unique_graphs"],
            "cudagraph_skips": counters["inductor"]["cudagraph_skips"],
        }
        if lever and "compile" in lever
        else {}
    )
    images = workload.clients * workload.samples_per_client
    median = statistics.median(seconds)
    return {
        "seconds_per_round": median,
        "seconds_per_round_repeats": seconds,
        "warmup_seconds": warmup,
        "images_per_round": images,
        "images_per_second": images / median,
        "flops_per_second": images * training_flops_per_sample(model, workload.image_shape) / median,
        "peak_memory_bytes": peak_memory(device),
        **compiled,
    }


# The path a lever is measured on when it is not the workload's faster one: the chunk rule only changes how
# the vectorized path stacks clients (BatchNorm workloads are faster sequential, where it changes nothing).
LEVER_PATHS = {"device_chunk": "vectorized"}


def measure_levers(
    workload: DeviceWorkload,
    device: torch.device,
    repeats: int,
    faster: str,
    levers: tuple[str, ...],
    base: Levers | None = None,
) -> dict:
    """Each named lever on the workload's faster path (or the one LEVER_PATHS names): images a second, or
    why it failed, with the path it ran on."""
    results = {}
    for lever in levers:
        path = LEVER_PATHS.get(lever, faster)
        print(f"device suite: {workload.key}, {path}, lever {lever}", file=sys.stderr, flush=True)
        try:
            results[lever] = measure_path(workload, device, path == "vectorized", repeats, lever, base)
        except (RuntimeError, ValueError, torch.cuda.OutOfMemoryError) as error:
            results[lever] = {"failed": (str(error).strip().splitlines() or [type(error).__name__])[0]}
        finally:
            torch._dynamo.reset()  # each workload compiles afresh, in its own warm-up, under the cache's limit
            if device.type == "cuda":
                torch.cuda.empty_cache()
        results[lever]["path"] = path
    return results


def run_workload(
    workload: DeviceWorkload,
    device: torch.device,
    repeats: int,
    levers: tuple[str, ...] = (),
    base: Levers | None = None,
) -> dict:
    base = environment_levers() if base is None else base
    paths = {}
    for label, vectorized in (("vectorized", True), ("sequential", False)):
        print(f"device suite: {workload.key}, {label}", file=sys.stderr, flush=True)
        try:
            paths[label] = measure_path(workload, device, vectorized, repeats, base=base)
        except (RuntimeError, torch.cuda.OutOfMemoryError) as error:  # reported, never hidden
            paths[label] = {"failed": (str(error).strip().splitlines() or [type(error).__name__])[0]}
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()
    done = {label: entry for label, entry in paths.items() if "failed" not in entry}
    faster = max(done, key=lambda label: done[label]["images_per_second"]) if done else None
    result = {
        "title": workload.title,
        "model": workload.model,
        "norm": workload.norm,
        "image_shape": list(workload.image_shape),
        "clients": workload.clients,
        "samples_per_client": workload.samples_per_client,
        "batch_size": workload.batch_size,
        "optimizer": workload.optimizer,
        "lr": workload.lr,
        "paths": paths,
        "faster_path": faster,
    }
    if levers and faster:
        result["levers"] = measure_levers(workload, device, repeats, faster, levers, base)
    return result


def parse_levers(text: str | None) -> tuple[str, ...]:
    """--levers' value: none (None), every lever ("all") or a comma-separated subset of LEVERS."""
    if text is None:
        return ()
    wanted = list(LEVERS) if text == "all" else [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in LEVERS]
    if unknown or not wanted:
        from pipeline.errors import UserError

        raise UserError(
            f"--levers: {', '.join(unknown) or repr(text)} not a lever; allowed: all or a comma-separated "
            f"subset of {', '.join(LEVERS)}"
        )
    return tuple(wanted)


def number(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def markdown(summary: dict) -> str:
    device = summary["device"]
    lines = [
        f"# Device benchmark: {device['name']} ({device['type']})",
        "",
        f"{summary['date']}; torch {device['torch']}"
        + (f", CUDA {device.get('cuda')}, cuDNN {device.get('cudnn')}" if device["type"] == "cuda" else "")
        + f"; TF32 matmul {device['tf32_matmul']}, TF32 cuDNN {device['tf32_cudnn']}; "
        f"deterministic {device['deterministic_algorithms']}; {summary['repeats']} timed round(s) after one "
        f"warm-up{'; tiny sizes (a smoke test)' if summary['quick'] else ''}.",
        "",
        "| workload | path | s / round | images / s | TFLOP/s | peak memory (MiB) |",
        "|---|---|---|---|---|---|",
    ]
    for key, workload in summary["workloads"].items():
        for label, entry in workload["paths"].items():
            if "failed" in entry:
                lines.append(f"| {key} | {label} | failed: {entry['failed']} | | | |")
                continue
            memory = entry["peak_memory_bytes"]
            lines.append(
                f"| {key} | {label}{' (faster)' if workload['faster_path'] == label else ''} | "
                f"{number(entry['seconds_per_round'])} | {number(entry['images_per_second'])} | "
                f"{number(entry['flops_per_second'] / 1e12)} | "
                f"{'-' if memory is None else number(memory / 2**20)} |"
            )
    lines += lever_lines(summary)
    lines += ["", "Workloads:"] + [f"- {key}: {w['title']}" for key, w in summary["workloads"].items()]
    return "\n".join(lines) + "\n"


def lever_lines(summary: dict) -> list[str]:
    """The levers' table: images a second on each workload's faster path, and the ratio to its baseline."""
    measured = {key: w for key, w in summary["workloads"].items() if "levers" in w}
    if not measured:
        return []
    # the levers this call measured (results from before the list was kept: every lever, "not measured" where absent)
    levers = summary.get("levers") or list(LEVERS)
    lines = [
        "",
        "Speed levers on each workload's faster path, or the path a cell names (images / s, and x that "
        "path's baseline above; speed only: no run trains with them):",
        "",
        "| workload | path | " + " | ".join(levers) + " |",
        "|---|---|" + "---|" * len(levers),
    ]
    for key, workload in measured.items():
        cells = []
        for lever in levers:
            entry = workload["levers"].get(lever, {})
            path = entry.get("path", workload["faster_path"])
            base = workload["paths"].get(path, {}).get("images_per_second")
            elsewhere = "" if path == workload["faster_path"] else f", {path}"
            if "failed" in entry:
                cells.append(f"failed: {entry['failed']}")
            elif "images_per_second" in entry and base:
                warmup = f"; warm-up {entry['warmup_seconds']:.1f} s" if "warmup_seconds" in entry else ""
                if entry.get("cudagraph_skips"):
                    warmup += f"; CUDA graphs declined {entry['cudagraph_skips']}x"
                cells.append(
                    f"{number(entry['images_per_second'])} (x{entry['images_per_second'] / base:.2f}"
                    f"{elsewhere}{warmup})"
                )
            elif "images_per_second" in entry:  # its path's own baseline failed: no ratio to give
                cells.append(f"{number(entry['images_per_second'])} ({path} baseline failed)")
            else:  # results from before the lever existed
                cells.append("not measured")
        lines.append(f"| {key} | {workload['faster_path']} | " + " | ".join(cells) + " |")
    return lines


def select(keys: str | None) -> list[DeviceWorkload]:
    if not keys:
        return WORKLOADS
    known = {w.key: w for w in WORKLOADS}
    wanted = [key.strip() for key in keys.split(",")]
    unknown = [key for key in wanted if key not in known]
    if unknown:
        from pipeline.errors import UserError

        raise UserError(
            f"--device-workloads: {', '.join(unknown)} not in the device suite; allowed: {', '.join(known)}"
        )
    return [known[key] for key in wanted]


def main(args, device: torch.device) -> dict:
    """Run the suite for speed.py's parsed `args` (out, repeats, quick, workloads) on `device`."""
    workloads = [w.tiny() if args.quick else w for w in select(args.device_workloads)]
    levers = parse_levers(getattr(args, "levers", None))
    base = environment_levers()  # a bad FEDFORGET_* value: one line, before anything runs
    summary = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": distributed.describe_device(device),
        "repeats": args.repeats,
        "quick": args.quick,
        "levers": list(levers),
        "workloads": {},
    }
    for workload in workloads:  # written after each workload: a check stopped by its time limit keeps the rest
        summary["workloads"][workload.key] = run_workload(workload, device, args.repeats, levers, base)
        text = markdown(summary)
        write_json(args.out / "device_speed.json", summary)
        write_text(args.out / "device_speed.md", text)
    print(text)  # the last workload's table holds them all
    return summary
