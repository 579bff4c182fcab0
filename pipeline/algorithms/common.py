"""Pieces several algorithms share (weighted sums of client uploads), and every hook's default.

The defaults are FedAvg's own parts: pipeline.algorithms.DEFAULTS gives each to the modules that leave
its hook out (pipeline.algorithms.Algorithm says what each hook does), so a module writes only what it
changes and FedAvg's module is its NAME alone.
"""

from __future__ import annotations

import torch


def weighted_sum(uploads: list[dict], weights: list[float], key: str) -> dict:
    """Σ_k w_k · uploads[k][key], name by name (every aggregation is a weighted sum of uploads)."""
    names = uploads[0][key].keys()
    return {name: sum(w * up[key][name] for up, w in zip(uploads, weights)) for name in names}


def zeros_like(params: dict) -> dict:
    return {name: torch.zeros_like(value) for name, value in params.items()}


# ---------------------------------------------------------------- the hooks' defaults (FedAvg)


def no_problems(path, hp):
    return []


def params_state(global_params, num_clients, hp):
    return {"params": global_params}


def no_shared_context(state, hp):
    return {}


def no_client_context(state, client, hp):
    return {}


def no_penalty(params, shared, ctx, hp):
    return torch.zeros(())


def no_penalty_affine(shared, ctx, hp):
    return None  # no term: the local objective is the data loss alone


def no_tracker(hp):
    return None


def params_upload(local, hp):
    return {"params": local.params}


def nothing_remembered(upload, hp):
    return None


def sample_weighted_average(state, uploads, weights, hp):
    """FedAvg's server step: the uploads' parameters averaged with the sample-size weights."""
    return {**state, "params": weighted_sum(uploads, weights, "params")}


def state_unchanged(state, view, hp):
    return state


def only_params_down(hp):
    return ()


def only_params_up(hp):
    return ("params",)
