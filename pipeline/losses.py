"""Local losses: the per-sample objective a client minimises, chosen per run (`loss`).

    ce    cross-entropy over all classes
    tce   truncated cross-entropy (Legate et al., the TCE paper): the softmax denominator runs over the
          classes present in the client's training data (its whole label set, fixed per client, not the
          batch's); nothing else changes. Absent classes' logits are set to -inf, so they get exactly
          zero gradient and the local model cannot push them down.

Each loss is a logit mask plus cross-entropy, so the vectorized, the sequential and the fused MLP path
(pipeline.cohort_mlp) all take it the same way: `client_logit_mask` gives the mask for a cohort, and
`per_sample_loss` applies it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def client_logit_mask(loss: str, data, clients: list[int]) -> torch.Tensor | None:
    """[clients, classes] bool of the logits each client's loss keeps, or None (keep all: plain CE)."""
    if loss == "ce":
        return None
    if loss == "tce":
        return data.label_sets(clients)
    raise ValueError(f"unknown loss {loss!r}; expected ce or tce")


def masked_logits(logits: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """Logits with the dropped classes at -inf (their softmax terms vanish from the denominator)."""
    if keep is None:
        return logits
    return logits.masked_fill(~keep, float("-inf"))


def per_sample_loss(logits: torch.Tensor, y: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    return F.cross_entropy(masked_logits(logits, keep), y, reduction="none")
