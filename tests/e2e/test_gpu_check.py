"""What CI can run of scripts/gpu-check.sh without a GPU: the `gpu` tier is collected, covers every part
of the check and skips cleanly; the device benchmark runs at tiny sizes on the CPU and its report agrees
with itself; its arguments are checked in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
WORKLOADS = {"resnet18_gn", "resnet18_bn", "resnet_shallow_adam", "densenet121", "dropout_cnn", "cnn_fedavg", "mlp_200"}
# One test function per part of the check the issue asks for (tests/gpu/test_gpu.py).
PARTS = [
    "test_a_round_of_every_algorithm_runs_on_cuda_without_syncs_in_its_steps",
    "test_cuda_agrees_with_the_cpu_in_float64",
    "test_keyed_draws_do_not_depend_on_the_chunking",
    "test_the_device_chunk_rule_stacks_the_whole_cohort_and_agrees_in_float64",
    "test_vmap_evaluation_of_batch_norm_models_matches_one_model_at_a_time",
    "test_a_killed_run_resumes_on_cuda",
    "test_two_processes_share_one_gpu_over_gloo_with_one_process_numbers",
    "test_two_processes_over_nccl_give_one_process_numbers",
    "test_more_nccl_processes_than_gpus_is_one_line",
    "test_deterministic_kernels_train_adaptive_pooling_models",
    "test_a_compiled_round_on_cuda_agrees_with_the_eager_round_in_float64",
    "test_a_compiled_round_on_cuda_makes_no_host_sync_once_compiled",
    "test_the_foreach_optimizer_on_cuda_gives_its_loops_bits",
]


def test_the_gpu_tier_is_collected_with_every_part_of_the_check():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "gpu",
            "tests/gpu/test_gpu.py",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    collected = {line.split("::")[1].split("[")[0] for line in result.stdout.splitlines() if "::" in line}
    assert set(PARTS) <= collected, set(PARTS) - collected
    every = [line for line in result.stdout.splitlines() if "every_algorithm_runs_on_cuda" in line]
    assert len(every) >= 2 * 8 * 3  # every algorithm (and RWalk) x both paths x the MLP and CNN setups


@pytest.mark.e2e
@pytest.mark.skipif(torch.cuda.is_available(), reason="the smoke run is the CPU's; with CUDA run the check itself")
def test_the_smoke_run_skips_the_tier_and_benchmarks_every_workload_on_both_paths(tmp_path):
    result = subprocess.run(
        ["bash", "scripts/gpu-check.sh", "--smoke", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    log = (tmp_path / "gpu_tests.log").read_text()
    assert " skipped" in log and "failed" not in log and "error" not in log.lower()
    report = json.loads((tmp_path / "device_speed.json").read_text())
    assert report["device"]["type"] == "cpu" and report["quick"] and set(report["workloads"]) == WORKLOADS
    for key, workload in report["workloads"].items():
        assert set(workload["paths"]) == {"vectorized", "sequential"}, key
        for label, entry in workload["paths"].items():
            assert "failed" not in entry, (key, label, entry)
            assert entry["images_per_round"] == 2 * 8  # tiny: 2 clients of 8 samples, one epoch
            assert entry["images_per_second"] == pytest.approx(entry["images_per_round"] / entry["seconds_per_round"])
            assert entry["peak_memory_bytes"] is None  # measured on CUDA only
        faster = max(workload["paths"], key=lambda label: workload["paths"][label]["images_per_second"])
        assert workload["faster_path"] == faster
        chunk = workload["levers"]["device_chunk"]  # the lever the check measures, on the path it changes
        assert "failed" not in chunk and chunk["path"] == "vectorized", (key, chunk)
        foreach = workload["levers"]["foreach_optimizer"]
        assert "failed" not in foreach and foreach["path"] == faster, (key, foreach)
    markdown = (tmp_path / "device_speed.md").read_text()
    assert markdown.count("| densenet121 |") == 3 and "tiny sizes" in markdown  # two paths and the levers' row
    compiled = json.loads((tmp_path / "compile" / "device_speed.json").read_text())["workloads"]
    assert set(compiled) == {"cnn_fedavg"}
    lever = compiled["cnn_fedavg"]["levers"]["compile"]
    assert "failed" not in lever and lever["path"] == compiled["cnn_fedavg"]["faster_path"], lever
    # the warm-up round held the compilation: far longer than a compiled round
    assert lever["warmup_seconds"] > 3 * max(lever["seconds_per_round_repeats"])
    assert lever["compiled_graphs"] >= 1 and lever["cudagraph_skips"] == 0
    assert "compiled_graphs" not in foreach  # counted for the compile levers only
    table = (tmp_path / "compile" / "device_speed.md").read_text()
    assert "| workload | path | compile |" in table  # the levers this call measured, no other column
    assert "gpu-check: tests exit 0, benchmark exit 0" in result.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--fast"], "gpu-check: unknown option --fast; "),
        (["a", "b"], "gpu-check: one output folder, not 'a' and 'b'; "),
        (["--smoke"], "gpu-check: --smoke takes an output folder and no --reproducibility; "),
        (["--smoke", "--reproducibility", "x"], "gpu-check: --smoke takes an output folder and no --reproducibility; "),
    ],
)
def test_the_check_refuses_bad_arguments_in_one_line_before_anything_runs(tmp_path, args, message):
    result = subprocess.run(
        ["bash", "scripts/gpu-check.sh", *args], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [message + "allowed: [--reproducibility] [OUT], or --smoke OUT"]


def test_the_device_benchmark_names_an_unknown_workload_in_one_line(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.speed",
            "--suite",
            "device",
            "--device",
            "cpu",
            "--device-workloads",
            "resnet18_gn,vgg",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --device-workloads: vgg not in the device suite; allowed: resnet18_gn, resnet18_bn, "
        "resnet_shallow_adam, densenet121, dropout_cnn, cnn_fedavg, mlp_200"
    ]


def test_a_lever_sets_its_backend_flag_for_the_block_only():
    from benchmarks.device_suite import LEVERS

    before = torch.backends.cudnn.benchmark
    with LEVERS["cudnn_benchmark"](torch.device("cpu")):
        assert torch.backends.cudnn.benchmark is True
    assert torch.backends.cudnn.benchmark is before


def test_the_levers_table_gives_each_lever_as_a_ratio_to_the_faster_paths_baseline():
    from benchmarks.device_suite import lever_lines

    workload = {
        "faster_path": "sequential",
        "paths": {"sequential": {"images_per_second": 200.0}},
        "levers": {
            "tf32_matmul": {"images_per_second": 300.0},
            "cudnn_benchmark": {"images_per_second": 100.0},
            "bf16_autocast": {"failed": "dtype mismatch"},
        },
    }
    lines = lever_lines({"workloads": {"w": workload, "plain": {"faster_path": "vectorized", "paths": {}}}})
    # device_chunk came after these results were measured: the table says so rather than failing
    assert lines[-1] == (
        "| w | sequential | 300 (x1.50) | 100 (x0.50) | failed: dtype mismatch | not measured | "
        "not measured | not measured | not measured |"
    )
    assert sum(line.startswith(("| w |", "| plain |")) for line in lines) == 1  # no row without levers


def test_the_chunk_lever_is_read_against_the_vectorized_baseline_it_ran_on():
    from benchmarks.device_suite import lever_lines

    # A BatchNorm workload: faster sequential (200/s), vectorized 100/s; the chunk lever runs vectorized at 150/s:
    # x1.50 of the vectorized baseline, not x0.75 of the sequential one.
    workload = {
        "faster_path": "sequential",
        "paths": {"sequential": {"images_per_second": 200.0}, "vectorized": {"images_per_second": 100.0}},
        "levers": {"device_chunk": {"images_per_second": 150.0, "path": "vectorized"}},
    }
    assert "| 150 (x1.50, vectorized) |" in lever_lines({"workloads": {"w": workload}})[-1]


def test_a_lever_cell_gives_its_warm_up_seconds():
    from benchmarks.device_suite import lever_lines

    workload = {
        "faster_path": "vectorized",
        "paths": {"vectorized": {"images_per_second": 100.0}},
        "levers": {"compile": {"images_per_second": 400.0, "warmup_seconds": 31.04, "path": "vectorized"}},
    }
    assert "| 400 (x4.00; warm-up 31.0 s) |" in lever_lines({"workloads": {"w": workload}})[-1]


def test_an_unknown_lever_is_one_line_before_anything_runs():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.speed",
            "--suite",
            "device",
            "--device",
            "cpu",
            "--levers",
            "tf32_matmul,warp",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "--levers: warp not a lever; allowed: all or a comma-separated subset of tf32_matmul, cudnn_benchmark, "
            "bf16_autocast, device_chunk, compile, compile_cudagraphs, foreach_optimizer"
        )
    )


def test_the_reproducibility_comparison_reports_equality_and_the_largest_difference():
    from benchmarks.gpu_reproducibility import compare

    state = {"params": {"w": torch.tensor([1.0, 2.0])}, "steps": [torch.tensor(3)]}
    assert compare(state, {"params": {"w": torch.tensor([1.0, 2.0])}, "steps": [torch.tensor(3)]}) == {
        "bitwise_equal": True,
        "max_abs_difference": 0.0,
    }
    moved = compare(state, {"params": {"w": torch.tensor([1.0, 2.5])}, "steps": [torch.tensor(3)]})
    assert moved == {"bitwise_equal": False, "max_abs_difference": 0.5}
