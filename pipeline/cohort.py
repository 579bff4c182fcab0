"""Training a cohort of clients for one round: vectorized (stacked) and sequential (the reference).

A cohort is trained as one computation: the clients' parameters are stacked along a leading client
dimension and `vmap(grad(objective))` gives every client's gradient from one call; the client optimiser
(pipeline.optimizers) then steps all clients at once. `train_sequential` runs the same objective and
step one client at a time; it is the reference the vectorized path is tested against. For plain MLPs
the gradients come from hand-written batched layers instead (pipeline.cohort_mlp), and with plain SGD
the whole step is fused into their backward pass.

Nothing here knows an algorithm by name: an algorithm's penalty comes in as a function or a closed-form
affine gradient, and anything it must observe along the local trajectory (RWalk's path score) comes in
as a `tracker` with `update(data_grads, steps_taken, active, active_host)` (`active` on the device, None
for one client, which steps; `active_host` the same as the host knows it, from the schedule).

On a GPU nothing in a local step waits for the device: the schedule is kept on the host (`StepPlan`), so
every branch (which clients step, how many samples a batch holds) is taken there, and the random draws
(dropout masks, crop-and-flip offsets) are made on the device from its own keyed generators.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch.func import functional_call, grad_and_value, vmap

from pipeline import cohort_mlp
from pipeline.clientdata import (
    AUGMENT_STREAM,
    DROPOUT_STREAM,
    ClientData,
    crop_flip,
    crop_flip_draws,
    gather_rows,
    generator_for,
)
from pipeline.losses import per_sample_loss
from pipeline.models import batch_norm_presence, dropout_masks
from pipeline.optimizers import SGD

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
    """How many clients to stack at once by the mmap rule: a function of the model only. Results on a CPU
    do not depend on it (every random draw is keyed by client), only memory and speed do."""
    largest = max(value.numel() * value.element_size() for value in params.values())
    return max(1, CHUNK_BYTES // largest)


# On a GPU the mmap rule has no reason to hold: it stacks ResNet-18 two clients at a time. The device rule
# stacks as many as fit in a fixed share of the device's *total* memory, by an estimate of one client's
# working set: a fixed function of the model, the batch and the kind of device (not of its free memory),
# so that a rerun on the same kind of GPU stacks the same chunks and gives the same bits (a chunk changes
# the kernels' shapes, and with them float32 rounding). RuntimeOptions.chunk = "device" chooses it
# (FEDFORGET_CHUNK); the default stays the mmap rule until the device benchmark's `device_chunk` lever has
# measured it on a GPU.
DEVICE_MEMORY_SHARE = 0.5  # the rest: the dataset on the device, the global state, evaluation, fragmentation
STATE_COPIES = 4  # a client's parameters, gradients and up to two optimiser moments (Adam)
# Autograd keeps a leaf's input and output and vmap's batching adds temporaries: 4 copies of every leaf
# module's output bound the peak memory the H200 measured on the vectorized path for every workload that
# peaked above 1 GiB, where the chunk decides what fits (3 did not, for the BatchNorm ResNets;
# tests/test_chunking.py checks the bound). Below that, the peak is mostly not the chunk's (the cohort's
# uploads, the data): FedAvg's CNN at B = 10 peaked at 213 MiB against an estimate of 117.
SAVED_OUTPUT_COPIES = 4


# torch.compile of the training step. On an H200, FedAvg's CNN at B = 10 trained at 0.3-0.5 TFLOP/s, 15 ms
# a vectorized step of 100 small images: ~500 operator calls (about half of them torch.func's views and
# reshapes), so the step is bound by the host's dispatch, not the arithmetic. Compiling traces the step
# once into fused kernels; `cudagraphs` also replays them as one CUDA graph (torch's "reduce-overhead").
# A speed lever, off by default (RuntimeOptions.compile, FEDFORGET_COMPILE) until the device benchmark's
# `compile` levers have measured it on a GPU: fused kernels round float32 differently, so, like the chunk
# rule, it is recorded in timing.json and is not part of a stage's key.
COMPILE_MODES = {"off": None, "on": "default", "cudagraphs": "reduce-overhead"}


def compiled(step, mode: str = "off"):
    """`step` compiled by torch.compile in `mode` (RuntimeOptions.compile), or `step` itself. A round
    builds its step anew (the objective closes over the round's job), but torch.compile's cache belongs
    to the code, and its guards compare what the closure holds, so later rounds reuse the first round's
    compiled graphs (tests/test_compile.py counts them)."""
    torch_mode = COMPILE_MODES[mode]
    return step if torch_mode is None else torch.compile(step, mode=torch_mode)


@dataclass(frozen=True)
class Levers:
    """The runtime's speed levers as the engine takes them (pipeline.options.RuntimeOptions): how cohorts
    are chunked, whether the step is compiled, whether the optimiser steps as multi-tensor operations. On
    a CPU none of them changes a number; on a GPU they may move the last bits (recorded in timing.json)."""

    chunk: str = "mmap"
    compile: str = "off"
    foreach: bool = False


_ACTIVATION_BYTES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {image shape: bytes}


def activation_bytes_per_sample(model: torch.nn.Module, image_shape) -> int:
    """The bytes of every leaf module's output for one (H, W, C) sample, counted once per model and shape
    on a copy of the model on the meta device: no memory, no arithmetic, the same number on every machine.
    In eval mode, where BatchNorm takes one sample (the outputs' shapes are the training pass's)."""
    known = _ACTIVATION_BYTES.setdefault(model, {})
    if tuple(image_shape) not in known:
        known[tuple(image_shape)] = _count_activation_bytes(model, image_shape)
    return known[tuple(image_shape)]


def _count_activation_bytes(model: torch.nn.Module, image_shape) -> int:
    height, width, channels = image_shape
    meta = copy.deepcopy(model).to("meta")
    total = 0

    def count(module, args, output):
        nonlocal total
        total += sum(
            t.numel() * t.element_size()
            for t in (output if isinstance(output, tuple) else (output,))
            if isinstance(t, torch.Tensor)
        )

    hooks = [m.register_forward_hook(count) for m in meta.modules() if not list(m.children())]
    try:
        meta.eval()
        meta(torch.empty(1, channels, height, width, device="meta"))
    finally:
        for hook in hooks:
            hook.remove()
    return total


def client_working_bytes(params: dict, activation_per_sample: int, batch_size: int) -> int:
    """One stacked client's estimated working set in a training step: its copies of the state and the
    activations autograd saves for its batch."""
    state = sum(value.numel() * value.element_size() for value in params.values())
    return STATE_COPIES * state + SAVED_OUTPUT_COPIES * batch_size * activation_per_sample


def device_chunk_size(working_bytes: int, total_memory: int, share: float = DEVICE_MEMORY_SHARE) -> int:
    """Clients a chunk stacks by the device rule: as many working sets as fit in `share` of the memory."""
    return max(1, int(share * total_memory) // max(1, working_bytes))


def chunk_for_round(
    model: torch.nn.Module, params: dict, image_shape, batch_size: int, device: torch.device, rule: str = "mmap"
) -> int:
    """The round's chunk: the device rule where `rule` (RuntimeOptions.chunk) is "device" and the state is on
    a CUDA device, else the mmap rule."""
    if device.type != "cuda" or rule != "device":
        return cohort_chunk_size(params)
    total = torch.cuda.get_device_properties(device).total_memory
    working = client_working_bytes(params, activation_bytes_per_sample(model, image_shape), batch_size)
    return device_chunk_size(working, total)


def prefer_vectorized(model, device: torch.device, cohort_clients: int | None = None) -> bool:
    """vmap over a cohort of convolutions ran 2-3x slower than one client at a time on this 2-core CPU
    (cnn_mnist, 96 clients, E=1: 128-201 s vs 63-68 s a round), while for MLPs the vectorized path is
    the fast one. On a GPU (an H200, benchmarks/results/gpu/, three machines) the vectorized path won
    for the MLP (8-30x), the dropout CNN (1.2-1.6x), FedAvg's CNN at B = 10 (1.1-1.3x) and ResNet-18 with
    GroupNorm (1.2-1.7x), and lost for every BatchNorm model (ResNet-18 1.5-3x, the shallow ResNet
    1.3-1.9x, DenseNet-121 2x: the keyed BatchNorm's masked statistics cost more under vmap than
    the batching saves), so BatchNorm models keep the sequential path there. A cohort of one client (a
    centralised run) has nothing to batch, and torch.func's stacking and pytree handling still cost: 5
    epochs of FedWAvg's centralised MNIST MLP took 22.5 s vectorized and 14.5 s sequential, so it goes
    sequential."""
    if cohort_clients == 1:
        return False
    has_conv = any(isinstance(m, torch.nn.Conv2d) for m in model.modules())
    if device.type == "cpu":
        return not has_conv
    return not batch_norm_presence(model)


# ---------------------------------------------------------------- the schedule on the host


@dataclass(frozen=True)
class StepPlan:
    """The round's schedule as the host knows it (it is drawn on the CPU, pipeline.clientdata): per step,
    how many samples each client's batch holds, its first ones (0: the client takes no step). The
    training loops branch on this, never on values they would have to read back from a GPU, so that a
    step's work is queued without waiting for the device."""

    sizes: tuple[tuple[int, ...], ...]  # [steps][clients]

    @classmethod
    def from_weights(cls, weight: torch.Tensor) -> "StepPlan":
        """From a [steps, clients, batch] weight schedule on the CPU (0 = padding or a finished client)."""
        present = weight > 0
        sizes = present.sum(-1)
        if not torch.equal(present, torch.arange(present.shape[-1]) < sizes.unsqueeze(-1)):
            raise ValueError("a batch's samples must come first and its padding last, as cohort_schedule puts them")
        return cls(tuple(tuple(row) for row in sizes.tolist()))

    def stepping(self, s: int) -> tuple[bool, ...]:
        """Which clients take step s."""
        return tuple(size > 0 for size in self.sizes[s])

    def everyone(self, s: int) -> bool:
        return all(size > 0 for size in self.sizes[s])

    def steps_per_client(self) -> list[int]:
        return [sum(size > 0 for size in column) for column in zip(*self.sizes)] if self.sizes else []


# ---------------------------------------------------------------- dropout masks keyed by client


class DropoutDraws:
    """Each client's dropout masks, drawn step by step from its own (seed, round, client) generator: the
    same masks whichever path or chunk trains the client. The generator and the draws are on the model's
    device (on a GPU, a CPU draw copied over would cost a transfer and a wait at every step), so a GPU
    draws other masks than the CPU from the same keys, but the same ones on every path and chunking."""

    def __init__(self, model, members: list[int], seed: int, round_: int, batch_size: int, example_input):
        self.modules = dropout_masks(model)
        self.shapes = mask_shapes(model, example_input) if self.modules else {}
        self.device = example_input.device
        self.generators = (
            [generator_for(seed, round_, client, DROPOUT_STREAM, device=self.device) for client in members]
            if self.modules
            else []
        )
        self.batch_size = batch_size

    def one(self, c: int) -> dict:
        masks = {}
        for name, module in self.modules.items():
            keep = 1.0 - module.p
            mask = torch.empty((self.batch_size, *self.shapes[name]), device=self.device)
            masks[name] = mask.bernoulli_(keep, generator=self.generators[c]).div_(keep)
        return masks

    def stacked(self, stepping: Sequence[bool]) -> dict:
        """[clients, batch, ...] masks; clients with no step (`stepping`, on the host) draw nothing (zeros),
        as on the sequential path."""
        if not self.modules:
            return {}
        per_client = [self.one(c) if on else None for c, on in enumerate(stepping)]
        return {
            name: torch.stack(
                [
                    m[name] if m is not None else torch.zeros(self.batch_size, *self.shapes[name], device=self.device)
                    for m in per_client
                ]
            )
            for name in self.modules
        }


class AugmentDraws:
    """Each client's crop-and-flip augmentation (`augment: crop_flip`), drawn step by step from its own
    (seed, round, client) generator for a full batch, padding included, as the dropout masks are: the
    same images whichever path or chunk trains the client. Drawn on the data's device, as the dropout
    masks are. A run without augmentation has none (CohortJob.augment is None)."""

    def __init__(self, members: list[int], seed: int, round_: int, batch_size: int, fill: torch.Tensor):
        self.device = fill.device
        self.generators = [
            generator_for(seed, round_, client, AUGMENT_STREAM, device=self.device) for client in members
        ]
        self.batch_size, self.fill = batch_size, fill

    def draws(self, c: int) -> torch.Tensor:
        return crop_flip_draws(self.batch_size, self.generators[c], device=self.device)

    def one(self, c: int, x: torch.Tensor, count: int | None = None) -> torch.Tensor:
        """Client c's batch x [b, C, H, W]: its first `count` samples of a full batch (all when None)."""
        draws = self.draws(c)
        return crop_flip(x, draws if count is None else draws[:count], self.fill)

    def stacked(self, x: torch.Tensor, stepping: Sequence[bool]) -> torch.Tensor:
        """The cohort's batches x [clients, batch, C, H, W]; clients with no step (`stepping`) draw nothing."""
        draws = torch.zeros(x.shape[0], self.batch_size, 3, dtype=torch.long, device=self.device)
        for c, on in enumerate(stepping):
            if on:
                draws[c] = self.draws(c)
        return crop_flip(x.flatten(0, 1), draws.flatten(0, 1), self.fill).view(x.shape)


def mask_shapes(model, example_input: torch.Tensor) -> dict:
    """The feature shape reaching each dropout, from one forward pass of one example."""
    shapes, hooks = {}, []  # type: ignore[var-annotated]
    for name, module in dropout_masks(model).items():
        hooks.append(
            module.register_forward_hook(
                lambda mod, args, out, name=name: shapes.__setitem__(name, tuple(args[0].shape[1:]))
            )
        )
    was_training = model.training
    try:
        with torch.no_grad():
            model.eval()
            model(example_input[:1])
    finally:
        model.train(was_training)
        for hook in hooks:
            hook.remove()
    return shapes


# ---------------------------------------------------------------- the local objective


def make_objective(model, algorithm, hp, record_correct: bool = True):
    """objective(params, extra, x, y, w, keep, shared, ctx) -> (total, (data_loss, correct)) for one
    client and one batch; `extra` holds buffers and dropout masks, `keep` the loss's logit mask (or None),
    `extra` also holds the parameters `freeze` holds fixed (no gradient, no step). `correct` says which
    samples this forward pass (before the step) classified right, over all classes:
    the presentations that example-forgetting events are counted from (all False unless
    `record_correct`: the argmax is not paid for when no run records it).

    When the algorithm gives its penalty's gradient in closed form (`penalty_affine`), the objective is
    the data loss alone and `add_penalty_gradient` adds that gradient outside vmap: the same numbers,
    without differentiating a parameter-sized quadratic through vmap at every step."""
    closed_form = algorithm.penalty_affine is not None

    def objective(params, extra, x, y, w, keep, shared, ctx):
        logits = functional_call(model, {**params, **extra}, (x,))
        # Padding (w = 0) may carry a label the client's TCE mask drops (loss +inf): select, never multiply.
        per_sample = torch.where(w > 0, per_sample_loss(logits, y, keep), 0.0)
        count = w.sum()
        data_loss = (per_sample * w).sum() / count.clamp_min(1.0)
        total = data_loss if closed_form else data_loss + algorithm.penalty(params, shared, ctx, hp)
        # A client with no samples in this step (finished or padding) contributes nothing at all.
        correct = logits.detach().argmax(-1) == y if record_correct else torch.zeros_like(y, dtype=torch.bool)
        return total * (count > 0), (data_loss, correct)

    return objective


def closed_form_penalty(algorithm, hp, shared: dict, ctx: dict):
    """The penalty's gradient as (scale, offset), scale·θ − offset, fixed for a whole round; None when
    there is no term (or the algorithm gives no closed form and vmap differentiates its penalty)."""
    if algorithm.penalty_affine is None:
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
        masked[name] = (scale if cohort_mlp.is_zero_scale(scale) else scale * mask, offset * mask)
    return masked


# ---------------------------------------------------------------- one cohort chunk


@dataclass
class CohortJob:
    """Everything one chunk of a round's cohort trains with."""

    model: torch.nn.Module
    algorithm: object
    hp: dict
    data: ClientData
    optimizer: object
    shared: dict
    contexts: dict  # stacked over the chunk's clients
    index: torch.Tensor  # [steps, clients, batch] sample indices
    weight: torch.Tensor  # [steps, clients, batch], 0 = padding or a finished client
    keep: torch.Tensor | None  # [clients, classes] logit mask of the loss, None = all classes
    dropout: DropoutDraws
    augment: AugmentDraws | None = None  # None: no augmentation
    tracker_factory: object = None  # () -> tracker, or None
    record_correct: bool = False  # keep each presentation's correctness (example-forgetting events)
    fixed: dict = field(default_factory=dict)  # stacked parameters held fixed (`freeze`): inputs, not trained
    objective: object = field(default=None)
    plan: StepPlan | None = None  # `weight` as the host knows it; None: read from `weight` once
    compile: str = "off"  # torch.compile of the step (RuntimeOptions.compile)

    def __post_init__(self):
        if self.objective is None:
            self.objective = make_objective(self.model, self.algorithm, self.hp, self.record_correct)
        if self.plan is None and self.weight is not None:
            self.plan = StepPlan.from_weights(self.weight.cpu())


@dataclass
class CohortOutcome:
    losses: torch.Tensor  # each client's mean data loss over its steps
    steps: torch.Tensor  # each client's number of local steps
    tracker: object = None  # the tracker holding every client's observations (or None)
    correct: torch.Tensor | None = None  # [steps, clients, batch]: right at that presentation (record_correct)


def by_hand_applies(job: CohortJob) -> bool:
    """The hand-written batched MLP layers give the gradients (pipeline.cohort_mlp); they do not report
    each presentation's correctness, so a run that records it takes vmap."""
    return (
        cohort_mlp.is_plain_mlp(job.model)
        and job.algorithm.penalty_affine is not None  # type: ignore[attr-defined]
        and not job.record_correct
        and not job.fixed
    )


def fused_sgd_applies(job: CohortJob, affine) -> bool:
    """Plain SGD on a plain MLP with a closed-form penalty (`affine`, from closed_form_penalty) and no
    tracker, or one that can read what it observes off the displacement (`displacement_tracker_applies`):
    the whole step, the penalty's pull included, runs inside the hand-written backward pass."""
    opt = job.optimizer
    return (
        by_hand_applies(job)
        and isinstance(opt, SGD)
        and not opt.momentum
        and not opt.weight_decay
        and (job.tracker_factory is None or displacement_tracker_applies(job, affine))
    )


def displacement_tracker_applies(job: CohortJob, affine) -> bool:
    """A tracker that only sums the data gradients (SCAFFOLD's `GradientMean`) needs no look at each step
    under plain SGD when the penalty's gradient is a constant (scale 0: θ_K = θ_0 − lr·Σ_k g_k + K·lr·offset),
    so the sum is read off the displacement afterwards (`from_sgd_displacement`)."""
    if not hasattr(job.tracker_factory, "from_sgd_displacement"):
        return False
    return affine is None or all(cohort_mlp.is_zero_scale(scale) for scale in affine[0].values())


def train_vectorized(job: CohortJob, stacked: dict, buffers: dict) -> CohortOutcome:
    """Train a stacked cohort in place (every client at once). BatchNorm buffers (stacked per client) are
    updated in place under vmap by each client's forward passes, whose statistics are told which of
    the padded batch's samples are the client's (`present`, models.KeyedBatchNorm2d)."""
    data, index, weight = job.data, job.index, job.weight
    presence = batch_norm_presence(job.model)
    keep_dim = None if job.keep is None else 0
    step_fn = compiled(
        vmap(
            grad_and_value(job.objective, has_aux=True),  # type: ignore[arg-type]
            in_dims=(0, 0, 0, 0, 0, keep_dim, None, 0),
        ),
        job.compile,
    )
    affine = closed_form_penalty(job.algorithm, job.hp, job.shared, job.contexts)
    by_hand = by_hand_applies(job)
    fused = fused_sgd_applies(job, affine)
    pull = fused and penalty_pull(affine, job.optimizer.lr)  # type: ignore[attr-defined]
    from_displacement = fused and job.tracker_factory is not None
    start = {name: value.clone() for name, value in stacked.items()} if from_displacement else None
    tracker = job.tracker_factory() if job.tracker_factory and not from_displacement else None  # type: ignore[operator]
    opt_state: dict = {}
    loss_sum = torch.zeros(index.shape[1], device=weight.device)
    steps_done = torch.zeros(index.shape[1], device=weight.device)
    correct = torch.zeros(index.shape, dtype=torch.bool, device=weight.device) if job.record_correct else None
    shares = cohort_mlp.sample_shares(weight) if by_hand else None  # the whole schedule's at once
    for s in range(index.shape[0]):
        w = weight[s]
        active = w.sum(1) > 0
        stepping, everyone = job.plan.stepping(s), job.plan.everyone(s)  # type: ignore[union-attr]  # `active` on the host
        x, y = data.inputs(index[s]), gather_rows(data.y, index[s])
        if job.augment is not None:
            x = job.augment.stacked(x, stepping)
        if fused:
            step_pull = pull if pull is None or everyone else masked_pull(pull, active, stacked)  # type: ignore[arg-type]
            data_loss = cohort_mlp.cohort_sgd_step(
                job.model,
                stacked,
                x,
                y,
                w,
                job.optimizer.lr,  # type: ignore[attr-defined]
                step_pull,  # type: ignore[arg-type]
                job.keep,
                shares[s],  # type: ignore[index]
            )
        else:
            if by_hand:
                data_grads, data_loss = cohort_mlp.cohort_grads(job.model, stacked, x, y, w, job.keep, shares[s])  # type: ignore[index]
            else:
                present = {name: (w > 0).to(w.dtype) for name in presence}
                masks = {**job.dropout.stacked(stepping), **job.fixed, **buffers, **present}
                data_grads, (_, (data_loss, right)) = step_fn(
                    stacked, masks, x, y, w, job.keep, job.shared, job.contexts
                )
                if correct is not None:
                    correct[s] = right & (w > 0)
            grads = add_penalty_gradient(data_grads, affine, stacked)
            taken = job.optimizer.step(  # type: ignore[attr-defined]
                stacked,
                grads,
                opt_state,
                active,
                keep_steps=tracker is not None,
                everyone=everyone,
            )
            if tracker is not None:
                tracker.update(data_grads, taken, active, stepping)
        loss_sum += data_loss.detach() * active
        steps_done += active
    if from_displacement:
        offset = {name: 0.0 for name in stacked} if affine is None else affine[1]
        tracker = job.tracker_factory.from_sgd_displacement(  # type: ignore[attr-defined]
            start,
            stacked,
            steps_done.long(),
            job.optimizer.lr,  # type: ignore[attr-defined]
            offset,
            job.plan.steps_per_client(),  # type: ignore[union-attr]
        )
    return CohortOutcome(loss_sum / steps_done.clamp_min(1), steps_done.long(), tracker, correct)


def sequential_step_function(objective, compile_mode: str = "off"):
    """One client's (gradients, (total, aux)) of the objective, by plain autograd.

    The sequential path has nothing to vmap, and torch.func's grad transform wraps every tensor of the
    forward and backward pass: one step of 64 CIFAR images on `cnn_small` with BatchNorm took 8.0 ms
    through it against 6.0 ms by autograd, with GroupNorm 9.3 against 4.7 ms, an MLP step of 10 samples
    1.11 against 0.60 (2-core AMD EPYC). Autograd gives torch.func's numbers bit for bit for every model
    but the GroupNorm ones, whose backward torch.func computes by another formula (gradients differ by
    ~1e-8 in ~1e-2); tests/test_engine.py checks both. Compiled (RuntimeOptions.compile), it is
    torch.func's transform: torch.autograd.grad would break the compiled graph."""
    if compile_mode != "off":
        return compiled(grad_and_value(objective, has_aux=True), compile_mode)
    return autograd_grad_and_value(objective)


def autograd_grad_and_value(objective):
    """`torch.func.grad_and_value(objective, has_aux=True)` for one client, by plain autograd."""

    def step(params: dict, *rest):
        with torch.enable_grad():  # as torch.func's grad, whatever the caller's grad mode
            leaves = {name: value.detach().requires_grad_(True) for name, value in params.items()}
            total, (data_loss, correct) = objective(leaves, *rest)
            grads = torch.autograd.grad(total, list(leaves.values()), allow_unused=True)
        grads = {name: torch.zeros_like(leaves[name]) if g is None else g for name, g in zip(leaves, grads)}  # type: ignore[assignment]
        return grads, (total.detach(), (data_loss.detach(), correct))

    return step


def train_sequential(job: CohortJob, stacked: dict, buffers: dict) -> CohortOutcome:
    """The reference: the same objective and optimiser, one client at a time, no vmap. BatchNorm
    buffers (stacked per client) are updated in place by each client's forward passes.

    Nothing in a step reads a value back from the device: which steps a client takes and how many
    samples each holds come from the host's plan, and the losses are summed on the device (in float64,
    as the Python floats they once were, so the numbers are the same)."""
    step_fn = sequential_step_function(job.objective, job.compile)
    index, weight = job.index, job.weight
    batch = index.shape[2]
    tracker = job.tracker_factory() if job.tracker_factory else None  # type: ignore[operator]
    losses, steps = [], []
    correct = torch.zeros(index.shape, dtype=torch.bool, device=weight.device) if job.record_correct else None
    for c in range(index.shape[1]):
        params = {name: value[c].clone() for name, value in stacked.items()}
        own_buffers = {name: value[c].clone() for name, value in buffers.items()}
        fixed = slice_tree(job.fixed, c)
        ctx = slice_tree(job.contexts, c)
        keep = None if job.keep is None else job.keep[c]
        own_tracker = job.tracker_factory() if job.tracker_factory else None  # type: ignore[operator]
        affine = closed_form_penalty(job.algorithm, job.hp, job.shared, ctx)
        opt_state: dict = {}
        loss_sum, steps_done = torch.zeros((), dtype=torch.float64, device=weight.device), 0
        for s in range(index.shape[0]):
            count = job.plan.sizes[s][c]  # type: ignore[union-attr]
            if count == 0:
                continue
            samples, w, masks = index[s, c], weight[s, c], job.dropout.one(c)
            if count < batch:  # a short last batch: padding must not enter BatchNorm's batch statistics
                samples, w, masks = samples[:count], w[:count], {k: m[:count] for k, m in masks.items()}
            x = job.data.inputs(samples)
            if job.augment is not None:
                x = job.augment.one(c, x, count)
            data_grads, (_, (data_loss, right)) = step_fn(
                params, {**own_buffers, **masks, **fixed}, x, job.data.y[samples], w, keep, job.shared, ctx
            )
            if correct is not None:
                correct[s, c, :count] = right
            grads = add_penalty_gradient(data_grads, affine, params)
            taken = job.optimizer.step(params, grads, opt_state, None, keep_steps=own_tracker is not None)  # type: ignore[attr-defined]
            if own_tracker is not None:
                own_tracker.update(data_grads, taken, None)
            loss_sum += data_loss.detach().to(torch.float64)
            steps_done += 1
        for name in stacked:
            stacked[name][c] = params[name]
        for name in buffers:
            buffers[name][c] = own_buffers[name]
        if tracker is not None:
            tracker.set_client(c, own_tracker, stacked)
        losses.append(loss_sum / max(steps_done, 1))
        steps.append(steps_done)
    # rounded as torch.tensor rounded the Python floats they were
    return CohortOutcome(torch.stack(losses).to(torch.get_default_dtype()), torch.tensor(steps), tracker, correct)


def slice_tree(value, c):
    if isinstance(value, dict):
        return {k: slice_tree(v, c) for k, v in value.items()}
    return value[c]


def stack_trees(trees: list):
    if isinstance(trees[0], dict):
        return {k: stack_trees([t[k] for t in trees]) for k in trees[0]}
    return torch.stack([torch.as_tensor(t) for t in trees])


def repeat_for(tree: dict, count: int) -> dict:
    """Each tensor repeated along a new leading client dimension."""
    return {name: value.detach().unsqueeze(0).repeat(count, *([1] * value.dim())) for name, value in tree.items()}
