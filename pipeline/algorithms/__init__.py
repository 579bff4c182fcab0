"""Federated algorithms: one module each, found by its file's name, holding only what it changes.

An algorithm is a handful of hooks over parameter dicts; `Algorithm` below says what each does and its
default. Every hook has one, FedAvg's own (common.py), so FedAvg's module is its NAME alone and a new
algorithm writes only what differs: FedProx its penalty, SCAFFOLD its contexts, upload and aggregation.
`get_algorithm` checks a module as it loads it and fills in the hooks it leaves out, so that a misspelled
or ill-formed hook fails there, in one line naming the module and the hook, never deep inside a round,
and the engine calls every hook without asking whether it is there.

A new algorithm is a new module here, found with no list to edit (`names`) and imported only when a run
uses it (`get_algorithm`); its runs' train stages depend on its module and the modules it imports, not on
the other algorithms.

The loss (cross-entropy or TCE) and the client optimiser (SGD or Adam) are run settings, not algorithm
code: pipeline/losses.py and pipeline/optimizers.py. The round loop lives in pipeline/rounds.py, local
training in pipeline/cohort.py.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import pkgutil
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Protocol, cast

from pipeline.algorithms import common
from pipeline.errors import UserError

if TYPE_CHECKING:
    import torch

    from pipeline.rounds import LocalResult, RoundView


class Algorithm(Protocol):
    """The hooks the engine calls on an algorithm, each with its default. A module defines them as plain
    functions (without `self`); states, contexts and uploads are dicts of tensors. NAME is required, and
    a hook's companion where it has one (NEEDS); every other hook may be left out."""

    NAME: str  # how runs name it (runs.<key>.algorithm.name): its file's name
    HYPERPARAMS: dict  # its own keys under runs.<key>.algorithm and their defaults; default: none

    def check(self, path: str, hp: dict) -> list[str]:
        """Problems with its keys' values (hp: HYPERPARAMS with the run's values in), one line each naming
        `path`.<key>. Default: none."""

    def init_state(self, global_params: dict, num_clients: int, hp: dict) -> dict:
        """The server's first state, whose "params" is the global model (the engine adds "buffers", the
        BatchNorm statistics, and "clients", the per-client store). Default: the parameters alone."""

    def shared_context(self, state: dict, hp: dict) -> dict:
        """What the server sends every client alike, besides the parameters. Default: nothing."""

    def client_context(self, state: dict, client: int, hp: dict) -> dict:
        """What it sends one client (stacked over the cohort by the engine); state["clients"][client] is
        what `remember` kept of that client's last upload. Default: nothing."""

    def penalty(self, params: dict, shared: dict, ctx: dict, hp: dict) -> torch.Tensor:
        """The scalar added to a client's data loss at every local step. Default: 0."""

    def penalty_affine(self, shared: dict, ctx: dict, hp: dict) -> tuple[dict, dict] | None:
        """`penalty`'s gradient in closed form, scale·θ − offset per name (None: no term), fixed for a
        round: the engine adds it to the data gradient or folds it into a fused SGD step. Default: None
        with the default penalty. A module that writes its penalty without this hook gets
        `penalty_affine = None`, and vmap differentiates the penalty at every step (slower, same numbers)."""

    def local_tracker(self, hp: dict) -> Callable[[], Any] | None:
        """A factory of an object that observes every local step (update(grads, steps, active)) and
        gives client_result(c) to LocalResult.tracked (RWalk's path score, SCAFFOLD's mean gradient).
        Default: None, nothing observed."""

    def client_upload(self, local: LocalResult, hp: dict) -> dict:
        """What a client sends back, from its pipeline.rounds.LocalResult: start and end parameters,
        BatchNorm buffers, local steps taken, its contexts, what its tracker observed, the model and its
        data. Default: its parameters, {"params": ...}."""

    def remember(self, upload: dict, hp: dict) -> dict | None:
        """What the server keeps of a client's upload until that client's next one, in the one per-client
        store (FedCurv's F_k and F_k·θ_k, SCAFFOLD's c_k); None keeps nothing. Default: nothing."""

    def aggregate(self, state: dict, uploads: list[dict], weights: list[float], hp: dict) -> dict:
        """The new server state from the cohort's uploads and sample-size weights. state["clients"]
        already holds this round's remembered uploads; state["previous_clients"] is the store before them,
        for sums kept up to date incrementally. Default: the parameters' weighted mean (FedAvg). A
        "round_log" entry in the state returned (a dict of 0-d tensors) is taken out of the state and
        logged as curves of the run (Importance's spread of its per-element weights); it is never kept."""

    def after_aggregate(self, state: dict, view: RoundView, hp: dict) -> dict:
        """The state once more after aggregation, with a pipeline.rounds.RoundView that evaluates the
        cohort's local models and the new global model on client data (forgettable examples, shared with
        the forgetting probes, so never computed twice). Default: the state unchanged."""

    def sent_down(self, hp: dict) -> tuple[str, ...]:
        """The state entries each client receives besides the parameters (bytes_down). Default: none."""

    def sent_up(self, hp: dict) -> tuple[str, ...]:
        """The upload entries that travel to the server (bytes_up; checked for divergence). Default:
        ("params",)."""


HOOKS = tuple(name for name, value in vars(Algorithm).items() if inspect.isfunction(value) and name[0] != "_")
INTERFACE = ("NAME", "HYPERPARAMS", *HOOKS)

# What a module that leaves a hook out gets (as_algorithm): FedAvg's part.
DEFAULTS: dict[str, Any] = {
    "check": common.no_problems,
    "init_state": common.params_state,
    "shared_context": common.no_shared_context,
    "client_context": common.no_client_context,
    "penalty": common.no_penalty,
    "penalty_affine": common.no_penalty_affine,
    "local_tracker": common.no_tracker,
    "client_upload": common.params_upload,
    "remember": common.nothing_remembered,
    "aggregate": common.sample_weighted_average,
    "after_aggregate": common.state_unchanged,
    "sent_down": common.only_params_down,
    "sent_up": common.only_params_up,
}

# A hook that is of use only with another: its companion must be written too (the default would
# silently contradict it).
NEEDS = {
    "penalty_affine": ("penalty", "the penalty whose gradient it is"),
    "local_tracker": ("client_upload", "the only reader of what the tracker observes"),
}


def as_algorithm(module) -> SimpleNamespace:
    """`module` checked against `Algorithm`, as the complete algorithm the engine calls: its hooks, and
    the default of every hook it leaves out (the module itself is not changed). A module that writes its
    penalty without `penalty_affine` gets None there: vmap differentiates its penalty. Raises UserError,
    one line naming the module and the hook, for what `interface_problems` finds."""
    problems = interface_problems(module)
    if problems:
        raise UserError("; ".join(problems))
    defaults = {"HYPERPARAMS": {}, **DEFAULTS}
    if hasattr(module, "penalty"):
        defaults["penalty_affine"] = None
    return SimpleNamespace(
        module=module, NAME=module.NAME, **{name: getattr(module, name, default) for name, default in defaults.items()}
    )


def interface_problems(module) -> list[str]:
    """Each as "<module>.<name>: what is wrong": no NAME, a name that looks like a misspelled hook, a
    hook the engine's arguments do not fit, a hook defined without the one it needs (NEEDS)."""
    label = getattr(module, "__name__", type(module).__name__)
    problems = []
    if not isinstance(getattr(module, "NAME", None), str):
        problems.append(f"{label}.NAME: missing or not a string; an algorithm is named by its file's name")
    if not isinstance(getattr(module, "HYPERPARAMS", {}), dict):
        problems.append(f"{label}.HYPERPARAMS: not a mapping of the algorithm's keys to their defaults")
    for name in dir(module):
        if not name.startswith("_") and (problem := misspelling(module, name)):
            problems.append(f"{label}.{name}: {problem}")
    for hook in HOOKS:
        if problem := ill_formed(module, hook):
            problems.append(f"{label}.{hook}: {problem}")
    for hook, (needed, why) in NEEDS.items():
        if callable(getattr(module, hook, None)) and not hasattr(module, needed):
            problems.append(f"{label}.{needed}: missing; {hook} is defined and needs it ({why})")
    return problems


def misspelling(module, name: str) -> str | None:
    """Why `name` looks like a misspelled hook (close to one the module leaves out), or None. The
    helpers the modules define (upload_from, penalty_weight, cohort_counts, ...) are none of them."""
    if name in INTERFACE:
        return None
    left_out = {hook.lower(): hook for hook in INTERFACE if not hasattr(module, hook)}
    close = difflib.get_close_matches(name.lower(), list(left_out), n=1, cutoff=0.85)
    return f"not a hook of the interface; did you mean {left_out[close[0]]!r}?" if close else None


def ill_formed(module, hook: str) -> str | None:
    """Why the engine cannot call the module's `hook` with the interface's arguments, or None (also
    when the hook is left out, or is penalty_affine's None: no closed form)."""
    value = getattr(module, hook, None)
    if value is None and (hook == "penalty_affine" or not hasattr(module, hook)):
        return None
    if not callable(value):
        return f"{value!r} is not a function"
    arguments = list(inspect.signature(getattr(Algorithm, hook)).parameters)[1:]  # without self
    try:
        inspect.signature(value).bind(*arguments)
    except TypeError:
        return f"takes {inspect.signature(value)}; the engine calls it with ({', '.join(arguments)})"
    return None


def names(path=__path__) -> list[str]:
    """Every algorithm's name, the baseline FedAvg first: its module's file name (every module here but
    common.py and names starting with _). Nothing is imported: an algorithm is loaded when a run uses it
    (`get_algorithm`), so one broken module fails its own runs only. An algorithm is added by adding its
    module, with no list to edit here, so this file (part of every train stage's fingerprint) does not
    change and no other algorithm's runs rerun (each train stage depends on its own algorithm's module
    only: pipeline.fingerprint)."""
    found = sorted(
        info.name for info in pkgutil.iter_modules(path) if info.name != "common" and not info.name.startswith("_")
    )
    return ["fedavg"] * ("fedavg" in found) + [name for name in found if name != "fedavg"]


@functools.cache
def get_algorithm(name: str, package: str = __name__) -> Algorithm:
    """The algorithm `name`, imported, checked against the interface and completed (`as_algorithm`);
    a module that cannot be imported or breaks the interface is one line naming it."""
    path = f"{package.replace('.', '/')}/{name}.py"
    try:
        module = importlib.import_module(f"{package}.{name}")
    except UserError:
        raise
    except Exception as error:  # a syntax error, a failed import, an exception at import: the module's own
        where = f" (line {error.lineno})" if isinstance(error, SyntaxError) and error.lineno else ""
        raise UserError(
            f"{path}: the algorithm module cannot be imported{where}: {type(error).__name__}: {error}"
        ) from None
    if getattr(module, "NAME", None) != name:
        raise UserError(
            f"{path}: NAME is {getattr(module, 'NAME', None)!r}; an algorithm's NAME is its file's "
            f"name ({name!r}), by which the train stages find its code"
        )
    return cast(Algorithm, as_algorithm(module))


def check_algorithm(path: str, settings) -> list[str]:
    known = names()
    if not isinstance(settings, dict) or "name" not in settings:
        return [f"{path}: {settings!r} is not allowed; expected a mapping with a `name` ({', '.join(known)})"]
    name = settings["name"]
    if not isinstance(name, str) or name not in known:
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(known)}"
        return [f"{path}.name: unknown algorithm {name!r}{hint}"]
    try:
        module = get_algorithm(name)
    except UserError as error:
        return [f"{path}.name: {error}"]
    hp = {key: value for key, value in settings.items() if key != "name"}
    problems = []
    for key in hp:
        if key not in module.HYPERPARAMS:
            close = difflib.get_close_matches(str(key), list(module.HYPERPARAMS), n=1)
            hint = (
                f"; did you mean {close[0]!r}?"
                if close
                else f"; {name} takes: {', '.join(module.HYPERPARAMS) or 'no keys'}"
            )
            problems.append(f"{path}.{key}: unknown key{hint}")
    return problems or module.check(path, resolve_hyperparams(settings))


def resolve_hyperparams(settings: dict) -> dict:
    """The algorithm's hyper-parameters with its defaults filled in."""
    module = get_algorithm(settings["name"])
    return {**module.HYPERPARAMS, **{k: v for k, v in settings.items() if k != "name"}}
