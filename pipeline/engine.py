"""The round loop: sample clients, train the cohort, aggregate, evaluate, checkpoint.

A cohort is trained as one computation: the clients' parameters are stacked along a leading client
dimension and `vmap(grad(objective))` gives every client's gradient from one call; a plain elementwise
SGD step then moves all clients at once. `train_cohort_sequential` runs the same objective and step
one client at a time; it is the reference the vectorized path is tested against.

All randomness is derived from (seed, round, client): which clients a round samples, each client's
batch order, and the dropout stream of each cohort chunk, so a resumed run repeats an uninterrupted one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad_and_value, vmap

from pipeline.fisher import diagonal_fisher


# ---------------------------------------------------------------- memory

# glibc serves allocations above its mmap threshold (at most 32 MiB) with fresh mmap'd pages and
# returns them on free, so every step of a large cohort paid page faults for its stacked tensors: on
# the FedCurv default run, 45 of 46 seconds were system time. Cohorts are therefore trained in chunks
# whose largest stacked tensor stays under the threshold, with the threshold raised to its maximum.
CHUNK_BYTES = 24 * 1024 * 1024


def tune_allocator() -> None:
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-3, 32 * 1024 * 1024)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: keep freed memory for the next step
    except (OSError, AttributeError):  # not glibc: nothing to tune
        pass


def cohort_chunk_size(params: dict) -> int:
    """How many clients to stack at once: a function of the model only, so results never depend
    on the machine (the chunk also keys the dropout stream)."""
    largest = max(value.numel() * value.element_size() for value in params.values())
    return max(1, CHUNK_BYTES // largest)


def prefer_vectorized(model, device: torch.device) -> bool:
    """vmap over a cohort of convolutions ran 2-3x slower than one client at a time on this 2-core CPU
    (cnn_mnist, 96 clients, E=1: 128-201 s vs 63-68 s a round), while for MLPs the vectorized path is
    the fast one; on a GPU the vectorized path is taken for every model."""
    has_conv = any(isinstance(m, torch.nn.Conv2d) for m in model.modules())
    return device.type != "cpu" or not has_conv


# ---------------------------------------------------------------- data and randomness

@dataclass
class ClientData:
    """The dataset in memory (uint8 images, int64 labels) and every client's sample indices."""
    x: torch.Tensor
    y: torch.Tensor
    clients: list[torch.Tensor]
    mean: torch.Tensor
    std: torch.Tensor

    def inputs(self, index: torch.Tensor) -> torch.Tensor:
        """Model input for samples `index` (any shape): normalised per batch, channels first."""
        images = self.x[index]  # [..., H, W, C] uint8
        images = images.movedim(-1, -3).float().div_(255.0)
        return (images - self.mean.view(-1, 1, 1)) / self.std.view(-1, 1, 1)


def channel_stats(x_uint8: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    pixels = x_uint8.reshape(-1, x_uint8.shape[-1]).float().div_(255.0)
    return pixels.mean(0), pixels.std(0).clamp_min(1e-3)


def derived_seed(*keys: int) -> int:
    """A 63-bit seed from integer keys, independent of call order (numpy's SeedSequence hashing)."""
    low, high = np.random.SeedSequence([int(k) for k in keys]).generate_state(2, dtype=np.uint32)
    return (int(high) << 31) ^ int(low)


def generator_for(*keys: int) -> torch.Generator:
    return torch.Generator().manual_seed(derived_seed(*keys))


def sample_cohort(num_clients: int, fraction: float, seed: int, round_: int) -> list[int]:
    """max(1, round(C·K)) distinct clients, chosen from (seed, round) only; C = 1 means all."""
    count = max(1, int(round(fraction * num_clients)))
    if count >= num_clients:
        return list(range(num_clients))
    chosen = torch.randperm(num_clients, generator=generator_for(seed, round_, 1 << 20))[:count]
    return sorted(chosen.tolist())


def local_batches(num_samples: int, epochs: int, batch_size: int, generator: torch.Generator):
    """Positions (into the client's index list) of every local step: a fresh permutation each epoch,
    cut into batches of `batch_size` (the last one smaller)."""
    batches = []
    for _ in range(epochs):
        order = torch.randperm(num_samples, generator=generator)
        batches += list(order.split(batch_size))
    return batches


def cohort_schedule(data: ClientData, cohort: list[int], epochs: int, batch_size: int, seed: int, round_: int):
    """Padded [steps, clients, batch] sample indices and weights (0 = padding or a finished client)."""
    per_client = []
    for client in cohort:
        positions = local_batches(len(data.clients[client]), epochs, batch_size,
                                  generator_for(seed, round_, client))
        per_client.append([data.clients[client][p] for p in positions])
    steps = max(len(b) for b in per_client)
    index = torch.zeros(steps, len(cohort), batch_size, dtype=torch.long)
    weight = torch.zeros(steps, len(cohort), batch_size)
    for c, batches in enumerate(per_client):
        for s, batch in enumerate(batches):
            index[s, c, :len(batch)] = batch
            weight[s, c, :len(batch)] = 1.0
    return index.to(data.x.device), weight.to(data.x.device)


# ---------------------------------------------------------------- the local objective and the step

def make_objective(model, algorithm, hp):
    """objective(params, x, y, w, shared, ctx) -> (total, data_loss) for one client and one batch.

    When the algorithm gives its penalty's gradient in closed form (`penalty_grad`), the objective is
    the data loss alone and `add_penalty_grad` adds that gradient outside vmap: the same numbers,
    without differentiating a parameter-sized quadratic through vmap at every step."""
    closed_form = hasattr(algorithm, "penalty_grad")

    def objective(params, x, y, w, shared, ctx):
        logits = functional_call(model, params, (x,))
        per_sample = F.cross_entropy(logits, y, reduction="none")
        count = w.sum()
        data_loss = (per_sample * w).sum() / count.clamp_min(1.0)
        total = data_loss if closed_form else data_loss + algorithm.penalty(params, shared, ctx, hp)
        # A client with no samples in this step (finished or padding) contributes nothing at all.
        return total * (count > 0), data_loss
    return objective


def add_penalty_grad(algorithm, hp, grads: dict, params: dict, shared: dict, ctx: dict) -> None:
    if hasattr(algorithm, "penalty_grad"):
        for name, g in algorithm.penalty_grad(params, shared, ctx, hp).items():
            grads[name] = grads[name] + g


@dataclass
class SGD:
    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0

    def step(self, params: dict, grads: dict, buffers: dict, active: torch.Tensor) -> None:
        """torch.optim.SGD's update (dampening 0, no Nesterov), applied only where `active`.

        `active` broadcasts against the leading dimensions of the parameters (clients, or none)."""
        for name, param in params.items():
            g = grads[name]
            mask = active.reshape(active.shape + (1,) * (param.dim() - active.dim())).to(param.dtype)
            if self.weight_decay:
                g = g + self.weight_decay * param
            if self.momentum:
                if name not in buffers:
                    buffers[name] = torch.zeros_like(param)
                buffers[name].copy_(buffers[name] * (1 - mask) + (self.momentum * buffers[name] + g) * mask)
                g = buffers[name]
            param.sub_(self.lr * g * mask)


def train_cohort_vectorized(model, algorithm, hp, objective, stacked: dict, shared: dict, contexts: dict,
                            data: ClientData, index, weight, sgd: SGD):
    """Train a stacked cohort in place; returns each client's mean data loss over its steps."""
    step_fn = vmap(grad_and_value(objective, has_aux=True), in_dims=(0, 0, 0, 0, None, 0),
                   randomness="different")
    buffers: dict = {}
    loss_sum = torch.zeros(index.shape[1], device=weight.device)
    steps_done = torch.zeros(index.shape[1], device=weight.device)
    for s in range(index.shape[0]):
        w = weight[s]
        grads, (_, data_loss) = step_fn(stacked, data.inputs(index[s]), data.y[index[s]], w, shared, contexts)
        add_penalty_grad(algorithm, hp, grads, stacked, shared, contexts)
        active = w.sum(1) > 0
        sgd.step(stacked, grads, buffers, active)
        loss_sum += data_loss.detach() * active
        steps_done += active
    return loss_sum / steps_done.clamp_min(1)


def train_cohort_sequential(model, algorithm, hp, objective, stacked: dict, shared: dict, contexts: dict,
                            data: ClientData, index, weight, sgd: SGD):
    """The reference: the same objective and SGD step, one client at a time, no vmap."""
    step_fn = grad_and_value(objective, has_aux=True)
    losses = []
    for c in range(index.shape[1]):
        params = {name: value[c].clone() for name, value in stacked.items()}
        ctx = {name: slice_tree(value, c) for name, value in contexts.items()}
        buffers: dict = {}
        loss_sum, steps_done = 0.0, 0
        for s in range(index.shape[0]):
            w = weight[s, c]
            if w.sum() == 0:
                continue
            grads, (_, data_loss) = step_fn(params, data.inputs(index[s, c]), data.y[index[s, c]], w, shared, ctx)
            add_penalty_grad(algorithm, hp, grads, params, shared, ctx)
            sgd.step(params, grads, buffers, torch.tensor(True))
            loss_sum += float(data_loss)
            steps_done += 1
        for name in stacked:
            stacked[name][c] = params[name]
        losses.append(loss_sum / max(steps_done, 1))
    return torch.tensor(losses)


def slice_tree(value, c):
    if isinstance(value, dict):
        return {k: slice_tree(v, c) for k, v in value.items()}
    return value[c]


def stack_trees(trees: list):
    if isinstance(trees[0], dict):
        return {k: stack_trees([t[k] for t in trees]) for k in trees[0]}
    return torch.stack([torch.as_tensor(t) for t in trees])


# ---------------------------------------------------------------- evaluation

@torch.no_grad()
def evaluate(model, params: dict, data: ClientData, index: torch.Tensor, chunk: int = 2000):
    """(accuracy, mean cross-entropy) of `params` on samples `index`."""
    model.eval()
    correct, loss = 0, 0.0
    for start in range(0, len(index), chunk):
        part = index[start:start + chunk]
        logits = functional_call(model, params, (data.inputs(part),))
        loss += float(F.cross_entropy(logits, data.y[part], reduction="sum"))
        correct += int((logits.argmax(1) == data.y[part]).sum())
    model.train()
    return correct / len(index), loss / len(index)


# ---------------------------------------------------------------- one round

@dataclass
class RoundResult:
    state: dict
    train_loss: float
    bytes_down: int
    bytes_up: int
    diverged: bool
    cohort: list[int] = field(default_factory=list)


def all_finite(tree) -> bool:
    """No NaN or inf anywhere in an upload (parameters, Fisher, ...): one poisoned upload would
    spread through the server's sums to every client."""
    if isinstance(tree, dict):
        return all(all_finite(v) for v in tree.values())
    return bool(torch.isfinite(tree).all()) if torch.is_tensor(tree) else True


def tensor_bytes(tree) -> int:
    if isinstance(tree, dict):
        return sum(tensor_bytes(v) for v in tree.values())
    return tree.numel() * tree.element_size() if torch.is_tensor(tree) else 0


def run_round(model, algorithm, hp, state: dict, data: ClientData, settings: dict, round_: int,
              vectorized: bool = True, max_chunk: int | None = None) -> RoundResult:
    """One communication round: sample, train (in cohort chunks), compute uploads, aggregate."""
    seed = settings["seed"]
    cohort = sample_cohort(len(data.clients), settings["client_fraction"], seed, round_)
    objective = make_objective(model, algorithm, hp)
    sgd = SGD(settings["lr"], settings["momentum"], settings["weight_decay"])
    shared = algorithm.shared_context(state, hp)
    chunk = max_chunk or cohort_chunk_size(state["params"])
    uploads, losses = [], []
    for start in range(0, len(cohort), chunk):
        members = cohort[start:start + chunk]
        index, weight = cohort_schedule(data, members, settings["local_epochs"], settings["batch_size"], seed, round_)
        stacked = {name: value.detach().unsqueeze(0).repeat(len(members), *([1] * value.dim()))
                   for name, value in state["params"].items()}
        contexts = stack_trees([algorithm.client_context(state, k, hp) for k in members])
        torch.manual_seed(derived_seed(seed, round_, members[0], 1 << 21))  # the chunk's dropout stream
        model.train()
        train = train_cohort_vectorized if vectorized else train_cohort_sequential
        losses.append(train(model, algorithm, hp, objective, stacked, shared, contexts, data, index, weight, sgd))
        for c, client in enumerate(members):
            params = {name: value[c].detach().clone() for name, value in stacked.items()}
            fisher = None
            if algorithm.upload_needs_fisher(hp):
                fisher = client_fisher(model, params, data, client, hp, seed, round_)
            uploads.append({"client": client, **algorithm.client_upload(params, fisher, hp)})
    train_loss = torch.cat(losses)
    sizes = [len(data.clients[k]) for k in cohort]
    weights = [n / sum(sizes) for n in sizes]
    diverged = not bool(torch.isfinite(train_loss).all()) or not all(
        all_finite({k: up[k] for k in algorithm.SENT_UP}) for up in uploads)
    new_state = state if diverged else algorithm.aggregate(state, uploads, weights, hp)
    sent_down = len(cohort) * (tensor_bytes(state["params"]) + sum(tensor_bytes(state[k])
                                                                   for k in algorithm.SENT_DOWN))
    sent_up = sum(tensor_bytes({k: up[k] for k in algorithm.SENT_UP}) for up in uploads)
    return RoundResult(new_state, float(train_loss.mean()), sent_down, sent_up, diverged, cohort)


def client_fisher(model, params, data: ClientData, client: int, hp: dict, seed: int, round_: int) -> dict:
    """The client's diagonal Fisher at its new parameters, over `fisher_samples` of its samples."""
    indices = data.clients[client]
    generator = generator_for(seed, round_, client, 1 << 22)
    if hp.get("fisher_samples") and hp["fisher_samples"] < len(indices):
        indices = indices[torch.randperm(len(indices), generator=generator)[:hp["fisher_samples"]]]
    return diagonal_fisher(model, params, data.inputs(indices), data.y[indices], hp["fisher_labels"], generator)


# ---------------------------------------------------------------- rounds to a target

def rounds_to_accuracy(rounds: list[int], accuracies: list[float], target: float) -> int | None:
    """The first round whose test accuracy is at or above `target`; None if it never gets there."""
    for round_, accuracy in zip(rounds, accuracies):
        if accuracy is not None and not math.isnan(accuracy) and accuracy >= target:
            return round_
    return None
