"""The round engine: the vectorized cohort equals the one-client-at-a-time reference, chunking does not
change results, the SGD step is torch.optim.SGD's, and the small pieces (cohort sampling, batch order,
rounds to a target, divergence) do what they promise. Everything on tiny synthetic data."""

from __future__ import annotations

import math

import pytest
import torch

from pipeline import cohort_mlp, models
from pipeline.clientdata import ClientData, client_schedule, sample_cohort
from pipeline.cohort import cohort_chunk_size, mask_shapes
from pipeline.metrics import rounds_to_accuracy
from pipeline.rounds import initial_state, run_round
from pipeline.settings import MODEL_NORMS
from support import synthetic
from support.algorithms import fedavg, fedcurv, fedprox, importance
from support.oracles import local_batches
from support.synthetic import CLASSES, SHAPE

SIZES = [5, 9, 3, 11, 7, 6]  # unequal, and the batch size 4 below divides none of them


# ---------------------------------------------------------------- helpers


def make_data(sizes=SIZES, **options) -> ClientData:
    return synthetic.make_data(sizes, **options)


def make_model(hidden=(6,), seed=0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return models.mlp(SHAPE, CLASSES, list(hidden))


def settings(**overrides) -> dict:
    return synthetic.run_settings(4, **{"client_fraction": 0.5, "momentum": 0.9, "weight_decay": 1e-3, **overrides})


def run(algorithm, hp, rounds, data, run_settings, **kwargs):
    model = make_model()
    state = initial_state(model, algorithm, len(data.clients), hp)
    results = []
    for round_ in range(1, rounds + 1):
        result = run_round(model, algorithm, hp, state, data, run_settings, round_, **kwargs)
        assert not result.diverged
        results.append(result)
        state = result.state
    return state, results


def flat_tensors(tree, prefix=""):
    """name -> tensor for every tensor in a (nested) state."""
    if torch.is_tensor(tree):
        return {prefix: tree}
    if tree is None or isinstance(tree, (list, int)):
        return {}
    out = {}
    for key, value in tree.items():
        out.update(flat_tensors(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


ALGORITHMS = [
    (fedavg, {}),
    (fedprox, {"mu": 0.1}),
    (fedcurv, {**fedcurv.HYPERPARAMS, "lambda": 0.5}),
    (importance, {**importance.HYPERPARAMS, "lambda": 50.0}),
    (importance, {**importance.HYPERPARAMS, "lambda": 50.0, "importance": "rwalk"}),
]
IDS = ["fedavg", "fedprox", "fedcurv", "importance", "importance_rwalk"]


# ---------------------------------------------------------------- vectorized == sequential, chunking


@pytest.mark.parametrize("algorithm, hp", ALGORITHMS, ids=IDS)
def test_vectorized_and_sequential_paths_agree_after_two_rounds(algorithm, hp):
    data = make_data()
    run_settings = settings()
    vec_state, vec_results = run(algorithm, hp, 2, data, run_settings, vectorized=True)
    seq_state, seq_results = run(algorithm, hp, 2, data, run_settings, vectorized=False)

    # The cohorts really have unequal sizes that the batch size does not divide (padding, masking).
    for result in vec_results:
        assert len(result.cohort) == 3
        cohort_sizes = [SIZES[k] for k in result.cohort]
        assert len(set(cohort_sizes)) > 1
        assert any(size % run_settings.local.batch_size for size in cohort_sizes)
    assert [r.cohort for r in vec_results] == [r.cohort for r in seq_results]

    vec, seq = flat_tensors(vec_state), flat_tensors(seq_state)
    assert set(vec) == set(seq)
    for name in vec:
        torch.testing.assert_close(vec[name], seq[name], atol=1e-5, rtol=1e-5, msg=name)
    for v, s in zip(vec_results, seq_results):
        assert v.train_loss == pytest.approx(s.train_loss, rel=1e-5)
    # The run went somewhere (not a trivially equal pair of unchanged models).
    start = dict(make_model().named_parameters())
    assert any((vec_state["params"][n] - start[n]).abs().max() > 1e-3 for n in start)


@pytest.mark.parametrize("algorithm, hp", ALGORITHMS, ids=IDS)
def test_plain_sgd_paths_agree_with_the_reference(algorithm, hp, monkeypatch):
    """Without momentum, weight decay or a penalty term, the steps are applied inside the hand-written
    backward pass (cohort_mlp.cohort_sgd_step); otherwise the gradients are. Both must match the
    one-client-at-a-time vmap reference."""
    calls = []
    fused_step = cohort_mlp.cohort_sgd_step
    monkeypatch.setattr(cohort_mlp, "cohort_sgd_step", lambda *a, **k: calls.append(1) or fused_step(*a, **k))
    data = make_data()
    run_settings = settings(momentum=0.0, weight_decay=0.0)
    vec_state, _ = run(algorithm, hp, 2, data, run_settings, vectorized=True)
    seq_state, _ = run(algorithm, hp, 2, data, run_settings, vectorized=False)
    # Every algorithm here, its penalty folded into the step, except RWalk (its path score needs g).
    assert bool(calls) == (getattr(algorithm, "local_tracker", lambda hp: None)(hp) is None)
    vec, seq = flat_tensors(vec_state), flat_tensors(seq_state)
    for name in vec:
        torch.testing.assert_close(vec[name], seq[name], atol=1e-5, rtol=1e-5, msg=name)


def test_hand_written_mlp_gradients_equal_autograd_per_client():
    model = make_model(hidden=(5, 4))
    data = make_data([4, 4, 4])
    stacked = {n: torch.stack([p.detach() + 0.1 * k for k in range(3)]) for n, p in model.named_parameters()}
    index = torch.stack([c[:3] for c in data.clients])
    w = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])  # a partial and an empty client
    grads, loss = cohort_mlp.cohort_grads(model, stacked, data.inputs(index), data.y[index], w)
    for c in range(3):
        params = {n: v[c].clone().requires_grad_(True) for n, v in stacked.items()}
        logits = torch.func.functional_call(model, params, (data.inputs(index[c]),))
        ce = torch.nn.functional.cross_entropy(logits, data.y[index[c]], reduction="none")
        expected_loss = (ce * w[c]).sum() / w[c].sum().clamp_min(1)
        expected = torch.autograd.grad(expected_loss, list(params.values()))
        assert float(loss[c]) == pytest.approx(float(expected_loss.detach()), abs=1e-6)
        for (name, _), g in zip(params.items(), expected):
            torch.testing.assert_close(grads[name][c], g, atol=1e-6, rtol=1e-5, msg=f"{name}[{c}]")
    assert all(grads[n][2].abs().sum() == 0 for n in grads)  # no samples: no gradient at all


def every_model_and_norm():
    for name in models.MODELS:
        yield from ((name, norm) for norm in MODEL_NORMS.get(name, (None,)))


@pytest.mark.parametrize("name, norm", list(every_model_and_norm()))
@pytest.mark.parametrize("tce_mask", [False, True], ids=["ce", "tce"])
def test_the_sequential_step_gives_torch_funcs_gradients_for_every_model(name, norm, tce_mask):
    """The sequential path's step function (plain autograd) against torch.func.grad_and_value on the same
    objective: the same bits, BatchNorm's running statistics (updated in place by the forward pass), dropout
    masks (supplied as the engine does) and TCE's logit mask (classes the client does not hold at −inf)
    included; for GroupNorm, whose backward torch.func computes by another formula, within float32 rounding
    (the regeneration of 2026-11-27 moved GroupNorm to autograd: half the time a step)."""
    from pipeline.cohort import autograd_grad_and_value, make_objective, sequential_step_function

    shape = (28, 28, 1) if name in ("cnn_mnist", "cnn_fedavg", "cnn_fedavg_bn") else (32, 32, 3)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = models.build_model(name, shape, CLASSES, 0, norm)
        x = torch.randn(4, shape[2], shape[0], shape[1])
        y = torch.randint(0, CLASSES, (4,))
        w = torch.tensor([1.0, 1.0, 1.0, 0.0])
        masks = {key: (torch.rand(4, *features) > 0.5).float() * 2 for key, features in mask_shapes(model, x).items()}
    # TCE: the client holds classes 0 and 2 (and its samples' labels are among them)
    keep = torch.tensor([True, False, True] + [False] * (CLASSES - 3)) if tce_mask else None
    if tce_mask:
        y = torch.tensor([0, 2, 2, 0])
    objective = make_objective(model, fedprox, {"mu": 0.1}, record_correct=True)
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    buffers = {n: b.detach().clone() for n, b in model.named_buffers()}
    results = []
    for step in (torch.func.grad_and_value(objective, has_aux=True), sequential_step_function(objective)):
        own = {n: b.clone() for n, b in buffers.items()}
        grads, (total, (loss, correct)) = step(params, {**own, **masks}, x, y, w, keep, {}, {})
        results.append((grads, total, loss, correct, own))
    (g1, t1, l1, c1, b1), (g2, t2, l2, c2, b2) = results
    assert not (t2.requires_grad or l2.requires_grad)
    assert torch.equal(t1, t2) and torch.equal(l1, l2) and torch.equal(c1, c2)
    assert all(torch.equal(b1[n], b2[n]) for n in b1)
    if norm == "group":  # torch.func's GroupNorm backward: another formula, the same gradient to rounding
        for n in g1:
            torch.testing.assert_close(g2[n], g1[n], rtol=1e-4, atol=1e-6)
    else:
        assert all(torch.equal(g1[n], g2[n]) for n in g1)
    if norm == "group":  # plain autograd would not be exact here: the reason GroupNorm keeps torch.func
        g3, _ = autograd_grad_and_value(objective)(params, masks, x, y, w, keep, {}, {})
        assert all(torch.allclose(g1[n], g3[n], atol=1e-6, rtol=1e-4) for n in g1)


def test_the_autograd_step_gives_its_gradients_under_an_outer_no_grad():
    """torch.func's grad ignores the caller's grad mode; the autograd step it stands in for must too."""
    from pipeline.cohort import autograd_grad_and_value, make_objective

    model = models.build_model("mlp_200", (8, 8, 1), CLASSES, 0)
    objective = make_objective(model, fedprox, {"mu": 0.1})
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    x, y, w = torch.randn(3, 1, 8, 8), torch.tensor([0, 1, 2]), torch.ones(3)
    expected, _ = torch.func.grad_and_value(objective, has_aux=True)(params, {}, x, y, w, None, {}, {})
    with torch.no_grad():
        grads, _ = autograd_grad_and_value(objective)(params, {}, x, y, w, None, {}, {})
    assert all(torch.equal(grads[n], expected[n]) for n in expected)


@pytest.mark.parametrize("algorithm, hp", [ALGORITHMS[0], ALGORITHMS[2]], ids=["fedavg", "fedcurv"])
def test_chunking_the_cohort_does_not_change_the_parameters(algorithm, hp):
    data = make_data()
    run_settings = settings(client_fraction=1.0)
    whole_state, whole_results = run(algorithm, hp, 2, data, run_settings, max_chunk=None)
    assert cohort_chunk_size(whole_state["params"]) >= len(SIZES)  # None really trains one chunk
    ones_state, ones_results = run(algorithm, hp, 2, data, run_settings, max_chunk=1)
    whole, ones = flat_tensors(whole_state), flat_tensors(ones_state)
    for name in whole:
        torch.testing.assert_close(ones[name], whole[name], atol=1e-6, rtol=1e-6, msg=name)
    for a, b in zip(whole_results, ones_results):
        assert a.train_loss == pytest.approx(b.train_loss, rel=1e-6)
        assert (a.bytes_down, a.bytes_up) == (b.bytes_down, b.bytes_up)


# ---------------------------------------------------------------- rounds to accuracy


def test_rounds_to_accuracy_is_the_first_round_at_or_above_target():
    rounds = [1, 2, 5, 10, 20]
    assert rounds_to_accuracy(rounds, [0.1, 0.5, 0.7, 0.95, 0.6], 0.7) == 5  # exactly equal counts
    assert rounds_to_accuracy(rounds, [0.1, 0.5, 0.69, 0.95, 0.99], 0.7) == 10
    assert rounds_to_accuracy(rounds, [0.9, 0.1, 0.1, 0.1, 0.1], 0.5) == 1  # first, even if it falls back


def test_rounds_to_accuracy_never_reached_is_none():
    assert rounds_to_accuracy([1, 2, 3], [0.1, 0.2, 0.299], 0.3) is None
    assert rounds_to_accuracy([], [], 0.3) is None


def test_rounds_to_accuracy_skips_nan_and_missing_entries():
    assert rounds_to_accuracy([1, 2, 3, 4], [math.nan, None, 0.2, 0.8], 0.5) == 4
    assert rounds_to_accuracy([1, 2], [math.nan, math.nan], 0.0) is None


# ---------------------------------------------------------------- cohort sampling


def test_sample_cohort_is_deterministic_in_seed_and_round():
    assert sample_cohort(20, 0.3, seed=7, round_=3) == sample_cohort(20, 0.3, seed=7, round_=3)
    assert sample_cohort(20, 0.3, seed=7, round_=3) != sample_cohort(20, 0.3, seed=8, round_=3)


@pytest.mark.parametrize(
    "clients, fraction, count", [(10, 0.3, 3), (10, 0.34, 3), (10, 0.36, 4), (10, 0.01, 1), (100, 0.1, 10), (7, 0.5, 4)]
)
def test_sample_cohort_draws_max_1_round_c_k_distinct_clients(clients, fraction, count):
    cohort = sample_cohort(clients, fraction, seed=1, round_=1)
    assert len(cohort) == count
    assert len(set(cohort)) == count
    assert cohort == sorted(cohort)
    assert all(0 <= k < clients for k in cohort)


def test_sample_cohort_with_fraction_one_is_every_client():
    assert sample_cohort(9, 1.0, seed=3, round_=5) == list(range(9))


def test_sample_cohort_changes_between_rounds():
    cohorts = [tuple(sample_cohort(50, 0.1, seed=0, round_=r)) for r in range(1, 11)]
    assert len(set(cohorts)) == len(cohorts)


# ---------------------------------------------------------------- local batches


def test_local_batches_each_epoch_is_a_permutation_cut_into_batches():
    n, epochs, size = 11, 3, 4
    batches = local_batches(n, epochs, size, torch.Generator().manual_seed(0))
    per_epoch = math.ceil(n / size)
    assert len(batches) == epochs * per_epoch
    orders = []
    for e in range(epochs):
        epoch = batches[e * per_epoch : (e + 1) * per_epoch]
        assert [len(b) for b in epoch] == [4, 4, 3]  # the last one smaller
        order = torch.cat(epoch)
        assert sorted(order.tolist()) == list(range(n))  # every sample exactly once
        orders.append(order.tolist())
    assert len({tuple(o) for o in orders}) > 1  # reshuffled per epoch
    again = local_batches(n, epochs, size, torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(batches, again))


@pytest.mark.parametrize("n, epochs, size", [(11, 3, 4), (8, 2, 4), (3, 1, 10)])
def test_client_schedule_is_local_batches_padded(n, epochs, size):
    batches = local_batches(n, epochs, size, torch.Generator().manual_seed(3))
    schedule = client_schedule(n, epochs, size, torch.Generator().manual_seed(3))
    assert len(schedule) == len(batches)
    for row, batch in zip(schedule, batches):
        assert row[: len(batch)].tolist() == batch.tolist()
        assert (row[len(batch) :] == -1).all()


def test_cached_normalised_inputs_equal_per_batch_normalisation(monkeypatch):
    data = make_data()
    index = torch.tensor([[0, 5], [7, 2]])
    cached = data.inputs(index)
    assert data.normalised is not None
    uncached = make_data()
    monkeypatch.setattr("pipeline.clientdata.NORMALISED_CACHE_BYTES", 0)
    assert torch.equal(uncached.inputs(index), cached) and uncached.normalised is None


@pytest.mark.parametrize(
    "algorithm, hp, vectorized",
    [(*a, True) for a in ALGORITHMS] + [(*ALGORITHMS[0], False)],
    ids=[f"{i}-vectorized" for i in IDS] + ["fedavg-sequential"],
)
def test_a_diverging_round_is_reported_and_leaves_the_state_alone(algorithm, hp, vectorized):
    data = make_data()
    model = make_model()
    state = initial_state(model, algorithm, len(data.clients), hp)
    snapshot = {name: value.clone() for name, value in flat_tensors(state).items()}
    result = run_round(model, algorithm, hp, state, data, settings(lr=1e6, local_epochs=3), 1, vectorized=vectorized)
    assert result.diverged is True
    assert result.state is state
    for name, value in flat_tensors(result.state).items():
        assert torch.equal(value, snapshot[name]), name
    # A sane learning rate on the same problem does not diverge (the flag is not always on).
    assert not run_round(model, algorithm, hp, state, data, settings(), 1, vectorized=vectorized).diverged


@pytest.mark.parametrize(
    "layout", ["flat", "labels", "nchw", "channels_last_colour", "channels_last_one_channel", "a_slice"]
)
def test_gather_rows_is_advanced_indexing_in_values_and_layout(layout):
    """The batch gather must give table[index] exactly, strides included: a convolution chooses its
    kernel (and so its rounding) by the input's layout, and MNIST scaled from [N, H, W, 1] keeps
    channels-last strides that is_contiguous() does not show."""
    from pipeline.clientdata import gather_rows

    generator = torch.Generator().manual_seed(0)
    table = {
        "flat": lambda: torch.randn(50, 784, generator=generator),
        "labels": lambda: torch.randint(0, 10, (50,), generator=generator),
        "nchw": lambda: torch.randn(50, 3, 8, 8, generator=generator),
        "channels_last_colour": lambda: torch.randn(50, 8, 8, 3, generator=generator).movedim(-1, -3),
        "channels_last_one_channel": lambda: torch.randn(50, 8, 8, 1, generator=generator).movedim(-1, -3),
        "a_slice": lambda: torch.randn(60, 784, generator=generator)[5:55],
    }[layout]()
    for index in (
        torch.randint(0, 50, (10, 10), generator=generator),
        torch.randint(0, 50, (7,), generator=generator),
        torch.tensor(3),
    ):
        expected, got = table[index], gather_rows(table, index)
        assert torch.equal(got, expected) and got.shape == expected.shape
        assert got.stride() == expected.stride(), (index.shape, got.stride(), expected.stride())
