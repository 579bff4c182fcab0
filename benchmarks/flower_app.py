"""Flower's side of implementation (e); imports flwr, so only `benchmarks.flower_sim` imports it.

The client runs in Ray actor processes. It reaches its data the way Flower users load theirs inside
`client_fn`: from a file, once per actor process (a module-level cache), never through the closure
that Flower ships with every message. Its `fit` is loop (c) of benchmarks/loops.py.
"""

from __future__ import annotations

import functools
import queue
import threading
import time

import numpy as np
import torch
from flwr.client import ClientApp, NumPyClient
from flwr.common import Context, ndarrays_to_parameters
from flwr.server import ServerApp, ServerAppComponents, ServerConfig
from flwr.server.strategy import FedAvg
from flwr.simulation import run_simulation

from benchmarks.loops import client_class_masks, local_training, shuffled_batches
from pipeline.clientdata import ClientData
from pipeline.models import build_model

_LOADED: dict = {}  # payload path -> (settings, every client's (inputs, labels)), per actor process


def load_payload(path: str):
    if path not in _LOADED:
        payload = torch.load(path, weights_only=False)
        device = torch.device(payload["device"])
        data = ClientData(
            payload["x"].to(device),
            payload["y"].to(device),
            [c.to(device) for c in payload["clients"]],
            payload["mean"].to(device),
            payload["std"].to(device),
            classes=payload["settings"]["classes"],
        )
        masks = client_class_masks(data, payload["settings"])
        tensors = [(data.inputs(index), data.y[index], mask) for index, mask in zip(data.clients, masks)]
        _LOADED.clear()  # one workload at a time
        _LOADED[path] = (payload["settings"], tensors)
    return _LOADED[path]


class TorchClient(NumPyClient):
    def __init__(self, model, x, y, keep, settings):
        self.model, self.x, self.y, self.keep, self.settings = model, x, y, keep, settings

    def fit(self, parameters, config):
        state = {name: torch.from_numpy(value) for name, value in zip(self.model.state_dict(), parameters)}
        self.model.load_state_dict(state)
        local_training(
            self.model, lambda: shuffled_batches(self.x, self.y, self.settings["batch_size"]), self.settings, self.keep
        )
        return [value.detach().cpu().numpy() for value in self.model.state_dict().values()], len(self.x), {}


def client_fn(path: str, context: Context):
    settings, tensors = load_payload(path)
    x, y, keep = tensors[int(context.node_config["partition-id"])]
    model = build_model(
        settings["model"], settings["image_shape"], settings["classes"], settings["seed"], settings.get("norm")
    )
    return TorchClient(model.to(x.device), x, y, keep, settings).to_client()


class GatedFedAvg(FedAvg):
    """FedAvg whose rounds wait for a permit, so that the benchmark can interleave Flower's rounds with
    the other implementations' while Ray stays up; every round's start and end go to `finished`. Once
    `aborted` is set, the remaining rounds select no client, so the simulation ends at once."""

    def __init__(self, permits: threading.Semaphore, finished: queue.Queue, aborted: threading.Event, **kwargs):
        super().__init__(**kwargs)
        self.permits, self.finished, self.aborted = permits, finished, aborted

    def configure_fit(self, server_round, parameters, client_manager):
        self.permits.acquire()
        if self.aborted.is_set():
            return []
        # FedAvg sizes the cohort from the clients registered so far: on a busy machine round 1 began with
        # part of them and sampled too few clients. Wait for all (before the clock starts).
        while client_manager.num_available() < self.min_available_clients:
            time.sleep(0.05)
        self.started = time.perf_counter()
        return super().configure_fit(server_round, parameters, client_manager)

    def aggregate_fit(self, server_round, results, failures):
        aggregated = super().aggregate_fit(server_round, results, failures)
        self.finished.put(
            {
                "round": server_round,
                "start": self.started,
                "end": time.perf_counter(),
                "results": len(results),
                "failures": len(failures),
            }
        )
        return aggregated


def simulate(
    path: str,
    initial: list[np.ndarray],
    num_clients: int,
    client_fraction: float,
    rounds: int,
    backend_config: dict,
    permits: threading.Semaphore,
    finished: queue.Queue,
    aborted: threading.Event,
) -> None:
    """Run `rounds` FedAvg rounds in Flower's simulation engine, each when `permits` allows."""

    def server_fn(context: Context):
        strategy = GatedFedAvg(
            permits,
            finished,
            aborted,
            fraction_fit=client_fraction,
            fraction_evaluate=0.0,
            min_fit_clients=1,
            min_evaluate_clients=0,
            min_available_clients=num_clients,
            initial_parameters=ndarrays_to_parameters(initial),
        )
        return ServerAppComponents(strategy=strategy, config=ServerConfig(num_rounds=rounds))

    run_simulation(
        server_app=ServerApp(server_fn=server_fn),
        client_app=ClientApp(client_fn=functools.partial(client_fn, path)),
        num_supernodes=num_clients,
        backend_config=backend_config,
    )
