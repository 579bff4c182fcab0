"""List every run of a profile with its resolved settings, before spending compute on it.

    python -m pipeline.plan                  # the active profile, one line per run
    python -m pipeline.plan --profile paper  # the paper profile, without switching to it
    python -m pipeline.plan --verbose        # every resolved setting, its partition's, and what was scaled

Each run's line ends with its estimated cost over all its seeds (pipeline.cost): training FLOPs, hours on
this kind of CPU (from the committed runs' measured throughput for the same model; "?" where no run of
that model was measured) and on one GPU (at the committed device benchmark's rate for the model, else an
assumed throughput); the profile's totals come last, each with where its rates came from.
"""

from __future__ import annotations

import argparse
import signal

from pipeline import cost
from pipeline.config import PROFILES, derive_grid, load_checked_params
from pipeline.errors import exit_on_user_error
from pipeline.runs import changed_scalings, resolve_run


def algorithm_text(algorithm: dict) -> str:
    extra = ", ".join(f"{k}={v}" for k, v in algorithm.items() if k != "name")
    return f"{algorithm['name']}({extra})" if extra else algorithm["name"]


def hours(seconds) -> str:
    return "?" if seconds is None else f"{seconds / 3600:.2f}"


def cost_text(estimate: dict) -> str:
    parameters = f"{estimate['parameters'] / 1e6:.2f} M parameters, "
    if estimate["flops"] is None:
        return parameters + "cost ? (client sizes unknown until the partition is built)"
    return (
        f"{parameters}{estimate['flops'] / 1e12:.1f} TFLOP, CPU {hours(estimate['cpu_seconds'])} h, "
        f"GPU {hours(estimate['gpu_seconds'])} h"
    )


def run_line(settings: dict) -> str:
    return (
        f"{settings['key']:<32} {algorithm_text(settings['algorithm']):<48} {settings['partition']:<26} "
        f"{settings['model']:<10} R={settings['rounds']:<4} C={settings['client_fraction']:<4} "
        f"E={settings['local_epochs']:<3} B={settings['batch_size']:<4} lr={settings['lr']:g} "
        f"{settings['optimizer']} momentum={settings['momentum']:g} wd={settings['weight_decay']:g} "
        f"loss={settings['loss']}{optional_text(settings)} seeds={settings['seeds']}"
    )


def optional_text(settings: dict) -> str:
    """The settings most runs leave at their default, shown only when set."""
    shown = [
        f"norm={settings['norm']}" if settings.get("norm") else "",
        f"augment={settings['augment']}" if settings.get("augment", "none") != "none" else "",
        f"eval={settings['evaluate_on']}" if settings.get("evaluate_on", "test") != "test" else "",
        f"freeze={settings['freeze']}" if settings.get("freeze", "none") != "none" else "",
    ]
    return "".join(f" {text}" for text in shown if text)


@exit_on_user_error
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=PROFILES, help="the profile to list (default: the active one)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the listing quietly
    params = load_checked_params(grid_path=None)
    if args.profile:
        params = {**params, "profile": args.profile}
    grid = derive_grid(params)
    seeds = sum(len(resolve_run(params, key)["seeds"]) for key in grid["runs"])
    print(
        f"profile {params['profile']}: {len(grid['runs'])} runs ({seeds} seeds), {len(grid['partitions'])} partitions, "
        f"datasets {', '.join(grid['datasets'])}"
    )
    throughput, sources = cost.cpu_throughput(params)
    gpu = cost.gpu_throughput()
    estimates = []
    for key in grid["runs"]:
        settings = resolve_run(params, key)
        estimates.append(cost.run_cost(settings, params, throughput, gpu))
        print(f"{run_line(settings)}  [{cost_text(estimates[-1])}]")
        if args.verbose:
            for name, value in sorted(settings.items()):
                if name not in ("key", "scaled"):
                    print(f"    {name}: {value}")
            # the partition's own settings (clients, clusters, samples per client, α): half of a run's setup
            print(f"    partition {settings['partition']}: {params['partitions'][settings['partition']]}")
            for name, change in sorted(changed_scalings(settings["scaled"]).items()):
                print(f"    scaled {name}: paper {change['paper']} -> {change['used']}")
    print(total_line(estimates, throughput, sources, gpu))


def gpu_source(estimates: list[dict], gpu: cost.GpuRates) -> str:
    """Where the GPU hours' rates came from: the benchmark's GPU and rates, and the runs left to the
    assumed throughput."""
    assumed = sum(1 for e in estimates if e["flops"] is not None and not e["gpu_measured"])
    measured = ", ".join(
        f"{model}{f' ({norm})' if norm else ''} {rate / 1e12:.2f}"
        for (model, norm), rate in sorted(gpu.by_model_and_norm.items(), key=str)
    )
    if not measured:
        return f"at an assumed {cost.GPU_TFLOPS:g} TFLOP/s (no GPU benchmark committed)"
    return (
        f"on one {gpu.device} at its measured TFLOP/s by model ({cost.GPU_BENCHMARK_RESULTS}: {measured})"
        f"{f', {assumed} run(s) of unmeasured models at an assumed {cost.GPU_TFLOPS:g}' if assumed else ''}"
    )


def total_line(estimates: list[dict], throughput: dict, sources: dict, gpu: cost.GpuRates | None = None) -> str:
    """The profile's totals; each says how many runs it leaves out (sizes unknown, model unmeasured)."""
    known = [e for e in estimates if e["flops"] is not None]
    cpu = [e["cpu_seconds"] for e in known if e["cpu_seconds"] is not None]
    unsized, cpu_left_out = len(estimates) - len(known), len(estimates) - len(cpu)
    rates = (
        ", ".join(
            f"{model} {rate / 1e9:.1f}{' (benchmark)' if sources.get(model) == 'benchmark' else ''}"
            for model, rate in sorted(throughput.items())
        )
        or "none measured"
    )
    return (
        f"total: {sum(e['flops'] for e in known) / 1e12:.1f} TFLOP"
        f"{f' without {unsized} run(s) whose client sizes are unknown' if unsized else ''}; "
        f"CPU {sum(cpu) / 3600:.2f} h"
        f"{f' without {cpu_left_out} run(s) of unmeasured models or sizes' if cpu_left_out else ''}; GPU "
        f"{sum(e['gpu_seconds'] for e in known) / 3600:.2f} h"
        f"{f' without the same {unsized}' if unsized else ''} {gpu_source(estimates, gpu or cost.GpuRates({}))} "
        f"(measured CPU GFLOP/s by model: {rates})"
    )


if __name__ == "__main__":
    main()
