"""FedNova (Wang et al. 2020): each client's update normalised by its amount of local work, so clients
that take more local steps do not pull the global model towards their own objective.

Client i's cumulative update is Δ_i = x − y_i = η Σ_k a_{i,k} g_{i,k}; FedNova uploads the normalised
update d_i = Δ_i / ‖a_i‖₁ and the server steps

    x ← x − τ_eff · Σ_i p_i d_i,       τ_eff = Σ_i p_i ‖a_i‖₁

(p_i: the engine's sample-size weights). ‖a_i‖₁ depends on the client optimiser:
- plain SGD: every step counts once, ‖a_i‖₁ = τ_i, the client's number of local steps (its own count,
  not epochs);
- SGD with momentum ρ (buffer reset every round, as pipeline.optimizers does): the k-th gradient enters
  every later step through the buffer, a_{i,k} = (1 − ρ^(τ−k+1))/(1 − ρ), so
  ‖a_i‖₁ = [τ − ρ(1 − ρ^τ)/(1 − ρ)] / (1 − ρ)  (the FedNova paper's momentum case);
- Adam: FedNova has no closed form for adaptive steps (each step is rescaled per coordinate by the
  moments); each step moves the parameters by about η whatever the gradient's size, so the work is the
  step count, ‖a_i‖₁ = τ_i, as for plain SGD. With every client taking the same number of steps (the
  FedWAvg paper's equal-sized clients) FedNova then equals FedAvg, as it does under SGD.
L2 weight decay is part of the gradient (as in the FedNova code), so it does not change a_i.

Only parameters are normalised: BatchNorm's running statistics are averaged apart by the engine, with
FedAvg's weights (they are not an optimiser's update). With equal step counts τ_eff·Σ p_i Δ_i/τ =
Σ p_i Δ_i: FedAvg exactly, up to rounding (tests/test_algorithms_fedwavg.py).
"""

from __future__ import annotations

from pipeline.algorithms.common import weighted_sum
from pipeline.optimizers import SGD

NAME = "fednova"


def sent_up(hp):
    return ("normalized_update",)  # and ‖a_i‖₁, one number


def work(steps: int, optimizer) -> float:
    """‖a_i‖₁ for `steps` local steps of `optimizer` (see the module's docstring)."""
    rho = optimizer.momentum if isinstance(optimizer, SGD) else 0.0
    if rho == 0 or steps == 0:
        return float(steps)
    return (steps - rho * (1 - rho**steps) / (1 - rho)) / (1 - rho)


def client_upload(local, hp):
    return upload_from(local.start, local.params, work(local.steps, local.optimizer))


def upload_from(start: dict, params: dict, norm: float) -> dict:
    """d_i = (x − y_i)/‖a_i‖₁ and ‖a_i‖₁; a client with no step sends a zero update and no work."""
    scale = 1.0 / norm if norm > 0 else 0.0
    return {"params": params, "normalized_update": {n: (start[n] - params[n]) * scale for n in params}, "work": norm}


def aggregate(state, uploads, weights, hp):
    tau_eff = sum(w * up["work"] for up, w in zip(uploads, weights))
    direction = weighted_sum(uploads, weights, "normalized_update")
    return {**state, "params": {n: state["params"][n] - tau_eff * direction[n] for n in direction}}
