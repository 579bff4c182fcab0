"""Independent computations the tests compare the pipeline with (they are not part of the pipeline)."""

from __future__ import annotations

import torch
from torch import nn


def forgetting_events(correct: torch.Tensor) -> torch.Tensor:
    """Example-forgetting events per example (Toneva et al. 2019, as FedWAvg's Table 1 counts them), from
    the dense record of every presentation: `correct[t, n]` says whether example n was right at its t-th
    presentation (bool [T, N]). An event is a presentation t >= 1 with correct[t-1] and not correct[t], so
    a wrong first presentation is no event and an example never learned has none. Returns long [N].
    The engine counts the same events as they stream in (`pipeline.forgetting.record_presentations`)."""
    assert correct.dtype == torch.bool and correct.dim() == 2, (correct.dtype, tuple(correct.shape))
    return (correct[:-1] & ~correct[1:]).sum(dim=0, dtype=torch.long)


def has_batch_norm(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def local_batches(num_samples: int, epochs: int, batch_size: int, generator: torch.Generator):
    """The reference for clientdata.client_schedule, as a list: the positions (into the client's index list) of
    every local step, a fresh permutation each epoch cut into batches of `batch_size` (the last one
    smaller), drawn one epoch after another."""
    batches = []
    for _ in range(epochs):
        order = torch.randperm(num_samples, generator=generator)
        batches += list(order.split(batch_size))
    return batches
