"""What a run will cost, before it runs: its training FLOPs, and seconds from measured throughput.

A run's work is counted in sample passes: every round, max(1, round(C·K)) clients each pass over their
training samples E times (a forward and a backward pass, ~3x a forward pass's FLOPs), and the global model
is evaluated on the test set every `eval_every` rounds (forward only). A model's forward FLOPs are
counted from one forward pass (2 per multiply-add of its Linear and Conv2d layers; biases, activations,
pooling, normalisation, the loss and the optimiser step are left out, a few per cent). The speed
benchmarks (benchmarks/) count with the same functions, so that their rates and these costs agree.

Seconds on this kind of machine come from the committed runs (`reports/runs/*/seed*/`): for each model,
the median of FLOPs / training seconds over the runs that trained it. They include what FLOPs do not
count (Fisher and path scores, probes, per-step overheads at small batches), so they are a rough guide,
within about 2x. A model no committed run trained (the paper profile's CNNs and ResNets: the default
profile trains MLPs and `cnn_small`) takes the committed speed benchmark's rate for it, the engine's own
path on FedAvg (`benchmarks/results/speed.json`, the same FLOP count): a FedAvg-only rate, so the
penalised algorithms' extra passes are not in it.

Seconds on one GPU come from the committed device benchmark (`benchmarks/results/gpu/device_speed.json`,
written by `scripts/gpu-check.sh`): per model (and normalisation, for ResNet-18's GroupNorm and BatchNorm),
the FLOP/s of the faster path on one FedAvg round of a few clients. Like the CPU's benchmark rate it
leaves out the penalised algorithms' extra passes and evaluation's own speed, and its cohorts are smaller
than most runs' (a larger cohort fills the GPU better). A model the benchmark did not measure divides by
an assumed throughput (`GPU_TFLOPS`), and the plan says for how many runs.
"""

from __future__ import annotations

import functools
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import torch

from pipeline.clientdata import sample_cohort
from pipeline.inputs import PARTITION_RECORDS, dataset_spec
from pipeline.paths import RUNS_DIR

# Effective fp32 training throughput assumed for one H100-class GPU on these small models and batches
# (far below its peak: at B = 10-64 the kernels are small). An assumption, not a measurement.
GPU_TFLOPS = 10.0
BENCHMARK_RESULTS = Path("benchmarks") / "results" / "speed.json"
GPU_BENCHMARK_RESULTS = Path("benchmarks") / "results" / "gpu" / "device_speed.json"
# A training step as 3 forward passes: the backward pass costs about two (a gradient for the weights and
# one for the inputs; the first layer needs none for its input, so this slightly over-counts).
TRAINING_STEP_FACTOR = 3


def layer_forward_flops(module: torch.nn.Module, output: torch.Tensor) -> int:
    """FLOPs of one sample through one Linear or Conv2d layer (2 per multiply-add), from its output (a
    batch of one); 0 for any other layer."""
    if isinstance(module, torch.nn.Linear):
        return 2 * module.in_features * module.out_features
    if isinstance(module, torch.nn.Conv2d):
        out_h, out_w = output.shape[-2:]
        kernel_h, kernel_w = module.kernel_size
        per_output = (module.in_channels // module.groups) * kernel_h * kernel_w
        return 2 * out_h * out_w * per_output * module.out_channels
    return 0


def forward_flops(model: torch.nn.Module, image_shape) -> int:
    """FLOPs of one (H, W, C) sample's forward pass: Σ over the Linear and Conv2d layers it goes through,
    counted from one pass on the model's device."""
    total = 0

    def count(module, args, output):
        nonlocal total
        total += layer_forward_flops(module, output)

    hooks = [
        m.register_forward_hook(count) for m in model.modules() if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d))
    ]
    height, width, channels = image_shape
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(torch.zeros(1, channels, height, width, device=next(model.parameters()).device))
    finally:
        model.train(was_training)
        for hook in hooks:
            hook.remove()
    return total


def training_flops_per_sample(model: torch.nn.Module, image_shape) -> int:
    return TRAINING_STEP_FACTOR * forward_flops(model, image_shape)


def client_sizes(params: dict, partition: str) -> list[int] | None:
    """Training samples per client: from the built partition when there is one, else as the partitioner
    will draw them (pipeline.partition_sizes, from the dataset's class counts: every scheme, clusters and
    Dirichlet included); None when the dataset's size is unknown before download (FEMNIST)."""
    from pipeline.partition_sizes import partition_sizes, training_split

    meta = PARTITION_RECORDS / partition / "meta.json"
    if meta.is_file():
        return json.loads(meta.read_text())["train_sizes"]
    settings = params["partitions"][partition]
    split = training_split(settings["dataset"], params.get("datasets", {}).get(settings["dataset"]))
    if split is None:
        return None
    return [int(size) for size in partition_sizes(settings, split).train_sizes]


@functools.lru_cache(maxsize=None)
def model_shape(model: str, image_shape: tuple, classes: int, norm: str | None) -> tuple[int, int]:
    """(forward FLOPs of one sample, parameter count) of a model for a dataset (built once per kind)."""
    from pipeline.models import build_model

    net = build_model(model, image_shape, classes, 0, norm)
    return forward_flops(net, image_shape), sum(p.numel() for p in net.parameters())


def run_model_shape(settings: dict, params: dict) -> tuple[int, int]:
    dataset = params["partitions"][settings["partition"]]["dataset"]
    spec = dataset_spec(dataset, params.get("datasets", {}).get(dataset))
    return model_shape(settings["model"], tuple(spec.image_shape), spec.classes, settings.get("norm"))


def run_flops(settings: dict, params: dict) -> float | None:
    """Training and evaluation FLOPs of one (run, seed); None when the clients' sizes are unknown."""
    sizes = client_sizes(params, settings["partition"])
    if sizes is None:
        return None
    dataset = params["partitions"][settings["partition"]]["dataset"]
    spec = dataset_spec(dataset, params.get("datasets", {}).get(dataset))
    forward = run_model_shape(settings, params)[0]
    per_round = len(sample_cohort(len(sizes), settings["client_fraction"], 0, 1))
    passes = settings["rounds"] * per_round * statistics.fmean(sizes) * settings["local_epochs"]
    evaluations = (spec.test_size or 0) * -(-settings["rounds"] // settings["eval_every"])
    return TRAINING_STEP_FACTOR * forward * passes + forward * evaluations


def measured_throughput(params: dict) -> dict[str, float]:
    """FLOP/s per model on this machine, from the committed runs' settings and training seconds."""
    by_model: dict[str, list[float]] = {}
    for timing_path in sorted(RUNS_DIR.glob("*/seed*/timing.json")):
        settings_path = timing_path.with_name("settings.json")
        if not settings_path.is_file():
            continue
        settings = json.loads(settings_path.read_text())
        timing = json.loads(timing_path.read_text())
        seconds, rounds_done = timing.get("seconds_total") or 0.0, len(timing.get("seconds_per_round", []))
        if seconds <= 0 or rounds_done == 0 or settings.get("partition") not in params.get("partitions", {}):
            continue
        flops = run_flops({**settings, "rounds": rounds_done}, params)
        if flops:
            by_model.setdefault(settings["model"], []).append(flops / seconds)
    return {model: statistics.median(rates) for model, rates in by_model.items()}


def benchmark_throughput(path: Path = BENCHMARK_RESULTS) -> dict[str, float]:
    """FLOP/s per model from the committed speed benchmark when it ran on a CPU: the engine's chosen path
    ("engine_auto") on each FedAvg workload, the median per model; {} without results."""
    if not path.is_file():
        return {}
    results = json.loads(path.read_text())
    if results.get("machine", {}).get("device") != "cpu":
        return {}
    by_model: dict[str, list[float]] = {}
    for workload in results.get("workloads", {}).values():
        rate = workload.get("implementations", {}).get("engine_auto", {}).get("flops_per_second")
        if rate:
            by_model.setdefault(workload["model"], []).append(rate)
    return {model: statistics.median(rates) for model, rates in by_model.items()}


@dataclass(frozen=True)
class GpuRates:
    """The committed device benchmark's FLOP/s by (model, norm), and the GPU it ran on (None: no results)."""

    by_model_and_norm: dict
    device: str | None = None

    def rate(self, model: str, norm: str | None) -> float | None:
        """The rate of this model with this normalisation; else the median over the model's workloads."""
        if (model, norm) in self.by_model_and_norm:
            return self.by_model_and_norm[(model, norm)]
        rates = [rate for (name, _), rate in self.by_model_and_norm.items() if name == model]
        return statistics.median(rates) if rates else None


def gpu_throughput(path: Path = GPU_BENCHMARK_RESULTS) -> GpuRates:
    """The device benchmark's rates when it ran on CUDA: per workload, its faster path's FLOP/s."""
    if not path.is_file():
        return GpuRates({})
    results = json.loads(path.read_text())
    if results.get("device", {}).get("type") != "cuda" or results.get("quick"):
        return GpuRates({})
    rates = {}
    for workload in results.get("workloads", {}).values():
        faster = workload.get("paths", {}).get(workload.get("faster_path") or "", {})
        if faster.get("flops_per_second"):
            rates[(workload["model"], workload.get("norm"))] = faster["flops_per_second"]
    return GpuRates(rates, results["device"].get("name"))


def cpu_throughput(params: dict) -> tuple[dict[str, float], dict[str, str]]:
    """(FLOP/s per model, where each came from: "runs" or "benchmark"): the committed runs' rate where a
    run trained the model, the benchmark's otherwise."""
    runs, benchmark = measured_throughput(params), benchmark_throughput()
    rates = {**benchmark, **runs}
    return rates, {model: "runs" if model in runs else "benchmark" for model in rates}


def run_cost(settings: dict, params: dict, throughput: dict[str, float], gpu: GpuRates | None = None) -> dict:
    """{"flops", "cpu_seconds" (None where no run of this model was measured), "gpu_seconds" (at the
    benchmark's rate for the model, else at GPU_TFLOPS), "gpu_measured"} for all of the run's seeds."""
    flops = run_flops(settings, params)
    parameters = run_model_shape(settings, params)[1]
    if flops is None:
        return {"flops": None, "cpu_seconds": None, "gpu_seconds": None, "parameters": parameters}
    flops *= len(settings["seeds"])
    rate = throughput.get(settings["model"])
    gpu_rate = (gpu or GpuRates({})).rate(settings["model"], settings.get("norm"))
    return {
        "flops": flops,
        "cpu_seconds": flops / rate if rate else None,
        "gpu_seconds": flops / (gpu_rate or GPU_TFLOPS * 1e12),
        "gpu_measured": gpu_rate is not None,
        "parameters": parameters,
    }
