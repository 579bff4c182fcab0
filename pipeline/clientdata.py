"""Client data in memory, and every random draw of training keyed by (seed, round, client).

The dataset stays as uint8 images; a client is a tensor of sample indices into it (its training
samples, and its held-out validation samples when the partition has them). Randomness never depends on
execution order: which clients a round samples, each client's batch order, its dropout masks and its augmentation all
come from generators seeded by (seed, round, client, purpose) (a new kind of draw takes a new purpose
stream below), so the vectorized and the sequential path, any cohort chunking and a resumed run all
draw the same numbers.
"""

from __future__ import annotations

import hashlib
import inspect
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from pipeline.io import atomic_path

NORMALISED_CACHE_BYTES = 1 << 30

# The purpose keys of derived generators: one stream per use, so adding a use never shifts another.
COHORT_STREAM = 1 << 20
DROPOUT_STREAM = 1 << 21
FISHER_STREAM = 1 << 22
PROBE_STREAM = 1 << 23
AUGMENT_STREAM = 1 << 24

# torchvision's RandomCrop(32, padding=4) + RandomHorizontalFlip, the CIFAR recipe the TCE authors use.
CROP_PADDING = 4


@dataclass
class ClientData:
    """The dataset in memory (uint8 images, int64 labels), every client's sample indices, and the
    per-channel shift and scale applied to model inputs."""

    x: torch.Tensor
    y: torch.Tensor
    clients: list[torch.Tensor]
    mean: torch.Tensor
    std: torch.Tensor
    val_clients: list[torch.Tensor] = field(default_factory=list)
    classes: int = 0

    normalised: torch.Tensor | None = field(default=None, repr=False, compare=False)
    clients_on_host: list[torch.Tensor] | None = field(default=None, repr=False, compare=False)

    def inputs(self, index: torch.Tensor) -> torch.Tensor:
        """Model input for samples `index` (any shape): scaled, channels first.

        Datasets up to NORMALISED_CACHE_BYTES as float are scaled once and then only gathered (the same
        elementwise arithmetic, so the same numbers); larger ones per batch, from uint8."""
        if self.normalised is None and self.x.numel() * 4 <= NORMALISED_CACHE_BYTES:
            self.normalised = self.normalise(self.x)
        if self.normalised is not None:
            return gather_rows(self.normalised, index)
        return self.normalise(gather_rows(self.x, index))

    def normalise(self, images: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Pixels in [0, 1] standardised per channel, computed in `dtype`: a CUDA division by a scalar is a
        multiplication by its reciprocal, one float32 ulp off the CPU's quotient, so a float64 comparison of
        the devices must normalise in float64 too."""
        images = images.movedim(-1, -3).to(dtype).div_(255.0)  # [..., H, W, C] uint8 -> [..., C, H, W]
        return (images - self.mean.view(-1, 1, 1)) / self.std.view(-1, 1, 1)

    def client_on_host(self, client: int) -> torch.Tensor:
        """The client's sample indices on the CPU, where schedules are drawn: copied from the device once
        a run, not once a round."""
        if self.clients_on_host is None:
            self.clients_on_host = [indices.cpu() for indices in self.clients]
        return self.clients_on_host[client]

    def held_out(self, client: int) -> torch.Tensor:
        """The client's validation samples; its training samples when the partition has no validation
        split (then a client's own accuracy measures fit, not generalisation: reports say which)."""
        if self.val_clients and len(self.val_clients[client]) > 0:
            return self.val_clients[client]
        return self.clients[client]

    def black(self) -> torch.Tensor:
        """[C]: the model input of a black pixel (what padding fills with)."""
        return -self.mean / self.std

    def validation_index(self) -> torch.Tensor:
        """All clients' validation samples (the TCE paper's evaluation set)."""
        return torch.cat(self.val_clients)

    def has_validation(self) -> bool:
        return bool(self.val_clients) and all(len(v) > 0 for v in self.val_clients)

    def label_sets(self, clients: list[int]) -> torch.Tensor:
        """[clients, classes] bool: which classes occur in each client's training data (TCE's mask)."""
        present = torch.zeros(len(clients), self.classes, dtype=torch.bool, device=self.y.device)
        for row, client in enumerate(clients):
            # every label written True (repeats too): no `unique`, whose output size a GPU must report back
            present[row, self.y[self.clients[client]]] = True
        return present


def gather_rows(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """table[index] for an index of any shape, values and memory layout alike, as one index_select of
    the flattened index: on this CPU twice as fast as advanced indexing (a [10, 10] batch of MNIST rows:
    39 µs vs 88 µs). The layout matters: images scaled from [N, H, W, C] keep those strides, and the
    convolutions pick their kernels, and so their rounding, by it. Rows whose elements lie in row-major
    order (one-channel images, flat features) are gathered as raw memory and given table[index]'s
    strides; other tables (colour images) are indexed as before."""
    index = index.to(table.device)  # an index built on the CPU for a table on the GPU
    row_shape, row_strides = tuple(table.shape[1:]), tuple(table.stride()[1:])
    row_size = math.prod(row_shape)
    if index.numel() == 0 or table.stride(0) != row_size or not row_major_positions(row_shape, row_strides):
        return table[index]
    rows = table.as_strided((table.shape[0], row_size), (row_size, 1)).index_select(0, index.reshape(-1))
    outer = tuple(s * row_size for s in row_major_strides(tuple(index.shape)))
    return rows.as_strided(tuple(index.shape) + row_shape, outer + row_strides)


def row_major_strides(shape: tuple) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def row_major_positions(shape: tuple, strides: tuple) -> bool:
    """Whether these strides put every element where row-major strides would (size-1 dimensions, whose
    stride is never used, may differ)."""
    return all(
        size == 1 or stride == expected for size, stride, expected in zip(shape, strides, row_major_strides(shape))
    )


def crop_flip_draws(
    batch: int, generator: torch.Generator, padding: int = CROP_PADDING, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """[batch, 3] int64 draws for `crop_flip`: the crop's row and column offset into the padded image
    (each in [0, 2·padding]) and whether to flip (0 or 1), in that order from one generator, made on
    `device` (the generator's), so that a GPU never waits for draws copied from the host."""
    offsets = torch.randint(0, 2 * padding + 1, (batch, 2), generator=generator, device=device)
    flips = torch.randint(0, 2, (batch, 1), generator=generator, device=device)
    return torch.cat([offsets, flips], dim=1)


def crop_flip(images: torch.Tensor, draws: torch.Tensor, fill: torch.Tensor, padding: int = CROP_PADDING):
    """Random crop with padding, then horizontal flip, as one gather. images: [N, C, H, W] model inputs;
    draws: [N, 3] (`crop_flip_draws`); fill: [C], the input value of a black pixel (the padding, as
    torchvision pads the image before it is scaled)."""
    count, channels, height, width = images.shape
    tall, wide = height + 2 * padding, width + 2 * padding
    padded = fill.view(1, channels, 1, 1).expand(count, channels, tall, wide).clone()
    padded[:, :, padding : padding + height, padding : padding + width] = images
    draws = draws.to(images.device)
    rows = draws[:, :1] + torch.arange(height, device=images.device)
    across = torch.arange(width, device=images.device)
    cols = draws[:, 1:2] + torch.where(draws[:, 2:3] > 0, width - 1 - across, across)
    # One gather over the flattened padded image (half the time of 4-tensor advanced indexing here).
    flat = (rows.unsqueeze(2) * wide + cols.unsqueeze(1)).view(count, 1, height * width)
    picked = padded.view(count, channels, tall * wide).gather(2, flat.expand(count, channels, height * width))
    return picked.view(count, channels, height, width)


def input_scaling_stats(x_uint8: torch.Tensor, scaling: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(shift, scale) per channel: the training set's mean and sd (`standardize`), or none (`unit`:
    inputs stay in [0, 1]). Reference code bases differ here, and on MNIST MLPs it alone changes the
    rounds to a target about twofold, so it is a run setting."""
    channels = x_uint8.shape[-1]
    if scaling == "unit":
        return torch.zeros(channels, device=x_uint8.device), torch.ones(channels, device=x_uint8.device)
    return channel_stats(x_uint8)


def channel_stats(x_uint8: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    pixels = x_uint8.reshape(-1, x_uint8.shape[-1]).float().div_(255.0)
    return pixels.mean(0), pixels.std(0).clamp_min(1e-3)


def cached_scaling_stats(
    x_uint8: torch.Tensor, scaling: str, dataset_sha256: str, cache_dir: Path | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """`input_scaling_stats`, remembered on disk: computing them reads the whole training set as floats,
    1.0 s of each CIFAR-10 train stage's start-up here. The stored tensors are the computed ones, bit for
    bit, so a stage gives the same numbers with or without the cache. The key names everything the bits
    depend on: the prepared file's sha256, the scaling, the statistics' code, torch's version and the CPU
    kernels it dispatches to (a float32 mean over 150 M values rounds differently with AVX2 and AVX-512)."""
    if scaling == "unit":
        return input_scaling_stats(x_uint8, scaling)
    kernels = torch.backends.cpu.get_cpu_capability() if x_uint8.device.type == "cpu" else str(x_uint8.device)
    code = inspect.getsource(channel_stats) + inspect.getsource(input_scaling_stats)
    key = hashlib.sha256(
        "\n".join([dataset_sha256, scaling, code, torch.__version__, kernels, str(tuple(x_uint8.shape))]).encode()
    ).hexdigest()[:32]
    path = Path(cache_dir or ".cache") / "scaling_stats" / f"{key}.pt"
    try:
        mean, std = torch.load(path, weights_only=True)
        return mean.to(x_uint8.device), std.to(x_uint8.device)
    except Exception:  # absent, or cut short by a crash: compute it again
        pass
    mean, std = input_scaling_stats(x_uint8, scaling)
    # Atomic, so two stages writing at once leave one whole file; through an open file, as train.save_torch
    # does, so the archive's bytes do not depend on the temporary name.
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        torch.save((mean.cpu(), std.cpu()), handle)
    return mean, std


def derived_seed(*keys: int) -> int:
    """A 63-bit seed from integer keys, independent of call order (numpy's SeedSequence hashing)."""
    low, high = np.random.SeedSequence([int(k) for k in keys]).generate_state(2, dtype=np.uint32)
    return (int(high) << 31) ^ int(low)


def generator_for(*keys: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A generator seeded by `keys`, on `device`: draws for tensors on a GPU come from a GPU generator
    (the same keys give other numbers there than on the CPU, but the same on every path and chunking)."""
    return new_generator(device).manual_seed(derived_seed(*keys))


def new_generator(device: torch.device | str) -> torch.Generator:
    """The one place generators are made, so that a test standing in for a GPU can make its own."""
    return torch.Generator(device=device)


def cohort_size(num_clients: int, fraction: float) -> int:
    """How many clients a round samples: max(1, round(C·K)), at most K."""
    return min(num_clients, max(1, int(round(fraction * num_clients))))


def sample_cohort(num_clients: int, fraction: float, seed: int, round_: int) -> list[int]:
    """cohort_size distinct clients, chosen from (seed, round) only; C = 1 means all."""
    count = cohort_size(num_clients, fraction)
    if count >= num_clients:
        return list(range(num_clients))
    chosen = torch.randperm(num_clients, generator=generator_for(seed, round_, COHORT_STREAM))[:count]
    return sorted(chosen.tolist())


def client_schedule(num_samples: int, epochs: int, batch_size: int, generator: torch.Generator):
    """Positions (into the client's index list) of every local step, as a padded [steps, batch_size]
    tensor (-1 = no sample): a fresh permutation each epoch, cut into batches of `batch_size` (the last
    one smaller)."""
    per_epoch = -(-num_samples // batch_size)
    orders = torch.full((epochs, per_epoch * batch_size), -1, dtype=torch.long)
    for epoch in range(epochs):
        orders[epoch, :num_samples] = torch.randperm(num_samples, generator=generator)
    return orders.view(epochs * per_epoch, batch_size)


def cohort_schedule(data: ClientData, cohort: list[int], epochs: int, batch_size: int, seed: int, round_: int):
    """Padded [steps, clients, batch] sample indices and weights (0 = padding or a finished client), on the
    CPU, where they are drawn: the training loop branches on this host copy (which clients step, how many
    samples a batch holds) and never asks the device."""
    positions = [
        client_schedule(len(data.clients[client]), epochs, batch_size, generator_for(seed, round_, client))
        for client in cohort
    ]
    steps = max(len(p) for p in positions)
    index = torch.zeros(steps, len(cohort), batch_size, dtype=torch.long)
    weight = torch.zeros(steps, len(cohort), batch_size)
    for c, (client, position) in enumerate(zip(cohort, positions)):
        present = position >= 0
        samples = data.client_on_host(client)
        index[: len(position), c] = torch.where(present, samples[position.clamp_min(0)], 0)
        weight[: len(position), c] = present.float()
    return index, weight
