"""Importance From Agent: the aggregation of eq. 2, the EWC term of eq. 3, the smoothing of eq. 4,
the ablation settings, and RWalk's path score on a quadratic computed by hand."""

from __future__ import annotations

import pytest
import torch

from pipeline import models
from pipeline.algorithms import check_algorithm
from pipeline.cohort import add_penalty_gradient
from pipeline.optimizers import SGD
from pipeline.path_score import PathScore
from pipeline.rounds import run_round, server_state
from support.algorithms import fedavg, fedprox, importance
from support.synthetic import CLASSES, SHAPE, make_data, run_settings

SHAPES = {"0.weight": (3, 4), "0.bias": (3,), "2.weight": (2, 3)}


def hp(**overrides) -> dict:
    return {**importance.HYPERPARAMS, **overrides}


def random_tree(generator, nonnegative=False, zero_fraction=0.0) -> dict:
    tree = {}
    for name, shape in SHAPES.items():
        value = torch.randn(shape, generator=generator, dtype=torch.float64)
        if nonnegative:
            value = value.abs() * (torch.rand(shape, generator=generator, dtype=torch.float64) >= zero_fraction)
        tree[name] = value
    return tree


def settings(**overrides) -> dict:
    return run_settings(5, **overrides)


def run_rounds(algorithm, algorithm_hp, rounds, data, run_settings):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = models.mlp(SHAPE, CLASSES, [6])
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    state = server_state(algorithm, start, len(data.clients), algorithm_hp)
    for round_ in range(1, rounds + 1):
        result = run_round(model, algorithm, algorithm_hp, state, data, run_settings, round_)
        assert not result.diverged
        state = result.state
    return state


# ---------------------------------------------------------------- eq. 2: the importance-weighted average


def test_normalised_importance_sums_to_one_across_clients_for_every_element():
    g = torch.Generator().manual_seed(1)
    fishers = [random_tree(g, nonnegative=True, zero_fraction=0.3) for _ in range(4)]
    fishers[2]["0.bias"] = torch.zeros(3, dtype=torch.float64)  # a client with no importance in a layer
    for name in SHAPES:  # and an element no client finds important
        for f in fishers:
            f[name].view(-1)[0] = 0.0
    weights = importance.importance_weights(fishers, [0.1, 0.2, 0.3, 0.4])
    for name in SHAPES:
        total = sum(w[name] for w in weights)
        torch.testing.assert_close(total, torch.ones_like(total), atol=1e-12, rtol=0)
        assert all((w[name] >= 0).all() for w in weights)
        # The element nobody finds important falls back to the sample-size weights.
        assert [float(w[name].view(-1)[0]) for w in weights] == pytest.approx([0.1, 0.2, 0.3, 0.4])


def test_normalisation_is_per_layer_within_a_client_then_per_element_across_clients():
    a = {"w": torch.tensor([1.0, 3.0]), "b": torch.tensor([2.0])}
    b = {"w": torch.tensor([10.0, 10.0]), "b": torch.tensor([6.0])}
    weights = importance.importance_weights([a, b], [0.5, 0.5])
    # Within a client: a.w -> [1/4, 3/4], b.w -> [1/2, 1/2]; across clients, element by element:
    torch.testing.assert_close(weights[0]["w"], torch.tensor([0.25 / 0.75, 0.75 / 1.25]))
    torch.testing.assert_close(weights[1]["w"], torch.tensor([0.5 / 0.75, 0.5 / 1.25]))
    torch.testing.assert_close(weights[0]["b"], torch.tensor([0.5]))  # each client's only bias counts 1


def test_a_clients_overall_fisher_scale_does_not_change_the_weights():
    g = torch.Generator().manual_seed(2)
    fishers = [random_tree(g, nonnegative=True) for _ in range(3)]
    scaled = [fishers[0], {n: 1000.0 * v for n, v in fishers[1].items()}, fishers[2]]
    for w, w_scaled in zip(
        importance.importance_weights(fishers, [1 / 3] * 3), importance.importance_weights(scaled, [1 / 3] * 3)
    ):
        for name in SHAPES:
            torch.testing.assert_close(w[name], w_scaled[name])


def test_the_weight_spread_of_a_hand_worked_case():
    """Two clients of sample-size weights 1/4 and 3/4; element weights (1/4, 3/4) on the first element
    (FedAvg's exactly) and (1/2, 1/2) on the second: relative deviations 0, 0 and 1, 1/3, so a mean of
    1/3 and half the (client, element) pairs moved by more than 10 %."""
    element_weights = [{"w": torch.tensor([0.25, 0.5])}, {"w": torch.tensor([0.75, 0.5])}]
    spread = importance.weight_spread(element_weights, [0.25, 0.75])
    assert float(spread["importance_weight_deviation"]) == pytest.approx((0 + 1 + 0 + 1 / 3) / 4)
    assert float(spread["importance_weight_moved_share"]) == pytest.approx(0.5)


def test_the_importance_aggregation_logs_its_spread_and_sample_weighting_logs_none():
    g = torch.Generator().manual_seed(4)
    fishers = [random_tree(g, nonnegative=True) for _ in range(3)]
    uploads = uploads_for(fishers, g)
    hp = {"name": "importance", "lambda": 0.0, "penalty": "none", "gamma": 0.9}
    weighted = importance.aggregate({"params": {}}, uploads, [0.2, 0.3, 0.5], {**hp, "aggregation": "importance"})
    assert set(weighted["round_log"]) == {"importance_weight_deviation", "importance_weight_moved_share"}
    plain = importance.aggregate({"params": {}}, uploads, [0.2, 0.3, 0.5], {**hp, "aggregation": "samples"})
    assert "round_log" not in plain


def uploads_for(fishers, g):
    return [{"client": k, "params": random_tree(g), "fisher": f} for k, f in enumerate(fishers)]


def test_with_uniform_importance_the_aggregation_equals_fedavg():
    g = torch.Generator().manual_seed(3)
    uniform = {name: torch.full(shape, 0.7, dtype=torch.float64) for name, shape in SHAPES.items()}
    uploads = uploads_for([uniform, uniform, uniform], g)
    weights = [1 / 3] * 3  # equal client sizes, as in the paper's shards
    ours = importance.aggregate({"params": None, "fisher": None}, uploads, weights, hp())
    reference = fedavg.aggregate({"params": None}, uploads, weights, {})
    for name in SHAPES:
        torch.testing.assert_close(ours["params"][name], reference["params"][name])


def test_with_no_importance_anywhere_the_aggregation_falls_back_to_fedavgs_sample_weights():
    g = torch.Generator().manual_seed(4)
    zero = {name: torch.zeros(shape, dtype=torch.float64) for name, shape in SHAPES.items()}
    uploads = uploads_for([zero, zero, zero], g)
    weights = [0.5, 0.3, 0.2]
    ours = importance.aggregate({"params": None, "fisher": None}, uploads, weights, hp())
    reference = fedavg.aggregate({"params": None}, uploads, weights, {})
    for name in SHAPES:
        torch.testing.assert_close(ours["params"][name], reference["params"][name])


def test_an_element_only_one_client_finds_important_takes_that_clients_value():
    g = torch.Generator().manual_seed(5)
    fishers = [random_tree(g, nonnegative=True) for _ in range(3)]
    for f in fishers[1:]:
        f["0.weight"][1, 2] = 0.0
    uploads = uploads_for(fishers, g)
    state = importance.aggregate({"params": None, "fisher": None}, uploads, [1 / 3] * 3, hp())
    assert float(state["params"]["0.weight"][1, 2]) == pytest.approx(float(uploads[0]["params"]["0.weight"][1, 2]))


def test_the_global_fisher_is_the_mean_of_the_uploaded_ones_and_samples_aggregation_is_fedavg():
    g = torch.Generator().manual_seed(6)
    fishers = [random_tree(g, nonnegative=True) for _ in range(4)]
    uploads = uploads_for(fishers, g)
    weights = [0.1, 0.2, 0.3, 0.4]
    state = importance.aggregate({"params": None, "fisher": None}, uploads, weights, hp(aggregation="samples"))
    reference = fedavg.aggregate({"params": None}, uploads, weights, {})
    for name in SHAPES:
        torch.testing.assert_close(state["fisher"][name], sum(f[name] for f in fishers) / 4)
        torch.testing.assert_close(state["params"][name], reference["params"][name])


# ---------------------------------------------------------------- eq. 3: the local objective


def test_with_lambda_zero_the_local_objective_is_cross_entropy_alone():
    data = make_data([6, 6, 6, 6], seed=7)
    run_settings = settings()
    reference = run_rounds(fedavg, {}, 3, data, run_settings)
    zero = run_rounds(importance, hp(**{"lambda": 0.0, "aggregation": "samples"}), 3, data, run_settings)
    nonzero = run_rounds(importance, hp(**{"lambda": 50.0, "aggregation": "samples"}), 3, data, run_settings)
    for name, value in reference["params"].items():
        assert torch.equal(zero["params"][name], value), name
    assert any(not torch.allclose(nonzero["params"][n], v, atol=1e-6) for n, v in reference["params"].items())


def test_ewc_penalty_and_its_gradient_are_half_lambda_fisher_weighted_squared_distance():
    g = torch.Generator().manual_seed(8)
    theta, anchor, fisher = random_tree(g), random_tree(g), random_tree(g, nonnegative=True)
    shared = {"global": anchor, "fisher": fisher}
    settings_hp = hp(**{"lambda": 3.0})
    expected = 1.5 * sum((fisher[n] * (theta[n] - anchor[n]) ** 2).sum() for n in SHAPES)
    assert float(importance.penalty(theta, shared, {}, settings_hp)) == pytest.approx(float(expected))
    leaves = {n: v.clone().requires_grad_(True) for n, v in theta.items()}
    autograd = torch.autograd.grad(importance.penalty(leaves, shared, {}, settings_hp), list(leaves.values()))
    closed = add_penalty_gradient(
        {n: torch.zeros_like(v) for n, v in theta.items()}, importance.penalty_affine(shared, {}, settings_hp), theta
    )
    for (name, _), auto in zip(leaves.items(), autograd):
        torch.testing.assert_close(closed[name], auto)


def test_l2_variant_is_fedprox_with_mu_equal_to_lambda():
    data = make_data([5, 7, 6, 4], seed=9)
    run_settings = settings(client_fraction=0.5)
    l2 = run_rounds(importance, hp(**{"lambda": 0.3, "penalty": "l2", "aggregation": "samples"}), 2, data, run_settings)
    prox = run_rounds(fedprox, {"mu": 0.3}, 2, data, run_settings)
    for name, value in prox["params"].items():
        torch.testing.assert_close(l2["params"][name], value, atol=1e-7, rtol=0)


def test_round_one_has_no_ewc_term_since_there_is_no_global_fisher_yet():
    theta = {"w": torch.ones(3)}
    shared = importance.shared_context(server_state(importance, {"w": torch.zeros(3)}, 4, hp()), hp())
    assert float(importance.penalty(theta, shared, {}, hp())) == 0.0
    assert importance.penalty_affine(shared, {}, hp()) is None


# ---------------------------------------------------------------- eq. 4: smoothing


def test_uploaded_fisher_is_gamma_smoothed_towards_the_global_one():
    g = torch.Generator().manual_seed(10)
    params, local, global_fisher = random_tree(g), random_tree(g, nonnegative=True), random_tree(g, nonnegative=True)
    upload = importance.upload_from(params, local, hp(gamma=0.9), shared={"fisher": global_fisher})
    for name in SHAPES:
        torch.testing.assert_close(upload["fisher"][name], 0.9 * global_fisher[name] + 0.1 * local[name])
    first_round = importance.upload_from(params, local, hp(gamma=0.9), shared={"fisher": None})
    for name in SHAPES:
        assert torch.equal(first_round["fisher"][name], local[name])


def test_l2_ablation_uploads_no_importance_and_sends_nothing_extra():
    settings_hp = hp(penalty="l2", aggregation="samples")
    assert not importance.uses_importance(settings_hp) and importance.local_tracker(settings_hp) is None
    assert importance.sent_up(settings_hp) == ("params",) and importance.sent_down(settings_hp) == ()
    assert importance.sent_down(hp()) == ("fisher",) and importance.sent_up(hp()) == ("params", "fisher")


@pytest.mark.parametrize("penalty, aggregation", [("none", "importance"), ("ewc", "samples")])
def test_ablations_that_use_the_global_fisher_are_charged_for_receiving_it(penalty, aggregation):
    """Eq. 4's smoothing needs F_t in the client even without an EWC term (the weighted-average ablation)."""
    settings_hp = hp(penalty=penalty, aggregation=aggregation)
    assert importance.sent_down(settings_hp) == ("fisher",)
    assert importance.sent_up(settings_hp) == ("params", "fisher")


# ---------------------------------------------------------------- RWalk


def test_rwalk_path_score_on_a_quadratic_equals_the_hand_computation():
    """L(θ) = ½·a·θ², plain SGD from θ0 = 1 with a = 2, lr = 0.1, decay 0.5, ε = 0.01.

    θ_s = 0.8^s; g_s = 2θ_s; Δ_s = −0.2θ_s; −g·Δ = 0.4θ_s²; F̂_0 = g_0² = 4, F̂_s = ½F̂_{s−1} + ½g_s².
      s=0: 0.4 / (½·4·0.04 + 0.01)              = 0.4 / 0.09
      s=1: 0.256 / (½·3.28·0.0256 + 0.01)       = 0.256 / 0.051984
      s=2: 0.16384 / (½·2.4592·0.016384 + 0.01) = 0.16384 / 0.0301457664
    """
    expected = 0.4 / 0.09 + 0.256 / 0.051984 + 0.16384 / 0.0301457664
    path = PathScore(decay=0.5, epsilon=0.01)
    params = {"θ": torch.tensor([1.0], dtype=torch.float64)}
    sgd = SGD(lr=0.1)
    for _ in range(3):
        grad = {"θ": 2.0 * params["θ"]}
        path.update(grad, sgd.step(params, grad, {}, torch.tensor(True), keep_steps=True), torch.tensor(True))
    assert float(params["θ"]) == pytest.approx(0.8**3, rel=1e-12)
    assert float(path.score["θ"]) == pytest.approx(expected, rel=1e-12)


def test_rwalk_scores_only_moves_that_lowered_the_loss_and_ignores_inactive_clients():
    path = PathScore(decay=0.5, epsilon=0.01)
    grad = torch.tensor([[1.0, 1.0], [1.0, 1.0]])
    active = torch.tensor([True, False])
    for step in ([[-0.1, 0.1], [0.0, 0.0]], [[-0.2, 0.1], [0.0, 0.0]]):  # client 0: downhill and uphill
        path.update({"p": grad}, {"p": torch.tensor(step)}, active)
    assert float(path.score["p"][0, 0]) > 0
    assert float(path.score["p"][0, 1]) == 0.0  # moved uphill: no credit
    assert path.score["p"][1].abs().sum() == 0  # inactive client: untouched
    assert path.running_fisher["p"][1].abs().sum() == 0  # nor its running Fisher


def test_rwalk_importance_averages_fisher_and_the_score_rescaled_to_the_fishers_mass():
    fisher = {"w": torch.tensor([1.0, 3.0]), "b": torch.tensor([2.0])}
    score = {"w": torch.tensor([30.0, 10.0]), "b": torch.tensor([0.0])}  # w's score rescaled: [3, 1]
    combined = importance.rwalk_importance(fisher, score)
    torch.testing.assert_close(combined["w"], torch.tensor([2.0, 2.0]))  # the Fisher's mass, spread evenly
    torch.testing.assert_close(combined["b"], torch.tensor([2.0]))  # no score: the Fisher alone
    assert float(combined["w"].sum()) == pytest.approx(float(fisher["w"].sum()))


def test_rwalk_runs_end_to_end_and_differs_from_fisher_importance():
    data = make_data([6, 6, 6, 6], seed=11)
    run_settings = settings()
    fisher_state = run_rounds(importance, hp(**{"lambda": 10.0}), 2, data, run_settings)
    rwalk_state = run_rounds(importance, hp(**{"lambda": 10.0, "importance": "rwalk"}), 2, data, run_settings)
    assert any(not torch.allclose(fisher_state["fisher"][n], rwalk_state["fisher"][n]) for n in fisher_state["fisher"])


# ---------------------------------------------------------------- settings


@pytest.mark.parametrize(
    "settings_, message",
    [
        ({"name": "importance", "penalty": "ewc2"}, "runs.x.algorithm.penalty: 'ewc2' is not allowed"),
        ({"name": "importance", "aggregation": "fisher"}, "runs.x.algorithm.aggregation: 'fisher' is not allowed"),
        ({"name": "importance", "gamma": 1.5}, "runs.x.algorithm.gamma: 1.5 is not allowed"),
        ({"name": "importance", "lambda": "1e5"}, "runs.x.algorithm.lambda: '1e5' is not allowed"),
        ({"name": "importance", "importance": "si"}, "runs.x.algorithm.importance: 'si' is not allowed"),
        ({"name": "importance", "gama": 0.9}, "runs.x.algorithm.gama: unknown key; did you mean 'gamma'?"),
    ],
)
def test_bad_importance_settings_are_named(settings_, message):
    problems = check_algorithm("runs.x.algorithm", settings_)
    assert len(problems) == 1 and problems[0].startswith(message), problems


def test_rwalk_stacked_score_equals_each_client_scored_alone_whatever_steps_it_skips():
    """A client that starts late gets F̂ = g² at its own first step; one that stops keeps its F̂ and score."""
    g = torch.Generator().manual_seed(12)
    grads = [torch.randn(2, 3, generator=g, dtype=torch.float64) for _ in range(4)]
    steps = [-0.1 * grad for grad in grads]
    activity = [[True, False], [True, True], [False, True], [True, True]]
    stacked = PathScore(decay=0.5, epsilon=0.01)
    alone = [PathScore(decay=0.5, epsilon=0.01) for _ in range(2)]
    for grad, step, active in zip(grads, steps, activity):
        active = torch.tensor(active)
        stacked.update({"p": grad}, {"p": step * active.unsqueeze(1)}, active)
        for c in range(2):
            if active[c]:
                alone[c].update({"p": grad[c]}, {"p": step[c]}, torch.tensor(True))
    for c in range(2):
        torch.testing.assert_close(stacked.score["p"][c], alone[c].score["p"])
        torch.testing.assert_close(stacked.running_fisher["p"][c], alone[c].running_fisher["p"])
