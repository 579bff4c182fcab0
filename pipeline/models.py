"""The networks the papers use, built from a name and the dataset's image shape and class count.

| name          | what                                                   | used by             |
|---------------|--------------------------------------------------------|---------------------|
| mlp_200       | 784-200-10 (input flattened), ReLU                     | Importance, FedAvg  |
| mlp_200_200   | 784-200-200-10 (McMahan et al.'s 2NN)                  | FedAvg paper        |
| cnn_mnist     | PyTorch's MNIST example: conv32-conv64-maxpool-fc128, dropouts 0.25/0.5 | FedCurv |
| cnn_fedavg    | McMahan et al.'s CNN: 5x5 conv32, pool, 5x5 conv64, pool, fc512        | Importance |

| cnn_fedavg_bn | cnn_fedavg with BatchNorm after each convolution                       | BatchNorm runs  |

Dropout is `KeyedDropout`: its mask is an input (a buffer the engine supplies through functional_call),
drawn from the client's own (seed, round, client) generator, so a dropout model gives the same numbers
on the vectorized and the sequential path and for any cohort chunking. BatchNorm's running statistics
are buffers the server carries and averages like parameters; such models train on the sequential path.
"""
from __future__ import annotations

import torch
from torch import nn


def mlp(image_shape, classes, hidden):
    height, width, channels = image_shape
    sizes = [height * width * channels, *hidden]
    layers: list[nn.Module] = [nn.Flatten()]
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
    layers.append(nn.Linear(sizes[-1], classes))
    return nn.Sequential(*layers)


class KeyedDropout(nn.Module):
    """Inverted dropout whose mask is supplied by the caller as the buffer `mask` ([batch, *features],
    already scaled by 1/(1 − p)); without one (a plain forward in train mode) it falls back to
    torch's own dropout."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p
        self.register_buffer("mask", torch.empty(0), persistent=False)

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        if self.mask.numel() == 0:
            return nn.functional.dropout(x, self.p, training=True)
        return x * self.mask


def cnn_mnist(image_shape, classes):
    """github.com/pytorch/examples mnist/main.py's Net (FedCurv's model), sized from the input."""
    height, width, channels = image_shape
    flat = 64 * ((height - 4) // 2) * ((width - 4) // 2)
    return nn.Sequential(
        nn.Conv2d(channels, 32, 3), nn.ReLU(),
        nn.Conv2d(32, 64, 3), nn.ReLU(),
        nn.MaxPool2d(2), KeyedDropout(0.25), nn.Flatten(),
        nn.Linear(flat, 128), nn.ReLU(), KeyedDropout(0.5),
        nn.Linear(128, classes),
    )


def cnn_fedavg(image_shape, classes):
    """McMahan et al. 2017's CNN: two 5x5 convs (32, 64), each followed by 2x2 max-pooling, fc512."""
    height, width, channels = image_shape
    flat = 64 * (height // 4) * (width // 4)
    return nn.Sequential(
        nn.Conv2d(channels, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(flat, 512), nn.ReLU(), nn.Linear(512, classes),
    )


def cnn_fedavg_bn(image_shape, classes):
    """cnn_fedavg with BatchNorm after each convolution (running statistics carried by the server)."""
    height, width, channels = image_shape
    flat = 64 * (height // 4) * (width // 4)
    return nn.Sequential(
        nn.Conv2d(channels, 32, 5, padding=2), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(flat, 512), nn.ReLU(), nn.Linear(512, classes),
    )


MODELS = {
    "mlp_200": lambda shape, classes: mlp(shape, classes, [200]),
    "mlp_200_200": lambda shape, classes: mlp(shape, classes, [200, 200]),
    "cnn_mnist": cnn_mnist,
    "cnn_fedavg": cnn_fedavg,
    "cnn_fedavg_bn": cnn_fedavg_bn,
}
MIN_SIDE = {"cnn_mnist": 6, "cnn_fedavg": 4, "cnn_fedavg_bn": 4}


def build_model(name: str, image_shape, classes: int, seed: int) -> nn.Module:
    """A freshly initialised model; the initialisation depends on `seed` only."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return MODELS[name](tuple(image_shape), classes)


def model_fits(name: str, image_shape) -> str | None:
    """Why the model cannot take this input shape, or None if it can."""
    height, width, _ = image_shape
    if min(height, width) < MIN_SIDE.get(name, 1):
        return f"needs images of at least {MIN_SIDE[name]}x{MIN_SIDE[name]}, got {height}x{width}"
    return None



def dropout_masks(model: nn.Module) -> dict[str, KeyedDropout]:
    """The keyed dropouts of a model, by the name of their mask buffer."""
    return {f"{name}.mask": module for name, module in model.named_modules()
            if isinstance(module, KeyedDropout) and module.p > 0}


def model_buffers(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state the server carries besides parameters (BatchNorm running statistics); masks excluded."""
    return {name: value.detach().clone() for name, value in model.named_buffers() if not name.endswith(".mask")}


def has_batch_norm(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
