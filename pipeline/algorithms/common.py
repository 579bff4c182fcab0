"""Pieces several algorithms share: weighted sums of client uploads."""
from __future__ import annotations

import torch


def weighted_sum(uploads: list[dict], weights: list[float], key: str) -> dict:
    """Σ_k w_k · uploads[k][key], name by name (every aggregation is a weighted sum of uploads)."""
    names = uploads[0][key].keys()
    return {name: sum(w * up[key][name] for up, w in zip(uploads, weights)) for name in names}


def zeros_like(params: dict) -> dict:
    return {name: torch.zeros_like(value) for name, value in params.items()}
