"""The engine cases the device tests share (tests/e2e/test_device.py on a stand-in device,
tests/gpu/test_gpu.py on CUDA, tests/unit/test_compile.py): every algorithm on setups that carry what a
device could lose (fused MLP steps, dropout masks, crop-and-flip with TCE's mask and GroupNorm, BatchNorm
with example-forgetting records), and rounds of them on a device."""

from __future__ import annotations

import torch

from pipeline.algorithms import get_algorithm, names, resolve_hyperparams
from pipeline.clientdata import ClientData
from pipeline.cohort import Levers
from pipeline.models import build_model
from pipeline.rounds import initial_state, run_round
from support.synthetic import make_data, run_settings

SIZES = [5, 9, 14, 3]
RWALK = {"importance": "rwalk", "lambda": 10.0}
# (model, image shape, run settings): the MLP's fused SGD step and its hand-written gradients under
# Adam, dropout masks (cnn_mnist), crop-and-flip with TCE's mask and GroupNorm, BatchNorm with
# example-forgetting records.
SETUPS = {
    "mlp_sgd": ("mlp_200", (8, 8, 1), {}),
    "mlp_adam": ("mlp_200", (8, 8, 1), {"optimizer": "adam", "lr": 0.01}),
    "dropout_cnn": ("cnn_mnist", (8, 8, 1), {"momentum": 0.5}),
    "augmented_gn": ("cnn_small", (8, 8, 3), {"augment": "crop_flip", "loss": "tce", "norm": "group"}),
    "batch_norm": ("cnn_fedavg_bn", (8, 8, 3), {"example_events": True, "optimizer": "adam", "lr": 0.01}),
}
ALGORITHM_CASES = [(name, {}) for name in names()] + [("importance", RWALK)]
CASES = [(setup, name, hp) for setup in ("mlp_sgd", "mlp_adam", "dropout_cnn") for name, hp in ALGORITHM_CASES] + [
    (setup, name, hp)
    for setup in ("augmented_gn", "batch_norm")
    for name, hp in [("fedavg", {}), ("scaffold", {}), ("importance", RWALK)]
]


def case_id(case) -> str:
    setup, name, hp = case
    return f"{setup}-{name}{'-rwalk' if hp else ''}"


def device_leaves(tree, path=""):
    """(path, tensor) of every tensor in a tree, 0-dim ones included."""
    if isinstance(tree, dict):
        return [item for k, v in tree.items() for item in device_leaves(v, f"{path}/{k}")]
    if isinstance(tree, (list, tuple)):
        return [item for i, v in enumerate(tree) for item in device_leaves(v, f"{path}/{i}")]
    return [(path, tree)] if torch.is_tensor(tree) else []


def on(data: ClientData, device: torch.device) -> ClientData:
    return ClientData(
        data.x.to(device),
        data.y.to(device),
        [c.to(device) for c in data.clients],
        data.mean.to(device),
        data.std.to(device),
        classes=data.classes,
    )


def round_on(device, setup, name, hp, vectorized, rounds=1, max_chunk=3, dtype=None, levers: Levers = Levers()):
    """`rounds` rounds of algorithm `name` on a setup's model and synthetic data on `device` (the server
    state after them, and each round's training loss)."""
    model_name, shape, extra = SETUPS[setup]
    settings = run_settings(0, client_fraction=1.0, local_epochs=2, batch_size=4, **extra)
    hp = resolve_hyperparams({"name": name, **hp})
    algorithm = get_algorithm(name)
    data = on(make_data(SIZES, shape=shape, classes=3, seed=1), device)
    model = build_model(model_name, shape, 3, 0, extra.get("norm")).to(device)
    if dtype is not None:
        model = model.to(dtype)
        data.normalised = data.normalise(data.x, dtype)  # the inputs in the model's precision
    state = initial_state(model, algorithm, len(SIZES), hp)
    losses = []
    for round_ in range(1, rounds + 1):
        result = run_round(
            model,
            algorithm,
            hp,
            state,
            data,
            settings,
            round_,
            vectorized=vectorized,
            max_chunk=max_chunk,
            levers=levers,
        )
        state = result.state
        losses.append(result.train_loss)
    return state, losses
