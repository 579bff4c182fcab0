"""Training one (run, seed): its rounds, evaluations and forgetting probes, resumed from its checkpoint
if it has one. What the train stage writes from the result is pipeline.outputs'; the command line and
the worker processes are pipeline.train's.

Per round: the round itself (pipeline.rounds), the global model's accuracy and loss every `eval_every`
rounds on the curves' evaluation set (the test set; with `evaluate_on: validation`, TCE's, the union of the
clients' validation sets, and the test set too at the last TEST_SET_EVALUATIONS evaluated rounds), the
probes at the rounds the run lists, and the round's seconds (kept apart from the history, so that the
numbers of two identical runs are byte-identical). A NaN/inf loss stops the run with status `diverged`.
Every `checkpoint_every` rounds the full state is saved (pipeline.results), keyed by everything the
numbers depend on: a killed run resumes from there, and a changed setting or engine never does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from pipeline import distributed, forgetting, results
from pipeline.algorithms import get_algorithm
from pipeline.clientdata import ClientData, cached_scaling_stats, cohort_size
from pipeline.cohort import Levers, prefer_vectorized
from pipeline.fingerprint import run_code_digest
from pipeline.inputs import dataset_spec, load_partition, load_prepared_with_sha256, settings_hash
from pipeline.metrics import evaluate
from pipeline.models import build_model
from pipeline.optimizers import build_optimizer
from pipeline.options import RuntimeOptions
from pipeline.rounds import initial_state, probe_positions, run_round
from pipeline.settings import DataSettings, ProbeSettings, RunSettings

# With `evaluate_on: validation` the test set is evaluated at this many last evaluated rounds, so that the
# accuracy the claims read is a mean over rounds like every other run's (report.seeds.K_LAST), not the
# last model's alone (a seed sd of 0.036 against 0.008 for a last-5 mean).
TEST_SET_EVALUATIONS = 5
# The curves an algorithm's aggregation logs (its state's "round_log") are named with this prefix.
AGGREGATION_LOG_PREFIX = "aggregation_"


@dataclass
class SeedResult:
    """What one (run, seed) trained to: everything its outputs are written from (pipeline.outputs)."""

    settings: RunSettings
    history: list[dict]  # one record per round: losses, bytes, accuracies where evaluated
    status: str  # "ok" or "diverged"
    seconds: list[float]  # per round, probes included
    probe_seconds: list[float]  # per round, the probes' own
    probes: dict  # forgetting probes (pipeline.forgetting), by kind and round
    final: dict  # the last global model's parameters and buffers, on the CPU
    final_test_accuracy: float | None = None  # TCE's last model on the test set
    device: dict = field(default_factory=dict)  # the device and kernels it trained on (distributed.describe_device)
    code: str = ""  # the engine's and the algorithm's code digest (pipeline.fingerprint.run_code_digest)
    commit: str = ""  # the commit it trained at (results.current_commit)


_DATA: dict = {}  # (data settings, device) -> (train, test, dataset sha): a worker's seeds share the loaded data


def load_client_data(
    settings: DataSettings, device: torch.device, cache: Path | None = None
) -> tuple[ClientData, ClientData, str]:
    """The run's training clients and test set on `device`, loaded once per process."""
    key = (
        settings.dataset,
        repr(sorted(settings.dataset_options.items())),
        settings.partition,
        settings.input_scaling,
        str(device),
    )
    if key not in _DATA:
        arrays, dataset_sha = load_prepared_with_sha256(settings.dataset, settings.dataset_options)
        partition = load_partition(settings.partition, dataset_sha)
        x = torch.from_numpy(arrays["x_train"]).to(device)
        mean, std = cached_scaling_stats(x, settings.input_scaling, dataset_sha, cache)
        classes = dataset_spec(settings.dataset).classes
        clients = [torch.from_numpy(p).to(device) for p in partition["train"]]
        val_clients = [torch.from_numpy(p).to(device) for p in partition["val"]]
        data = ClientData(x, torch.from_numpy(arrays["y_train"]).to(device), clients, mean, std, val_clients, classes)
        test = ClientData(
            torch.from_numpy(arrays["x_test"]).to(device),
            torch.from_numpy(arrays["y_test"]).to(device),
            [],
            mean,
            std,
            [],
            classes,
        )
        _DATA.clear()  # one run's data at a time
        _DATA[key] = (data, test, dataset_sha)
    return _DATA[key]


def aggregation_record(log: dict) -> dict:
    """The aggregation's round_log (0-d tensors) as the record's curves: one read-back for all of them."""
    if not log:
        return {}
    values = torch.stack([value.to(torch.float64) for value in log.values()]).tolist()
    return {AGGREGATION_LOG_PREFIX + name: value for name, value in zip(log, values)}


def probe_round(view, round_: int, settings: ProbeSettings, seed: int, probes: dict, num_clients: int) -> None:
    """Record a probed round's forgetting measurements into `probes` (`seed`: the run's, which picks the
    clients followed when the cohort is larger than `settings.clients`)."""
    if round_ in settings.rounds:
        positions = probe_positions(view.cohort, num_clients, settings.clients, seed)
        record = view.local_forgetting(positions)
        per_client = view.global_accuracy_per_client()
        probes.setdefault("rounds", {})[round_] = {
            "round": round_,
            **record,
            "global_accuracy_per_client": per_client,
            "global_accuracy_spread": forgetting.accuracy_spread(per_client),
        }
    if settings.forgettable_every and round_ % settings.forgettable_every == 0:
        probes.setdefault("forgettable", {})[round_] = dict(zip(view.cohort, view.forgettable.tolist()))


def is_probed(settings: ProbeSettings, round_: int) -> bool:
    every = settings.forgettable_every
    return round_ in settings.rounds or bool(every and round_ % every == 0)


def curve_set(evaluate_on: str, data, test) -> tuple:
    """The data the accuracy curves are evaluated on (`evaluate_on`): the whole test set; the union of the
    clients' validation sets (TCE); or the test samples of the classes some client trains on
    (`test_seen_classes`: FedWAvg's cluster partitions hold 4 or 6 of CIFAR-10's classes, and its
    accuracies, up to 92 %, are on those)."""
    if evaluate_on == "validation":
        return data, data.validation_index()
    everything = torch.arange(len(test.y), device=test.y.device)
    if evaluate_on == "test_seen_classes":
        seen = torch.unique(data.y[torch.cat(list(data.clients))]).to(test.y.device)
        return test, everything[torch.isin(test.y, seen)]
    return test, everything


def rounds_also_on_the_test_set(schedule, evaluations: int = TEST_SET_EVALUATIONS) -> frozenset[int]:
    """The last `evaluations` rounds at which the curves are evaluated (every `eval_every` rounds and the
    last): where a run monitored on validation data is also evaluated on the test set."""
    evaluated = [r for r in range(1, schedule.rounds + 1) if r % schedule.eval_every == 0 or r == schedule.rounds]
    return frozenset(evaluated[-evaluations:])


def checkpoint_key(settings: RunSettings, dataset_sha: str, vectorized: bool, device: torch.device) -> str:
    """Everything a seed's numbers depend on, hashed: its settings, data, path, code, device and torch."""
    return settings_hash(
        settings.record,
        {
            "dataset_sha256": dataset_sha,
            "vectorized": vectorized,
            "code": run_code_digest(settings.algorithm["name"]),
            "device": device.type,
            "machine": results.machine_kind(device),
            "torch": torch.__version__,
            "partition": load_partition(settings.data.partition)["meta"]["clients_sha256"],
        },
    )


def train_seed(
    settings: RunSettings,
    options: RuntimeOptions = RuntimeOptions(),
    vectorized: bool | None = None,
    ranks: distributed.Ranks | None = None,
) -> SeedResult | None:
    """Train one (run, seed), resuming from its checkpoint if there is one, or return its kept result.

    vectorized=None picks the faster path for the model and device (cohort.prefer_vectorized). With
    `ranks` (torchrun), this process trains its block of each cohort (pipeline.distributed); rank 0 alone
    evaluates, probes and checkpoints, and returns the result (the other ranks return None)."""
    key, schedule, hp = settings.key, settings.schedule, settings.algorithm
    main_rank = ranks is None or ranks.is_main
    device = distributed.device_for(ranks, options.device)
    data, test, dataset_sha = load_client_data(settings.data, device, options.cache)
    spec = dataset_spec(settings.data.dataset)
    model = build_model(settings.model.name, spec.image_shape, spec.classes, settings.seed, settings.model.norm).to(
        device
    )
    algorithm = get_algorithm(hp["name"])
    if vectorized is None:
        vectorized = prefer_vectorized(model, device, cohort_size(len(data.clients), settings.round.client_fraction))
    digest = checkpoint_key(settings, dataset_sha, vectorized, device)
    store = results.Store(options.checkpoints)
    kept = store.kept(key, digest) if main_rank else None
    if ranks is None and kept is not None:
        return SeedResult(settings, **kept)
    # Rank 0 reads the checkpoint and sends it: the ranks of a multi-node run need not share a disk.
    checkpoint = distributed.broadcast_from_main(
        ranks, store.checkpoint(key, digest, device) if main_rank else None, device, "reading the checkpoint"
    )
    if checkpoint:
        state, history, seconds = checkpoint["state"], checkpoint["history"], checkpoint["seconds"]
        probe_seconds, probes = checkpoint["probe_seconds"], checkpoint["probes"]
        if main_rank:
            print(f"{key}: resuming after round {len(history)} from {store.checkpoint_path(key, digest)}", flush=True)
    else:
        state, history, seconds = initial_state(model, algorithm, len(data.clients), hp), [], []
        probe_seconds, probes = [], {"has_validation": data.has_validation()}
    status = "diverged" if history and history[-1].get("diverged") else "ok"
    on_validation = schedule.evaluate_on == "validation"
    curve_data, curve_index = curve_set(schedule.evaluate_on, data, test)
    also_on_test = rounds_also_on_the_test_set(schedule) if on_validation else frozenset()
    test_data, test_index = curve_set("test", data, test)
    levers = Levers(options.chunk, options.compile, options.foreach == "on")
    optimizer = build_optimizer(settings.round.local.optimizer, levers.foreach)
    bar = tqdm(
        total=schedule.rounds,
        initial=len(history),
        desc=key,
        unit="round",
        dynamic_ncols=True,
        disable=not (options.progress and main_rank),
    )
    for round_ in range(len(history) + 1, schedule.rounds + 1):
        if status == "diverged":
            break
        start = time.perf_counter()
        result = run_round(
            model,
            algorithm,
            hp,
            state,
            data,
            settings.round,
            round_,
            vectorized=vectorized,
            probe=main_rank and is_probed(settings.probes, round_),
            ranks=ranks,
            optimizer=optimizer,
            levers=levers,
        )
        record = {
            "round": round_,
            "train_loss": result.train_loss,
            "bytes_down": result.bytes_down,
            "bytes_up": result.bytes_up,
            "test_accuracy": None,
            "test_loss": None,
            "example_forgetting_events": result.example_events,
        }
        if result.diverged:
            status = "diverged"
            record["diverged"] = True
            record["train_loss"] = None
        else:
            state = result.state
            record.update(aggregation_record(result.aggregation_log))
            if main_rank and (round_ % schedule.eval_every == 0 or round_ == schedule.rounds):
                weights = {**state["params"], **state["buffers"]}
                record["test_accuracy"], record["test_loss"] = evaluate(model, weights, curve_data, curve_index)
                if round_ in also_on_test:
                    record["test_set_accuracy"] = evaluate(model, weights, test_data, test_index)[0]
        probe_start = time.perf_counter()
        if result.view is not None:
            probe_round(result.view, round_, settings.probes, settings.seed, probes, len(data.clients))
        probe_seconds.append(time.perf_counter() - probe_start if result.view is not None else 0.0)
        history.append(record)
        seconds.append(time.perf_counter() - start)
        bar.update(1)
        if record["test_accuracy"] is not None:
            bar.set_postfix(acc=f"{record['test_accuracy']:.4f}")
        if round_ % schedule.checkpoint_every == 0 or status == "diverged":
            distributed.check_agreement(ranks, state, round_, device)
        if main_rank and (round_ % schedule.checkpoint_every == 0 or status == "diverged") and round_ < schedule.rounds:
            store.save_checkpoint(
                key,
                digest,
                {
                    "state": state,
                    "history": history,
                    "seconds": seconds,
                    "probe_seconds": probe_seconds,
                    "probes": probes,
                },
            )
    bar.close()
    if not main_rank:
        return None
    final = {name: value.detach().cpu() for name, value in {**state["params"], **state["buffers"]}.items()}
    final_test_accuracy = None
    if on_validation and status == "ok":  # the TCE paper reports the last model on the test set
        # The last round is always among rounds_also_on_the_test_set: its record holds that evaluation.
        final_test_accuracy = history[-1]["test_set_accuracy"]
    if settings.round.example_events:
        probes["presentations"] = {
            "clients": len(data.clients),
            **forgetting.presentation_summary(state.get("presentations", {})),
        }
    outcome = SeedResult(
        settings,
        history,
        status,
        seconds,
        probe_seconds,
        probes,
        final,
        final_test_accuracy,
        distributed.describe_device(device),
        run_code_digest(hp["name"]),
        results.current_commit(),
    )
    store.keep(key, digest, outcome_fields(outcome))
    return outcome


def outcome_fields(outcome: SeedResult) -> dict:
    """A result's fields but its settings (which the kept result is keyed by): what pipeline.results keeps."""
    return {name: getattr(outcome, name) for name in SeedResult.__dataclass_fields__ if name != "settings"}
