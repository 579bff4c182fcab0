"""Federated algorithms: one module each, all with the same small set of functions over parameter dicts.

    HYPERPARAMS                      defaults of the algorithm's own keys under runs.<key>.algorithm
    check(path, hp) -> [problems]    validation of those keys (one line each)
    init_state(global_params, num_clients, hp) -> server state (a dict; "params" is the global model;
                                     the engine adds "buffers" (BatchNorm statistics) and "clients")
    shared_context(state, hp)        what the server sends every client alike (tensors)
    client_context(state, client, hp)   what it sends one client (tensors; stacked over the cohort);
                                     state["clients"][client] is what `remember` kept of its last upload
    penalty(params, shared, ctx, hp) -> scalar added to the local data loss (0 for FedAvg)
    penalty_affine(shared, ctx, hp)  (optional) the penalty's gradient in closed form, as scale·θ − offset
                                     per name (None: no term); the engine adds it to the data gradient
                                     or folds it into a fused SGD step. Without it, vmap differentiates
                                     `penalty` at every step (slower, same numbers)
    client_upload(local, hp)         what a client sends back, from its whole pipeline.rounds.LocalResult:
                                     start and end parameters, BatchNorm buffers, local steps taken, its
                                     contexts, what its tracker observed, the model and its data
                                     (FedCurv and Importance compute their Fisher from it here)
    sent_down(hp), sent_up(hp)       the state / upload entries that travel (bytes; divergence check)
    aggregate(state, uploads, weights, hp) -> new server state (state["clients"] already holds
                                     this round's `remember`ed uploads; state["previous_clients"] is
                                     the store before them, for sums kept up to date incrementally)

Optional hooks, looked up with hasattr / getattr:

    local_tracker(hp) -> factory or None   an object observing every local step (update(grads, steps,
                                     active)) and giving client_result(c) to LocalResult.tracked
                                     (RWalk's PathScore, pipeline/path_score.py)
    remember(upload, hp) -> dict     what the server keeps per client until that client's next upload
                                     (the one per-client store: FedCurv's F_k, F_k·θ_k; SCAFFOLD's c_k)
    after_aggregate(state, view, hp) -> state   runs after aggregation with a pipeline.rounds.RoundView,
                                     which evaluates the cohort's local models and the new global model
                                     on client data (forgettable examples, cached and shared with the
                                     forgetting probes, so they are never computed twice)

A new algorithm is a new module here defining NAME and the functions above; it is found by name
(`discover`), and its runs' train stages depend on its module and the modules it imports from this
package, not on the other algorithms.

The loss (cross-entropy or TCE) and the client optimiser (SGD or Adam) are run settings, not algorithm
code: pipeline/losses.py and pipeline/optimizers.py. The round loop lives in pipeline/rounds.py, local
training in pipeline/cohort.py.
"""
from __future__ import annotations

import difflib
import importlib
import pkgutil


def discover() -> dict:
    """Every module of this package that defines NAME, by that name: an algorithm is added by adding
    its module, with no list to edit here, so this file (a dependency of every train stage) does not
    change and no other algorithm's runs are retrained (stages/<paper>/dvc.yaml: each train stage depends on its own
    algorithm's module only, see pipeline.fingerprint.algorithm_code)."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "NAME"):
            found[module.NAME] = module
    order = ["fedavg"] + sorted(name for name in found if name != "fedavg")  # the baseline first
    return {name: found[name] for name in order if name in found}


ALGORITHMS = discover()


def get_algorithm(name: str):
    return ALGORITHMS[name]


def check_algorithm(path: str, settings) -> list[str]:
    if not isinstance(settings, dict) or "name" not in settings:
        return [f"{path}: {settings!r} is not allowed; expected a mapping with a `name` "
                f"({', '.join(ALGORITHMS)})"]
    name = settings["name"]
    if not isinstance(name, str) or name not in ALGORITHMS:
        close = difflib.get_close_matches(str(name), list(ALGORITHMS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(ALGORITHMS)}"
        return [f"{path}.name: unknown algorithm {name!r}{hint}"]
    module = ALGORITHMS[name]
    hp = {key: value for key, value in settings.items() if key != "name"}
    problems = []
    for key in hp:
        if key not in module.HYPERPARAMS:
            close = difflib.get_close_matches(str(key), list(module.HYPERPARAMS), n=1)
            hint = (f"; did you mean {close[0]!r}?" if close
                    else f"; {name} takes: {', '.join(module.HYPERPARAMS) or 'no keys'}")
            problems.append(f"{path}.{key}: unknown key{hint}")
    return problems or module.check(path, resolve_hyperparams(settings))


def resolve_hyperparams(settings: dict) -> dict:
    """The algorithm's hyper-parameters with its defaults filled in."""
    module = ALGORITHMS[settings["name"]]
    return {**module.HYPERPARAMS, **{k: v for k, v in settings.items() if k != "name"}}
