"""The cohort optimisers (pipeline/optimizers.py) against torch.optim run client by client: stacked and
unstacked, with clients skipping steps or finishing early, which must leave them exactly unchanged."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from pipeline.optimizers import SGD, Adam, build_optimizer
from pipeline.settings import OptimizerSettings, build

CLIENTS = 3
STEPS = 6
SHAPES = {"weight": (4, 5), "bias": (4,)}
# active[s, c]: client 1 skips steps 2 and 5, client 2 stops after step 3 (steps numbered from 1)
SCHEDULE = torch.tensor(
    [
        [True, True, True],
        [True, False, True],
        [True, True, True],
        [True, True, False],
        [True, False, False],
        [True, True, False],
    ]
)


def random_params(leading=(CLIENTS,), seed=0) -> dict:
    generator = torch.Generator().manual_seed(seed)
    return {name: torch.randn(*leading, *shape, generator=generator) for name, shape in SHAPES.items()}


def random_grads(schedule: torch.Tensor, seed=1) -> list[dict]:
    """One gradient dict per step; a client inactive at a step gets NaN, which must not leak into it."""
    generator = torch.Generator().manual_seed(seed)
    steps = []
    for active in schedule:
        grads = {}
        for name, shape in SHAPES.items():
            g = torch.randn(*active.shape, *shape, generator=generator)
            g[~active] = float("nan")
            grads[name] = g
        steps.append(grads)
    return steps


def clone(tree: dict) -> dict:
    return {name: value.clone() for name, value in tree.items()}


def torch_reference(make_optimizer, initial: dict, grads: list[dict], schedule: torch.Tensor, client: int):
    """One client trained by torch.optim, stepping only when the schedule says so."""
    params = {name: torch.nn.Parameter(value[client].clone()) for name, value in initial.items()}
    optimizer = make_optimizer(list(params.values()))
    for step_grads, active in zip(grads, schedule):
        if active[client]:
            for name, p in params.items():
                p.grad = step_grads[name][client].clone()
            optimizer.step()
    return {name: p.detach() for name, p in params.items()}, optimizer


def run_cohort(optimizer, initial: dict, grads: list[dict], schedule: torch.Tensor):
    params, state = clone(initial), {}
    for step_grads, active in zip(grads, schedule):
        optimizer.step(params, step_grads, state, active)
    return params, state


def test_stacked_sgd_matches_torch_per_client():
    ours = SGD(lr=0.1, momentum=0.9, weight_decay=1e-3)
    initial, grads = random_params(), random_grads(SCHEDULE)
    params, state = run_cohort(ours, initial, grads, SCHEDULE)
    for client in range(CLIENTS):
        expected, reference = torch_reference(
            lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-3), initial, grads, SCHEDULE, client
        )
        for index, name in enumerate(SHAPES):
            torch.testing.assert_close(params[name][client], expected[name], atol=1e-6, rtol=0)
            buffer = reference.state[reference.param_groups[0]["params"][index]]["momentum_buffer"]
            torch.testing.assert_close(state["momentum_buffer"][name][client], buffer, atol=1e-6, rtol=0)


def test_stacked_adam_matches_torch_per_client():
    ours = Adam(lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=1e-2)
    initial, grads = random_params(), random_grads(SCHEDULE)
    params, state = run_cohort(ours, initial, grads, SCHEDULE)
    # each client's own count: a shared counter would give every client 6 and bias-correct clients 1 and 2 wrongly
    assert state["step"].tolist() == [6, 4, 3]
    for client in range(CLIENTS):
        expected, reference = torch_reference(
            lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=1e-2),
            initial,
            grads,
            SCHEDULE,
            client,
        )
        for index, name in enumerate(SHAPES):
            torch.testing.assert_close(params[name][client], expected[name], atol=1e-6, rtol=0)
            moments = reference.state[reference.param_groups[0]["params"][index]]
            torch.testing.assert_close(state["exp_avg"][name][client], moments["exp_avg"], atol=1e-6, rtol=0)
            torch.testing.assert_close(state["exp_avg_sq"][name][client], moments["exp_avg_sq"], atol=1e-6, rtol=0)


def test_finished_client_is_left_exactly_unchanged():
    initial, grads = random_params(), random_grads(SCHEDULE)
    for optimizer in (SGD(lr=0.1, momentum=0.9, weight_decay=1e-3), Adam(lr=0.01, weight_decay=1e-2)):
        after_three, state_three = run_cohort(optimizer, initial, grads[:3], SCHEDULE[:3])
        after_all, state_all = run_cohort(optimizer, initial, grads, SCHEDULE)
        for name in SHAPES:
            assert torch.equal(after_all[name][2], after_three[name][2])
        for key in ("momentum_buffer", "exp_avg", "exp_avg_sq"):
            for name in state_all.get(key, {}):
                assert torch.equal(state_all[key][name][2], state_three[key][name][2])


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_single_unstacked_client_matches_torch(kind):
    if kind == "sgd":
        ours, make = (
            SGD(lr=0.05, momentum=0.9, weight_decay=1e-3),
            lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-3),
        )
    else:
        ours, make = (
            Adam(lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=1e-2),
            lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=1e-2),
        )
    schedule = torch.ones(STEPS, 1, dtype=torch.bool)
    initial, stacked_grads = random_params(leading=(1,)), random_grads(schedule)
    expected, _ = torch_reference(make, initial, stacked_grads, schedule, client=0)
    params, state = {name: value[0].clone() for name, value in initial.items()}, {}
    for step_grads in stacked_grads:
        ours.step(params, {name: g[0] for name, g in step_grads.items()}, state, torch.tensor(True))
    for name in SHAPES:
        assert params[name].shape == SHAPES[name]
        torch.testing.assert_close(params[name], expected[name], atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    "optimizer",
    [SGD(lr=0.1), SGD(lr=0.1, momentum=0.9, weight_decay=1e-3), Adam(lr=0.01, betas=(0.9, 0.99), weight_decay=1e-2)],
)
def test_keep_steps_is_the_change_in_params(optimizer):
    params, state = random_params(), {}
    for step_grads, active in zip(random_grads(SCHEDULE), SCHEDULE):
        shadow, shadow_state = (
            clone(params),
            {k: clone(v) if isinstance(v, dict) else v.clone() for k, v in state.items()},
        )
        before = clone(params)
        steps = optimizer.step(params, step_grads, state, active, keep_steps=True)
        assert optimizer.step(shadow, step_grads, shadow_state, active) == {}
        for name in SHAPES:
            assert torch.equal(steps[name], params[name] - before[name])
            assert torch.equal(steps[name][~active], torch.zeros_like(steps[name][~active]))
            assert bool(steps[name][active].ne(0).any())
            # keeping the steps does not change the update
            assert torch.equal(params[name], shadow[name])


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_all_active_fast_path_equals_masked_path(momentum):
    """The in-place path (every client active) and the masked one (here forced by an extra, inactive
    client) give the same bits for the clients both move."""
    optimizer = SGD(lr=0.1, momentum=momentum)
    everyone = torch.ones(STEPS, CLIENTS, dtype=torch.bool)
    with_idle = torch.cat([everyone, torch.zeros(STEPS, 1, dtype=torch.bool)], dim=1)
    initial, grads = random_params(leading=(CLIENTS + 1,)), random_grads(with_idle)
    fast, _ = run_cohort(
        optimizer,
        {n: v[:CLIENTS] for n, v in initial.items()},
        [{n: g[:CLIENTS] for n, g in step.items()} for step in grads],
        everyone,
    )
    masked, _ = run_cohort(optimizer, initial, grads, with_idle)
    for name in SHAPES:
        assert not torch.equal(fast[name], initial[name][:CLIENTS])
        assert torch.equal(fast[name], masked[name][:CLIENTS])
        assert torch.equal(masked[name][CLIENTS], initial[name][CLIENTS])


def test_build_optimizer():
    sgd = build_optimizer(
        build(
            OptimizerSettings,
            {"optimizer": "sgd", "lr": 0.05, "momentum": 0.5, "weight_decay": 1e-4, "betas": [0.8, 0.9], "eps": 1e-6},
        )
    )
    assert sgd == SGD(lr=0.05, momentum=0.5, weight_decay=1e-4)
    adam = build_optimizer(
        build(
            OptimizerSettings,
            {
                "optimizer": "adam",
                "lr": 0.001,
                "momentum": 0.0,
                "weight_decay": 1e-2,
                "betas": [0.8, 0.95],
                "eps": 1e-6,
            },
        )
    )
    assert adam == Adam(lr=0.001, betas=(0.8, 0.95), eps=1e-6, weight_decay=1e-2)
    assert isinstance(adam.betas, tuple)
    with pytest.raises(ValueError, match="rmsprop"):
        build_optimizer(
            OptimizerSettings("rmsprop", lr=0.1, momentum=0.0, weight_decay=0.0, betas=(0.9, 0.999), eps=1e-8)
        )


# ---------------------------------------------------------------- FEDFORGET_FOREACH: multi-tensor steps

FOREACH_CASES = [
    SGD(lr=0.1),
    SGD(lr=0.1, momentum=0.9, weight_decay=1e-3),
    Adam(lr=0.01, betas=(0.9, 0.99), weight_decay=1e-2),
    Adam(lr=0.001),
]


def with_foreach(optimizer):
    return dataclasses.replace(optimizer, foreach=True)


@pytest.mark.parametrize("optimizer", FOREACH_CASES, ids=lambda o: repr(o))
def test_a_foreach_step_of_one_client_is_the_loops_bit_for_bit(optimizer):
    # the sequential path's call: one unstacked client, active None
    initial = {name: value[0] for name, value in random_params().items()}
    grads = [{name: g[0] for name, g in step.items()} for step in random_grads(torch.ones(STEPS, 1, dtype=torch.bool))]
    results = []
    for opt in (optimizer, with_foreach(optimizer)):
        params, state = clone(initial), {}
        for step_grads in grads:
            assert opt.step(params, step_grads, state, None) == {}
        results.append((params, state))
    (loop, loop_state), (multi, multi_state) = results
    for name in SHAPES:
        assert torch.equal(multi[name], loop[name]), name
        assert not torch.equal(multi[name], initial[name])
    for key in ("momentum_buffer", "exp_avg", "exp_avg_sq"):
        for name in loop_state.get(key, {}):
            assert torch.equal(multi_state[key][name], loop_state[key][name]), (key, name)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_a_foreach_step_of_one_client_matches_torch_optim(kind):
    # an independent check: torch.optim's own (single-tensor) implementation
    if kind == "sgd":
        ours, make = (
            SGD(lr=0.05, momentum=0.9, weight_decay=1e-3, foreach=True),
            lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-3, foreach=False),
        )
    else:
        ours, make = (
            Adam(lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=1e-2, foreach=True),
            lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=1e-2, foreach=False),
        )
    schedule = torch.ones(STEPS, 1, dtype=torch.bool)
    initial, stacked_grads = random_params(leading=(1,)), random_grads(schedule)
    expected, _ = torch_reference(make, initial, stacked_grads, schedule, client=0)
    params, state = {name: value[0].clone() for name, value in initial.items()}, {}
    for step_grads in stacked_grads:
        ours.step(params, {name: g[0] for name, g in step_grads.items()}, state, None)
    for name in SHAPES:
        torch.testing.assert_close(params[name], expected[name], atol=1e-6, rtol=0)


@pytest.mark.parametrize("optimizer", FOREACH_CASES, ids=lambda o: repr(o))
def test_foreach_leaves_masked_and_kept_steps_to_the_loop(optimizer):
    # a cohort with clients skipping steps (the schedule above), steps kept for a tracker: the same bits
    params, state, kept = random_params(), {}, []
    shadow, shadow_state, shadow_kept = random_params(), {}, []
    multi = with_foreach(optimizer)
    for step_grads, active in zip(random_grads(SCHEDULE), SCHEDULE):
        kept.append(optimizer.step(params, step_grads, state, active, keep_steps=True))
        shadow_kept.append(multi.step(shadow, step_grads, shadow_state, active, keep_steps=True))
    for name in SHAPES:
        assert torch.equal(shadow[name], params[name])
        assert all(torch.equal(a[name], b[name]) for a, b in zip(kept, shadow_kept))


def test_a_stacked_sgd_step_every_client_takes_is_the_loops_bit_for_bit():
    everyone = torch.ones(STEPS, CLIENTS, dtype=torch.bool)
    initial, grads = random_params(), random_grads(everyone)
    optimizer = SGD(lr=0.1, momentum=0.9, weight_decay=1e-3)
    loop, _ = run_cohort(optimizer, initial, grads, everyone)
    multi, _ = run_cohort(with_foreach(optimizer), initial, grads, everyone)
    for name in SHAPES:
        assert torch.equal(multi[name], loop[name])


def test_the_foreach_route_is_off_unless_asked():
    settings = OptimizerSettings("adam", 0.01, 0.0, 0.0, (0.9, 0.999), 1e-8)
    assert not build_optimizer(settings).foreach and build_optimizer(settings, foreach=True).foreach


@pytest.mark.parametrize("optimizer", FOREACH_CASES, ids=lambda o: repr(o))
def test_the_foreach_route_runs_exactly_where_every_client_steps_and_no_step_is_kept(optimizer, monkeypatch):
    # every multi-tensor step ends in one torch._foreach_add_ on the parameters; the loop never calls it
    calls = []
    real = torch._foreach_add_

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "_foreach_add_", counted)
    multi = with_foreach(optimizer)

    def steps_taken_by_foreach(params, grads, active, keep_steps=False) -> bool:
        calls.clear()
        multi.step(params, grads, {}, active, keep_steps=keep_steps)
        return bool(calls)

    one = {name: value[0] for name, value in random_params().items()}
    one_grads = {name: g[0] for name, g in random_grads(torch.ones(1, 1, dtype=torch.bool))[0].items()}
    assert steps_taken_by_foreach(clone(one), one_grads, None)  # the sequential path's call
    assert not steps_taken_by_foreach(clone(one), one_grads, None, keep_steps=True)
    everyone = torch.ones(CLIENTS, dtype=torch.bool)
    stacked_grads = random_grads(everyone.unsqueeze(0))[0]
    # a stacked step every client takes: SGD's multi-tensor route; Adam's per-client corrections keep the loop
    assert steps_taken_by_foreach(random_params(), stacked_grads, everyone) == isinstance(optimizer, SGD)
    assert not steps_taken_by_foreach(random_params(), random_grads(SCHEDULE)[1], SCHEDULE[1])  # one skips


@pytest.mark.parametrize("optimizer", FOREACH_CASES, ids=lambda o: repr(o))
def test_with_foreach_a_cohort_whose_clients_skip_steps_is_the_loops_bit_for_bit(optimizer):
    # no step kept, clients skipping and finishing (their gradients NaN): the loop's bits, skipped clients untouched
    initial, grads = random_params(), random_grads(SCHEDULE)
    loop, loop_state = run_cohort(optimizer, initial, grads, SCHEDULE)
    multi, multi_state = run_cohort(with_foreach(optimizer), initial, grads, SCHEDULE)
    after_three, _ = run_cohort(with_foreach(optimizer), initial, grads[:3], SCHEDULE[:3])
    for name in SHAPES:
        assert torch.equal(multi[name], loop[name])
        assert torch.equal(multi[name][2], after_three[name][2])  # client 2 stopped after step 3
        assert bool(torch.isfinite(multi[name]).all())
