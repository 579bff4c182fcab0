"""Implementation (e): the same FedAvg workload through Flower's simulation engine (flwr[simulation], Ray).

A NumPyClient whose `fit` is loop (c), and Flower's FedAvg strategy (fraction_fit=C, fraction_evaluate=0,
min_available_clients=K), run with `flwr.simulation.run_simulation`, the in-process simulation API of
the installed flwr (1.41; it and the older `start_simulation` are both marked deprecated in favour of
the `flwr run` command, which runs the app in other processes). Client resources are Flower's defaults
(2 CPUs per actor, so as many actors as the machine has pairs of cores); with CUDA each actor also gets a
quarter of the GPU.

How a round is timed, Ray's start-up excluded: one simulation per workload runs in a background thread
for all of the benchmark's rounds of Flower, and its strategy holds each round until the benchmark
grants it (benchmarks/flower_app.py), so Flower's rounds are interleaved with the other
implementations' while Ray stays up (idle in between). The strategy timestamps every round, from
configure_fit to the end of aggregate_fit. The first round, which waits for Ray and the actors to start
and has them load their data, is the warm-up; a timed turn of n rounds takes from the start of its
first round to the end of its last, divided by n. Flower samples its cohorts with its own generator;
all clients are the same size, so every cohort is the same amount of work.
"""

from __future__ import annotations

import logging
import os
import queue
import tempfile
import threading
import warnings
from pathlib import Path

import torch

from pipeline.clientdata import ClientData, sample_cohort

INSTALL_HINT = "pip install -e .[bench]"
# Flower reads this once, when it is first imported: no telemetry (and no network on these machines).
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")


def missing_reason() -> str | None:
    """Why implementation (e) cannot run here, or None when it can."""
    for module in ("flwr", "ray"):
        try:
            __import__(module)
        except ImportError:
            return f"skipped: {module} not installed ({INSTALL_HINT})"
    return None


def describe(device: torch.device) -> dict:
    """How (e) is run, for the report."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        flwr_version = version("flwr")
    except PackageNotFoundError:
        flwr_version = None
    return {
        "flwr": flwr_version,
        "api": "flwr.simulation.run_simulation + flwr.server.strategy.FedAvg",
        "client_resources": backend_config(device)["client_resources"],
        "round_time": "configure_fit to the end of aggregate_fit, stamped by the strategy; round 1 (Ray and "
        "actor start-up) discarded",
    }


def backend_config(device: torch.device) -> dict:
    resources = {"num_cpus": 2, "num_gpus": 0.25 if device.type == "cuda" else 0.0}
    # Quiet: Ray logs errors only and keeps the actors' output in its own log files.
    return {
        "client_resources": resources,
        "init_args": {"logging_level": "ERROR", "log_to_driver": False, "include_dashboard": False},
    }


def write_payload(
    folder: Path,
    model_name: str,
    image_shape,
    classes: int,
    seed: int,
    data: ClientData,
    settings: dict,
    device: torch.device,
) -> str:
    """What the actors load once: the uint8 images, every client's indices and the local settings."""
    path = folder / "payload.pt"
    torch.save(
        {
            "x": data.x.cpu(),
            "y": data.y.cpu(),
            "clients": [c.cpu() for c in data.clients],
            "mean": data.mean.cpu(),
            "std": data.std.cpu(),
            "device": device.type,
            "settings": {
                "model": model_name,
                "image_shape": tuple(image_shape),
                "classes": classes,
                "seed": seed,
                **{
                    key: settings[key]
                    for key in (
                        "local_epochs",
                        "batch_size",
                        "lr",
                        "optimizer",
                        "momentum",
                        "weight_decay",
                        "loss",
                        "norm",
                    )
                },
            },
        },
        path,
    )
    return str(path)


def quiet_flower() -> None:
    """Flower's per-round INFO lines, run_simulation's deprecation notice and Ray's GPU tip, all silenced
    for good (the simulation runs in another thread, where a temporary filter would not hold)."""
    logging.getLogger("flwr").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message="Tip: In future versions of Ray", category=FutureWarning)


class FlowerSession:
    """One simulation of `total_rounds` rounds, run a turn of rounds at a time."""

    def __init__(
        self,
        path: str,
        initial,
        num_clients: int,
        client_fraction: float,
        total_rounds: int,
        expected_clients: int,
        device: torch.device,
    ):
        from benchmarks import flower_app

        quiet_flower()
        self.permits, self.finished, self.aborted = threading.Semaphore(0), queue.Queue(), threading.Event()
        self.expected_clients, self.rounds_left, self.error = expected_clients, total_rounds, None
        args = (
            path,
            initial,
            num_clients,
            client_fraction,
            total_rounds,
            backend_config(device),
            self.permits,
            self.finished,
            self.aborted,
        )
        self.thread = threading.Thread(target=self.simulate, args=(flower_app.simulate, args), daemon=True)
        self.thread.start()

    def simulate(self, simulate, args) -> None:
        try:
            simulate(*args)
        except BaseException as error:  # reported by the waiting benchmark thread
            self.error = error

    def next_stamp(self) -> dict:
        while True:
            try:
                return self.finished.get(timeout=1.0)
            except queue.Empty:
                if not self.thread.is_alive():
                    raise RuntimeError(f"the Flower simulation stopped early: {self.error!r}") from self.error

    def turn(self, count: int) -> float:
        """Let `count` rounds run; their mean seconds per round."""
        self.permits.release(count)
        stamps = [self.next_stamp() for _ in range(count)]
        for stamp in stamps:
            if stamp["failures"] or stamp["results"] != self.expected_clients:
                self.close()
                raise RuntimeError(
                    f"Flower round {stamp['round']}: {stamp['results']} results and {stamp['failures']} "
                    f"failures, expected {self.expected_clients} results (the clients' errors are in "
                    "Ray's logs under /tmp/ray/session_latest/logs)"
                )
        self.rounds_left -= count
        if self.rounds_left == 0:
            self.thread.join()
        return (stamps[-1]["end"] - stamps[0]["start"]) / count

    def close(self) -> None:
        """End a simulation that still has rounds to run (the benchmark failed or was interrupted): its
        threads would otherwise keep the process from exiting, waiting for rounds nobody grants."""
        if self.thread.is_alive():
            self.aborted.set()
            self.permits.release(self.rounds_left + 1)
            self.thread.join(timeout=60)


def flower_rounds(
    model,
    model_name: str,
    image_shape,
    classes: int,
    seed: int,
    data: ClientData,
    settings: dict,
    device: torch.device,
    total_rounds: int,
):
    """(time_rounds(first_round, count), close()) for the benchmark: the calls of `time_rounds` must add
    up to `total_rounds` rounds, the first (the warm-up) starting the simulation; `close` ends it early."""
    folder = tempfile.TemporaryDirectory(prefix="fedforget-flower-")
    path = write_payload(Path(folder.name), model_name, image_shape, classes, seed, data, settings, device)
    initial = [value.detach().cpu().numpy() for value in model.state_dict().values()]
    expected = len(sample_cohort(len(data.clients), settings["client_fraction"], seed, 1))
    session: list[FlowerSession] = []

    def time_rounds(first_round: int, count: int) -> float:
        if not session:
            session.append(
                FlowerSession(
                    path, initial, len(data.clients), settings["client_fraction"], total_rounds, expected, device
                )
            )
        return session[0].turn(count)

    def close() -> None:
        for running in session:
            running.close()
        folder.cleanup()

    return time_rounds, close
