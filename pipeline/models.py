"""The networks the papers use, built from a name and the dataset's image shape and class count.

| name          | what                                                   | used by             |
|---------------|--------------------------------------------------------|---------------------|
| mlp_200       | 784-200-10 (input flattened), ReLU                     | Importance, FedAvg  |
| mlp_200_200   | 784-200-200-10 (McMahan et al.'s 2NN)                  | FedAvg paper        |
| cnn_mnist     | PyTorch's MNIST example: conv32-conv64-maxpool-fc128, dropouts 0.25/0.5 | FedCurv |
| cnn_fedavg    | McMahan et al.'s CNN: 5x5 conv32, pool, 5x5 conv64, pool, fc512        | Importance |

None has BatchNorm, so every model is a pure function of its parameters (what torch.func needs to
train a whole cohort of clients in one vectorized computation).
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


def cnn_mnist(image_shape, classes):
    """github.com/pytorch/examples mnist/main.py's Net (FedCurv's model), sized from the input."""
    height, width, channels = image_shape
    flat = 64 * ((height - 4) // 2) * ((width - 4) // 2)
    return nn.Sequential(
        nn.Conv2d(channels, 32, 3), nn.ReLU(),
        nn.Conv2d(32, 64, 3), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
        nn.Linear(flat, 128), nn.ReLU(), nn.Dropout(0.5),
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


MODELS = {
    "mlp_200": lambda shape, classes: mlp(shape, classes, [200]),
    "mlp_200_200": lambda shape, classes: mlp(shape, classes, [200, 200]),
    "cnn_mnist": cnn_mnist,
    "cnn_fedavg": cnn_fedavg,
}
MIN_SIDE = {"cnn_mnist": 6, "cnn_fedavg": 4}


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


def to_input(images_uint8: torch.Tensor) -> torch.Tensor:
    """uint8 N×H×W×C -> float N×C×H×W in [0, 1]; done per batch so data stays uint8 in memory."""
    return images_uint8.permute(0, 3, 1, 2).float().div_(255.0)
