"""The machine's matrix-multiply rate, to compare the models' FLOP rates with.

The models' FLOPs are counted by pipeline/cost.py's `training_flops_per_sample` (2 per multiply-add of
the Linear and Conv2d layers, a training step as 3 forward passes), the counter `python -m pipeline.plan`
estimates a run's cost with, so that a benchmark's rate and a plan's estimate count the same work.
"""

from __future__ import annotations

import time

import torch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_rate(size: int, repeats: int, device: torch.device) -> dict:
    """Best-of-`repeats` float32 torch.mm of two size×size matrices: the machine's reachable FLOP/s."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=generator).to(device)
    b = torch.randn(size, size, generator=generator).to(device)
    torch.mm(a, b)  # warm-up: thread pool, kernels
    best = float("inf")
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        torch.mm(a, b)
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    flops = 2 * size**3
    return {"size": size, "repeats": repeats, "seconds_best": best, "flops_per_second": flops / best}
