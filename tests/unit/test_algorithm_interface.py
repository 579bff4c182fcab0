"""The algorithm interface (pipeline.algorithms.Algorithm): a module holds only the hooks it changes,
loading fills in the others with their defaults (FedAvg's), and a module that does not fit the
interface is refused when a run uses it, in one line naming the module and the hook; the other
algorithms are not touched by it."""

from __future__ import annotations

import inspect
import textwrap

import pytest
import torch

from pipeline import algorithms, models
from pipeline.algorithms import DEFAULTS, HOOKS, Algorithm, check_algorithm
from pipeline.errors import UserError
from pipeline.rounds import initial_state, run_round
from support import synthetic
from support.algorithms import fedavg, fedprox

# The README's "add an algorithm" example, whole: a server step size over FedAvg's mean.
SERVER_LR = '''\
"""FedAvg with a server step size: θ ← θ + η_g·(the clients' weighted mean − θ)."""
from pipeline.algorithms import common
from pipeline.checks import check_positive

NAME = "fedavg_server_lr"
HYPERPARAMS = {"server_lr": 1.0}


def check(path, hp):
    return check_positive(f"{path}.server_lr", hp["server_lr"])


def aggregate(state, uploads, weights, hp):
    mean = common.weighted_sum(uploads, weights, "params")
    step = hp["server_lr"]
    return {**state, "params": {n: p + step * (mean[n] - p) for n, p in state["params"].items()}}
'''

# FedProx's penalty without its closed form: the engine differentiates it with vmap at every step.
PROX_BY_AUTOGRAD = """\
NAME = "prox_by_autograd"
HYPERPARAMS = {"mu": 0.5}


def shared_context(state, hp):
    return {"global": state["params"]}


def penalty(params, shared, ctx, hp):
    return 0.5 * hp["mu"] * sum(((params[n] - shared["global"][n]) ** 2).sum() for n in params)
"""

DATA = synthetic.make_data([6, 9, 5], shape=(8, 8, 1), classes=4)


def package(tmp_path, monkeypatch, modules: dict) -> tuple[list[str], str]:
    """A package of algorithm modules (file stem -> source) under tmp_path, importable, and where the
    package looks for algorithms while the test runs (pipeline.algorithms.SEARCH)."""
    name = f"algorithms_{tmp_path.name}"  # one per test: a package already imported would be reused
    folder = tmp_path / name
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for stem, source in modules.items():
        (folder / f"{stem}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    load, listed = algorithms.get_algorithm, algorithms.names
    monkeypatch.setattr(algorithms, "names", lambda path=None: listed([str(folder)]))
    monkeypatch.setattr(algorithms, "get_algorithm", lambda stem, package=name: load(stem, package))
    return [str(folder)], name


def discovered(tmp_path, monkeypatch, stem: str, source: str):
    """The module `source`, loaded as the package's own are."""
    package(tmp_path, monkeypatch, {stem: source})
    return algorithms.get_algorithm(stem)


def one_round(algorithm, hp: dict, vectorized: bool = True):
    """A round of `algorithm` from a fresh model: (its start parameters, the round's result)."""
    model = models.build_model("mlp_200", (8, 8, 1), 4, 0)
    hp = {**algorithm.HYPERPARAMS, **hp}
    state = initial_state(model, algorithm, len(DATA.clients), hp)
    start = {n: p.clone() for n, p in state["params"].items()}
    settings = synthetic.run_settings(3, local_epochs=1, lr=0.1)
    return start, run_round(model, algorithm, hp, state, DATA, settings, 1, vectorized=vectorized)


def test_every_hook_has_a_default_taking_its_arguments_and_fedavg_is_the_defaults():
    assert set(DEFAULTS) == set(HOOKS)
    for hook in HOOKS:
        arguments = list(inspect.signature(getattr(Algorithm, hook)).parameters)[1:]  # without self
        assert list(inspect.signature(DEFAULTS[hook]).parameters) == arguments, hook
    assert all(getattr(fedavg, hook) is DEFAULTS[hook] for hook in HOOKS)
    assert fedavg.HYPERPARAMS == {} and fedavg.check("runs.x.algorithm", {}) == []


@pytest.mark.parametrize("vectorized", [True, False], ids=["vectorized", "sequential"])
def test_a_module_with_only_what_it_changes_is_discovered_and_trains_through_the_round(
    tmp_path, monkeypatch, vectorized
):
    module = discovered(tmp_path, monkeypatch, "fedavg_server_lr", SERVER_LR)
    assert [hook for hook in HOOKS if getattr(module, hook) is not DEFAULTS[hook]] == ["check", "aggregate"]
    assert check_algorithm("runs.x.algorithm", {"name": module.NAME, "server_lr": 0.5}) == []
    assert check_algorithm("runs.x.algorithm", {"name": module.NAME, "server_lr": 0}) == [
        "runs.x.algorithm.server_lr: 0 is not allowed; expected a finite number > 0"
    ]

    start, averaged = one_round(fedavg, {}, vectorized)
    _, half_step = one_round(module, {"server_lr": 0.5}, vectorized)
    # The defaulted hooks are FedAvg's: the same local training, the same bytes each way.
    assert (half_step.train_loss, half_step.bytes_down, half_step.bytes_up) == (
        averaged.train_loss,
        averaged.bytes_down,
        averaged.bytes_up,
    )
    for name, value in start.items():
        torch.testing.assert_close(half_step.state["params"][name], (value + averaged.state["params"][name]) / 2)
    assert any(not torch.equal(start[n], averaged.state["params"][n]) for n in start)  # the round did train


def test_a_penalty_without_its_closed_form_is_differentiated_by_the_engine(tmp_path, monkeypatch):
    module = discovered(tmp_path, monkeypatch, "prox_by_autograd", PROX_BY_AUTOGRAD)
    assert module.penalty_affine is None  # not the default's "no term": there is one, without a closed form
    _, by_autograd = one_round(module, {"mu": 0.5})
    _, closed_form = one_round(fedprox, {"mu": 0.5})
    _, without = one_round(fedavg, {})
    for name, value in closed_form.state["params"].items():
        torch.testing.assert_close(by_autograd.state["params"][name], value, atol=1e-6, rtol=1e-5)
    assert any(not torch.allclose(without.state["params"][n], v) for n, v in closed_form.state["params"].items())


AGGREGATE = "def aggregate(state, uploads, weights, hp):\n    return state\n"


@pytest.mark.parametrize(
    "source, where, says",
    [
        (
            f'NAME = "bad"\n{AGGREGATE}def remeber(upload, hp):\n    return upload\n',
            "remeber",
            "not a hook of the interface; did you mean 'remember'?",
        ),
        (
            'NAME = "bad"\ndef after_agregate(state, view, hp):\n    return state\n',
            "after_agregate",
            "not a hook of the interface; did you mean 'after_aggregate'?",
        ),
        ('NAME = "bad"\nHYPERPARAM = {"mu": 1.0}\n', "HYPERPARAM", "did you mean 'HYPERPARAMS'?"),
        (
            'NAME = "bad"\ndef aggregate(state, uploads, weights):\n    return state\n',
            "aggregate",
            "takes (state, uploads, weights); the engine calls it with (state, uploads, weights, hp)",
        ),
        ('NAME = "bad"\nsent_up = ("params",)\n', "sent_up", "('params',) is not a function"),
        (
            'NAME = "bad"\ndef penalty_affine(shared, ctx, hp):\n    return None\n',
            "penalty",
            "missing; penalty_affine is defined and needs it (the penalty whose gradient it is)",
        ),
        (AGGREGATE, "NAME", "None; an algorithm's NAME is its file's name ('bad')"),
        (f'NAME = "other"\n{AGGREGATE}', "NAME", "'other'; an algorithm's NAME is its file's name ('bad')"),
    ],
    ids=[
        "misspelled_remember",
        "misspelled_after_aggregate",
        "misspelled_hyperparams",
        "an_argument_short",
        "not_a_function",
        "penalty_affine_without_penalty",
        "no_name",
        "name_not_the_files",
    ],
)
def test_a_module_that_does_not_fit_the_interface_is_refused_at_discovery_in_one_line(
    tmp_path, monkeypatch, source, where, says
):
    path, name = package(tmp_path, monkeypatch, {"bad": source})
    with pytest.raises(UserError) as refused:
        algorithms.get_algorithm("bad")
    message = str(refused.value)
    start = f"{name}/bad.py: NAME is " if where == "NAME" else f"{name}.bad.{where}: "
    assert message.startswith(start) and says in message
    assert "\n" not in message


def test_what_an_aggregation_logs_leaves_the_state_and_reaches_the_round_result(tmp_path, monkeypatch):
    """A module whose aggregate returns a round_log: the round's result carries it, the state kept does not
    (so it is neither checkpointed nor sent to clients)."""
    module = discovered(
        tmp_path,
        monkeypatch,
        "logs",
        textwrap.dedent("""\
        import torch
        from pipeline.algorithms import common
        NAME = "logs"
        def aggregate(state, uploads, weights, hp):
            return {**common.sample_weighted_average(state, uploads, weights, hp),
                    "round_log": {"cohort": torch.tensor(float(len(uploads)))}}
        """),
    )
    _, result = one_round(module, {})
    assert "round_log" not in result.state
    assert {name: float(value) for name, value in result.aggregation_log.items()} == {"cohort": len(result.cohort)}
    assert len(result.cohort) > 1
