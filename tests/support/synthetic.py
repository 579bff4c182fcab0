"""Tiny synthetic federated data for the unit tests of the engine and the algorithms."""

from __future__ import annotations

import torch

from pipeline.clientdata import ClientData, channel_stats
from pipeline.settings import RUN_DEFAULTS, RoundSettings, build

SHAPE = (4, 4, 1)
CLASSES = 3


def make_data(sizes, shape=SHAPE, classes=CLASSES, seed=0) -> ClientData:
    """Random uint8 images and labels, dealt to clients of the given sizes."""
    g = torch.Generator().manual_seed(seed)
    n = sum(sizes)
    x = torch.randint(0, 256, (n, *shape), generator=g, dtype=torch.uint8)
    y = torch.randint(0, classes, (n,), generator=g)
    clients = [part.clone() for part in torch.randperm(n, generator=g).split(list(sizes))]
    mean, std = channel_stats(x)
    return ClientData(x, y, clients, mean, std, classes=classes)


def run_settings(seed: int, **overrides) -> RoundSettings:
    """A round's settings for engine tests, from resolved settings (keys as in params.yaml): RUN_DEFAULTS,
    small batches, plain SGD, then `overrides`."""
    return build(
        RoundSettings,
        {
            **RUN_DEFAULTS,
            "seed": seed,
            "client_fraction": 1.0,
            "lr": 0.05,
            "momentum": 0.0,
            "weight_decay": 0.0,
            "local_epochs": 2,
            "batch_size": 4,
            **overrides,
        },
    )
