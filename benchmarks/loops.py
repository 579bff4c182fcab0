"""The conventional baselines: a FedAvg round written the way careful PyTorch users write it.

(c) `tensor_loop`: every client's images held in memory as normalised float tensors; per client a copy
    of the global model and torch.optim.SGD (or torch.optim.Adam), and per batch forward, cross-entropy
    (TCE's: over the client's own classes, the others' logits masked, the mask made once per client
    before timing), zero_grad, backward, step; then the sample-weighted average of the clients'
    state_dicts (BatchNorm's running statistics included).
(d) `dataloader_loop`: the same loop fed by torch.utils.data.DataLoader (shuffle=True, num_workers=0)
    over a Dataset whose __getitem__ applies torchvision's ToTensor + Normalize to one uint8 image.

Both take the engine's cohorts (`sample_cohort`), so every implementation trains the same clients.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

from pipeline.clientdata import ClientData, sample_cohort


def client_optimizer(model, settings: dict) -> torch.optim.Optimizer:
    if settings.get("optimizer", "sgd") == "adam":
        return torch.optim.Adam(model.parameters(), lr=settings["lr"], weight_decay=settings.get("weight_decay", 0.0))
    return torch.optim.SGD(
        model.parameters(),
        lr=settings["lr"],
        momentum=settings.get("momentum", 0.0),
        weight_decay=settings.get("weight_decay", 0.0),
    )


def local_training(model, epoch_batches, settings: dict, keep: torch.Tensor | None = None) -> None:
    """Local training: `epoch_batches()` gives one epoch's (inputs, labels) batches; `keep` ([classes]
    bool), TCE's classes of this client (None: plain cross-entropy)."""
    optimizer = client_optimizer(model, settings)
    model.train()
    for _ in range(settings["local_epochs"]):
        for x, y in epoch_batches():
            logits = model(x)
            if keep is not None:
                logits = logits.masked_fill(~keep, float("-inf"))
            loss = F.cross_entropy(logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def client_class_masks(data: ClientData, settings: dict) -> list[torch.Tensor | None]:
    """Per client, TCE's [classes] mask of its own classes (None for plain cross-entropy)."""
    if settings.get("loss", "ce") != "tce":
        return [None] * len(data.clients)
    return list(data.label_sets(list(range(len(data.clients)))))


def shuffled_batches(x: torch.Tensor, y: torch.Tensor, batch_size: int):
    order = torch.randperm(len(x), device=x.device)
    return zip(x[order].split(batch_size), y[order].split(batch_size))


def fedavg_round(global_model, cohort: list[int], sizes: list[int], train_client) -> None:
    """Train a copy of the global model on each client, then load the sample-weighted average."""
    total = sum(sizes[k] for k in cohort)
    average = None
    for k in cohort:
        local = copy.deepcopy(global_model)
        train_client(local, k)
        weight = sizes[k] / total
        state = local.state_dict()
        if average is None:
            average = {name: weight * value for name, value in state.items()}
        else:
            for name, value in state.items():
                average[name] += weight * value
    global_model.load_state_dict(average)


def client_tensors(data: ClientData) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Every client's samples as normalised float inputs and labels, prepared once, before timing."""
    return [(data.inputs(index), data.y[index]) for index in data.clients]


def tensor_loop(model, data: ClientData, settings: dict):
    """(c): one round per call, `round_` choosing the cohort as the engine does."""
    tensors = client_tensors(data)
    masks = client_class_masks(data, settings)
    sizes = [len(index) for index in data.clients]

    def train_client(local, k):
        x, y = tensors[k]
        local_training(local, lambda: shuffled_batches(x, y, settings["batch_size"]), settings, masks[k])

    def one_round(round_: int) -> None:
        cohort = sample_cohort(len(sizes), settings["client_fraction"], settings["seed"], round_)
        fedavg_round(model, cohort, sizes, train_client)

    return one_round


class TransformedImages(Dataset):
    """uint8 H×W×C images, each turned into a normalised C×H×W float tensor when it is fetched."""

    def __init__(self, images, labels, transform):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.transform(self.images[i]), int(self.labels[i])


def client_datasets(data: ClientData) -> list[TransformedImages]:
    normalize = transforms.Compose([transforms.ToTensor(), transforms.Normalize(data.mean.tolist(), data.std.tolist())])
    images, labels = data.x.cpu().numpy(), data.y.cpu().numpy()
    return [
        TransformedImages(images[index.cpu().numpy()], labels[index.cpu().numpy()], normalize) for index in data.clients
    ]


def dataloader_loop(model, data: ClientData, settings: dict, device: torch.device):
    """(d): as (c), the batches coming from a DataLoader (on the CPU, each moved to `device`)."""
    datasets = client_datasets(data)
    masks = client_class_masks(data, settings)
    sizes = [len(dataset) for dataset in datasets]

    def train_client(local, k):
        loader = DataLoader(datasets[k], batch_size=settings["batch_size"], shuffle=True, num_workers=0)
        local_training(local, lambda: ((x.to(device), y.to(device)) for x, y in loader), settings, masks[k])

    def one_round(round_: int) -> None:
        cohort = sample_cohort(len(sizes), settings["client_fraction"], settings["seed"], round_)
        fedavg_round(model, cohort, sizes, train_client)

    return one_round
