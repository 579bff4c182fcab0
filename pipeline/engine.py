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

from pipeline import cohort_mlp
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

    normalised: torch.Tensor | None = field(default=None, repr=False, compare=False)

    def inputs(self, index: torch.Tensor) -> torch.Tensor:
        """Model input for samples `index` (any shape): normalised, channels first.

        Datasets up to NORMALISED_CACHE_BYTES as float are normalised once and then only gathered
        (the same elementwise arithmetic, so the same numbers); larger ones per batch, from uint8."""
        if self.normalised is None and self.x.numel() * 4 <= NORMALISED_CACHE_BYTES:
            self.normalised = self.normalise(self.x)
        if self.normalised is not None:
            return self.normalised[index]
        return self.normalise(self.x[index])

    def normalise(self, images: torch.Tensor) -> torch.Tensor:
        images = images.movedim(-1, -3).float().div_(255.0)  # [..., H, W, C] uint8 -> [..., C, H, W]
        return (images - self.mean.view(-1, 1, 1)) / self.std.view(-1, 1, 1)


NORMALISED_CACHE_BYTES = 1 << 30


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


def client_schedule(num_samples: int, epochs: int, batch_size: int, generator: torch.Generator):
    """`local_batches` as a padded [steps, batch_size] tensor of positions (-1 = no sample), built
    with whole-tensor operations: the same permutations, drawn in the same order."""
    per_epoch = -(-num_samples // batch_size)
    orders = torch.full((epochs, per_epoch * batch_size), -1, dtype=torch.long)
    for epoch in range(epochs):
        orders[epoch, :num_samples] = torch.randperm(num_samples, generator=generator)
    return orders.view(epochs * per_epoch, batch_size)


def cohort_schedule(data: ClientData, cohort: list[int], epochs: int, batch_size: int, seed: int, round_: int):
    """Padded [steps, clients, batch] sample indices and weights (0 = padding or a finished client)."""
    positions = [client_schedule(len(data.clients[client]), epochs, batch_size, generator_for(seed, round_, client))
                 for client in cohort]
    steps = max(len(p) for p in positions)
    index = torch.zeros(steps, len(cohort), batch_size, dtype=torch.long)
    weight = torch.zeros(steps, len(cohort), batch_size)
    for c, (client, position) in enumerate(zip(cohort, positions)):
        present = position >= 0
        samples = data.clients[client].cpu()
        index[:len(position), c] = torch.where(present, samples[position.clamp_min(0)], 0)
        weight[:len(position), c] = present.float()
    return index.to(data.x.device), weight.to(data.x.device)


# ---------------------------------------------------------------- the local objective and the step

def make_objective(model, algorithm, hp):
    """objective(params, x, y, w, shared, ctx) -> (total, data_loss) for one client and one batch.

    When the algorithm gives its penalty's gradient in closed form (`penalty_affine`), the objective is
    the data loss alone and `add_penalty_gradient` adds that gradient outside vmap: the same numbers,
    without differentiating a parameter-sized quadratic through vmap at every step."""
    closed_form = hasattr(algorithm, "penalty_affine")

    def objective(params, x, y, w, shared, ctx):
        logits = functional_call(model, params, (x,))
        per_sample = F.cross_entropy(logits, y, reduction="none")
        count = w.sum()
        data_loss = (per_sample * w).sum() / count.clamp_min(1.0)
        total = data_loss if closed_form else data_loss + algorithm.penalty(params, shared, ctx, hp)
        # A client with no samples in this step (finished or padding) contributes nothing at all.
        return total * (count > 0), data_loss
    return objective


def closed_form_penalty(algorithm, hp, shared: dict, ctx: dict):
    """The penalty's gradient as (scale, offset), scale·θ − offset, fixed for a whole round; None when
    there is no term (or the algorithm gives no closed form and vmap differentiates its penalty)."""
    if not hasattr(algorithm, "penalty_affine"):
        return None
    return algorithm.penalty_affine(shared, ctx, hp)


def add_penalty_gradient(grads: dict, affine, params: dict) -> dict:
    """grads + (scale·θ − offset), name by name: the one place the penalty's gradient is formed (the
    fused MLP step applies the same affine map inside its backward pass, cohort_mlp.apply_pull)."""
    if affine is None:
        return grads
    scale, offset = affine
    total = {}
    for name, g in grads.items():
        if torch.is_tensor(scale[name]):
            total[name] = torch.addcmul(g, scale[name], params[name]).sub_(offset[name])
        else:
            total[name] = g.add(params[name], alpha=scale[name]).sub_(offset[name])
    return total


@dataclass
class SGD:
    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0

    def step(self, params: dict, grads: dict, buffers: dict, active: torch.Tensor,
             keep_steps: bool = False) -> dict:
        """torch.optim.SGD's update (dampening 0, no Nesterov), applied only where `active`.

        `active` broadcasts against the leading dimensions of the parameters (clients, or none). When
        every client is active (most steps) the update is torch.optim.SGD's in-place one: one pass
        over each parameter instead of four, which is most of a step's time for an MLP.
        With `keep_steps`, returns the step Δθ taken (0 where inactive), for RWalk's path score."""
        everyone = bool(active.all())
        steps = {}
        for name, param in params.items():
            g = grads[name]
            mask = active.reshape(active.shape + (1,) * (param.dim() - active.dim())).to(param.dtype)
            if self.weight_decay:
                g = g.add(param, alpha=self.weight_decay)
            if self.momentum:
                if name not in buffers:
                    buffers[name] = torch.zeros_like(param)
                if everyone:
                    buffers[name].mul_(self.momentum).add_(g)
                else:
                    buffers[name].copy_(buffers[name] * (1 - mask) + (self.momentum * buffers[name] + g) * mask)
                g = buffers[name]
            if keep_steps:
                steps[name] = g * -self.lr if everyone else g * (-self.lr * mask)
                param.add_(steps[name])
            elif everyone:
                param.add_(g, alpha=-self.lr)
            else:
                param.sub_(g * (self.lr * mask))
        return steps


class PathScore:
    """RWalk's path-integral importance (Chaudhry et al. 2018), accumulated step by step:

        s ← s + max(0, −g·Δθ) / (½·F̂·Δθ² + ε),     F̂ ← decay·F̂ + (1 − decay)·g²   (F̂ = g² at first)

    g being the data loss's gradient at the step, Δθ the step taken and F̂ a running Fisher from the
    squared mini-batch gradients: the loss decrease each parameter's move bought, per unit of the
    curvature it moved along. Works on stacked cohorts (`active` masks finished clients) and on one
    client (`active` a scalar True)."""

    def __init__(self, decay: float, epsilon: float):
        self.decay, self.epsilon = decay, epsilon
        self.score: dict = {}
        self.running_fisher: dict = {}
        self.started: torch.Tensor | None = None  # which clients have taken a step (F̂ = g² at their first)
        self.epsilon_as_tensor: torch.Tensor | None = None

    def update(self, grads: dict, steps: dict, active: torch.Tensor) -> None:
        """Add one step: `grads` the data loss's gradients, `steps` the Δθ taken (0 for inactive clients,
        so they gain no score; their running Fisher is left as it was).

        In place, a few passes per tensor: on the MNIST MLP cohort this made RWalk's rounds 2.5x faster
        than building each term as a new tensor from parameter copies (11-12 s -> 4.7 s a round)."""
        if self.started is None:
            self.started = torch.zeros_like(active)
        steady = bool(self.started.all()) and bool(active.all())  # the common case: one in-place pass
        first = active & ~self.started
        for name, g in grads.items():
            if name not in self.running_fisher:
                self.running_fisher[name] = torch.zeros_like(g)
                self.score[name] = torch.zeros_like(g)
            running = self.running_fisher[name]
            if steady:
                running.mul_(self.decay).addcmul_(g, g, value=1 - self.decay)
            else:
                shape = active.shape + (1,) * (g.dim() - active.dim())
                squared = g * g
                running.copy_(torch.where(first.reshape(shape), squared,
                                          torch.where(active.reshape(shape),
                                                      running * self.decay + (1 - self.decay) * squared, running)))
            # score += max(0, −g·Δθ) / (½·F̂·Δθ² + ε), written as min(0, g·Δθ) / (…) subtracted
            delta = steps[name]
            decrease = torch.mul(g, delta).clamp_max_(0)  # minus the loss decrease the move bought
            cost = torch.mul(delta, delta)
            torch.addcmul(self.epsilon_like(cost), cost, running, value=0.5, out=cost)
            self.score[name].addcdiv_(decrease, cost, value=-1.0)
        self.started = self.started | active

    def epsilon_like(self, like: torch.Tensor) -> torch.Tensor:
        if self.epsilon_as_tensor is None or self.epsilon_as_tensor.dtype != like.dtype:
            self.epsilon_as_tensor = torch.tensor(self.epsilon, dtype=like.dtype, device=like.device)
        return self.epsilon_as_tensor

    def set_client(self, c: int, client: PathScore, like: dict) -> None:
        """Put one client's score (sequential path) at position c of this stacked score."""
        for name, value in like.items():
            if name not in self.score:
                self.score[name] = torch.zeros_like(value)
            if name in client.score:
                self.score[name][c] = client.score[name]


def train_cohort_vectorized(model, algorithm, hp, objective, stacked: dict, shared: dict, contexts: dict,
                            data: ClientData, index, weight, sgd: SGD, path: PathScore | None = None):
    """Train a stacked cohort in place; returns each client's mean data loss over its steps.

    With `path`, RWalk's path score of every client is accumulated there along the way."""
    step_fn = vmap(grad_and_value(objective, has_aux=True), in_dims=(0, 0, 0, 0, None, 0),
                   randomness="different")
    affine = closed_form_penalty(algorithm, hp, shared, contexts)
    by_hand = cohort_mlp.is_plain_mlp(model) and hasattr(algorithm, "penalty_affine")
    # Plain SGD: the whole step, a quadratic penalty's pull included, is applied inside the backward pass.
    fused = by_hand and path is None and not sgd.momentum and not sgd.weight_decay
    pull = fused and penalty_pull(affine, sgd.lr)
    buffers: dict = {}
    loss_sum = torch.zeros(index.shape[1], device=weight.device)
    steps_done = torch.zeros(index.shape[1], device=weight.device)
    for s in range(index.shape[0]):
        w = weight[s]
        active = w.sum(1) > 0
        if fused:
            step_pull = pull if pull is None or bool(active.all()) else masked_pull(pull, active, stacked)
            data_loss = cohort_mlp.cohort_sgd_step(model, stacked, data.inputs(index[s]), data.y[index[s]], w, sgd.lr,
                                                   step_pull)
        else:
            if by_hand:
                data_grads, data_loss = cohort_mlp.cohort_grads(model, stacked, data.inputs(index[s]),
                                                                data.y[index[s]], w)
            else:
                data_grads, (_, data_loss) = step_fn(stacked, data.inputs(index[s]), data.y[index[s]], w, shared,
                                                     contexts)
            grads = add_penalty_gradient(data_grads, affine, stacked)
            taken = sgd.step(stacked, grads, buffers, active, keep_steps=path is not None)
            if path is not None:
                path.update(data_grads, taken, active)
        loss_sum += data_loss.detach() * active
        steps_done += active
    return loss_sum / steps_done.clamp_min(1)


def penalty_pull(affine, lr: float):
    """The penalty's part of an SGD step, −lr·(scale·θ − offset), as (lr·scale, lr·offset) per name."""
    if affine is None:
        return None
    scale, offset = affine
    return {name: (lr * scale[name], lr * offset[name]) for name in scale}


def masked_pull(pull: dict, active: torch.Tensor, stacked: dict) -> dict:
    """The pull with clients that have no step left (finished, padding) not moved at all."""
    masked = {}
    for name, (scale, offset) in pull.items():
        mask = active.reshape(-1, *([1] * (stacked[name].dim() - 1))).to(stacked[name].dtype)
        masked[name] = (scale * mask, offset * mask)
    return masked


def train_cohort_sequential(model, algorithm, hp, objective, stacked: dict, shared: dict, contexts: dict,
                            data: ClientData, index, weight, sgd: SGD, path: PathScore | None = None):
    """The reference: the same objective and SGD step, one client at a time, no vmap."""
    step_fn = grad_and_value(objective, has_aux=True)
    losses = []
    for c in range(index.shape[1]):
        params = {name: value[c].clone() for name, value in stacked.items()}
        ctx = {name: slice_tree(value, c) for name, value in contexts.items()}
        client_path = PathScore(path.decay, path.epsilon) if path is not None else None
        affine = closed_form_penalty(algorithm, hp, shared, ctx)
        buffers: dict = {}
        loss_sum, steps_done = 0.0, 0
        for s in range(index.shape[0]):
            w = weight[s, c]
            if w.sum() == 0:
                continue
            data_grads, (_, data_loss) = step_fn(params, data.inputs(index[s, c]), data.y[index[s, c]], w, shared,
                                                 ctx)
            grads = add_penalty_gradient(data_grads, affine, params)
            taken = sgd.step(params, grads, buffers, torch.tensor(True), keep_steps=client_path is not None)
            if client_path is not None:
                client_path.update(data_grads, taken, torch.tensor(True))
            loss_sum += float(data_loss)
            steps_done += 1
        for name in stacked:
            stacked[name][c] = params[name]
        if client_path is not None:
            path.set_client(c, client_path, stacked)
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
        path = PathScore(hp["rwalk_decay"], hp["rwalk_epsilon"]) if algorithm.needs_path_score(hp) else None
        losses.append(train(model, algorithm, hp, objective, stacked, shared, contexts, data, index, weight, sgd,
                            path))
        for c, client in enumerate(members):
            params = {name: value[c].detach().clone() for name, value in stacked.items()}
            fisher = None
            if algorithm.upload_needs_fisher(hp):
                fisher = client_fisher(model, params, data, client, hp, seed, round_)
            score = {name: value[c] for name, value in path.score.items()} if path is not None else None
            uploads.append({"client": client,
                            **algorithm.client_upload(params, fisher, hp, shared=shared, path_score=score)})
    train_loss = torch.cat(losses)
    sizes = [len(data.clients[k]) for k in cohort]
    weights = [n / sum(sizes) for n in sizes]
    diverged = not bool(torch.isfinite(train_loss).all()) or not all(
        all_finite({k: up[k] for k in algorithm.sent_up(hp)}) for up in uploads)
    new_state = state if diverged else algorithm.aggregate(state, uploads, weights, hp)
    sent_down = len(cohort) * (tensor_bytes(state["params"]) + sum(tensor_bytes(state[k])
                                                                   for k in algorithm.sent_down(hp)))
    sent_up = sum(tensor_bytes({k: up[k] for k in algorithm.sent_up(hp)}) for up in uploads)
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
