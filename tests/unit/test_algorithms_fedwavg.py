"""The FedWAvg paper's algorithms (SCAFFOLD, FedNova, FedWAvg), its models and `freeze`, each against an
independent computation: torch.optim.SGD loops per client, hand-worked numbers, per-sample counts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from pipeline import models
from pipeline.algorithms import check_algorithm, get_algorithm, names, resolve_hyperparams
from pipeline.clientdata import ClientData, client_schedule, generator_for
from pipeline.optimizers import SGD, Adam
from pipeline.rounds import initial_state, run_round
from pipeline.settings import MODEL_NORMS
from support import synthetic
from support.algorithms import fedavg, fednova, fedwavg, scaffold
from support.oracles import has_batch_norm

IMAGE = (8, 8, 1)
CLASSES = 4


def make_data(sizes=(6, 9, 5), seed=0, shape=IMAGE) -> ClientData:
    return synthetic.make_data(list(sizes), shape=shape, classes=CLASSES, seed=seed)


def settings(**overrides) -> dict:
    return synthetic.run_settings(7, **overrides)


def build(name="mlp_200", shape=IMAGE, **options):
    return models.build_model(name, shape, CLASSES, 0, **options)


def run_rounds(algorithm, hp, data, run_settings, rounds=1, model_name="mlp_200", vectorized=True, norm=None):
    model = build(model_name, tuple(data.x.shape[1:]), norm=norm)
    hp = resolve_hyperparams({"name": algorithm.NAME, **hp})
    state = initial_state(model, algorithm, len(data.clients), hp)
    for round_ in range(1, rounds + 1):
        state = run_round(model, algorithm, hp, state, data, run_settings, round_, vectorized=vectorized).state
    return state


def assert_trees_close(a: dict, b: dict, **tolerance):
    assert set(a) == set(b)
    for name in a:
        torch.testing.assert_close(a[name], b[name], msg=name, **tolerance)


# ---------------------------------------------------------------- the package's shape


def test_each_algorithm_module_is_named_by_its_file_and_imports_only_common_from_its_package():
    """dvc.yaml makes a run's train stage depend on its algorithm's fingerprint alone (pipeline/fingerprint.py
    counts what the algorithms import from this package, common.py, in the engine's)."""
    folder = Path(__file__).resolve().parents[2] / "pipeline" / "algorithms"
    assert {"scaffold", "fednova", "fedwavg"} <= set(names())
    for name in names():
        path = Path(get_algorithm(name).module.__file__)
        assert path.parent == folder and path.stem == name
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pipeline.algorithms"):
                if node.module == "pipeline.algorithms":  # from pipeline.algorithms import common
                    assert [alias.name for alias in node.names] == ["common"], (name, node.module)
                else:
                    assert node.module == "pipeline.algorithms.common", (name, node.module)
            if isinstance(node, ast.Import):
                assert not any(alias.name.startswith("pipeline.algorithms") for alias in node.names), name


# ---------------------------------------------------------------- SCAFFOLD


def sgd_client(model, data, client, start, steps_batches, lr, correction=None):
    """torch.optim.SGD on one client's batches from `start`; `correction` (name -> c − c_i) added to
    every gradient (SCAFFOLD's line 10)."""
    model.load_state_dict(start, strict=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for chosen in steps_batches:
        optimizer.zero_grad()
        F.cross_entropy(model(data.inputs(chosen)), data.y[chosen]).backward()
        if correction is not None:
            for name, p in model.named_parameters():
                p.grad += correction[name]
        optimizer.step()
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def client_batches(data, client, run_settings, round_):
    samples = data.clients[client]
    return [
        samples[positions[positions >= 0]]
        for positions in client_schedule(
            len(samples),
            run_settings.local.epochs,
            run_settings.local.batch_size,
            generator_for(run_settings.seed, round_, client),
        )
    ]


def test_scaffold_with_one_client_and_zero_variates_is_fedavg():
    data = make_data((10,))
    run_settings = settings(local_epochs=2)
    # equal up to rounding: x + 1·(y − x) is not y bit for bit
    assert_trees_close(
        run_rounds(scaffold, {}, data, run_settings)["params"],
        run_rounds(fedavg, {}, data, run_settings)["params"],
        atol=1e-7,
        rtol=1e-6,
    )


@pytest.mark.parametrize("vectorized", [True, False], ids=["vectorized", "sequential"])
def test_scaffold_variates_and_second_round_match_a_per_client_sgd_loop(vectorized):
    """Two rounds, three clients of unequal size (so K differs: 3, 5, 2 steps a round at B = 4, E = 1),
    against torch.optim.SGD per client with the correction added by hand; option II's variates from
    the loop's displacements, c the mean over all N clients."""
    data = make_data((12, 20, 8))
    lr, run_settings = 0.05, settings(local_epochs=1, batch_size=4, lr=0.05)
    model = build()
    x0 = {n: p.detach().clone() for n, p in model.named_parameters()}
    steps = [len(client_batches(data, k, run_settings, 1)) for k in range(3)]
    assert steps == [3, 5, 2]
    sizes = torch.tensor([12.0, 20.0, 8.0])
    weights = (sizes / sizes.sum()).tolist()
    # round 1: c = c_i = 0, plain SGD
    ends = [sgd_client(model, data, k, x0, client_batches(data, k, run_settings, 1), lr) for k in range(3)]
    controls = [{n: (x0[n] - ends[k][n]) / (steps[k] * lr) for n in x0} for k in range(3)]
    x1 = {n: sum(w * e[n] for w, e in zip(weights, ends)) for n in x0}
    c1 = {n: sum(ck[n] for ck in controls) / 3 for n in x0}
    # round 2: corrected gradients
    steps2 = [len(client_batches(data, k, run_settings, 2)) for k in range(3)]
    ends2 = [
        sgd_client(
            model,
            data,
            k,
            x1,
            client_batches(data, k, run_settings, 2),
            lr,
            correction={n: c1[n] - controls[k][n] for n in x0},
        )
        for k in range(3)
    ]
    controls2 = [{n: controls[k][n] - c1[n] + (x1[n] - ends2[k][n]) / (steps2[k] * lr) for n in x0} for k in range(3)]
    x2 = {n: sum(w * e[n] for w, e in zip(weights, ends2)) for n in x0}
    c2 = {n: sum(ck[n] for ck in controls2) / 3 for n in x0}

    hp = resolve_hyperparams({"name": "scaffold"})
    state = initial_state(build(), scaffold, 3, hp)
    assert all(float(v.abs().max()) == 0 for v in state["control"].values())  # zeros, not the weights
    state = run_round(build(), scaffold, hp, state, data, run_settings, 1, vectorized=vectorized).state
    assert_trees_close(state["control"], c1, atol=2e-5, rtol=1e-4)
    for k in range(3):
        assert_trees_close(state["clients"][k]["control"], controls[k], atol=2e-5, rtol=1e-4)
    state = run_round(build(), scaffold, hp, state, data, run_settings, 2, vectorized=vectorized).state
    assert_trees_close(state["params"], x2, atol=2e-6, rtol=1e-4)
    assert_trees_close(state["control"], c2, atol=5e-5, rtol=1e-3)


def test_scaffold_variates_under_adam_are_the_mean_gradients_of_a_torch_optim_adam_loop():
    """Two clients, Adam, two rounds: round 1 plain Adam per client (c = c_i = 0), each variate the mean of
    the gradients at the points visited; round 2 Adam on g − c_i + c (the correction added by hand)."""
    data = make_data((12, 8))
    run_settings = settings(local_epochs=1, batch_size=4, optimizer="adam", lr=0.01)
    model = build()
    x0 = {n: p.detach().clone() for n, p in model.named_parameters()}

    def adam_client(start, k, round_, correction):
        model.load_state_dict(start, strict=False)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        sums = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
        batches = client_batches(data, k, run_settings, round_)
        for chosen in batches:
            optimizer.zero_grad()
            F.cross_entropy(model(data.inputs(chosen)), data.y[chosen]).backward()
            for n, p in model.named_parameters():
                sums[n] += p.grad
                p.grad += correction[n]
            optimizer.step()
        return {n: p.detach().clone() for n, p in model.named_parameters()}, {
            n: s / len(batches) for n, s in sums.items()
        }

    zero = {n: torch.zeros_like(v) for n, v in x0.items()}
    ends, controls = zip(*[adam_client(x0, k, 1, zero) for k in range(2)])
    x1 = {n: 0.6 * ends[0][n] + 0.4 * ends[1][n] for n in x0}
    c1 = {n: (controls[0][n] + controls[1][n]) / 2 for n in x0}
    ends2 = [adam_client(x1, k, 2, {n: c1[n] - controls[k][n] for n in x0})[0] for k in range(2)]
    x2 = {n: 0.6 * ends2[0][n] + 0.4 * ends2[1][n] for n in x0}

    hp = resolve_hyperparams({"name": "scaffold"})
    state = initial_state(build(), scaffold, 2, hp)
    state = run_round(build(), scaffold, hp, state, data, run_settings, 1).state
    for k in range(2):
        assert_trees_close(state["clients"][k]["control"], controls[k], atol=1e-6, rtol=1e-5)
    assert max(float(v.abs().max()) for v in c1.values()) < 1.0  # gradients' units, not displacement / (K·lr)
    state = run_round(build(), scaffold, hp, state, data, run_settings, 2).state
    assert_trees_close(state["params"], x2, atol=1e-5, rtol=1e-4)


def test_scaffold_partial_participation_keeps_c_the_mean_of_all_variates_and_sends_twice_fedavgs_bytes():
    data = make_data((8, 8, 8, 8))
    run_settings = settings(client_fraction=0.5, local_epochs=1)
    hp = resolve_hyperparams({"name": "scaffold", "global_lr": 0.5})
    model = build()
    state = initial_state(model, scaffold, 4, hp)
    for round_ in (1, 2, 3):
        previous = state
        result = run_round(model, scaffold, hp, state, data, run_settings, round_)
        state = result.state
        assert len(result.cohort) == 2
        mean = {n: sum(state["clients"][k]["control"][n] for k in state["clients"]) / 4 for n in state["control"]}
        assert_trees_close(state["control"], mean, atol=1e-6, rtol=1e-5)
        fed = run_round(model, fedavg, {}, {**previous, "params": previous["params"]}, data, run_settings, round_)
        assert result.bytes_up == 2 * fed.bytes_up and result.bytes_down == 2 * fed.bytes_down


def test_scaffold_variates_cover_parameters_only_with_batchnorm():
    data = make_data((6, 7))
    state = run_rounds(
        scaffold, {}, data, settings(local_epochs=1), rounds=2, model_name="cnn_small", vectorized=False, norm="batch"
    )
    assert set(state["control"]) == set(state["params"])
    assert state["buffers"] and not set(state["buffers"]) & set(state["control"])


def test_scaffold_checks_its_global_lr():
    assert check_algorithm("runs.x.algorithm", {"name": "scaffold", "global_lr": 0}) == [
        "runs.x.algorithm.global_lr: 0 is not allowed; expected a finite number > 0"
    ]


# ---------------------------------------------------------------- FedNova


def test_fednova_with_equal_step_counts_is_fedavg():
    data = make_data((8, 8, 8))
    for run_settings in (
        settings(local_epochs=2),
        settings(local_epochs=2, momentum=0.9),
        settings(local_epochs=2, optimizer="adam", lr=0.01),
    ):
        assert_trees_close(
            run_rounds(fednova, {}, data, run_settings, rounds=2)["params"],
            run_rounds(fedavg, {}, data, run_settings, rounds=2)["params"],
            atol=1e-6,
            rtol=1e-5,
        )


def test_fednova_work_with_momentum_is_the_sum_of_the_running_counter():
    """‖a‖₁ by summing the momentum buffer's coefficients step by step, against the closed form."""
    for rho in (0.0, 0.5, 0.9):
        for tau in (1, 2, 7, 30):
            counter, total = 0.0, 0.0
            for _ in range(tau):
                counter = rho * counter + 1.0  # the weight of the gradients in the buffer, one step on
                total += counter
            assert fednova.work(tau, SGD(lr=0.1, momentum=rho)) == pytest.approx(total, rel=1e-12)
    assert fednova.work(5, Adam(lr=0.01)) == 5.0 and fednova.work(0, SGD(lr=0.1, momentum=0.9)) == 0.0


def test_fednova_aggregates_a_hand_worked_case():
    """Two clients from x = 1: one moved to 0.4 in 3 steps, one to 1.6 in 1 step, weights 0.25/0.75.
    d = (0.2, −0.6), τ_eff = 0.25·3 + 0.75·1 = 1.5, x ← 1 − 1.5·(0.25·0.2 + 0.75·(−0.6)) = 1.6;
    FedAvg would give 0.25·0.4 + 0.75·1.6 = 1.3."""
    start = {"w": torch.tensor([1.0])}
    uploads = [
        {"client": 0, **fednova.upload_from(start, {"w": torch.tensor([0.4])}, 3.0)},
        {"client": 1, **fednova.upload_from(start, {"w": torch.tensor([1.6])}, 1.0)},
    ]
    state = fednova.aggregate({"params": start}, uploads, [0.25, 0.75], {})
    assert float(state["params"]["w"]) == pytest.approx(1.6, abs=1e-6)


def test_fednova_round_with_unequal_steps_matches_per_client_sgd():
    data = make_data((12, 20, 8))
    run_settings = settings(local_epochs=1, batch_size=4, lr=0.05)
    model = build()
    x0 = {n: p.detach().clone() for n, p in model.named_parameters()}
    ends, steps = [], []
    for k in range(3):
        batches = client_batches(data, k, run_settings, 1)
        steps.append(len(batches))
        ends.append(sgd_client(model, data, k, x0, batches, 0.05))
    p = [12 / 40, 20 / 40, 8 / 40]
    tau_eff = sum(pk * s for pk, s in zip(p, steps))
    expected = {n: x0[n] - tau_eff * sum(pk * (x0[n] - e[n]) / s for pk, e, s in zip(p, ends, steps)) for n in x0}
    assert_trees_close(run_rounds(fednova, {}, data, run_settings)["params"], expected, atol=1e-6, rtol=1e-5)


def test_fednova_normalises_parameters_only_and_averages_batchnorm_buffers_as_fedavg():
    """Clients of unequal size take unequal step counts, so FedNova's parameters differ from FedAvg's;
    the BatchNorm running statistics are not normalised: after the same local training they are FedAvg's
    sample-weighted mean, to the bit."""
    data = make_data((6, 13, 4))
    run_settings = settings(local_epochs=1, batch_size=4)
    nova = run_rounds(fednova, {}, data, run_settings, model_name="cnn_small", vectorized=False, norm="batch")
    avg = run_rounds(fedavg, {}, data, run_settings, model_name="cnn_small", vectorized=False, norm="batch")
    assert nova["buffers"] and set(nova["buffers"]).isdisjoint(nova["params"])
    assert all(torch.equal(nova["buffers"][n], avg["buffers"][n]) for n in avg["buffers"])
    assert not all(torch.allclose(nova["params"][n], avg["params"][n]) for n in avg["params"])


# ---------------------------------------------------------------- FedWAvg


def test_fedwavg_weights_are_the_hand_computed_ones():
    # α = 0.3, counts 10/30/0/60 (Σ 100, N = 4): W = 0.7 + 1.2·F/100 = 0.82, 1.06, 0.70, 1.42; equal sizes: W/4
    assert fedwavg.averaging_weights([10, 30, 0, 60], [0.25] * 4, 0.3) == pytest.approx([0.205, 0.265, 0.175, 0.355])
    # unequal sizes 1:3 with counts 1:1: W = 1 each, the sample-size weights stay
    assert fedwavg.averaging_weights([5, 5], [0.25, 0.75], 0.3) == pytest.approx([0.25, 0.75])
    # counts 0:10, sizes 1:1, α = 0.5: W = 0.5, 1.5
    assert fedwavg.averaging_weights([0, 10], [0.5, 0.5], 0.5) == pytest.approx([0.25, 0.75])
    assert fedwavg.averaging_weights([0, 0, 0], [0.2, 0.3, 0.5], 0.3) == pytest.approx([0.2, 0.3, 0.5])
    assert fedwavg.averaging_weights([7, 1], [0.5, 0.5], 0.0) == pytest.approx([0.5, 0.5])


def test_fedwavg_counts_not_yet_taken_stand_in_with_the_counted_mean_else_ones():
    assert fedwavg.cohort_counts({}, [3, 1]) == [1.0, 1.0]
    assert fedwavg.cohort_counts({1: 10, 2: 30, 9: 500}, [1, 2, 4]) == [10.0, 30.0, 20.0]


def test_fedwavg_with_alpha_zero_is_fedavg():
    data = make_data()
    run_settings = settings()
    assert_trees_close(
        run_rounds(fedwavg, {"alpha": 0.0}, data, run_settings, rounds=3)["params"],
        run_rounds(fedavg, {}, data, run_settings, rounds=3)["params"],
        atol=1e-6,
        rtol=1e-6,
    )


def correct_by_loop(model, params, data, samples):
    model.load_state_dict(params, strict=False)
    model.eval()
    with torch.no_grad():
        right = [bool(model(data.inputs(s.view(1))).argmax(-1) == data.y[s]) for s in samples]
    model.train()
    return torch.tensor(right)


@pytest.mark.parametrize("model_name, norm", [("mlp_200", None), ("cnn_small", "batch")])
def test_fedwavg_counts_and_next_aggregation_match_per_sample_loops(model_name, norm):
    """After round 1 the counts are each client's training samples its local model gets right and the new
    global model wrong (a per-sample loop); round 2 averages with eq. 2's weights of those counts."""
    data = make_data((10, 14, 6))
    run_settings = settings(local_epochs=2, lr=0.3)
    hp = resolve_hyperparams({"name": "fedwavg", "alpha": 0.3})
    model = build(model_name, norm=norm)
    state = initial_state(model, fedwavg, 3, hp)
    first = run_round(model, fedwavg, hp, state, data, run_settings, 1, vectorized=False, probe=True)
    net = build(model_name, norm=norm)
    global_full = {**first.state["params"], **first.state["buffers"]}
    counts = []
    for position, local in enumerate(first.view.locals):
        samples = data.clients[local.client]
        local_right = correct_by_loop(net, {**local.params, **local.buffers}, data, samples)
        global_right = correct_by_loop(net, global_full, data, samples)
        counts.append(int((local_right & ~global_right).sum()))
    assert first.state["forgettable"] == dict(zip(first.cohort, counts))
    assert sum(counts) > 0
    second = run_round(model, fedwavg, hp, first.state, data, run_settings, 2, vectorized=False, probe=True)
    sizes = [len(data.clients[k]) for k in second.cohort]
    weights = fedwavg.averaging_weights(
        [first.state["forgettable"][k] for k in second.cohort], [n / sum(sizes) for n in sizes], 0.3
    )
    expected = {
        n: sum(w * local.params[n] for w, local in zip(weights, second.view.locals)) for n in first.state["params"]
    }
    assert_trees_close(second.state["params"], expected, atol=1e-6, rtol=1e-6)


def test_fedwavg_refreshes_counts_for_the_rounds_that_are_multiples_of_period():
    """t = 2: Algorithm 1 counts in rounds 2, 4, ... from the previous round's models, i.e. at the end of
    rounds 1, 3, ...; round 2's counts then weigh rounds 2 and 3."""
    data = make_data()
    hp = resolve_hyperparams({"name": "fedwavg", "period": 2})
    model = build()
    state = initial_state(model, fedwavg, 3, hp)
    state = run_round(model, fedwavg, hp, state, data, settings(lr=0.3), 1).state
    assert set(state["forgettable"]) == {0, 1, 2}
    taken = dict(state["forgettable"])
    state = run_round(model, fedwavg, hp, state, data, settings(lr=0.3), 2).state
    assert state["forgettable"] == taken


def test_fedwavg_checks_alpha_and_period():
    problems = check_algorithm("runs.x.algorithm", {"name": "fedwavg", "alpha": 1.0, "period": 0})
    assert problems == [
        "runs.x.algorithm.alpha: 1.0 is not allowed; expected a number in [0, 1) (eq. 2)",
        "runs.x.algorithm.period: 0 is not allowed; expected an integer >= 1",
    ]


# ---------------------------------------------------------------- both paths, every new algorithm


@pytest.mark.parametrize("name, hp", [("scaffold", {"global_lr": 0.8}), ("fednova", {}), ("fedwavg", {"alpha": 0.3})])
@pytest.mark.parametrize("model_name", ["mlp_200", "cnn_small"])
@pytest.mark.parametrize(
    "optimizer", [{"momentum": 0.5}, {}, {"weight_decay": 0.01}], ids=["momentum", "plain", "weight_decay"]
)
def test_vectorized_and_sequential_paths_agree(name, hp, model_name, optimizer):
    """Plain SGD puts SCAFFOLD's MLP cohort on the fused step (its variates read off the displacement);
    momentum and weight decay keep its gradient tracker: each against the sequential path's tracker."""
    data = make_data((6, 9, 5))
    run_settings = settings(local_epochs=2, lr=0.1, **optimizer)
    algorithm = get_algorithm(name)
    vec = run_rounds(algorithm, hp, data, run_settings, rounds=3, model_name=model_name, vectorized=True)
    seq = run_rounds(algorithm, hp, data, run_settings, rounds=3, model_name=model_name, vectorized=False)
    assert_trees_close(vec["params"], seq["params"], atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------- freeze


@pytest.mark.parametrize(
    "model_name, vectorized",
    [("mlp_200", True), ("mlp_200", False), ("cnn_small", True), ("resnet_shallow_small", False)],
)
def test_a_frozen_classifier_is_neither_trained_nor_averaged(model_name, vectorized):
    shape = (16, 16, 1) if model_name == "resnet_shallow_small" else IMAGE
    data = make_data((8, 12, 4), shape=shape)  # whole batches: BatchNorm's 1x1 maps need two samples
    run_settings = settings(freeze="classifier", optimizer="adam", lr=0.01, weight_decay=0.1)
    model = build(model_name, shape)
    frozen = models.frozen_parameters(model, "classifier")
    initial = {n: p.detach().clone() for n, p in model.named_parameters()}
    state = run_rounds(fedwavg, {}, data, run_settings, rounds=2, model_name=model_name, vectorized=vectorized)
    assert len(frozen) == 2
    for name, value in state["params"].items():
        assert torch.equal(value, initial[name]) == (name in frozen), name


class ReversedSet(frozenset):
    """A set that iterates in the reverse of the order it was given: the frozen names as a hash seed
    other than this process's could order them."""

    def __new__(cls, names):
        made = super().__new__(cls, names)
        made.order = list(reversed(list(names)))
        return made

    def __iter__(self):
        return iter(self.order)


@pytest.mark.parametrize("vectorized", [True, False])
def test_a_frozen_runs_state_keeps_the_models_parameter_order_whatever_the_sets_order(vectorized, monkeypatch):
    """The saved model's bytes follow its keys' order: a frozen run's must be the model's, not the order
    a set of frozen names happens to iterate in (found when a fresh-clone run wrote another md5)."""
    from pipeline import rounds

    frozen_names = rounds.frozen_names
    monkeypatch.setattr(
        rounds,
        "frozen_names",
        lambda model, run: ReversedSet(
            [name for name, _ in model.named_parameters() if name in frozen_names(model, run)]
        ),
    )
    state = run_rounds(fedavg, {}, make_data((6, 9, 5)), settings(freeze="classifier"), vectorized=vectorized)
    assert list(state["params"]) == [name for name, _ in build().named_parameters()]


def test_frozen_runs_agree_between_paths_and_train_like_a_model_without_a_classifier_gradient():
    """The same numbers on both paths; and against torch.optim.SGD on one client with the classifier's
    requires_grad off (what freezing means)."""
    data = make_data((6, 9, 5))
    run_settings = settings(freeze="classifier")
    vec = run_rounds(fedavg, {}, data, run_settings, rounds=2, vectorized=True)
    seq = run_rounds(fedavg, {}, data, run_settings, rounds=2, vectorized=False)
    assert_trees_close(vec["params"], seq["params"], atol=1e-6, rtol=1e-5)
    one = ClientData(data.x, data.y, [data.clients[1]], data.mean, data.std, classes=CLASSES)
    state = run_rounds(fedavg, {}, one, run_settings)
    net = build()
    for name in models.frozen_parameters(net, "classifier"):
        net.get_parameter(name).requires_grad_(False)
    optimizer = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=run_settings.local.optimizer.lr)
    for chosen in client_batches(one, 0, run_settings, 1):
        optimizer.zero_grad()
        F.cross_entropy(net(one.inputs(chosen)), one.y[chosen]).backward()
        optimizer.step()
    assert_trees_close(state["params"], {n: p.detach() for n, p in net.named_parameters()}, atol=1e-6, rtol=1e-5)


# ---------------------------------------------------------------- the paper's models


def test_shallow_resnet_has_the_papers_structure_and_the_hand_counted_parameters():
    model = models.build_model("resnet_shallow", (32, 32, 3), 10, 0)
    blocks = [m for m in model if isinstance(m, models.BasicBlock)]
    assert len(blocks) == 4 and sum(len(b.shortcut) > 0 for b in blocks) == 3
    convs = [m for b in blocks for m in (b.conv1, b.conv2)]
    assert all(c.kernel_size == (3, 3) for c in convs)
    assert all(isinstance(b.norm1, torch.nn.BatchNorm2d) for b in blocks)
    conv = lambda i, o, k: i * o * k * k  # noqa: E731
    bn = lambda c: 2 * c  # noqa: E731
    count = conv(3, 64, 3) + bn(64)
    for fan_in, width in ((64, 64), (64, 128), (128, 256), (256, 512)):
        count += conv(fan_in, width, 3) + conv(width, width, 3) + 2 * bn(width)
        if fan_in != width:
            count += conv(fan_in, width, 1) + bn(width)
    count += 512 * 10 + 10
    assert sum(p.numel() for p in model.parameters()) == count == 4_903_242
    small = models.build_model("resnet_shallow_small", (32, 32, 3), 10, 0)
    assert small(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


@pytest.mark.parametrize("shape", [(28, 28, 1), (32, 32, 3)])
def test_densenet121_takes_small_images_and_has_torchvisions_body(shape):
    model = models.build_model("densenet121", shape, 10, 0)
    # torchvision's DenseNet-121 for 1000 classes has 7,978,856 parameters; ours: a 10-class head and
    # a 3x3 stem of `channels` inputs instead of the 7x7 one of 3 inputs.
    expected = 7_978_856 - (1024 * 1000 + 1000) + (1024 * 10 + 10) - 3 * 64 * 49 + shape[2] * 64 * 9
    assert sum(p.numel() for p in model.parameters()) == expected
    model.eval()
    assert model(torch.zeros(2, shape[2], shape[0], shape[1])).shape == (2, 10)


def test_curves_on_seen_classes_use_exactly_the_test_samples_of_the_clients_classes():
    from pipeline.training import curve_set

    train = ClientData(
        torch.zeros(6, 2, 2, 1, dtype=torch.uint8),
        torch.tensor([0, 0, 3, 3, 1, 2]),
        [torch.tensor([0, 1]), torch.tensor([2, 3])],
        torch.zeros(1),
        torch.ones(1),
        classes=4,
    )
    test = ClientData(
        torch.zeros(7, 2, 2, 1, dtype=torch.uint8),
        torch.tensor([3, 1, 0, 2, 0, 3, 1]),
        [],
        torch.zeros(1),
        torch.ones(1),
        classes=4,
    )
    # clients hold classes 0 and 3 only (samples 4 and 5, classes 1 and 2, belong to no client)
    assert curve_set("test_seen_classes", train, test)[1].tolist() == [0, 2, 4, 5]
    assert curve_set("test", train, test)[1].tolist() == list(range(7))


def every_model(batch_norm: bool):
    for name in models.MODELS:
        for norm in MODEL_NORMS.get(name, (None,)):
            if has_batch_norm(build(name, (16, 16, 3), **({} if norm is None else {"norm": norm}))) == batch_norm:
                yield name, norm


@pytest.mark.parametrize("model_name, norm", list(every_model(batch_norm=False)))
def test_every_model_trains_to_the_same_numbers_on_both_paths(model_name, norm):
    """Every model without BatchNorm against the sequential reference, in float32 as the runs train:
    two rounds of FedAvg with momentum (its buffer reset between them), clients of unequal size (a
    short last batch) and, for the CNN with dropout, each client's own masks. Each round starts both
    paths from the same state: carried across rounds, the paths' ~1e-7 rounding differences can flip
    a ReLU on these 20 samples and grow to ~1e-3 (seen on resnet_shallow with GroupNorm), which would
    test the conditioning of the model, not the paths."""
    shape = (16, 16, 3) if model_name.startswith("resnet") else (8, 8, 1)
    data = make_data((6, 9, 5), shape=shape)
    for start, vec, seq in rounds_on_both_paths(build(model_name, shape, norm=norm), data):
        assert_trees_close(vec["params"], seq["params"], atol=1e-5, rtol=1e-4)
        assert any(not torch.equal(seq["params"][name], start["params"][name]) for name in seq["params"])


def rounds_on_both_paths(model, data, rounds=2):
    """(start, vectorized, sequential) states of FedAvg with momentum, each round from the sequential
    path's last state on both paths."""
    run_settings = settings(local_epochs=1, momentum=0.5, lr=0.05)
    hp = resolve_hyperparams({"name": fedavg.NAME})
    state = initial_state(model, fedavg, len(data.clients), hp)
    for round_ in range(1, rounds + 1):
        vec = run_round(model, fedavg, hp, state, data, run_settings, round_, vectorized=True).state
        seq = run_round(model, fedavg, hp, state, data, run_settings, round_, vectorized=False).state
        yield state, vec, seq
        state = seq


@pytest.mark.parametrize("model_name, norm", list(every_model(batch_norm=True)))
def test_every_batch_norm_model_trains_to_the_same_numbers_on_both_paths(model_name, norm, monkeypatch):
    """Every BatchNorm model: the vectorized path (each client's padded batch, its statistics told which
    samples are present) against the sequential one (padding dropped, torch's own BatchNorm), two rounds
    in float64. In float32 the two agree to ~1e-7 after one step, but a round of steps on batches of 2-4
    samples normalised over 1x1 and 2x2 maps (ResNet-18, DenseNet at 16x16) amplifies that rounding to
    ~1e-3, a property of the model rather than of the paths; float64 leaves the paths' differences
    visible: a wrong statistic (padding counted, a finished client's running mean moved) shows as ~1e-2.
    Clients of 6, 10 and 7 samples in batches of 4: short last batches and finished clients."""
    inputs = ClientData.inputs
    monkeypatch.setattr(ClientData, "inputs", lambda self, index: inputs(self, index).double())
    shape = (16, 16, 3) if model_name.startswith(("resnet", "densenet")) else (8, 8, 1)
    data = make_data((6, 10, 7), shape=shape)
    model = build(model_name, shape, **({} if norm is None else {"norm": norm})).double()
    for start, vec, seq in rounds_on_both_paths(model, data):
        assert_trees_close(vec["params"], seq["params"], atol=1e-10, rtol=1e-9)
        assert_trees_close(vec["buffers"], seq["buffers"], atol=1e-10, rtol=1e-9)
        assert any(not torch.equal(seq["buffers"][name], start["buffers"][name]) for name in seq["buffers"])


def test_the_path_is_chosen_by_the_measured_winner_on_each_device():
    """On this CPU vmap over convolutions lost to one client at a time (cohort.prefer_vectorized); on an
    H200 vmap won for every model but those with BatchNorm; MLPs take it everywhere."""
    from pipeline.cohort import prefer_vectorized

    chosen_on_gpu = {}
    for name in models.MODELS:
        for norm in MODEL_NORMS.get(name, (None,)):
            model = build(name, (16, 16, 3), **({} if norm is None else {"norm": norm}))
            convolutional = any(isinstance(m, torch.nn.Conv2d) for m in model.modules())
            batch_norm = any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
            assert prefer_vectorized(model, torch.device("cpu")) is not convolutional
            assert prefer_vectorized(model, torch.device("cuda")) is not batch_norm
            assert not prefer_vectorized(model, torch.device("cuda"), cohort_clients=1)
            chosen_on_gpu[(name, norm)] = prefer_vectorized(model, torch.device("cuda"))
    assert chosen_on_gpu[("resnet18", "group")] and not chosen_on_gpu[("resnet18", "batch")]
    assert chosen_on_gpu[("mlp_200", None)] and not chosen_on_gpu[("densenet121", None)]
