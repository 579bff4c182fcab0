"""SCAFFOLD (Karimireddy et al. 2020): local steps corrected by control variates against client drift.

Client i starts from the global model x with its control variate c_i and the server's c, and every
local step uses the corrected gradient

    g(y) − c_i + c                               (Algorithm 1, line 10)

(`penalty_affine`: a constant added to the data gradient, so it also composes with Adam clients, where
it is added before Adam's moments, as the FedWAvg paper's Adam-trained SCAFFOLD must do). After its K
local steps it updates its variate by the paper's option II,

    c_i⁺ = c_i − c + (x − y_i) / (K·η)            (line 12),

computed as what that formula is for plain SGD: each step moves y by η(g_k − c_i + c), so
(x − y_i)/(K·η) = mean_k g_k − c_i + c and c_i⁺ = mean_k g_k, the mean of the client's data-loss
gradients at the K points it visited (`GradientMean`, observed along the trajectory like RWalk's path
score). Under plain SGD the two are the same number (tests/test_algorithms_fedwavg.py checks the
variates against (x − y_i)/(K·η) from a torch.optim.SGD loop); under Adam or momentum the displacement
form would not be a gradient at all (an Adam step moves every coordinate by about η whatever the
gradient's size, so (x − y_i)/(K·η) is of order 1 where the gradients are of order 1e-3, and the
correction would swamp the data from round 2 on), while the mean gradient keeps option II's meaning.
It then uploads Δy_i = y_i − x and Δc_i = c_i⁺ − c_i. The server moves

    x ← x + η_g · Σ_i w_i Δy_i,      c ← c + (1/N) Σ_{i∈S} Δc_i      (lines 16-17)

so c stays the mean of all N clients' variates (clients not sampled keep theirs). w_i are the
engine's sample-size weights (the paper's 1/|S| when clients hold equal data); η_g is `global_lr`.

Known traps, avoided (tests/test_algorithms_fedwavg.py checks each): the variates start at zero, not
at the model's weights; K is the number of local optimiser steps the client took (its own count, a
client with less data takes fewer), not epochs; the correction's sign (−c_i + c); only parameters
carry variates, never BatchNorm's running statistics (the engine averages those apart); the
correction and the variates cover the data loss's gradient (L2 weight decay, the same function in every
client, cancels in c − c_i and is left to the optimiser).

A client that took no step (no data) keeps its variate (Δc_i = 0). Bytes: c goes down with x, and
Δc_i comes up with y_i, so SCAFFOLD's bytes curve is twice FedAvg's, as the paper states.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pipeline.algorithms.common import weighted_sum, zeros_like
from pipeline.checks import check_positive
from pipeline.optimizers import active_on_host

NAME = "scaffold"
HYPERPARAMS = {"global_lr": 1.0}


def check(path, hp):
    return check_positive(f"{path}.global_lr", hp["global_lr"])


def sent_down(hp):
    return ("control",)  # c, besides x


def sent_up(hp):
    return ("params", "control_delta")


def init_state(global_params, num_clients, hp):
    return {"params": global_params, "control": zeros_like(global_params), "num_clients": num_clients}


def shared_context(state, hp):
    return {"control": state["control"]}


def client_context(state, client, hp):
    """c_i: the client's variate from its last upload (zeros before its first)."""
    own = state["clients"].get(client)
    return {"control": own["control"] if own is not None else zeros_like(state["control"])}


def penalty(params, shared, ctx, hp):
    """A linear term whose gradient is the correction c − c_i (its value is not part of the loss)."""
    return sum(((shared["control"][n] - ctx["control"][n]) * params[n]).sum() for n in params)


def penalty_affine(shared, ctx, hp):
    """The correction as scale·θ − offset: scale 0, offset c_i − c (stacked over a cohort or not)."""
    return (
        {n: 0.0 for n in shared["control"]},
        {n: ctx["control"][n] - shared["control"][n] for n in shared["control"]},
    )


class GradientMean:
    """The mean of each client's data-loss gradients over the steps it took (c_i⁺ of option II). Works on
    a stacked cohort (`active` masks clients without a step) and on one client (`active` None: it steps;
    or a scalar). The steps are counted on the host, from the schedule the engine knows there, so that
    neither a step nor the upload waits for a count on a GPU."""

    def __init__(self):
        self.total: dict = {}
        self.count: list[int] | None = None  # steps per client

    def update(
        self, grads: dict, steps: dict, active: torch.Tensor | None, active_host: Sequence[bool] | None = None
    ) -> None:
        stepped = active_on_host(active, active_host)
        self.count = [n + on for n, on in zip(self.count or [0] * len(stepped), stepped)]
        for name, g in grads.items():
            if name not in self.total:
                self.total[name] = torch.zeros_like(g)
            if active is None:  # one client, which stepped
                self.total[name].add_(g)
                continue
            # on g's device: a CPU mask meeting a GPU gradient is an error there
            mask = active.to(g.device).reshape(active.shape + (1,) * (g.dim() - active.dim())).to(g.dtype)
            self.total[name].addcmul_(g, mask)

    @classmethod
    def from_sgd_displacement(
        cls, start: dict, end: dict, steps: torch.Tensor, lr: float, offset: dict, counts: Sequence[int]
    ):
        """The same sums without watching the steps, for a stacked cohort trained by plain SGD with the
        correction c − c_i (= −offset) added to every step's gradient: y_K = x − lr·Σ_k g_k + K·lr·offset,
        so Σ_k g_k = (x − y_K)/lr + K·offset, which is option II's (x − y_i)/(K·η) − c + c_i times K.
        Used by the engine's fused MLP step (pipeline.cohort.displacement_tracker_applies), where no
        gradient is ever materialised; it agrees with the watched sums to rounding
        (tests/test_algorithms_fedwavg.py). `steps`: the step counts on the device, for the sums;
        `counts`: the same on the host, for the upload."""
        tracker = cls()
        tracker.count = list(counts)
        for name, x in start.items():
            k = steps.reshape(steps.shape + (1,) * (x.dim() - 1)).to(x.dtype)
            tracker.total[name] = (x - end[name]) / lr + k * offset[name]
        return tracker

    def client_result(self, c: int) -> dict:
        steps = self.count[c] if self.count else 0
        return {"gradient_sum": {n: v[c] for n, v in self.total.items()}, "steps": steps}

    def set_client(self, c: int, client: "GradientMean", like: dict) -> None:
        """Put one client's sums (sequential path) at position c of this stacked tracker."""
        if self.count is None:
            self.count = [0] * next(iter(like.values())).shape[0]
        self.count[c] = sum(client.count) if client.count else 0
        for name, value in like.items():
            if name not in self.total:
                self.total[name] = torch.zeros_like(value)
            if name in client.total:
                self.total[name][c] = client.total[name]


def local_tracker(hp):
    return GradientMean


def client_upload(local, hp):
    tracked = local.tracked or {"gradient_sum": {}, "steps": 0}
    return upload_from(local.start, local.params, tracked["gradient_sum"], tracked["steps"], local.context)


def upload_from(start: dict, params: dict, gradient_sum: dict, steps: int, ctx: dict) -> dict:
    """y_i, Δy_i, c_i⁺ (option II: the mean data gradient over the client's steps) and Δc_i. A client that
    took no step keeps its variate; a parameter without gradients (`freeze`) has variate 0."""
    if steps == 0:
        new_control = ctx["control"]
    else:
        new_control = {n: gradient_sum[n] / steps if n in gradient_sum else torch.zeros_like(params[n]) for n in params}
    return {
        "params": params,
        "delta": {n: params[n] - start[n] for n in params},
        "control": new_control,
        "control_delta": {n: new_control[n] - ctx["control"][n] for n in params},
    }


def remember(upload, hp):
    return {"control": upload["control"]}


def aggregate(state, uploads, weights, hp):
    step = weighted_sum(uploads, weights, "delta")
    params = {n: state["params"][n] + hp["global_lr"] * step[n] for n in step}
    control_step = weighted_sum(uploads, [1.0 / state["num_clients"]] * len(uploads), "control_delta")
    control = {n: state["control"][n] + control_step[n] for n in control_step}
    return {**state, "params": params, "control": control}
