"""FedProx (Li et al. 2020): FedAvg plus the proximal term μ/2·‖θ − θ_t‖² in every local objective."""

from __future__ import annotations

from pipeline.checks import check_nonnegative

NAME = "fedprox"
HYPERPARAMS = {"mu": 0.01}


def check(path, hp):
    return check_nonnegative(f"{path}.mu", hp["mu"])


def shared_context(state, hp):
    return {"global": state["params"]}


def penalty(params, shared, ctx, hp):
    squared_distance = sum(((params[n] - shared["global"][n]) ** 2).sum() for n in params)
    return 0.5 * hp["mu"] * squared_distance


def penalty_affine(shared, ctx, hp):
    """∂penalty/∂θ = μ(θ − θ_t) as scale·θ − offset: (μ, μ·θ_t); None at μ = 0."""
    if hp["mu"] == 0:
        return None
    return (
        {name: hp["mu"] for name in shared["global"]},
        {name: hp["mu"] * value for name, value in shared["global"].items()},
    )
