"""The cost estimate of `pipeline.plan` against hand-counted FLOPs."""

from __future__ import annotations

import json

import pytest

from pipeline import cost
from pipeline.models import build_model


def test_forward_flops_of_the_mlp_and_the_mcmahan_cnn_by_hand():
    mlp = build_model("mlp_200", (28, 28, 1), 10, 0)
    assert cost.forward_flops(mlp, (28, 28, 1)) == 2 * (784 * 200 + 200 * 10)
    cnn = build_model("cnn_fedavg", (28, 28, 1), 10, 0)
    conv1 = 2 * (32 * 28 * 28) * (1 * 5 * 5)
    conv2 = 2 * (64 * 14 * 14) * (32 * 5 * 5)
    dense = 2 * (64 * 7 * 7 * 512 + 512 * 10)
    assert cost.forward_flops(cnn, (28, 28, 1)) == conv1 + conv2 + dense


PARAMS = {
    "datasets": {"mnist": {"train_size": 1000, "test_size": 200}},
    "partitions": {"p": {"dataset": "mnist", "scheme": "iid", "clients": 10, "seed": 0}},
}
SETTINGS = {
    "partition": "p",
    "model": "mlp_200",
    "rounds": 4,
    "client_fraction": 0.3,
    "local_epochs": 2,
    "eval_every": 2,
    "seeds": [0, 1],
}


def test_run_flops_and_seconds_by_hand(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no built partition here: an equal split of the 1,000 samples
    forward = 2 * (784 * 200 + 200 * 10)
    passes = 4 * 3 * 100 * 2  # rounds x round(0.3 x 10) clients x 100 samples x E
    evaluations = 200 * 2  # the test set at rounds 2 and 4
    expected = 3 * forward * passes + forward * evaluations
    assert cost.run_flops(SETTINGS, PARAMS) == pytest.approx(expected)
    estimate = cost.run_cost(SETTINGS, PARAMS, {"mlp_200": 1e9})
    assert estimate["flops"] == pytest.approx(2 * expected)
    assert estimate["cpu_seconds"] == pytest.approx(2 * expected / 1e9)
    assert estimate["gpu_seconds"] == pytest.approx(2 * expected / (cost.GPU_TFLOPS * 1e12))
    assert cost.run_cost(SETTINGS, PARAMS, {})["cpu_seconds"] is None


def test_measured_throughput_from_a_committed_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "reports" / "runs" / "r" / "seed0"
    folder.mkdir(parents=True)
    (folder / "settings.json").write_text(json.dumps({**SETTINGS, "seed": 0}))
    # Two of the four rounds were trained (a diverged run stops early): its FLOPs are counted for two.
    (folder / "timing.json").write_text(json.dumps({"seconds_total": 3.0, "seconds_per_round": [1.0, 2.0]}))
    two_rounds = cost.run_flops({**SETTINGS, "rounds": 2}, PARAMS)
    assert cost.measured_throughput(PARAMS) == {"mlp_200": pytest.approx(two_rounds / 3.0)}


def test_a_model_no_run_trained_takes_the_benchmarks_cpu_rate(tmp_path, monkeypatch):
    """The paper profile's CNNs and ResNets: the benchmark's engine rate on FedAvg (the median over the
    model's workloads), and a committed run's rate wins where there is one; a GPU benchmark gives none."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "reports" / "runs" / "r" / "seed0"
    folder.mkdir(parents=True)
    (folder / "settings.json").write_text(json.dumps({**SETTINGS, "seed": 0}))
    (folder / "timing.json").write_text(json.dumps({"seconds_total": 2.0, "seconds_per_round": [1.0] * 4}))

    def engine(rate):
        return {
            "implementations": {"engine_auto": {"flops_per_second": rate}, "loop_tensors": {"flops_per_second": 1.0}}
        }

    results = {
        "machine": {"device": "cpu"},
        "workloads": {
            "1": {"model": "mlp_200", **engine(5e9)},
            "3": {"model": "cnn_mnist", **engine(4e10)},
            "9": {"model": "cnn_mnist", **engine(6e10)},
            "8": {"model": "cnn_fedavg", **engine(2e10)},
        },
    }
    path = tmp_path / "benchmarks" / "results" / "speed.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(results))
    assert cost.benchmark_throughput() == {"mlp_200": 5e9, "cnn_mnist": 5e10, "cnn_fedavg": 2e10}
    rates, sources = cost.cpu_throughput(PARAMS)
    assert rates["mlp_200"] == pytest.approx(cost.run_flops(SETTINGS, PARAMS) / 2.0) and sources["mlp_200"] == "runs"
    assert rates["cnn_mnist"] == 5e10 and sources["cnn_mnist"] == "benchmark"
    path.write_text(json.dumps({**results, "machine": {"device": "cuda"}}))
    assert cost.benchmark_throughput() == {}


def device_results(device_type: str = "cuda", quick: bool = False) -> dict:
    def workload(model, norm, vectorized, sequential, faster):
        return {
            "model": model,
            "norm": norm,
            "faster_path": faster,
            "paths": {
                "vectorized": {"flops_per_second": vectorized},
                "sequential": {"flops_per_second": sequential} if sequential else {"failed": "out of memory"},
            },
        }

    return {
        "device": {"type": device_type, "name": "Some GPU"},
        "quick": quick,
        "workloads": {
            "a": workload("resnet18", "group", 4e12, 2e12, "vectorized"),
            "b": workload("resnet18", "batch", 1e12, 3e12, "sequential"),
            "c": workload("mlp_200", None, 5e11, None, "vectorized"),
        },
    }


def test_gpu_seconds_take_the_device_benchmarks_faster_path_for_the_model_and_norm(tmp_path):
    path = tmp_path / "device_speed.json"
    path.write_text(json.dumps(device_results()))
    gpu = cost.gpu_throughput(path)
    assert gpu.device == "Some GPU"
    assert gpu.rate("resnet18", "group") == 4e12 and gpu.rate("resnet18", "batch") == 3e12
    assert gpu.rate("resnet18", None) == 3.5e12  # no workload of that norm: the median of the model's
    assert gpu.rate("mlp_200", None) == 5e11 and gpu.rate("cnn_small", None) is None
    flops = cost.run_flops(SETTINGS, PARAMS) * 2
    measured = cost.run_cost(SETTINGS, PARAMS, {}, gpu)
    assert measured["gpu_seconds"] == pytest.approx(flops / 5e11) and measured["gpu_measured"]
    assumed = cost.run_cost({**SETTINGS, "model": "cnn_small", "norm": None}, PARAMS, {}, gpu)
    assert not assumed["gpu_measured"]


@pytest.mark.parametrize("results", [device_results("cpu"), device_results(quick=True)], ids=["cpu", "quick"])
def test_a_cpu_or_smoke_device_benchmark_gives_no_gpu_rate(tmp_path, results):
    path = tmp_path / "device_speed.json"
    path.write_text(json.dumps(results))
    assert cost.gpu_throughput(path).by_model_and_norm == {}
    assert cost.gpu_throughput(tmp_path / "missing.json").device is None
