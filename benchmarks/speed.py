"""Speed benchmark: seconds per federated round of the engine against conventional implementations.

    python -m benchmarks.speed [--workloads 1,...,8] [--quick] [--sizes paper|tiny] [--repeats N]
                               [--device auto|cpu|cuda] [--data PATH] [--no-flower] [--out benchmarks/results]
    python -m benchmarks.speed --suite device --device cuda   # GPU-scale models: images/s, peak memory
                                                              # (benchmarks/device_suite.py)

Workloads 1-3 and 6-8 run one FedAvg workload (benchmarks/workloads.py) through
  (a) the engine, `run_round(..., vectorized=prefer_vectorized(model, device))` ("auto": vmap for MLPs,
      one client at a time for CNNs on a CPU, where vmap over convolutions is slower; a CNN on a CPU
      also gets the forced-vmap number, "engine_vmap", BatchNorm models included),
  (b) the engine's sequential reference path (vectorized=False),
  (c) a careful per-client loop over in-memory tensors, (d) the same loop fed by a DataLoader with
      per-sample transforms (benchmarks/loops.py), and
  (e) Flower's simulation engine (benchmarks/flower_sim.py; skipped, and said so, without flwr).
Workload 4 times FedCurv (per-sample Fisher included) against FedAvg, workload 5 every algorithm of
`pipeline.algorithms.names()` and FedAvg with TCE's truncated loss, all through the engine's auto path.
Workload 6 is FedWAvg's shallow ResNet (BatchNorm, Adam), 7 TCE's setting (Dirichlet 0.1, truncated
loss), 8 McMahan et al.'s CNN at B = 10.

Method: a single process; each implementation first runs one untimed warm-up round, then the
implementations run in alternation (the order rotated each repeat) `--repeats` times, each repeat
timing `rounds` consecutive rounds (no evaluation); the median of the repeats is reported. With
--device cuda (or auto on a machine with CUDA) the data and the models live on the GPU and the device
is synchronised before every clock reading (DataLoader batches come from the CPU, as they would).

Writes <out>/speed.json and <out>/speed.md (atomically) and prints the markdown. --quick runs tiny
synthetic sizes with 2 repeats and a small matmul, a smoke test of a few seconds, plus ~10 s of Ray
start-up when flwr is installed (so Flower runs on workload 1 only); the full benchmark is
`python -m benchmarks.speed` (several minutes on 2 cores). Run it on an otherwise idle machine: with
another job on one of the cores, every parallel op of torch's thread pool waits for a scheduler slice
and small rounds became up to 20x slower.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import os
import platform
import pstats
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from benchmarks import flower_sim, loops, report
from benchmarks.flops import matmul_rate, synchronize
from benchmarks.workloads import (
    PAPER,
    SEED,
    TINY_CLASSES,
    TINY_CLIENTS,
    TINY_SHAPE,
    TINY_SHARD,
    Workload,
    client_data,
    default_data_path,
    load_images,
    synthetic_images,
    workloads_for,
)
from pipeline import distributed
from pipeline.algorithms import get_algorithm, names, resolve_hyperparams
from pipeline.clientdata import ClientData, sample_cohort
from pipeline.cohort import prefer_vectorized, tune_allocator
from pipeline.cost import training_flops_per_sample
from pipeline.errors import UserError, exit_on_user_error
from pipeline.inputs import dataset_spec
from pipeline.io import write_json, write_text
from pipeline.models import build_model
from pipeline.rounds import initial_state, run_round
from pipeline.settings import RUN_DEFAULTS, RoundSettings, build

MATMUL = {"paper": (2048, 5), "tiny": (256, 3)}  # (size, repeats)


@dataclass
class Implementation:
    label: str
    time_rounds: Callable[[int, int], float] | None  # (first round, count) -> seconds per round
    skipped: str | None = None
    close: Callable[[], None] | None = None  # frees what the implementation holds (Flower's simulation)


# ---------------------------------------------------------------- implementations


def engine_settings(workload: Workload) -> dict:
    return {
        **RUN_DEFAULTS,
        "seed": SEED,
        "client_fraction": workload.client_fraction,
        "lr": workload.lr,
        "momentum": 0.0,
        "weight_decay": workload.weight_decay,
        "local_epochs": workload.local_epochs,
        "batch_size": workload.batch_size,
        "optimizer": workload.optimizer,
        "loss": workload.loss,
        "norm": workload.norm,
    }


def engine_rounds(model, algorithm_name: str, hp: dict, data: ClientData, settings: dict, vectorized: bool):
    """One engine round per call, the server state carried from round to round; `settings` as resolved
    (the other loops read the same dict)."""
    from benchmarks.device_suite import environment_levers

    algorithm = get_algorithm(algorithm_name)
    round_settings = build(RoundSettings, settings)
    state = {"now": initial_state(model, algorithm, len(data.clients), hp)}
    levers = environment_levers()  # FEDFORGET_CHUNK, _COMPILE, _FOREACH, as a train stage reads them

    def one_round(round_: int) -> None:
        result = run_round(
            model, algorithm, hp, state["now"], data, round_settings, round_, vectorized=vectorized, levers=levers
        )
        if not result.diverged:  # a diverged round keeps the old state (its time still counts)
            state["now"] = result.state

    return one_round


def timed(one_round: Callable[[int], None], device: torch.device) -> Callable[[int, int], float]:
    def time_rounds(first_round: int, count: int) -> float:
        synchronize(device)
        start = time.perf_counter()
        for round_ in range(first_round, first_round + count):
            one_round(round_)
        synchronize(device)
        return (time.perf_counter() - start) / count

    return time_rounds


def comparison_implementations(
    workload: Workload,
    data: ClientData,
    image_shape,
    classes: int,
    device: torch.device,
    flower_skip: str | None,
    repeats: int,
) -> dict[str, Implementation]:
    """(a)-(e) on FedAvg, each with its own fresh copy of the same initial model."""
    settings = engine_settings(workload)

    def model():
        return build_model(workload.model, image_shape, classes, SEED, workload.norm).to(device)

    auto = prefer_vectorized(model(), device)
    impls = {
        "engine_auto": Implementation(
            f"(a) engine, auto ({'vmap' if auto else 'sequential'})",
            timed(engine_rounds(model(), "fedavg", {}, data, settings, auto), device),
        )
    }
    if not auto:
        impls["engine_vmap"] = Implementation(
            "(a') engine, vmap forced", timed(engine_rounds(model(), "fedavg", {}, data, settings, True), device)
        )
    impls["engine_sequential"] = Implementation(
        "(b) engine, sequential reference", timed(engine_rounds(model(), "fedavg", {}, data, settings, False), device)
    )
    impls["loop_tensors"] = Implementation(
        "(c) careful loop, in-memory tensors", timed(loops.tensor_loop(model(), data, settings), device)
    )
    impls["loop_dataloader"] = Implementation(
        "(d) loop, DataLoader + per-sample transforms",
        timed(loops.dataloader_loop(model(), data, settings, device), device),
    )
    if flower_skip:
        impls["flower"] = Implementation("(e) Flower simulation (Ray)", None, skipped=flower_skip)
    else:
        time_rounds, close = flower_sim.flower_rounds(
            model(), workload.model, image_shape, classes, SEED, data, settings, device, 1 + repeats * workload.rounds
        )
        impls["flower"] = Implementation("(e) Flower simulation (Ray)", time_rounds, close=close)
    return impls


def algorithm_implementations(
    workload: Workload, data: ClientData, image_shape, classes: int, device: torch.device
) -> dict[str, Implementation]:
    """The workload's algorithms (all registered ones when it names none, and then FedAvg with TCE's
    truncated loss too, as "tce") on the engine's auto path, FedAvg first: it is the baseline."""
    every = not workload.algorithms
    chosen = list(workload.algorithms or names())
    runs = [(name, name, engine_settings(workload)) for name in chosen]
    if every:
        runs.append(("tce", "fedavg", {**engine_settings(workload), "loss": "tce"}))
    impls = {}
    for key, name, settings in runs:
        model = build_model(workload.model, image_shape, classes, SEED, workload.norm).to(device)
        hp = resolve_hyperparams({"name": name, **workload.hyperparams.get(name, {})})
        one_round = engine_rounds(model, name, hp, data, settings, prefer_vectorized(model, device))
        label = "engine, fedavg with TCE's loss" if key == "tce" else f"engine, {name}"
        impls[key] = Implementation(label, timed(one_round, device))
    return impls


# ---------------------------------------------------------------- measuring


def measure(impls: dict[str, Implementation], repeats: int, rounds: int, name: str) -> dict[str, list[float]]:
    """Seconds per round of every runnable implementation, `repeats` times, in rotating alternation."""
    runnable = [key for key, impl in impls.items() if impl.skipped is None]
    for key in runnable:
        impls[key].time_rounds(0, 1)  # untimed: vmap tracing, allocator, Ray's start-up
    times: dict[str, list[float]] = {key: [] for key in runnable}
    for repeat in range(repeats):
        print(f"{name}: repeat {repeat + 1}/{repeats}", file=sys.stderr, flush=True)
        shift = repeat % len(runnable)
        for key in runnable[shift:] + runnable[:shift]:
            times[key].append(impls[key].time_rounds(1 + repeat * rounds, rounds))
    return times


PROFILE_TOP = 6


def profiled_keys(impls: dict[str, Implementation], compares_algorithms: bool) -> list[str]:
    """The engine's implementations (the ones a missed target is about); the other loops are not ours."""
    return [
        key for key, impl in impls.items() if impl.skipped is None and (compares_algorithms or key.startswith("engine"))
    ]


def profile_round(impl: Implementation, round_: int) -> dict:
    """Where one more round's time goes: cProfile's own time per function, the top PROFILE_TOP, each
    as a share of the profiled round's wall time (the profiler's overhead included)."""
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    impl.time_rounds(round_, 1)
    profiler.disable()
    wall = time.perf_counter() - start
    rows = sorted(pstats.Stats(profiler).stats.items(), key=lambda item: -item[1][2])[:PROFILE_TOP]
    return {
        "seconds": wall,
        "top": [
            {"function": function_label(where), "calls": counts[1], "seconds": counts[2], "share": counts[2] / wall}
            for where, counts in rows
        ],
    }


def function_label(where: tuple) -> str:
    """cProfile's (file, line, name) as 'pipeline/fisher.py:38(layer_stack_squared_grads)' or 'torch.bmm'."""
    filename, line, name = where
    if filename == "~":  # a built-in: "<built-in method torch.bmm>", "<method 'add_' of ... objects>"
        return name.strip("<>").replace("built-in method ", "").replace("method ", "")
    path = Path(filename)
    try:
        path = path.resolve().relative_to(Path.cwd())
    except ValueError:
        path = Path(*path.parts[-2:])
    return f"{path}:{line}({name})"


def summarise(
    impls: dict[str, Implementation],
    times: dict[str, list[float]],
    baseline: str,
    flops_per_round: int,
    matmul_flops: float,
    full_round_scale: float | None,
) -> dict:
    base = statistics.median(times[baseline])
    out = {}
    for key, impl in impls.items():
        if impl.skipped is not None:
            out[key] = {"label": impl.label, "skipped": impl.skipped}
            continue
        seconds = statistics.median(times[key])
        entry = {
            "label": impl.label,
            "seconds_per_round": seconds,
            "seconds_per_round_repeats": times[key],
            "rounds_per_second": 1.0 / seconds,
            "time_over_baseline": seconds / base,
            "rate_over_baseline": base / seconds,
            "flops_per_second": flops_per_round / seconds,
            "fraction_of_matmul": flops_per_round / seconds / matmul_flops,
        }
        if full_round_scale is not None:
            entry["estimated_seconds_per_full_round"] = seconds * full_round_scale
        out[key] = entry
    return out


def run_workload(
    workload: Workload,
    x,
    y,
    image_shape,
    classes: int,
    device: torch.device,
    repeats: int,
    flower_skip: str | None,
    matmul_flops: float,
) -> dict:
    data = client_data(x, y, workload, device, classes)
    if workload.algorithms is None:
        impls = comparison_implementations(workload, data, image_shape, classes, device, flower_skip, repeats)
        baseline = "engine_auto"
    else:
        impls = algorithm_implementations(workload, data, image_shape, classes, device)
        baseline = next(iter(impls))
    cohort = sample_cohort(len(data.clients), workload.client_fraction, SEED, 1)
    samples = workload.local_epochs * sum(len(data.clients[k]) for k in cohort)
    per_sample = training_flops_per_sample(
        build_model(workload.model, image_shape, classes, SEED, workload.norm), image_shape
    )
    # A reduced workload's time scaled to its whole round (the work grows with the samples trained on).
    full_clients = max(1, round(workload.client_fraction * workload.clients))
    full_samples = workload.local_epochs * full_clients * 2 * workload.shard_size  # (reduced workloads use shards)
    scale = full_samples / samples if workload.reduce_clients is not None else None
    try:
        times = measure(impls, repeats, workload.rounds, f"workload {workload.number}")
        after = 1 + repeats * workload.rounds
        profiles = {
            key: profile_round(impls[key], after) for key in profiled_keys(impls, workload.algorithms is not None)
        }
    finally:
        for impl in impls.values():
            if impl.close:
                impl.close()
    return {
        "title": workload.title,
        "model": workload.model,
        "clients": workload.clients,
        "shard_size": workload.shard_size,
        "client_fraction": workload.client_fraction,
        "local_epochs": workload.local_epochs,
        "batch_size": workload.batch_size,
        "lr": workload.lr,
        "reduction": workload.reduction(),
        "full_round_scale": scale,
        "rounds_per_repeat": workload.rounds,
        "repeats": repeats,
        "clients_per_round": len(cohort),
        "samples_per_round": samples,
        "flops_per_sample_step": per_sample,
        "flops_per_round": samples * per_sample,
        "baseline": baseline,
        "implementations": summarise(impls, times, baseline, samples * per_sample, matmul_flops, scale),
        "profiles": profiles,
    }


# ---------------------------------------------------------------- command line


def machine(device: torch.device) -> dict:
    return {
        "cpu": distributed.cpu_model(),
        "logical_cores": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else distributed.cpu_model(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, like every other user mistake
        raise UserError(message)


def flower_skip_reason(args, number: int) -> str | None:
    """Why (e) is not run on this workload, or None to run it."""
    if args.no_flower:
        return "skipped: --no-flower"
    missing = flower_sim.missing_reason()
    if missing:
        return missing
    if args.quick and number != 1:  # each workload starts Ray and its actors: ~10 s on 2 cores
        return "skipped: --quick runs Flower on workload 1 only"
    return None


def parse_workloads(text: str) -> list[int]:
    allowed = {str(n) for n in PAPER}
    parts = [part.strip() for part in text.split(",")]
    if any(part not in allowed for part in parts):
        raise UserError(
            f"--workloads: {text!r} is not allowed; expected a comma-separated subset of "
            f"{','.join(sorted(allowed, key=int))}"
        )
    return sorted({int(part) for part in parts})


def choose_device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: CUDA is not available on this machine; use --device cpu")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def parse_args(argv):
    parser = Parser(prog="python -m benchmarks.speed", description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(map(str, PAPER)), help="comma-separated subset of 1,...,8")
    parser.add_argument("--quick", action="store_true", help="tiny synthetic sizes, 2 repeats: a smoke test")
    parser.add_argument("--sizes", choices=("paper", "tiny"), help="paper: real MNIST (default); tiny: synthetic")
    parser.add_argument("--repeats", type=int, help="timed repeats per implementation (default 5; 2 with --quick)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument(
        "--data",
        type=Path,
        help="prepared-format MNIST .npz (default data/prepared/mnist.npz, "
        "else $FEDFORGET_DATA_MIRROR/mnist.npz); unused with tiny sizes",
    )
    parser.add_argument("--no-flower", action="store_true", help="skip implementation (e)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument(
        "--suite",
        choices=("compare", "device"),
        default="compare",
        help="compare: workloads 1-8 against other implementations (above); device: images/s and "
        "peak memory of the GPU-scale models on both paths (benchmarks/device_suite.py)",
    )
    parser.add_argument(
        "--device-workloads",
        help="with --suite device: a comma-separated subset of "
        "resnet18_gn,resnet18_bn,resnet_shallow_adam,densenet121,"
        "dropout_cnn,cnn_fedavg,mlp_200",
    )
    parser.add_argument(
        "--levers",
        nargs="?",
        const="all",
        metavar="LEVERS",
        help="with --suite device: also time each workload's faster path under each speed lever "
        "(all, or a comma-separated subset of tf32_matmul,cudnn_benchmark,bf16_autocast,"
        "device_chunk; device_chunk on the vectorized path): speed only, not the runs' settings",
    )
    args = parser.parse_args(argv)
    args.sizes = args.sizes or ("tiny" if args.quick else "paper")
    args.repeats = args.repeats if args.repeats is not None else (2 if args.quick else 5)
    if args.repeats < 1:
        raise UserError(f"--repeats: {args.repeats} is not allowed; expected an integer >= 1")
    if args.levers is not None:  # refused here, before any workload runs
        from benchmarks.device_suite import parse_levers

        parse_levers(args.levers)
    return args


def workload_data(dataset: str, args):
    """(images, labels, image shape, classes, where they came from) of a workload's dataset."""
    if args.sizes == "paper":
        path = (args.data or default_data_path()) if dataset == "mnist" else default_data_path(dataset)
        x, y = load_images(path, dataset, "--data" if dataset == "mnist" else "data")
        return x, y, tuple(x.shape[1:]), dataset_spec(dataset).classes, str(path)
    shape = (*TINY_SHAPE[:2], dataset_spec(dataset).image_shape[-1])
    x, y = synthetic_images(TINY_CLIENTS * 2 * TINY_SHARD, shape)
    return x, y, shape, TINY_CLASSES, "synthetic (tiny sizes)"


@exit_on_user_error
def main(argv=None) -> None:
    args = parse_args(argv)
    numbers = parse_workloads(args.workloads)
    device = choose_device(args.device)
    tune_allocator()  # as pipeline.train does before training
    if args.suite == "device":
        from benchmarks import device_suite

        device_suite.main(args, device)
        return
    size, matmul_repeats = MATMUL[args.sizes]
    matmul = matmul_rate(size, matmul_repeats, device)
    results, sources, loaded = {}, {}, {}
    for number, workload in workloads_for(args.sizes).items():
        if number not in numbers:
            continue
        if workload.dataset not in loaded:
            loaded[workload.dataset] = workload_data(workload.dataset, args)
        x, y, image_shape, classes, sources[workload.dataset] = loaded[workload.dataset]
        flower_skip = flower_skip_reason(args, number) if workload.algorithms is None else None
        results[str(number)] = run_workload(
            workload, x, y, image_shape, classes, device, args.repeats, flower_skip, matmul["flops_per_second"]
        )
    data_name = "; ".join(f"{name}: {source}" for name, source in sources.items())
    summary = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(device),
        "sizes": args.sizes,
        "data": data_name,
        "repeats": args.repeats,
        "matmul": matmul,
        "flops_note": report.FLOPS_NOTE,
        "flower": flower_sim.describe(device),
        "workloads": results,
    }
    summary["targets"] = report.targets(results)
    markdown = report.markdown(summary)
    write_json(args.out / "speed.json", summary)
    write_text(args.out / "speed.md", markdown)
    print(markdown)


if __name__ == "__main__":
    main()
