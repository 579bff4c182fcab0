"""Client optimisers that step a whole cohort at once.

Each parameter is stacked along a leading client dimension (weight [C, out, in]) and every update is
elementwise, so one call moves all C clients. `active` (bool, shape [C]) says which clients take this
step; a client that has run out of local data is left exactly unchanged, parameters and optimiser
state alike (Adam's step count too). The same code steps one unstacked client with `active = None`
(the sequential path: the client steps, and Adam counts its steps in a Python int, so that no step
copies a count to or from a GPU) or `active = torch.tensor(True)`, which broadcasts against each
parameter's leading dimensions.

`everyone` is the host's knowledge that every client steps (the schedule is drawn on the CPU): with
it, a step on a GPU never waits for `active.all()` to come back; without it, that is asked.

The updates are torch.optim.SGD's and torch.optim.Adam's (L2 weight decay added to the gradient, no
Nesterov, no AMSGrad), with the same arithmetic order, so a cohort matches per-client torch.optim runs.

With `foreach` (RuntimeOptions.foreach, FEDFORGET_FOREACH=on), a step every client takes, with no step kept for a tracker, runs as torch's
multi-tensor (`_foreach_*`) operations: the same operations in the same order, one call for all of a
model's tensors instead of one per tensor (Adam only on one unstacked client, the sequential path, whose
bias corrections are Python floats; its stacked step stays the loop). On the CPU torch runs them tensor
by tensor, bit for bit the loop's; on a GPU they are a few kernel launches a step where the loop makes
up to 4 per tensor for SGD and ~9 for Adam (DenseNet-121's 364 tensors: ~3,300), the launches that bind
the small models' steps there. A speed lever, off until the device benchmark's
`foreach_optimizer` lever has measured it on a GPU; recorded in timing.json, not part of a stage's key.

Optimiser state lives in a dict the caller creates empty at the start of every federated round: in
FedAvg-style training a client is stateless between rounds (it starts each round from the global model
and the papers reproduced here do not carry momentum or Adam moments across rounds), and a client that
is sampled again later may not even be in the same cohort position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pipeline.settings import OptimizerSettings


def _client_mask(active: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
    """`active` shaped to broadcast over `param`'s trailing (per-client) dimensions."""
    return active.to(param.device).reshape(active.shape + (1,) * (param.dim() - active.dim()))


def every_client_steps(active: torch.Tensor | None, everyone: bool | None) -> bool:
    """Whether this step moves every client: `everyone` when the caller knows it on the host, else asked
    of `active` (a device sync on a GPU); one unstacked client (`active` None) always steps."""
    if active is None:
        return True
    return bool(active.all()) if everyone is None else everyone


def active_on_host(active: torch.Tensor | None, known: Sequence[bool] | None = None) -> list[bool]:
    """Which clients step, as host booleans: `known` when the caller has them (the schedule is drawn on
    the CPU), else read from `active` (a device sync on a GPU); [True] for one unstacked client (None)."""
    if known is not None:
        return list(known)
    if active is None:
        return [True]
    return [bool(on) for on in active.reshape(-1).tolist()]


def host_bias_corrections(lr: float, beta1: float, beta2: float, step: int) -> tuple[float, float]:
    """Adam's −lr/(1 − β1ᵗ) and √(1 − β2ᵗ) for one client's step count t, as Python floats. Computed by
    the stacked path's own float64 tensor formulas, on the CPU (no device is involved), because Python's
    float arithmetic does not give the same bits: `lr / tensor` is torch's `tensor.reciprocal() * lr`,
    and math.sqrt differed from torch's square root in the last bit at t = 38 (β2 = 0.999) here."""
    t = torch.tensor(float(step), dtype=torch.float64)
    return float(-(lr / (1 - beta1**t))), float((1 - beta2**t) ** 0.5)


def divide_by_scalar_(tensors: list, divisor: float) -> None:
    """Divide each tensor in place by a Python float with the arithmetic `tensor / divisor` has on the
    tensors' device, so that the multi-tensor step keeps the loop's bits: on CUDA torch multiplies by the
    divisor's reciprocal rounded to the tensors' precision (one ulp from a true division), which
    `_foreach_div_` does not; on the CPU both divide."""
    if tensors[0].device.type == "cuda":
        reciprocal = float(torch.ones((), dtype=tensors[0].dtype) / divisor)  # rounded as CUDA rounds it
        torch._foreach_mul_(tensors, reciprocal)
    else:
        torch._foreach_div_(tensors, divisor)


def per_client(values: tuple, active: torch.Tensor, param: torch.Tensor) -> tuple:
    """Per-client float64 values in `param`'s dtype and device, shaped to broadcast over its trailing dimensions."""
    shape = active.shape + (1,) * (param.dim() - active.dim())
    return tuple(value.to(param.device, param.dtype).reshape(shape) for value in values)


def _apply(param: torch.Tensor, updated: torch.Tensor, mask: torch.Tensor | None, keep_steps: bool):
    """Write `updated` into `param` where `mask` (everywhere if None); return the change if `keep_steps`.

    The change is measured as new - old rather than taken from the update term, so that it is
    exactly the step the parameters moved, rounding included."""
    if mask is not None:
        # where, not a 0/1 multiply: a finished client's gradient may be NaN (an empty batch's mean)
        updated = torch.where(mask, updated, param)
    step = updated - param if keep_steps else None
    param.copy_(updated)
    return step


@dataclass
class SGD:
    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0
    foreach: bool = False  # FEDFORGET_FOREACH: the hot step as multi-tensor operations

    def step(
        self,
        params: dict,
        grads: dict,
        state: dict,
        active: torch.Tensor | None,
        keep_steps: bool = False,
        everyone: bool | None = None,
    ) -> dict:
        """torch.optim.SGD's update (dampening 0, no Nesterov), applied only where `active`.

        Updates `params` and the momentum buffers in `state` in place. With `keep_steps`, returns
        name -> the step Δθ taken (0 where inactive); otherwise {}."""
        everyone = every_client_steps(active, everyone)
        buffers = state.setdefault("momentum_buffer", {}) if self.momentum else None
        if self.foreach and everyone and not keep_steps:
            self._step_everyone_foreach(params, grads, buffers)
            return {}
        steps = {}
        for name, param in params.items():
            g = grads[name]
            if self.weight_decay:
                g = g.add(param, alpha=self.weight_decay)
            mask = None if everyone else _client_mask(active, param)  # type: ignore[arg-type]
            if self.momentum:
                # torch starts the buffer at g; momentum * 0 + g is exactly g, so zeros need no special first step
                buf = buffers.get(name)  # type: ignore[union-attr]
                if buf is None:
                    buf = buffers[name] = torch.zeros_like(param)  # type: ignore[index]
                if everyone:
                    buf.mul_(self.momentum).add_(g)
                else:
                    buf.copy_(torch.where(mask, buf * self.momentum + g, buf))  # type: ignore[arg-type]
                g = buf
            if everyone and not keep_steps:
                # the hot loop: one in-place pass, as torch.optim.SGD does
                param.add_(g, alpha=-self.lr)
                continue
            step = _apply(param, torch.add(param, g, alpha=-self.lr), mask, keep_steps)
            if keep_steps:
                steps[name] = step
        return steps

    def _step_everyone_foreach(self, params: dict, grads: dict, buffers: dict | None) -> None:
        """The loop's hot path (every client steps, no step kept), one multi-tensor call per operation."""
        names = list(params)
        tensors, g = [params[name] for name in names], [grads[name] for name in names]
        if self.weight_decay:
            g = torch._foreach_add(g, tensors, alpha=self.weight_decay)  # type: ignore[assignment]
        if buffers is not None:
            for name, param in zip(names, tensors):
                if name not in buffers:
                    buffers[name] = torch.zeros_like(param)
            g_buffers = [buffers[name] for name in names]
            torch._foreach_mul_(g_buffers, self.momentum)
            torch._foreach_add_(g_buffers, g)
            g = g_buffers
        torch._foreach_add_(tensors, g, alpha=-self.lr)


@dataclass
class Adam:
    lr: float
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    foreach: bool = False  # FEDFORGET_FOREACH: one client's hot step as multi-tensor operations

    def step(
        self,
        params: dict,
        grads: dict,
        state: dict,
        active: torch.Tensor | None,
        keep_steps: bool = False,
        everyone: bool | None = None,
    ) -> dict:
        """torch.optim.Adam's update (L2 weight decay, not AdamW; no AMSGrad), applied only where `active`.

        Each client has its own step count, since a client that skipped steps has seen fewer
        gradients and its bias correction must say so. Updates `params` and `state` in place. With
        `keep_steps`, returns name -> the step Δθ taken (0 where inactive); otherwise {}."""
        beta1, beta2 = self.betas
        everyone = every_client_steps(active, everyone)
        exp_avgs = state.setdefault("exp_avg", {})
        exp_avg_sqs = state.setdefault("exp_avg_sq", {})
        if active is None:  # one client: its count on the host, its corrections Python floats
            state["step"] = state.get("step", 0) + 1
            corrections = host_bias_corrections(self.lr, beta1, beta2, state["step"])
        else:
            if "step" not in state:
                state["step"] = torch.zeros(active.shape, dtype=torch.int64, device=active.device)
            state["step"] += active
            # torch computes the bias corrections in Python floats (double) from its step count; so do
            # we, per client. A client that has never stepped gets an infinite step size, masked out below.
            t = state["step"].to(torch.float64)
            corrections = (-(self.lr / (1 - beta1**t)), (1 - beta2**t) ** 0.5)
        if self.foreach and active is None and not keep_steps:
            self._step_one_client_foreach(params, grads, exp_avgs, exp_avg_sqs, *corrections)
            return {}
        steps = {}
        for name, param in params.items():
            g = grads[name]
            if self.weight_decay:
                g = g.add(param, alpha=self.weight_decay)
            neg_step_size, bc2_sqrt = corrections if active is None else per_client(corrections, active, param)
            exp_avg = exp_avgs.get(name)
            if exp_avg is None:
                exp_avg = exp_avgs[name] = torch.zeros_like(param)
                exp_avg_sqs[name] = torch.zeros_like(param)
            exp_avg_sq = exp_avg_sqs[name]
            mask = None if everyone else _client_mask(active, param)  # type: ignore[arg-type]
            if everyone:
                exp_avg.lerp_(g, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            else:
                exp_avg.copy_(torch.where(mask, exp_avg.lerp(g, 1 - beta1), exp_avg))  # type: ignore[arg-type]
                exp_avg_sq.copy_(
                    torch.where(
                        mask,  # type: ignore[arg-type]
                        (exp_avg_sq * beta2).addcmul_(g, g, value=1 - beta2),
                        exp_avg_sq,
                    )
                )
            denom = (exp_avg_sq.sqrt() / bc2_sqrt).add_(self.eps)
            # addcdiv_'s order, (value * m) / denom, with a per-client value that addcdiv_ cannot take
            update = (exp_avg * neg_step_size).div_(denom)
            if everyone and not keep_steps:
                param.add_(update)
                continue
            step = _apply(param, param + update, mask, keep_steps)
            if keep_steps:
                steps[name] = step
        return steps

    def _step_one_client_foreach(
        self, params: dict, grads: dict, exp_avgs: dict, exp_avg_sqs: dict, neg_step_size: float, bc2_sqrt: float
    ) -> None:
        """The loop's step for one unstacked client (no step kept), one multi-tensor call per operation."""
        beta1, beta2 = self.betas
        names = list(params)
        tensors, g = [params[name] for name in names], [grads[name] for name in names]
        if self.weight_decay:
            g = torch._foreach_add(g, tensors, alpha=self.weight_decay)  # type: ignore[assignment]
        for name, param in zip(names, tensors):
            if name not in exp_avgs:
                exp_avgs[name] = torch.zeros_like(param)
                exp_avg_sqs[name] = torch.zeros_like(param)
        m, v = [exp_avgs[name] for name in names], [exp_avg_sqs[name] for name in names]
        torch._foreach_lerp_(m, g, 1 - beta1)
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, g, g, value=1 - beta2)
        denom = torch._foreach_sqrt(v)
        divide_by_scalar_(denom, bc2_sqrt)  # type: ignore[arg-type]
        torch._foreach_add_(denom, self.eps)
        update = torch._foreach_mul(m, neg_step_size)
        torch._foreach_div_(update, denom)
        torch._foreach_add_(tensors, update)


def build_optimizer(settings: OptimizerSettings, foreach: bool = False):
    """The client optimiser a run names: SGD (lr, momentum, weight_decay) or Adam (lr, betas, eps,
    weight_decay); `foreach` (RuntimeOptions.foreach) steps it as multi-tensor operations."""
    if settings.name == "sgd":
        return SGD(lr=settings.lr, momentum=settings.momentum, weight_decay=settings.weight_decay, foreach=foreach)
    if settings.name == "adam":
        return Adam(
            lr=settings.lr, betas=settings.betas, eps=settings.eps, weight_decay=settings.weight_decay, foreach=foreach
        )
    raise ValueError(f"unknown optimizer {settings.name!r}: expected 'sgd' or 'adam'")
