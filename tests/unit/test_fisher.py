"""diagonal_fisher is the mean of per-sample squared gradients of the log-likelihood (EWC's diagonal
Fisher), on both of its code paths (the MLP shortcut and the vmap one), with true or sampled labels,
and is not the square of the mini-batch gradient."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pipeline import models
from pipeline.fisher import diagonal_fisher, is_layer_stack

CLASSES = 4


def build(name: str, shape, seed=0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if name == "mlp":
            model = models.mlp(shape, CLASSES, [7, 5])
        elif name == "tanh_cnn":
            model = torch.nn.Sequential(
                torch.nn.Conv2d(shape[2], 3, 3, padding=1),
                torch.nn.Tanh(),
                torch.nn.Flatten(),
                torch.nn.Linear(3 * shape[0] * shape[1], CLASSES),
            )
        else:
            model = models.MODELS[name](shape, CLASSES)
    # float64: in float32 a ReLU input within rounding of 0 can switch sides between the batched and the
    # one-sample forward pass, which changes that sample's gradient by far more than rounding.
    return model.double()


def batch(shape, n, seed=1):
    g = torch.Generator().manual_seed(seed)
    height, width, channels = shape
    x = torch.randn(n, channels, height, width, generator=g, dtype=torch.float64)
    y = torch.randint(0, CLASSES, (n,), generator=g)
    return x, y


def params_of(model) -> dict:
    return {name: value.detach().clone() for name, value in model.named_parameters()}


def loop_fisher(model, x, y) -> dict:
    """The definition, one sample at a time: backward of one sample's loss, square, average (eval mode)."""
    model.eval()
    total = {name: torch.zeros_like(p) for name, p in model.named_parameters()}
    for i in range(len(x)):
        model.zero_grad()
        F.cross_entropy(model(x[i : i + 1]), y[i : i + 1]).backward()
        for name, p in model.named_parameters():
            total[name] += p.grad.detach() ** 2
    model.train()
    return {name: value / len(x) for name, value in total.items()}


def assert_trees_close(actual: dict, expected: dict):
    assert set(actual) == set(expected)
    for name in expected:
        scale = float(expected[name].abs().max())
        assert scale > 0, name
        torch.testing.assert_close(actual[name], expected[name], rtol=1e-9, atol=1e-12 * scale, msg=name)


CASES = [("mlp", (4, 4, 1)), ("cnn_fedavg", (8, 8, 1)), ("cnn_mnist", (8, 8, 1)), ("tanh_cnn", (8, 8, 2))]


def test_the_cases_cover_both_code_paths():
    assert is_layer_stack(build("mlp", (4, 4, 1)))
    assert is_layer_stack(build("cnn_fedavg", (8, 8, 1)))
    assert is_layer_stack(build("cnn_mnist", (8, 8, 1)))
    assert not is_layer_stack(build("tanh_cnn", (8, 8, 2)))  # a layer the shortcut does not know: vmap


@pytest.mark.parametrize("name, shape", CASES)
@pytest.mark.parametrize("chunk", [256, 3])
def test_true_label_fisher_equals_per_sample_loop(name, shape, chunk):
    model = build(name, shape)
    x, y = batch(shape, 7)
    expected = loop_fisher(model, x, y)
    actual = diagonal_fisher(model, params_of(model), x, y, "true", chunk=chunk)
    assert_trees_close(actual, expected)
    assert model.training  # the mode the model came in with is restored


@pytest.mark.parametrize("name, shape", CASES)
def test_fisher_at_params_other_than_the_modules_own(name, shape):
    # The function must use the params it is given, not the module's registered ones.
    model, other = build(name, shape, seed=0), build(name, shape, seed=5)
    x, y = batch(shape, 6)
    actual = diagonal_fisher(model, params_of(other), x, y, "true")
    assert_trees_close(actual, loop_fisher(other, x, y))


def sample_labels_like_diagonal_fisher(model, x, generator) -> torch.Tensor:
    """y_i ~ p(· | x_i; θ) in eval mode: one multinomial draw over the whole batch."""
    model.eval()
    with torch.no_grad():
        probs = F.softmax(model(x), dim=1)
    model.train()
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


@pytest.mark.parametrize("name, shape", CASES)
def test_sampled_label_fisher_equals_loop_on_the_same_sampled_labels(name, shape):
    model = build(name, shape)
    x, y = batch(shape, 12)
    actual = diagonal_fisher(model, params_of(model), x, y, "sampled", torch.Generator().manual_seed(9))
    sampled = sample_labels_like_diagonal_fisher(model, x, torch.Generator().manual_seed(9))
    assert not torch.equal(sampled, y)  # so "sampled" differs from "true" below
    assert_trees_close(actual, loop_fisher(model, x, sampled))

    again = diagonal_fisher(model, params_of(model), x, y, "sampled", torch.Generator().manual_seed(9))
    for key in actual:
        assert torch.equal(again[key], actual[key])
    true = diagonal_fisher(model, params_of(model), x, y, "true")
    assert any(not torch.allclose(true[k], actual[k], rtol=1e-3, atol=0) for k in actual)


@pytest.mark.parametrize("name, shape", CASES)
def test_fisher_is_not_the_squared_minibatch_gradient(name, shape):
    model = build(name, shape)
    x, y = batch(shape, 16)
    fisher = diagonal_fisher(model, params_of(model), x, y, "true")
    model.eval()
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    squared_mean = {n: p.grad.detach() ** 2 for n, p in model.named_parameters()}
    model.train()
    total_fisher = sum(float(v.sum()) for v in fisher.values())
    total_squared_mean = sum(float(v.sum()) for v in squared_mean.values())
    # mean_i g_i² >= (mean_i g_i)² elementwise, and on 16 disagreeing samples by a wide margin.
    for n in fisher:
        assert (fisher[n] >= squared_mean[n] - 1e-12 * float(fisher[n].abs().max())).all(), n
    assert total_fisher > 2.0 * total_squared_mean


def test_batchnorm_model_fisher_uses_running_statistics_and_differentiates_parameters_only():
    """cnn_fedavg_bn: the running statistics passed in (moved away from their initial 0 and 1) enter the
    forward pass as in eval mode, whatever the module holds; only parameters get a Fisher. Against the
    per-sample loop on a module that holds those statistics."""
    shape = (8, 8, 1)
    model = build("cnn_fedavg_bn", shape)
    x, y = batch(shape, 7)
    model.train()
    with torch.no_grad():
        model(x * 3 + 1)  # running statistics now differ from the defaults
    buffers = {name: value.detach().clone() for name, value in model.named_buffers()}
    expected = loop_fisher(model, x, y)
    for module in model.modules():  # the module forgets them: only the `buffers` argument has them now
        if isinstance(module, torch.nn.BatchNorm2d):
            module.reset_running_stats()
    actual = diagonal_fisher(model, params_of(model), x, y, "true", buffers=buffers)
    assert_trees_close(actual, expected)
    without = diagonal_fisher(model, params_of(model), x, y, "true")  # the module's reset statistics
    assert any(not torch.allclose(without[name], expected[name]) for name in expected)


def test_fedcurv_round_on_a_batchnorm_model():
    """The upload's Fisher on a BatchNorm model (it used to differentiate the buffers and fail)."""
    from pipeline.rounds import initial_state, run_round
    from support import synthetic
    from support.algorithms import fedcurv

    data = synthetic.make_data([6, 9], shape=(8, 8, 1), classes=CLASSES)
    model = models.build_model("cnn_fedavg_bn", (8, 8, 1), CLASSES, 0)
    hp = {**fedcurv.HYPERPARAMS, "lambda": 1.0}
    state = initial_state(model, fedcurv, 2, hp)
    result = run_round(model, fedcurv, hp, state, data, synthetic.run_settings(0), 1, vectorized=False)
    assert not result.diverged
    fisher = result.state["clients"][0]["fisher"]
    assert set(fisher) == {name for name, _ in model.named_parameters()}
    assert all(bool(torch.isfinite(value).all()) for value in fisher.values())
    assert any(float(value.abs().max()) > 0 for value in fisher.values())
