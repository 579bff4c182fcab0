"""The eight benchmark workloads, and the federated data they run on.

`paper` sizes are the papers' settings on real MNIST and CIFAR-10; `tiny` sizes keep every workload's
model, batch size, optimiser, loss and client fraction but shrink the data (synthetic 8×8 images with the
dataset's channels, 20 clients of 16 samples), so that the whole benchmark runs in seconds as a smoke test.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from pipeline.clientdata import ClientData, channel_stats
from pipeline.download import MIRROR_ENV
from pipeline.errors import UserError
from pipeline.inputs import dataset_spec, prepared_path, read_npz, validate_arrays
from pipeline.partitioners import partition_dirichlet, partition_shards

SEED = 0


@dataclass(frozen=True)
class Workload:
    number: int
    title: str
    model: str
    clients: int
    shard_size: int  # every client gets 2 label-sorted shards of this size (McMahan et al.'s cut)
    client_fraction: float
    local_epochs: int
    batch_size: int
    lr: float
    rounds: int  # rounds timed per repeat
    # None: compare the implementations (a)-(e) on FedAvg; otherwise time these algorithms through
    # the engine, the first being the baseline; () means every algorithm in the registry.
    algorithms: tuple[str, ...] | None = None
    hyperparams: dict = field(default_factory=dict)  # algorithm -> overrides of its defaults
    # A compute-bound workload timed on part of a round: only the first `reduce_clients` clients,
    # each restricted to its first `reduce_samples` samples, for every implementation alike.
    reduce_clients: int | None = None
    reduce_samples: int | None = None
    dataset: str = "mnist"
    # None: 2 label-sorted shards of shard_size per client; else Dir(alpha) label skew, equal sizes (TCE's)
    dirichlet_alpha: float | None = None
    optimizer: str = "sgd"  # the client optimiser (sgd or adam, torch.optim's defaults otherwise)
    loss: str = "ce"  # ce, or tce: cross-entropy over the client's own classes only (TCE)
    weight_decay: float = 0.0
    norm: str | None = None  # the model's normalisation layers (None: its default)

    def reduction(self) -> str | None:
        if self.reduce_clients is None:
            return None
        steps = -(-self.reduce_samples // self.batch_size)
        return (
            f"timed on part of a round: the first {self.reduce_clients} of {self.clients} clients, each "
            f"restricted to its first {self.reduce_samples} samples (at most {steps} local step(s) of "
            f"B={self.batch_size} an epoch), identically for every implementation"
        )


PAPER = {
    1: Workload(
        1,
        "MLP 784-200-10, MNIST, 100 clients x 2 shards of 300, C=0.1, E=1, B=10, lr 0.01",
        "mlp_200",
        100,
        300,
        0.1,
        1,
        10,
        0.01,
        rounds=3,
    ),
    2: Workload(2, "as 1 with E=5, B=50", "mlp_200", 100, 300, 0.1, 5, 50, 0.01, rounds=2),
    3: Workload(
        3,
        "CNN (PyTorch MNIST example), 96 clients x 2 shards of 312, C=1, E=1, B=256, lr 0.01",
        "cnn_mnist",
        96,
        312,
        1.0,
        1,
        256,
        0.01,
        rounds=1,
        reduce_clients=8,
        reduce_samples=256,
    ),
    4: Workload(
        4,
        "FedCurv vs FedAvg on workload 1 with E=5 (engine, per-sample Fisher included)",
        "mlp_200",
        100,
        300,
        0.1,
        5,
        10,
        0.01,
        rounds=2,
        algorithms=("fedavg", "fedcurv"),
        hyperparams={"fedcurv": {"lambda": 1.0}},
    ),
    5: Workload(
        5,
        "every registered algorithm on workload 1 (engine, default hyper-parameters), and TCE's loss",
        "mlp_200",
        100,
        300,
        0.1,
        1,
        10,
        0.01,
        rounds=3,
        algorithms=(),
    ),
    6: Workload(
        6,
        "FedWAvg's shallow ResNet (BatchNorm, 4.9 M parameters), CIFAR-10, the paper's 10 clients "
        "(x 2 shards of 2500), C=1, E=1, B=64, Adam lr 0.001",
        "resnet_shallow",
        10,
        2500,
        1.0,
        1,
        64,
        0.001,
        rounds=1,
        reduce_clients=4,
        reduce_samples=64,
        dataset="cifar10",
        optimizer="adam",
    ),
    7: Workload(
        7,
        "TCE's setting: cnn_small (GroupNorm), CIFAR-10, 100 clients by Dirichlet alpha=0.1, C=0.1, "
        "E=1, B=64, SGD lr 0.1, weight decay 1e-4, truncated cross-entropy",
        "cnn_small",
        100,
        500,
        0.1,
        1,
        64,
        0.1,
        rounds=1,
        dataset="cifar10",
        dirichlet_alpha=0.1,
        loss="tce",
        weight_decay=1e-4,
    ),
    8: Workload(
        8,
        "McMahan et al.'s CNN, MNIST, 10 clients x 2 shards of 300, C=1, E=1, B=10, lr 0.01",
        "cnn_fedavg",
        10,
        300,
        1.0,
        1,
        10,
        0.01,
        rounds=1,
        reduce_clients=10,
        reduce_samples=100,
    ),
}

TINY_SHAPE = (8, 8, 1)
TINY_CLASSES = 10
TINY_CLIENTS = 20
TINY_SHARD = 8


def tiny(workload: Workload) -> Workload:
    reduce = (
        {"reduce_clients": 4, "reduce_samples": min(workload.reduce_samples, 2 * TINY_SHARD)}
        if workload.reduce_clients
        else {}
    )
    split = "by Dirichlet" if workload.dirichlet_alpha is not None else f"x 2 shards of {TINY_SHARD}"
    title = f"{workload.title} [tiny: synthetic 8x8 images, {TINY_CLIENTS} clients {split}]"
    return dataclasses.replace(workload, title=title, clients=TINY_CLIENTS, shard_size=TINY_SHARD, rounds=1, **reduce)


def workloads_for(sizes: str) -> dict[int, Workload]:
    return PAPER if sizes == "paper" else {n: tiny(w) for n, w in PAPER.items()}


# ---------------------------------------------------------------- data


def default_data_path(dataset: str = "mnist") -> Path:
    """data/prepared/<dataset>.npz, else the mirror's copy; one line naming both when neither exists."""
    local = prepared_path(dataset)
    if local.is_file():
        return local
    mirror = os.environ.get(MIRROR_ENV)
    if mirror and (Path(mirror) / f"{dataset}.npz").is_file():
        return Path(mirror) / f"{dataset}.npz"
    flag = "--data: " if dataset == "mnist" else ""
    raise UserError(
        f"{flag}no {dataset} found at {local} nor in ${MIRROR_ENV}; run `dvc repro download@{dataset}`, "
        f"set {MIRROR_ENV}" + (", or pass --data PATH" if dataset == "mnist" else "")
    )


def load_images(path: Path, dataset: str = "mnist", flag: str = "--data") -> tuple[np.ndarray, np.ndarray]:
    """Training images and labels of a prepared-format file of `dataset` (any number of samples)."""
    arrays = read_npz(Path(path), f"{flag} {path}")
    validate_arrays(arrays, dataset_spec(dataset, {"train_size": None, "test_size": None}), str(path))
    return arrays["x_train"], arrays["y_train"]


def synthetic_images(samples: int, shape=TINY_SHAPE, classes: int = TINY_CLASSES, seed: int = SEED):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, size=(samples, *shape), dtype=np.uint8)
    y = rng.integers(0, classes, size=samples).astype(np.int64)
    return x, y


def client_data(x: np.ndarray, y: np.ndarray, workload: Workload, device: torch.device, classes: int) -> ClientData:
    """The workload's partition of (x, y) as the engine's ClientData (as pipeline.train builds it),
    already reduced for a workload timed on part of a round."""
    rng = np.random.default_rng(SEED)
    if workload.dirichlet_alpha is None:
        parts = partition_shards(y, workload.clients, 2, workload.shard_size, rng, cut="sorted")
    else:  # TCE's equally sized clients
        parts = partition_dirichlet(y, workload.clients, workload.dirichlet_alpha, equal_size=True, rng=rng)
    if workload.reduce_clients is not None:
        parts = [part[: workload.reduce_samples] for part in parts[: workload.reduce_clients]]
    images = torch.from_numpy(x).to(device)
    mean, std = channel_stats(images)
    clients = [torch.from_numpy(part).to(device) for part in parts]
    return ClientData(images, torch.from_numpy(y).to(device), clients, mean, std, classes=classes)
