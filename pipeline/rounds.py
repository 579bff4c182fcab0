"""The round loop: sample clients, train the cohort (in chunks), compute uploads, aggregate, probe.

The server state is a dict: "params" (the global model), "buffers" (BatchNorm running statistics,
averaged with the same sample-size weights as FedAvg's parameters; `num_batches_tracked` takes the
cohort's largest count, since it only matters for BatchNorm's cumulative averaging, which no model here
uses), "presentations" (with `example_events`: each client's example-forgetting record, see
pipeline.forgetting.record_presentations), "clients" (one store of what the server keeps per client: FedCurv's last uploads, SCAFFOLD's
control variates, ...; an algorithm says what with `remember(upload, hp)`), and whatever the
algorithm's `init_state` adds.

A round hands each client's whole local result (`LocalResult`: start and end parameters, number of
steps, its context, the model and its data) to the algorithm's `client_upload`, and after aggregation
calls the algorithm's `after_aggregate(state, view, hp)` with a `RoundView` that can evaluate
the new global model on client data. The forgetting probes read the same view, so a quantity both need
(the forgettable examples) is computed once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import torch

from pipeline import distributed, forgetting
from pipeline.clientdata import PROBE_STREAM, ClientData, cohort_schedule, generator_for, sample_cohort
from pipeline.cohort import (
    AugmentDraws,
    CohortJob,
    DropoutDraws,
    Levers,
    StepPlan,
    chunk_for_round,
    repeat_for,
    slice_tree,
    stack_trees,
    train_sequential,
    train_vectorized,
)
from pipeline.losses import client_logit_mask
from pipeline.metrics import accuracy_by_owner, cohort_correct_on_own, cohort_correct_on_shared, correct_predictions
from pipeline.models import frozen_parameters, model_buffers
from pipeline.optimizers import build_optimizer
from pipeline.settings import RoundSettings


def initial_state(model, algorithm, num_clients: int, hp: dict) -> dict:
    params = {name: value.detach().clone() for name, value in model.named_parameters()}
    return server_state(algorithm, params, num_clients, hp, model_buffers(model))


def server_state(algorithm, params: dict, num_clients: int, hp: dict, buffers: dict | None = None) -> dict:
    """The algorithm's initial state plus what the engine carries for every algorithm."""
    return {**algorithm.init_state(params, num_clients, hp), "buffers": buffers or {}, "clients": {}}


@dataclass
class LocalResult:
    """One client's round: what `client_upload` computes its upload from."""

    client: int
    start: dict  # the global parameters it started from
    params: dict  # its parameters after local training
    buffers: dict  # its BatchNorm buffers after local training
    steps: int  # local optimiser steps taken (SCAFFOLD's K, FedNova's τ)
    optimizer: object  # the client optimiser (pipeline.optimizers): its lr, momentum (SCAFFOLD, FedNova)
    context: dict  # what the server sent it (client_context)
    shared: dict  # what the server sent every client (shared_context)
    tracked: dict | None  # what the algorithm's tracker observed along its trajectory (RWalk)
    model: torch.nn.Module
    data: ClientData
    seed: int
    round: int

    @property
    def train_index(self) -> torch.Tensor:
        return self.data.clients[self.client]

    def generator(self, purpose: int) -> torch.Generator:
        """A generator of this client's own in this round, for the algorithm's random draws."""
        return generator_for(self.seed, self.round, self.client, purpose)


@dataclass
class RoundResult:
    state: dict
    train_loss: float
    bytes_down: int
    bytes_up: int
    diverged: bool
    cohort: list[int] = field(default_factory=list)
    view: "RoundView | None" = None
    example_events: int | None = None  # forgetting events among this round's presentations (example_events)
    # What the algorithm's aggregation logged this round (its state's "round_log": name -> 0-d tensor).
    aggregation_log: dict = field(default_factory=dict)
    probe_seconds: float = 0.0


class RoundView:
    """A round after aggregation: the cohort's local models and the new global model, with the
    evaluations that probes and algorithms share (each computed at most once)."""

    def __init__(self, model, data: ClientData, locals_: list[LocalResult], previous: dict, new: dict):
        self.model, self.data, self.locals, self.previous, self.new = model, data, locals_, previous, new
        self.cohort = [local.client for local in locals_]
        self.round = locals_[0].round if locals_ else 0

    def full(self, state: dict) -> dict:
        return {**state["params"], **state["buffers"]}

    def stacked_locals(self, positions: list[int]) -> dict:
        return stack_trees([{**self.locals[p].params, **self.locals[p].buffers} for p in positions])

    @cached_property
    def forgettable(self) -> torch.Tensor:
        """Per cohort client: its training samples its local model got right and the new global wrong."""
        own = [local.train_index for local in self.locals]
        local_correct, valid = cohort_correct_on_own(
            self.model, self.stacked_locals(list(range(len(self.locals)))), self.data, own
        )
        global_correct = torch.zeros_like(local_correct)
        everyone = correct_predictions(self.model, self.full(self.new), self.data, torch.cat(own))  # one pass
        for c, right in enumerate(everyone.split([len(index) for index in own])):
            global_correct[c, : len(right)] = right
        return forgetting.forgettable_counts(local_correct, global_correct, valid)

    def local_forgetting(self, positions: list[int]) -> dict:
        """F_ki over the cohort members at `positions`, on their held-out data."""
        clients = [self.cohort[p] for p in positions]
        held_out = [self.data.held_out(k) for k in clients]
        index = torch.cat(held_out)
        owner = torch.cat(
            [torch.full((len(h),), row, dtype=torch.long, device=index.device) for row, h in enumerate(held_out)]
        )
        post_by_model = accuracy_by_owner(
            cohort_correct_on_shared(self.model, self.stacked_locals(positions), self.data, index), owner, len(clients)
        )
        prior = accuracy_by_owner(
            correct_predictions(self.model, self.full(self.previous), self.data, index), owner, len(clients)
        )
        post = post_by_model.T  # rows k = whose data, columns i = whose local model
        difference, average = forgetting.local_client_forgetting(post, prior)
        return {"clients": clients, "post": post, "prior": prior, "difference": difference, "F": average}

    def global_accuracy_per_client(self) -> torch.Tensor:
        """The new global model's accuracy on every client's held-out data (all clients)."""
        held_out = [self.data.held_out(k) for k in range(len(self.data.clients))]
        index = torch.cat(held_out)
        owner = torch.cat(
            [torch.full((len(h),), k, dtype=torch.long, device=index.device) for k, h in enumerate(held_out)]
        )
        return accuracy_by_owner(
            correct_predictions(self.model, self.full(self.new), self.data, index), owner, len(held_out)
        )


def probe_positions(cohort: list[int], num_clients: int, limit: int, seed: int) -> list[int]:
    """Positions in the cohort of the clients whose forgetting is probed: all of them up to `limit`,
    else the cohort members that come first in one fixed seeded order of all clients, so that the same
    clients are followed from round to round whenever they take part."""
    if len(cohort) <= limit:
        return list(range(len(cohort)))
    order = torch.randperm(num_clients, generator=generator_for(seed, 0, 0, PROBE_STREAM)).tolist()
    rank = {client: r for r, client in enumerate(order)}
    chosen = sorted(cohort, key=rank.__getitem__)[:limit]
    return sorted(cohort.index(client) for client in chosen)


def all_finite(tree) -> bool:
    """No NaN or inf anywhere in an upload (parameters, Fisher, ...): one poisoned upload would
    spread through the server's sums to every client. One answer read back from the device for the
    whole tree, not one per tensor."""
    checks = [torch.isfinite(leaf).all() for leaf in tensor_leaves(tree)]
    return bool(torch.stack(checks).all()) if checks else True


def tensor_leaves(tree) -> list[torch.Tensor]:
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in tensor_leaves(value)]
    if isinstance(tree, (list, tuple)):
        return [leaf for value in tree for leaf in tensor_leaves(value)]
    return [tree] if torch.is_tensor(tree) else []


def state_device(state: dict) -> torch.device:
    """Where the server state lives (its global model's device)."""
    return next(iter(state["params"].values())).device


def tensor_bytes(tree) -> int:
    if isinstance(tree, dict):
        return sum(tensor_bytes(v) for v in tree.values())
    return tree.numel() * tree.element_size() if torch.is_tensor(tree) else 0


def weighted_buffers(buffers: list[dict], weights: list[float]) -> dict:
    """BatchNorm statistics averaged with the parameters' weights; counters take the largest."""
    if not buffers or not buffers[0]:
        return {}
    averaged = {}
    for name, first in buffers[0].items():
        if first.dtype.is_floating_point:
            averaged[name] = sum(w * b[name] for b, w in zip(buffers, weights))
        else:
            averaged[name] = torch.stack([b[name] for b in buffers]).max(0).values
    return averaged


def train_chunk(
    model,
    algorithm,
    hp,
    state,
    data,
    settings: RoundSettings,
    round_,
    members,
    vectorized,
    shared,
    optimizer,
    compile_mode: str = "off",
):
    """Train one chunk of the cohort; returns (LocalResults, mean losses, presentations' correctness or None)."""
    seed, local = settings.seed, settings.local
    index, weight = cohort_schedule(data, members, local.epochs, local.batch_size, seed, round_)
    plan = StepPlan.from_weights(weight)  # the schedule the training loop branches on, kept on the host
    index, weight = index.to(data.x.device), weight.to(data.x.device)
    frozen = frozen_names(model, settings)
    stacked = repeat_for({n: v for n, v in state["params"].items() if n not in frozen}, len(members))
    # In the model's order, not the set's (which follows the string hash, random per process): the
    # saved model's key order, and so its bytes, must not change from run to run.
    fixed = repeat_for({n: v for n, v in state["params"].items() if n in frozen}, len(members))
    buffers = repeat_for(state["buffers"], len(members))
    contexts = stack_trees([algorithm.client_context(state, k, hp) for k in members])
    tracker_factory = algorithm.local_tracker(hp)
    job = CohortJob(
        model,
        algorithm,
        hp,
        data,
        optimizer,
        shared,
        contexts,
        index,
        weight,
        client_logit_mask(local.loss, data, members),
        DropoutDraws(model, members, seed, round_, local.batch_size, data.inputs(index[0, 0, :1])),
        augment=augment_draws(settings, members, round_, data),
        tracker_factory=tracker_factory,
        record_correct=settings.example_events,
        fixed=fixed,
        plan=plan,
        compile=compile_mode,
    )
    model.train()
    outcome = (train_vectorized if vectorized else train_sequential)(job, stacked, buffers)
    steps = plan.steps_per_client()  # what outcome.steps holds, known on the host
    results = []
    for c, client in enumerate(members):
        results.append(
            LocalResult(
                client=client,
                start=state["params"],
                params={name: value[c].detach().clone() for name, value in {**stacked, **fixed}.items()},
                buffers={name: value[c].detach().clone() for name, value in buffers.items()},
                steps=steps[c],
                optimizer=optimizer,
                context=slice_tree(contexts, c),
                shared=shared,
                tracked=outcome.tracker.client_result(c) if outcome.tracker is not None else None,  # type: ignore[attr-defined]
                model=model,
                data=data,
                seed=seed,
                round=round_,
            )
        )
    return results, outcome.losses, None if outcome.correct is None else (index, weight, outcome.correct)


def frozen_names(model, settings: RoundSettings) -> set[str]:
    """The parameters the run's `freeze` holds fixed: neither trained (cohort.CohortJob.fixed) nor
    averaged (aggregate_round keeps the global values, bit for bit)."""
    return frozen_parameters(model, settings.freeze)


def augment_draws(settings: RoundSettings, members: list[int], round_: int, data: ClientData) -> AugmentDraws | None:
    if settings.local.augment == "none":
        return None
    return AugmentDraws(members, settings.seed, round_, settings.local.batch_size, data.black())


def positions_in(own: torch.Tensor, samples: torch.Tensor) -> torch.Tensor:
    """Where each of `samples` (dataset indices) stands in the client's index list `own`, by a binary
    search of the sorted list (no dataset-sized map per client). Samples not in `own` (padding) get an
    arbitrary position: the caller masks them."""
    if len(own) == 0:  # a client without samples presents only padding
        return torch.zeros_like(samples)
    order = torch.argsort(own)
    found = torch.searchsorted(own[order], samples.contiguous()).clamp_max_(len(own) - 1)
    return order[found]


def record_chunk_presentations(records: dict, data: ClientData, members: list[int], presented) -> int:
    """A chunk's presentations added to its clients' records (new records, the old ones untouched);
    returns the forgetting events among them."""
    index, weight, correct = presented
    events = 0
    for c, client in enumerate(members):
        own = data.clients[client]
        positions = torch.where(weight[:, c] > 0, positions_in(own, index[:, c]), -1)
        old = records.get(client) or forgetting.new_presentation_record(len(own), own.device)
        records[client] = {name: value.clone() for name, value in old.items()}
        events += forgetting.record_presentations(records[client], positions, correct[:, c])
    return events


def run_round(
    model,
    algorithm,
    hp,
    state: dict,
    data: ClientData,
    settings: RoundSettings,
    round_: int,
    vectorized: bool = True,
    max_chunk: int | None = None,
    probe: bool = False,
    ranks: distributed.Ranks | None = None,
    optimizer=None,
    levers: Levers = Levers(),
) -> RoundResult:
    """One communication round: sample, train (in cohort chunks), compute uploads, aggregate.

    With `probe`, the result keeps a RoundView for the forgetting probes. With `ranks` (torchrun), this
    process trains and uploads only its block of the cohort, then gathers everyone's (pipeline.distributed).
    `optimizer`: the run's client optimiser (built from the settings when None); `levers`: the runtime's
    speed levers (pipeline.options), which change no number on a CPU."""
    cohort = sample_cohort(len(data.clients), settings.client_fraction, settings.seed, round_)
    optimizer = optimizer or build_optimizer(settings.local.optimizer, levers.foreach)
    shared = algorithm.shared_context(state, hp)
    chunk = max_chunk or chunk_for_round(
        model, state["params"], tuple(data.x.shape[1:]), settings.local.batch_size, state_device(state), levers.chunk
    )
    mine = [cohort[p] for p in distributed.positions_of_rank(len(cohort), ranks)]
    locals_, losses = [], []
    presentations, events = dict(state.get("presentations", {})), None
    for start in range(0, len(mine), chunk):
        members = mine[start : start + chunk]
        results, chunk_losses, presented = train_chunk(
            model, algorithm, hp, state, data, settings, round_, members, vectorized, shared, optimizer, levers.compile
        )
        locals_ += results
        losses.append(chunk_losses)
        if presented is not None:
            events = (events or 0) + record_chunk_presentations(presentations, data, members, presented)
    uploads = [{"client": local.client, **algorithm.client_upload(local, hp)} for local in locals_]
    train_loss = torch.cat(losses)
    if ranks is not None:
        locals_, uploads, train_loss, presentations, events = gather_cohort(
            ranks,
            locals_,
            uploads,
            train_loss,
            {k: presentations[k] for k in mine if k in presentations},
            events,
            state.get("presentations", {}),
            state_device(state),
        )
    sizes = [len(data.clients[k]) for k in cohort]
    weights = [n / sum(sizes) for n in sizes]
    diverged = not all_finite([train_loss] + [{k: up[k] for k in algorithm.sent_up(hp)} for up in uploads])
    sent_down = len(cohort) * (
        tensor_bytes(state["params"]) + sum(tensor_bytes(state[k]) for k in algorithm.sent_down(hp))
    )
    sent_up = sum(tensor_bytes({k: up[k] for k in algorithm.sent_up(hp)}) for up in uploads)
    if diverged:
        return RoundResult(state, float(train_loss.mean()), sent_down, sent_up, True, cohort)
    new_state, aggregation_log = aggregate_round(
        algorithm, hp, state, uploads, weights, [local.buffers for local in locals_], frozen_names(model, settings)
    )
    view = RoundView(model, data, locals_, state, new_state)  # evaluates nothing until asked
    new_state = algorithm.after_aggregate(new_state, view, hp)
    view.new = new_state
    if events is not None:  # after the algorithm's own step, which builds its state without this engine key
        new_state = {**new_state, "presentations": presentations}
        view.new = new_state
    return RoundResult(
        new_state,
        float(train_loss.mean()),
        sent_down,
        sent_up,
        False,
        cohort,
        view if probe else None,
        events,
        aggregation_log,
    )


def gather_cohort(ranks, locals_, uploads, train_loss, records, events, previous_records, device: torch.device):
    """Every rank's clients, in cohort order (ranks hold contiguous blocks, in rank order): their local
    models, uploads, losses and presentation records, on `device` (the server state's: not the losses',
    which may have been summed elsewhere). A client's `context` and `tracked` stay on its own rank: only
    `client_upload`, which ran there, reads them."""
    template = locals_[0]  # every rank trains at least one client (distributed.check_cohort_size)
    mine = {
        "locals": [{"client": r.client, "params": r.params, "buffers": r.buffers, "steps": r.steps} for r in locals_],
        "uploads": uploads,
        "loss": train_loss,
        "records": records,
        "events": events,
    }
    everyone = distributed.all_gather(ranks, mine, device, f"gathering round {template.round}")
    gathered_locals = [
        replace(template, **item, context=None, tracked=None) for part in everyone for item in part["locals"]
    ]
    merged = dict(previous_records)
    for part in everyone:
        merged.update(part["records"])
    counts = [part["events"] for part in everyone if part["events"] is not None]
    return (
        gathered_locals,
        [up for part in everyone for up in part["uploads"]],
        torch.cat([part["loss"] for part in everyone]),
        merged,
        sum(counts) if counts else None,
    )


def aggregate_round(
    algorithm,
    hp,
    state,
    uploads,
    weights,
    client_buffers,
    frozen: set[str] = frozenset(),  # type: ignore[assignment]
) -> tuple[dict, dict]:
    """The algorithm's aggregation over a per-client store already updated with this round's uploads,
    and the BatchNorm buffers averaged with the parameters' weights. `frozen` parameters keep their
    global values exactly (a weighted mean of equal values can move them by a rounding error). Returns
    the new state and what the aggregation logged (its "round_log", never kept in the state)."""
    store = dict(state["clients"])
    for up in uploads:
        kept = algorithm.remember(up, hp)
        if kept is not None:
            store[up["client"]] = kept
    # "previous_clients": the store before this round's uploads, for an algorithm that keeps running sums
    # over it (FedCurv's u and v: it adds the uploaders' new entries and takes out the ones they replace,
    # O(cohort) instead of a re-sum over every client). Never part of the state kept.
    new_state = algorithm.aggregate(
        {**state, "clients": store, "previous_clients": state["clients"]}, uploads, weights, hp
    )
    new_state.pop("previous_clients", None)
    aggregation_log = new_state.pop("round_log", {})
    if frozen:
        new_state = {
            **new_state,
            "params": {n: state["params"][n] if n in frozen else v for n, v in new_state["params"].items()},
        }
    return {**new_state, "clients": store, "buffers": weighted_buffers(client_buffers, weights)}, aggregation_log
