"""Metrics: a model's accuracy and loss on samples, a cohort of models evaluated at once, and rounds
to a target accuracy on a run's curve."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.func import functional_call, vmap

EVAL_CHUNK = 2000


def rounds_to_accuracy(rounds: list[int], accuracies: list[float], target: float) -> int | None:
    """The first round whose test accuracy is at or above `target`; None if it never gets there."""
    for round_, accuracy in zip(rounds, accuracies):
        if accuracy is not None and not math.isnan(accuracy) and accuracy >= target:
            return round_
    return None


@torch.no_grad()
def evaluate(model, params: dict, data, index: torch.Tensor, chunk: int = EVAL_CHUNK):
    """(accuracy, mean cross-entropy) of `params` (parameters and buffers) on samples `index`.

    The sums stay on the data's device until the end (one read-back, not two per chunk); the loss is
    summed in float64, as the Python float it was summed in before, so the numbers are the same."""
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=data.y.device)
    loss = torch.zeros((), dtype=torch.float64, device=data.y.device)
    for start in range(0, len(index), chunk):
        part = index[start : start + chunk]
        logits = functional_call(model, params, (data.inputs(part),))
        loss += F.cross_entropy(logits, data.y[part], reduction="sum").to(torch.float64)
        correct += (logits.argmax(1) == data.y[part]).sum()
    model.train()
    return int(correct) / len(index), float(loss) / len(index)


@torch.no_grad()
def correct_predictions(model, params: dict, data, index: torch.Tensor, chunk: int = EVAL_CHUNK) -> torch.Tensor:
    """Bool per sample of `index`: does the model with `params` classify it right."""
    model.eval()
    parts = []
    for start in range(0, len(index), chunk):
        part = index[start : start + chunk]
        parts.append(functional_call(model, params, (data.inputs(part),)).argmax(1) == data.y[part])
    model.train()
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.bool, device=data.y.device)


@torch.no_grad()
def cohort_correct_on_shared(model, stacked: dict, data, index: torch.Tensor, chunk: int = EVAL_CHUNK) -> torch.Tensor:
    """[models, samples] bool: every stacked model on the same samples, in one vmapped pass per chunk."""
    model.eval()
    predict = vmap(lambda p, x: functional_call(model, p, (x,)).argmax(-1), in_dims=(0, None))
    parts = []
    for start in range(0, len(index), chunk):
        part = index[start : start + chunk]
        parts.append(predict(stacked, data.inputs(part)) == data.y[part])
    model.train()
    count = next(iter(stacked.values())).shape[0]
    return torch.cat(parts, dim=1) if parts else torch.zeros(count, 0, dtype=torch.bool, device=data.y.device)


@torch.no_grad()
def cohort_correct_on_own(model, stacked: dict, data, indices: list[torch.Tensor], chunk: int = EVAL_CHUNK):
    """[models, longest] bool and the validity mask: model c on its own samples indices[c] (padded)."""
    count, longest = len(indices), max((len(i) for i in indices), default=0)
    padded = torch.zeros(count, longest, dtype=torch.long, device=data.y.device)
    valid = torch.zeros(count, longest, dtype=torch.bool, device=data.y.device)
    for c, own in enumerate(indices):
        padded[c, : len(own)] = own
        valid[c, : len(own)] = True
    model.eval()
    predict = vmap(lambda p, x: functional_call(model, p, (x,)).argmax(-1), in_dims=(0, 0))
    per_chunk = max(1, chunk // max(count, 1))
    parts = []
    for start in range(0, longest, per_chunk):
        part = padded[:, start : start + per_chunk]
        parts.append(predict(stacked, data.inputs(part)) == data.y[part])
    model.train()
    correct = torch.cat(parts, dim=1) if parts else torch.zeros(count, 0, dtype=torch.bool, device=data.y.device)
    return correct & valid, valid


def accuracy_by_owner(correct: torch.Tensor, owner: torch.Tensor, owners: int) -> torch.Tensor:
    """[..., owners] accuracy: correct [..., samples] averaged over the samples each owner holds."""
    sums = torch.zeros(*correct.shape[:-1], owners, device=correct.device)
    sums.index_add_(-1, owner, correct.float())
    counts = torch.bincount(owner, minlength=owners).clamp_min(1).to(sums.dtype)
    return sums / counts
