"""What is reproducible bit for bit on a GPU, measured: three rounds of tests/support/round_driver.py (six clients
of 3-14 samples, Adam, the synthetic 8x8 data of the tests) per model, run in fresh processes and
compared tensor by tensor.

    python -m benchmarks.gpu_reproducibility [--out benchmarks/results/gpu]   # on a machine with CUDA

Per model, with FEDFORGET_DETERMINISTIC=1 (pipeline.distributed.use_deterministic_kernels) unless a row
says otherwise:
- the same run twice (one process, the model's GPU path), and the same twice without the setting;
- the vectorized against the sequential path;
- one process against two sharing the GPU over gloo (torchrun).
Each comparison gives whether every tensor of the final server state is equal and the largest absolute
difference. Writes <out>/reproducibility.json and .md; `scripts/gpu-check.sh` runs it after the tests.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from pipeline import distributed
from pipeline.io import write_json, write_text
from pipeline.options import DETERMINISTIC, DIST_BACKEND

REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "tests" / "support" / "round_driver.py"
# A BatchNorm CNN (cuDNN's convolutions and BatchNorm), the dropout-free FedAvg CNN and the MLP; FedAvg and
# SCAFFOLD (its control variates add a second state that must agree too).
CASES = [("cnn_fedavg_bn", "fedavg"), ("cnn_fedavg", "scaffold"), ("mlp_200", "fedavg")]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]


def run_driver(
    out: Path, model: str, algorithm: str, path: str, deterministic: bool, launcher: list[str] | None = None
) -> dict:
    # the driver reads them once (pipeline.options.RuntimeOptions) and passes them down
    env = {
        **os.environ,
        DETERMINISTIC: "1" if deterministic else "0",
        DIST_BACKEND: "gloo",
        "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
    }
    command = [
        *(launcher or [sys.executable]),
        str(DRIVER),
        str(out),
        "--device",
        "cuda",
        "--rounds",
        "3",
        "--model",
        model,
        "--algorithm",
        algorithm,
        "--path",
        path,
    ]
    subprocess.run(command, cwd=REPO, env=env, check=True, capture_output=True, text=True, timeout=300)
    return torch.load(out, weights_only=False)


def leaves(tree, prefix: str = "") -> dict:
    if isinstance(tree, dict):
        return {k: v for key, value in tree.items() for k, v in leaves(value, f"{prefix}/{key}").items()}
    if isinstance(tree, (list, tuple)):
        return {k: v for i, value in enumerate(tree) for k, v in leaves(value, f"{prefix}/{i}").items()}
    return {prefix: tree} if torch.is_tensor(tree) else {}


def compare(left: dict, right: dict) -> dict:
    a, b = leaves(left), leaves(right)
    differences = [
        float((a[k].double() - b[k].double()).abs().max()) if a[k].numel() else 0.0
        for k in a
        if a[k].is_floating_point()
    ]
    equal = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    return {"bitwise_equal": equal, "max_abs_difference": max(differences, default=0.0)}


def measure_case(model: str, algorithm: str, folder: Path) -> dict:
    path = "sequential" if model.endswith("_bn") else "vectorized"  # the path cohort.prefer_vectorized takes
    other = "sequential" if path == "vectorized" else "vectorized"

    def run(name, **options):
        return run_driver(folder / f"{model}-{algorithm}-{name}.pt", model, algorithm, **options)

    first = run("a", path=path, deterministic=True)
    return {
        "path": path,
        "same run twice, deterministic kernels": compare(first, run("b", path=path, deterministic=True)),
        "same run twice, default kernels": compare(
            run("c", path=path, deterministic=False), run("d", path=path, deterministic=False)
        ),
        f"{path} vs {other} path": compare(first, run("e", path=other, deterministic=True)),
        "1 vs 2 processes (gloo, one GPU)": compare(first, run("f", path=path, deterministic=True, launcher=TORCHRUN)),
    }


def markdown(summary: dict) -> str:
    device = summary["device"]
    lines = [
        f"# Reproducibility on {device['name']}",
        "",
        f"{summary['date']}; torch {device['torch']}, CUDA {device.get('cuda')}, cuDNN {device.get('cudnn')}; "
        "three rounds of tests/support/round_driver.py per case, compared tensor by tensor.",
        "",
        "| model, algorithm | comparison | bit for bit | largest difference |",
        "|---|---|---|---|",
    ]
    for case, results in summary["cases"].items():
        for name, result in results.items():
            if name == "path":
                continue
            lines.append(
                f"| {case} ({results['path']} path) | {name} | "
                f"{'yes' if result['bitwise_equal'] else 'no'} | {result['max_abs_difference']:.3g} |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/gpu"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_reproducibility: no CUDA here; nothing measured", file=sys.stderr)
        sys.exit(2)
    with tempfile.TemporaryDirectory() as tmp:
        cases = {f"{model}, {algorithm}": measure_case(model, algorithm, Path(tmp)) for model, algorithm in CASES}
    summary = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": distributed.describe_device(torch.device("cuda")),
        "cases": cases,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "reproducibility.json", summary)
    write_text(args.out / "reproducibility.md", markdown(summary))
    print(markdown(summary))


if __name__ == "__main__":
    main()
