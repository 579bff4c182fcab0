"""Diagonal Fisher information from per-sample gradients (torch.func), as EWC defines it.

F = mean over samples i of (∂/∂θ log p(y_i | x_i; θ))², one squared gradient per sample, never the
square of a mini-batch gradient (a common shortcut that underestimates F by up to the batch size).
`labels="true"` uses the data's labels (the empirical Fisher); `labels="sampled"` draws y_i from the
model's own predictive distribution (the true Fisher's Monte-Carlo estimate).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from pipeline.models import KeyedDropout

# Layers whose per-sample squared gradients `layer_stack_squared_grads` computes without vmap.
LAYER_STACK = (nn.Linear, nn.Conv2d, nn.ReLU, nn.Flatten, nn.Dropout, KeyedDropout, nn.MaxPool2d)


def per_sample_log_likelihood_grads(model, params, x, y, buffers=None):
    """Gradients of log p(y_i|x_i) for every sample: dict name -> tensor [N, *param.shape]. Buffers
    (BatchNorm's running statistics, used as constants in eval mode) enter the forward pass only."""
    buffers = buffers or {}

    def log_likelihood(p, xi, yi):
        logits = functional_call(model, {**p, **buffers}, (xi.unsqueeze(0),))
        return -F.cross_entropy(logits, yi.unsqueeze(0))

    return vmap(grad(log_likelihood), in_dims=(None, 0, 0))(params, x, y)


def is_layer_stack(model) -> bool:
    return isinstance(model, nn.Sequential) and all(
        isinstance(m, LAYER_STACK) and (not isinstance(m, nn.Conv2d) or m.groups == 1) for m in model
    )


def layer_stack_squared_grads(model, params, x, y) -> dict:
    """Σ_i (per-sample gradient)² for a Sequential of Linear/Conv2d/ReLU/pooling layers, without
    materialising every parameter's per-sample gradient.

    One backward pass of the summed loss gives each layer's per-sample output gradient g_i (samples
    are independent). A linear layer's per-sample weight gradient is g_i a_iᵀ, so Σ_i (g_i a_iᵀ)² =
    (g²)ᵀ(a²): one matrix product. A convolution's is g_i · unfold(a_i)ᵀ (a sum over positions, so it
    is formed per sample, but only for the small conv kernels, never for the wide dense layers that
    made vmap's per-sample gradients cost gigabytes). Exact; tests/test_fisher.py checks it against the
    one-sample-at-a-time definition.
    """
    records, h = [], x
    for index, layer in enumerate(model):
        if isinstance(layer, (nn.Linear, nn.Conv2d)):
            weight = params[f"{index}.weight"].detach().requires_grad_(True)
            bias = params.get(f"{index}.bias")
            records.append((str(index), layer, h.detach()))
            if isinstance(layer, nn.Linear):
                h = F.linear(h, weight, bias.detach() if bias is not None else None)
            else:
                h = F.conv2d(
                    h, weight, bias.detach() if bias is not None else None, layer.stride, layer.padding, layer.dilation
                )
            records[-1] += (h,)  # type: ignore[assignment]
        else:  # ReLU, Flatten, pooling; Dropout is the identity in eval mode, where the Fisher is taken
            h = layer(h)
    loss = F.cross_entropy(h, y, reduction="sum")
    output_grads = torch.autograd.grad(loss, [record[3] for record in records])  # type: ignore[misc]
    squared = {}
    for (name, layer, a, _), g in zip(records, output_grads):  # type: ignore[misc]
        if isinstance(layer, nn.Linear):
            g2 = g * g
            squared[f"{name}.weight"] = g2.T @ (a * a)
            bias_grad = g
        else:
            g = g.flatten(2)  # [N, out, L]
            squared[f"{name}.weight"] = sum(  # type: ignore[union-attr]
                conv_squared_weight_grads(layer, a[start : start + CONV_SLICE], g[start : start + CONV_SLICE])
                for start in range(0, len(a), CONV_SLICE)
            ).view_as(layer.weight)
            bias_grad = g.sum(2)
        if layer.bias is not None:
            squared[f"{name}.bias"] = (bias_grad * bias_grad).sum(0)
    return squared


# Samples per unfold: a [32, in·k·k, L] block stays in cache; 256 at once made the FedAvg CNN's second
# convolution 1.7x slower on this CPU (0.13 s vs 0.22 s for 256 samples).
CONV_SLICE = 32


def conv_squared_weight_grads(layer, a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Σ_i (g_i · unfold(a_i)ᵀ)² over the samples of a slice: [out, in·k·k]."""
    columns = F.unfold(a, layer.kernel_size, layer.dilation, layer.padding, layer.stride)  # [N, in·k·k, L]
    per_sample = torch.bmm(g, columns.transpose(1, 2))  # [N, out, in·k·k]
    return (per_sample * per_sample).sum(0)


def diagonal_fisher(
    model,
    params: dict,
    x: torch.Tensor,
    y: torch.Tensor,
    labels: str = "true",
    generator: torch.Generator | None = None,
    chunk: int = 256,
    buffers: dict | None = None,
) -> dict:
    """Mean of per-sample squared gradients over (x, y) for each parameter; x already model input. Model
    in eval mode; `buffers` (BatchNorm running statistics) are used, not differentiated."""
    was_training = model.training
    model.eval()
    params = {name: value.detach() for name, value in params.items()}
    buffers = {name: value.detach() for name, value in (buffers or {}).items()}
    total = {name: torch.zeros_like(value) for name, value in params.items()}
    with torch.no_grad():
        if labels == "sampled":
            logits = torch.cat(
                [functional_call(model, {**params, **buffers}, (x[i : i + chunk],)) for i in range(0, len(x), chunk)]
            )
            # Sampled on the CPU, where the (seed, round, client) generator lives, whatever the device.
            probabilities = F.softmax(logits, dim=1).cpu()
            y = torch.multinomial(probabilities, 1, generator=generator).squeeze(1).to(x.device)
    for start in range(0, len(x), chunk):
        xs, ys = x[start : start + chunk], y[start : start + chunk]
        if is_layer_stack(model):
            with torch.enable_grad():
                for name, value in layer_stack_squared_grads(model, params, xs, ys).items():
                    total[name] += value
            continue
        for name, g in per_sample_log_likelihood_grads(model, params, xs, ys, buffers).items():
            total[name] += (g * g).sum(0)
    model.train(was_training)
    return {name: value / len(x) for name, value in total.items()}


def client_fisher(local, hp: dict) -> dict:
    """A client's diagonal Fisher at its new parameters (a LocalResult), over `fisher_samples` of its
    training samples (all when null), drawn from the client's own (seed, round, client) stream."""
    from pipeline.clientdata import FISHER_STREAM

    indices = local.train_index
    generator = local.generator(FISHER_STREAM)
    if hp.get("fisher_samples") and hp["fisher_samples"] < len(indices):
        # drawn on the CPU, where the client's generator lives; moved to the indices' device to pick there
        chosen = torch.randperm(len(indices), generator=generator)[: hp["fisher_samples"]]
        indices = indices[chosen.to(indices.device)]
    return diagonal_fisher(
        local.model,
        local.params,
        local.data.inputs(indices),
        local.data.y[indices],
        hp["fisher_labels"],
        generator,
        buffers=local.buffers,
    )
