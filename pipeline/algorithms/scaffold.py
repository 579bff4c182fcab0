"""SCAFFOLD (Karimireddy et al. 2020): local steps corrected by control variates against client drift.

Client i starts from the global model x with its control variate c_i and the server's c, and every
local step uses the corrected gradient

    g(y) − c_i + c                               (Algorithm 1, line 10)

(`penalty_affine`: a constant added to the data gradient, so it also composes with Adam clients, where
it is added before Adam's moments, as the FedWAvg paper's Adam-trained SCAFFOLD must do). After K local
steps of learning rate η it updates its variate by the paper's option II

    c_i⁺ = c_i − c + (x − y_i) / (K·η)            (line 12)

and uploads Δy_i = y_i − x and Δc_i = c_i⁺ − c_i. The server moves

    x ← x + η_g · Σ_i w_i Δy_i,      c ← c + (1/N) Σ_{i∈S} Δc_i      (lines 16-17)

so c stays the mean of all N clients' variates (clients not sampled keep theirs). w_i are the
engine's sample-size weights (the paper's 1/|S| when clients hold equal data); η_g is `global_lr`.

Known traps, avoided (tests/test_algorithms_fedwavg.py checks each): the variates start at zero, not
at the model's weights; K is the number of local optimiser steps the client took (its own count, a
client with less data takes fewer), not epochs; the correction's sign (−c_i + c); only parameters
carry variates, never BatchNorm's running statistics (the engine averages those apart). With Adam, η
in option II is Adam's learning rate: the paper's formula estimates the mean gradient as displacement
over (K·η), which for Adam is only a scale-free proxy; the FedWAvg authors give no other.

A client that took no step (no data) keeps its variate (Δc_i = 0). Bytes: c goes down with x, and
Δc_i comes up with y_i, so SCAFFOLD's bytes curve is twice FedAvg's, as the paper states.
"""
from __future__ import annotations

from pipeline.algorithms.common import weighted_sum, zeros_like
from pipeline.checks import check_positive

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
    return ({n: 0.0 for n in shared["control"]},
            {n: ctx["control"][n] - shared["control"][n] for n in shared["control"]})


def client_upload(local, hp):
    return upload_from(local.start, local.params, local.steps, local.optimizer.lr, local.context, local.shared)


def upload_from(start: dict, params: dict, steps: int, lr: float, ctx: dict, shared: dict) -> dict:
    """y_i, Δy_i, c_i⁺ and Δc_i (option II) from the client's start and end parameters."""
    if steps == 0:
        new_control = ctx["control"]
    else:
        new_control = {n: ctx["control"][n] - shared["control"][n] + (start[n] - params[n]) / (steps * lr)
                       for n in params}
    return {"params": params, "delta": {n: params[n] - start[n] for n in params}, "control": new_control,
            "control_delta": {n: new_control[n] - ctx["control"][n] for n in params}}


def remember(upload, hp):
    return {"control": upload["control"]}


def aggregate(state, uploads, weights, hp):
    step = weighted_sum(uploads, weights, "delta")
    params = {n: state["params"][n] + hp["global_lr"] * step[n] for n in step}
    control_step = weighted_sum(uploads, [1.0 / state["num_clients"]] * len(uploads), "control_delta")
    control = {n: state["control"][n] + control_step[n] for n in control_step}
    return {**state, "params": params, "control": control}
