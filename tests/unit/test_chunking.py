"""How a round's cohort is cut into stacked chunks: the CPU's mmap rule and the device-memory rule for a
GPU (pipeline.cohort.chunk_for_round), checked by hand-worked counts and against the peak memory that an
H200 measured (benchmarks/results/gpu/device_speed.json)."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
import torch

from pipeline.cohort import (
    activation_bytes_per_sample,
    chunk_for_round,
    client_working_bytes,
    cohort_chunk_size,
    device_chunk_size,
)
from pipeline.models import build_model

MIB, GIB = 2**20, 2**30
DEVICE_RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "gpu" / "device_speed.json"


def test_the_leaf_outputs_of_one_sample_counted_by_hand():
    # 1x4x4 image: the convolution gives 2x4x4 = 32 floats, ReLU 32, Flatten 32, the linear layer 3:
    # 99 float32 values, 396 bytes. The containers (Sequential) are not leaves and add nothing.
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(32, 3)
    )
    assert activation_bytes_per_sample(model, (4, 4, 1)) == 99 * 4
    assert next(model.parameters()).device.type == "cpu"  # counted on a copy: the model stays where it was


def test_a_clients_working_set_and_the_chunks_that_fit_by_hand():
    params = {"w": torch.zeros(256, 1024)}  # 1 MiB of float32
    # 4 state copies (4 MiB) + 4 saved copies x 8 samples x 1 KiB (32 KiB)
    assert client_working_bytes(params, 1024, 8) == 4 * MIB + 32 * 1024
    assert device_chunk_size(100 * MIB, 80 * GIB) == 409  # half of 81,920 MiB is 40,960: 409 whole clients
    assert device_chunk_size(100 * GIB, 80 * GIB) == 1  # never fewer than one


def resnet18():
    model = build_model("resnet18", (32, 32, 3), 10, 0, "group")
    return model, dict(model.named_parameters())


def test_a_cpu_state_keeps_the_mmap_rule_whatever_the_rule_asked():
    model, params = resnet18()
    assert (
        chunk_for_round(model, params, (32, 32, 3), 32, torch.device("cpu"), "device") == cohort_chunk_size(params) == 2
    )


def test_the_device_rule_stacks_tces_whole_cohort_on_an_80_gib_gpu(monkeypatch):
    # ResNet-18 at TCE's B = 64 (CIFAR-10): 43 MiB of parameters and 5.7 MiB of leaf outputs a sample, about
    # 1.6 GiB a client, so half of 80 GiB holds some 25 clients: TCE's cohort of 10 in one chunk, where the
    # mmap rule stacks 2. Fixed by the device's total memory: the same chunk on every GPU of that kind.
    model, params = resnet18()
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(total_memory=80 * GIB)
    )
    cuda = torch.device("cuda", 0)
    assert 20 <= chunk_for_round(model, params, (32, 32, 3), 64, cuda, "device") <= 30
    assert chunk_for_round(model, params, (32, 32, 3), 64, cuda, "mmap") == 2
    assert chunk_for_round(model, params, (32, 32, 3), 64, cuda) == 2  # the default rule


def test_batch_norm_models_at_the_smallest_images_are_counted_too():
    # One sample through BatchNorm in training mode is refused ("more than 1 value per channel"): the count
    # runs in eval mode, where the outputs have the same shapes.
    for name, shape, norm in (
        ("resnet18", (8, 8, 3), "batch"),
        ("densenet121", (8, 8, 1), None),
        ("cnn_small", (4, 4, 3), "batch"),
    ):
        assert activation_bytes_per_sample(build_model(name, shape, 10, 0, norm), shape) > 0


def measured_workloads():
    summary = json.loads(DEVICE_RESULTS.read_text())
    return [
        (key, w) for key, w in summary["workloads"].items() if "peak_memory_bytes" in w["paths"].get("vectorized", {})
    ]


@pytest.mark.parametrize("key,workload", measured_workloads(), ids=lambda v: v if isinstance(v, str) else "")
def test_the_estimate_bounds_the_h200s_peak_memory_where_the_chunk_decides_what_fits(key, workload):
    """For every workload whose vectorized round peaked above 1 GiB on the H200 (the ResNets, DenseNet, the
    dropout CNN), the estimate for the chunks it stacked is at least that peak. The small B = 10 models
    peaked at a few hundred MiB, mostly not the chunk's (the cohort's uploads, the data): for them only
    that the peak is within 256 MiB of the estimate."""
    shape = tuple(workload["image_shape"])
    model = build_model(workload["model"], shape, 10, 0, workload["norm"])
    params = dict(model.named_parameters())
    chunk = min(workload["clients"], cohort_chunk_size(params))  # the rule the benchmark ran under
    estimate = chunk * client_working_bytes(params, activation_bytes_per_sample(model, shape), workload["batch_size"])
    peak = workload["paths"]["vectorized"]["peak_memory_bytes"]
    if peak > GIB:
        assert estimate >= peak, f"{key}: estimate {estimate / MIB:.0f} MiB < measured {peak / MIB:.0f} MiB"
    else:
        assert peak < 256 * MIB + estimate
