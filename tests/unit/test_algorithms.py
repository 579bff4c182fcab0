"""The federated algorithms' defining properties, on tiny synthetic data and hand-made uploads.

FedAvg's round against a hand computation, FedProx/FedCurv reducing to FedAvg at a zero coefficient,
FedCurv's u/v bookkeeping against the explicit pairwise penalty of the paper's eq. 3, the closed-form
penalty gradients against autograd, and the hyper-parameter checks' messages.
"""

from __future__ import annotations

import pytest
import torch

from pipeline import models
from pipeline.algorithms import check_algorithm, resolve_hyperparams
from pipeline.clientdata import ClientData
from pipeline.cohort import add_penalty_gradient
from pipeline.rounds import aggregate_round, run_round, server_state
from support.algorithms import fedavg, fedcurv, fedprox
from support.synthetic import CLASSES, SHAPE, make_data, run_settings

# ---------------------------------------------------------------- helpers


def settings(**overrides) -> dict:
    return run_settings(3, **{"lr": 0.1, "local_epochs": 1, **overrides})


def initial_params(model) -> dict:
    return {name: value.detach().clone() for name, value in model.named_parameters()}


def closed_form_gradient(algorithm, theta, shared, ctx, hp):
    """The penalty's gradient as the engine forms it: penalty_affine's scale·θ − offset."""
    zeros = {n: torch.zeros_like(v) for n, v in theta.items()}
    return add_penalty_gradient(zeros, algorithm.penalty_affine(shared, ctx, hp), theta)


def run_rounds(algorithm, hp, rounds, data, run_settings, model_seed=0, hidden=(6,)):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(model_seed)
        model = models.mlp(SHAPE, CLASSES, list(hidden))
    state = server_state(algorithm, initial_params(model), len(data.clients), hp)
    for round_ in range(1, rounds + 1):
        result = run_round(model, algorithm, hp, state, data, run_settings, round_)
        assert not result.diverged
        state = result.state
    return state


def random_tree(shapes: dict, generator, nonnegative=False) -> dict:
    tree = {name: torch.randn(shape, generator=generator, dtype=torch.float64) for name, shape in shapes.items()}
    return {name: value.abs() for name, value in tree.items()} if nonnegative else tree


SHAPES = {"0.weight": (3, 4), "0.bias": (3,), "2.weight": (2, 3)}


# ---------------------------------------------------------------- FedAvg by hand


def normalised_inputs_by_hand(data: ClientData, index: torch.Tensor) -> torch.Tensor:
    """The model input written out: [N,H,W,C] uint8 -> [N,C,H,W] in [0,1], minus the training set's
    per-channel mean, over its per-channel std (computed here from the raw pixels)."""
    pixels = data.x.reshape(-1, data.x.shape[-1]).double() / 255.0
    mean, std = pixels.mean(0), pixels.std(0)
    images = data.x[index].double().permute(0, 3, 1, 2) / 255.0
    return (images - mean.view(-1, 1, 1)) / std.view(-1, 1, 1)


def test_one_fedavg_round_equals_sample_weighted_average_of_hand_computed_full_batch_gd_steps():
    sizes = [3, 7, 12]
    data = make_data(sizes, seed=1)
    lr = 0.5
    torch.manual_seed(0)
    model = models.mlp(SHAPE, CLASSES, [])  # Flatten + one Linear: a linear softmax classifier
    assert [type(m) for m in model] == [torch.nn.Flatten, torch.nn.Linear]
    start = initial_params(model)
    state = server_state(fedavg, {k: v.clone() for k, v in start.items()}, len(sizes), {})
    result = run_round(model, fedavg, {}, state, data, settings(lr=lr, batch_size=max(sizes), local_epochs=1), 1)
    assert result.cohort == [0, 1, 2]

    # Each client: one full-batch gradient step on the mean cross-entropy, written out explicitly.
    new_params = []
    for k in range(len(sizes)):
        index = data.clients[k]
        x = normalised_inputs_by_hand(data, index).flatten(1)
        y = data.y[index]
        weight = start["1.weight"].double().clone().requires_grad_(True)
        bias = start["1.bias"].double().clone().requires_grad_(True)
        logits = x @ weight.T + bias
        log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
        loss = -log_prob[torch.arange(len(y)), y].sum() / len(y)
        g_weight, g_bias = torch.autograd.grad(loss, (weight, bias))
        new_params.append({"1.weight": (weight - lr * g_weight).detach(), "1.bias": (bias - lr * g_bias).detach()})
    total = sum(sizes)
    expected = {name: sum(sizes[k] / total * new_params[k][name] for k in range(len(sizes))) for name in start}
    uniform = {name: sum(new_params[k][name] for k in range(len(sizes))) / len(sizes) for name in start}

    for name in start:
        torch.testing.assert_close(result.state["params"][name].double(), expected[name], atol=1e-6, rtol=0)
    # The check above can tell a sample-weighted mean from a plain one, and a step from no step.
    assert (expected["1.weight"] - uniform["1.weight"]).abs().max() > 1e-3
    assert (expected["1.weight"] - start["1.weight"].double()).abs().max() > 1e-3


@pytest.mark.parametrize(
    "algorithm, hp, other_hp",
    [
        (fedprox, {"mu": 0.0}, {"mu": 1.0}),
        (fedcurv, {**fedcurv.HYPERPARAMS, "lambda": 0.0}, {**fedcurv.HYPERPARAMS, "lambda": 50.0}),
    ],
    ids=["fedprox_mu0", "fedcurv_lambda0"],
)
def test_zero_coefficient_gives_exactly_fedavg_after_two_rounds(algorithm, hp, other_hp):
    data = make_data([5, 9, 3, 6], seed=2)
    run_settings = settings(momentum=0.9, weight_decay=1e-3, client_fraction=0.5, local_epochs=2, batch_size=4)
    reference = run_rounds(fedavg, {}, 2, data, run_settings)
    zero = run_rounds(algorithm, hp, 2, data, run_settings)
    for name, value in reference["params"].items():
        assert torch.equal(zero["params"][name], value), name
    # ...whereas a non-zero coefficient does change the result (the comparison is not vacuous).
    nonzero = run_rounds(algorithm, other_hp, 2, data, run_settings)
    assert any(not torch.allclose(nonzero["params"][n], v, atol=1e-6) for n, v in reference["params"].items())


# ---------------------------------------------------------------- FedCurv's u, v against the pairwise form


def fedcurv_two_rounds(sums_over: str, lam: float = 0.7):
    """Clients 0, 1, 2 upload in round 1; clients 1 and 3 in round 2 (so 0 and 2 were absent from the
    last round, and 3 never uploaded before it). Returns the state and every client's latest upload."""
    g = torch.Generator().manual_seed(11)
    hp = {**fedcurv.HYPERPARAMS, "lambda": lam, "sums_over": sums_over}
    state = server_state(fedcurv, random_tree(SHAPES, g), 4, hp)
    latest, round_uploads = {}, []
    for cohort in ([0, 1, 2], [1, 3]):
        uploads = []
        for client in cohort:
            theta, fisher = random_tree(SHAPES, g), random_tree(SHAPES, g, nonnegative=True)
            uploads.append({"client": client, **fedcurv.upload_from(theta, fisher, hp)})
            latest[client] = (theta, fisher)
        weights = [1.0 / len(cohort)] * len(cohort)
        state, _ = aggregate_round(fedcurv, hp, state, uploads, weights, [{}] * len(uploads))
        round_uploads.append(uploads)
    return state, hp, latest, round_uploads


def covered(sums_over: str) -> list[int]:
    """The clients whose uploads the server sums hold after the two rounds above."""
    return [0, 1, 2, 3] if sums_over == "latest" else [1, 3]


def explicit_penalty(theta: dict, lam: float, terms) -> torch.Tensor:
    """λ Σ_j (θ − θ_j)ᵀ diag(F_j) (θ − θ_j), summed over the given (θ_j, F_j)."""
    total = torch.zeros((), dtype=torch.float64)
    for theta_j, fisher_j in terms:
        for name in theta:
            total = total + (fisher_j[name] * (theta[name] - theta_j[name]) ** 2).sum()
    return lam * total


@pytest.mark.parametrize("sums_over", ["latest", "participants"])
@pytest.mark.parametrize("client", [0, 1, 2, 3])
def test_fedcurv_penalty_equals_explicit_pairwise_sum_over_other_clients(sums_over, client):
    state, hp, latest, _ = fedcurv_two_rounds(sums_over)
    ctx = fedcurv.client_context(state, client, hp)
    theta = random_tree(SHAPES, torch.Generator().manual_seed(100 + client))
    others = [latest[j] for j in covered(sums_over) if j != client]
    expected = explicit_penalty(theta, hp["lambda"], others)
    value = fedcurv.penalty(theta, fedcurv.shared_context(state, hp), ctx, hp)
    torch.testing.assert_close(value, expected, rtol=1e-10, atol=1e-10)
    # Including the client's own term, or leaving out another's, gives a different number.
    with_self = explicit_penalty(theta, hp["lambda"], others + [latest[client]])
    assert abs(float(with_self - expected)) > 1e-3


def test_fedcurv_sums_over_modes_differ_for_a_client_absent_from_the_last_round():
    # Client 0 uploaded in round 1 only: `latest` still counts its round-1 peers 2 (and 1, 3 fresh),
    # `participants` only this round's cohort {1, 3}.
    theta = random_tree(SHAPES, torch.Generator().manual_seed(5))
    values = {}
    for mode in ("latest", "participants"):
        state, hp, latest, _ = fedcurv_two_rounds(mode)
        ctx = fedcurv.client_context(state, 0, hp)
        values[mode] = float(fedcurv.penalty(theta, {}, ctx, hp))
        expected = explicit_penalty(theta, hp["lambda"], [latest[j] for j in covered(mode) if j != 0])
        assert values[mode] == pytest.approx(float(expected), rel=1e-10)
    assert abs(values["latest"] - values["participants"]) > 1e-3


@pytest.mark.parametrize("sums_over", ["latest", "participants"])
@pytest.mark.parametrize("client", [0, 1, 3])
def test_fedcurv_penalty_affine_equals_autograd_of_penalty(sums_over, client):
    state, hp, _, _ = fedcurv_two_rounds(sums_over)
    ctx = fedcurv.client_context(state, client, hp)
    theta = {n: v.requires_grad_(True) for n, v in random_tree(SHAPES, torch.Generator().manual_seed(7)).items()}
    value = fedcurv.penalty(theta, {}, ctx, hp)
    auto = torch.autograd.grad(value, list(theta.values()))
    closed = closed_form_gradient(fedcurv, {n: v.detach() for n, v in theta.items()}, {}, ctx, hp)
    assert set(closed) == set(theta)
    for (name, _), g in zip(theta.items(), auto):
        torch.testing.assert_close(closed[name], g, rtol=1e-10, atol=1e-10)
        assert g.abs().max() > 1e-3


def test_fedprox_penalty_is_half_mu_squared_distance_and_its_grad_equals_autograd():
    g = torch.Generator().manual_seed(3)
    hp = {"mu": 0.3}
    state = server_state(fedprox, random_tree(SHAPES, g), 4, hp)
    shared = fedprox.shared_context(state, hp)
    theta = {n: v.requires_grad_(True) for n, v in random_tree(SHAPES, g).items()}
    value = fedprox.penalty(theta, shared, {}, hp)
    expected = 0.5 * hp["mu"] * sum(((theta[n] - state["params"][n]) ** 2).sum() for n in theta)
    torch.testing.assert_close(value, expected.detach(), rtol=1e-12, atol=0)
    auto = torch.autograd.grad(value, list(theta.values()))
    closed = closed_form_gradient(fedprox, {n: v.detach() for n, v in theta.items()}, shared, {}, hp)
    for (name, _), grad in zip(theta.items(), auto):
        torch.testing.assert_close(closed[name], grad, rtol=1e-12, atol=1e-12)
        assert grad.abs().max() > 1e-3


# ---------------------------------------------------------------- FedCurv's aggregate


@pytest.mark.parametrize("sums_over", ["latest", "participants"])
def test_fedcurv_aggregate_u_and_v_are_sums_of_fisher_and_fisher_times_params_over_the_right_clients(sums_over):
    state, _, latest, round_uploads = fedcurv_two_rounds(sums_over)
    clients = covered(sums_over)
    for name in SHAPES:
        u = sum(latest[j][1][name] for j in clients)
        v = sum(latest[j][1][name] * latest[j][0][name] for j in clients)
        torch.testing.assert_close(state["u"][name], u, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(state["v"][name], v, rtol=1e-12, atol=1e-12)
    w = sum((latest[j][1][n] * latest[j][0][n] ** 2).sum() for j in clients for n in SHAPES)
    torch.testing.assert_close(state["w_total"], w, rtol=1e-12, atol=1e-12)
    assert sorted(state["clients"]) == sorted(set(state["clients"]) | set(clients)) and state["summed"] == clients
    # The global model is the weighted mean of this round's cohort only, whatever the mode.
    last_round = round_uploads[-1]
    for name in SHAPES:
        mean = sum(up["params"][name] for up in last_round) / len(last_round)
        torch.testing.assert_close(state["params"][name], mean, rtol=1e-12, atol=1e-12)


def test_fedcurv_latest_sums_carried_over_30_rounds_of_random_cohorts_equal_a_fresh_float32_sum():
    """u, v and Σ F·θ² kept up to date round by round (the uploaders' new entries in, their old ones out)
    against the sums written out over every client's latest upload, in float32 as the engine runs."""
    g = torch.Generator().manual_seed(5)
    hp = {**fedcurv.HYPERPARAMS, "lambda": 0.3}
    state = server_state(fedcurv, random_tree(SHAPES, g), 10, hp)
    latest = {}
    for _ in range(30):
        cohort = torch.randperm(10, generator=g)[:3].tolist()
        uploads = []
        for client in cohort:
            theta = {n: t.float() for n, t in random_tree(SHAPES, g).items()}
            fisher = {n: t.float() for n, t in random_tree(SHAPES, g, nonnegative=True).items()}
            uploads.append({"client": client, **fedcurv.upload_from(theta, fisher, hp)})
            latest[client] = (theta, fisher)
        state, _ = aggregate_round(fedcurv, hp, state, uploads, [1 / 3] * 3, [{}] * 3)
    assert "previous_clients" not in state and state["summed"] == sorted(latest)
    for name in SHAPES:
        u = sum(latest[j][1][name].double() for j in latest)
        v = sum((latest[j][1][name] * latest[j][0][name]).double() for j in latest)
        torch.testing.assert_close(state["u"][name].double(), u, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(state["v"][name].double(), v, rtol=1e-5, atol=1e-5)
    w = sum((latest[j][1][n].double() * latest[j][0][n].double() ** 2).sum() for j in latest for n in SHAPES)
    assert float(state["w_total"]) == pytest.approx(float(w), rel=1e-5)


def test_fedcurv_carried_sums_keep_small_entries_when_a_dominant_one_is_replaced():
    """One client's Fisher 1.0 and 99 others' 1e-9, then the first client re-uploads 2e-9: a float32
    running total loses the 99 small entries for good (1.0 + 9.9e-8 rounds to 1.0; less the 1.0 it is
    0), the float64 carry keeps them. Against the sum written out in float64, within float32 rounding."""
    hp = {**fedcurv.HYPERPARAMS, "lambda": 1.0}
    shapes = {"w": (1,)}
    state = server_state(fedcurv, {"w": torch.zeros(1)}, 100, hp)

    def upload(client, fisher):
        return {"client": client, **fedcurv.upload_from({"w": torch.ones(1)}, {"w": torch.tensor([fisher])}, hp)}

    state, _ = aggregate_round(
        fedcurv, hp, state, [upload(0, 1.0)] + [upload(k, 1e-9) for k in range(1, 100)], [0.01] * 100, [{}] * 100
    )
    for round_ in range(3):  # client 0 alone, three times: the totals carried, round after round
        state, _ = aggregate_round(fedcurv, hp, state, [upload(0, 2e-9 * (round_ + 1))], [1.0], [{}])
        expected = 99 * 1e-9 + 2e-9 * (round_ + 1)
        assert state["u"]["w"].dtype == torch.float32
        assert float(state["u"]["w"]) == pytest.approx(expected, rel=1e-6)
        assert float(state["v"]["w"]) == pytest.approx(expected, rel=1e-6)
        assert float(state["w_total"]) == pytest.approx(expected, rel=1e-6)
    assert set(shapes) == set(state["u"])


def test_fedcurv_latest_sums_read_only_this_rounds_uploaders_entries():
    """O(cohort): the stored entries of clients absent from the round are never read (they are poisoned
    with NaN here, and the sums stay finite); the sums still cover them, through the carried totals."""
    state, hp, latest, _ = fedcurv_two_rounds("latest")
    g = torch.Generator().manual_seed(3)
    theta, fisher = random_tree(SHAPES, g), random_tree(SHAPES, g, nonnegative=True)
    upload = {"client": 2, **fedcurv.upload_from(theta, fisher, hp)}
    nan = {n: torch.full(shape, float("nan"), dtype=torch.float64) for n, shape in SHAPES.items()}
    poison = {"fisher": nan, "fisher_params": nan, "fisher_params2": torch.tensor(float("nan"))}
    state = {**state, "clients": {**state["clients"], 0: poison, 1: poison, 3: poison}}
    new, _ = aggregate_round(fedcurv, hp, state, [upload], [1.0], [{}])
    latest[2] = (theta, fisher)
    for name in SHAPES:
        torch.testing.assert_close(new["u"][name], sum(latest[j][1][name] for j in latest), rtol=1e-12, atol=1e-12)
    assert torch.isfinite(new["w_total"])


def test_fedcurv_aggregate_modes_differ_when_a_client_missed_the_round():
    latest_state = fedcurv_two_rounds("latest")[0]
    participants_state = fedcurv_two_rounds("participants")[0]
    assert not torch.allclose(latest_state["u"]["0.weight"], participants_state["u"]["0.weight"])


# ---------------------------------------------------------------- checks


PATH = "runs.r.algorithm"


def test_valid_algorithm_settings_have_no_problems():
    assert check_algorithm(PATH, {"name": "fedavg"}) == []
    assert check_algorithm(PATH, {"name": "fedprox", "mu": 0.0}) == []
    assert (
        check_algorithm(
            PATH,
            {
                "name": "fedcurv",
                "lambda": 0.0,
                "fisher_labels": "sampled",
                "sums_over": "participants",
                "fisher_samples": 10,
            },
        )
        == []
    )


def test_negative_lambda_is_reported_at_its_key_path():
    problems = check_algorithm(PATH, {"name": "fedcurv", "lambda": -0.5})
    assert len(problems) == 1
    assert problems[0].startswith(f"{PATH}.lambda: -0.5 is not allowed")
    assert ">= 0" in problems[0]
    # The module's own check says the same on resolved hyper-parameters.
    assert fedcurv.check(PATH, resolve_hyperparams({"name": "fedcurv", "lambda": -0.5})) == problems


def test_negative_mu_is_reported_at_its_key_path():
    problems = check_algorithm(PATH, {"name": "fedprox", "mu": -1})
    assert len(problems) == 1 and problems[0].startswith(f"{PATH}.mu: -1 is not allowed")


def test_unknown_fisher_labels_names_the_key_and_the_choices():
    problems = check_algorithm(PATH, {"name": "fedcurv", "fisher_labels": "empirical"})
    assert len(problems) == 1
    assert problems[0].startswith(f"{PATH}.fisher_labels: 'empirical' is not allowed")
    assert "true" in problems[0] and "sampled" in problems[0]


def test_unknown_sums_over_and_bad_fisher_samples_are_each_reported():
    problems = check_algorithm(PATH, {"name": "fedcurv", "sums_over": "all", "fisher_samples": 0})
    assert sorted(p.split(":")[0] for p in problems) == [f"{PATH}.fisher_samples", f"{PATH}.sums_over"]


def test_unknown_key_gets_did_you_mean_with_full_key_path():
    assert check_algorithm(PATH, {"name": "fedcurv", "lamda": 1.0}) == [
        f"{PATH}.lamda: unknown key; did you mean 'lambda'?"
    ]
    problems = check_algorithm(PATH, {"name": "fedavg", "mu": 0.1})
    assert len(problems) == 1 and problems[0].startswith(f"{PATH}.mu: unknown key")


def test_unknown_algorithm_name_gets_did_you_mean():
    assert check_algorithm(PATH, {"name": "fedprx"}) == [
        f"{PATH}.name: unknown algorithm 'fedprx'; did you mean 'fedprox'?"
    ]
    problems = check_algorithm(PATH, "fedavg")
    assert len(problems) == 1 and problems[0].startswith(f"{PATH}: ")


# ---------------------------------------------------------------- the fused step's affine form


@pytest.mark.parametrize(
    "name, hp",
    [
        ("fedprox", {"name": "fedprox", "mu": 0.3}),
        ("fedcurv", {"name": "fedcurv", "lambda": 0.7}),
        ("importance", {"name": "importance", "lambda": 5.0}),
        ("importance", {"name": "importance", "lambda": 5.0, "penalty": "l2"}),
    ],
    ids=["fedprox", "fedcurv", "importance_ewc", "importance_l2"],
)
def test_penalty_affine_is_the_autograd_gradient_of_the_penalty(name, hp):
    """The engine never differentiates these penalties: penalty_affine's scale·θ − offset must be it."""
    from pipeline.algorithms import get_algorithm

    algorithm, hp = get_algorithm(name), resolve_hyperparams(hp)
    g = torch.Generator().manual_seed(21)
    state = server_state(algorithm, random_tree(SHAPES, g), 3, hp)

    def upload(k):  # a client's upload from random parameters (and a random Fisher, where one is sent)
        params, fisher = random_tree(SHAPES, g), random_tree(SHAPES, g, True)
        if name == "fedprox":  # its upload is its parameters
            return {"client": k, "params": params}
        return {
            "client": k,
            **algorithm.module.upload_from(params, fisher, hp, shared=algorithm.shared_context(state, hp)),
        }

    uploads = [upload(k) for k in range(3)]
    state, _ = aggregate_round(
        algorithm, hp, state, uploads, [1 / 3] * 3, [{}] * len(uploads)
    )  # so every penalty term exists
    shared, ctx = algorithm.shared_context(state, hp), algorithm.client_context(state, 1, hp)
    theta = {n: v.requires_grad_(True) for n, v in random_tree(SHAPES, g).items()}
    expected = torch.autograd.grad(algorithm.penalty(theta, shared, ctx, hp), list(theta.values()))
    closed = closed_form_gradient(algorithm, {n: v.detach() for n, v in theta.items()}, shared, ctx, hp)
    assert set(closed) == set(SHAPES)
    for n, auto in zip(theta, expected):
        torch.testing.assert_close(closed[n], auto)
        assert auto.abs().max() > 1e-3
