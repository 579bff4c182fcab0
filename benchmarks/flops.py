"""Analytic FLOP counts of the models, and the machine's matrix-multiply rate to compare them with.

Only the multiply-adds of Linear and Conv2d layers are counted (2 FLOPs each); biases, activations,
pooling, the loss and the optimiser step are left out, as are FedCurv's Fisher and any penalty. A
training step is taken as 3 forward passes (the backward pass costs about twice the forward one: a
gradient for the weights and one for the inputs), so the counts are the usual ~6·in·out per sample for
a Linear layer; the first layer needs no input gradient, so this slightly over-counts.
"""
from __future__ import annotations

import time

import torch
from torch import nn

TRAINING_STEP_FACTOR = 3  # forward + backward ≈ 3 forwards


def layer_forward_flops(module: nn.Module, output: torch.Tensor) -> int:
    """FLOPs of one sample through one layer, from its output shape (batch of one)."""
    if isinstance(module, nn.Linear):
        return 2 * module.in_features * module.out_features
    if isinstance(module, nn.Conv2d):
        out_h, out_w = output.shape[-2:]
        kernel_h, kernel_w = module.kernel_size
        per_output = (module.in_channels // module.groups) * kernel_h * kernel_w
        return 2 * out_h * out_w * per_output * module.out_channels
    return 0


def forward_flops_per_sample(model: nn.Module, image_shape) -> int:
    """Σ over the Linear and Conv2d layers of one forward pass of one (H, W, C) image."""
    height, width, channels = image_shape
    total = 0

    def count(module, inputs, output):
        nonlocal total
        total += layer_forward_flops(module, output)

    hooks = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    device = next(model.parameters()).device
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(torch.zeros(1, channels, height, width, device=device))
    finally:
        model.train(was_training)
        for hook in hooks:
            hook.remove()
    return total


def training_flops_per_sample(model: nn.Module, image_shape) -> int:
    return TRAINING_STEP_FACTOR * forward_flops_per_sample(model, image_shape)


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
    flops = 2 * size ** 3
    return {"size": size, "repeats": repeats, "seconds_best": best, "flops_per_second": flops / best}
