"""Federated algorithms: one module each, all with the same small set of functions over parameter dicts.

    HYPERPARAMS                      defaults of the algorithm's own keys under runs.<key>.algorithm
    check(path, hp) -> [problems]    validation of those keys (one line each)
    init_state(global_params, num_clients, hp) -> server state (a dict; "params" is the global model)
    shared_context(state, hp)        what the server sends every client alike (tensors)
    client_context(state, client, hp)   what it sends one client (tensors; stacked over the cohort)
    penalty(params, shared, ctx, hp) -> scalar added to the local data loss (0 for FedAvg)
    penalty_affine(shared, ctx, hp)  (optional) the penalty's gradient in closed form, as scale·θ − offset
                                     per name (None: no term); the engine adds it to the data gradient
                                     or folds it into a fused SGD step. Without it, vmap differentiates
                                     `penalty` at every step (slower, same numbers)
    client_upload(params, fisher, hp, shared, path_score)   what a client sends back after training
    upload_needs_fisher(hp) -> bool  whether the engine must compute the client's Fisher diagonal
    needs_path_score(hp) -> bool     whether the engine must accumulate RWalk's path score (PathScore)
    sent_down(hp), sent_up(hp)       the state / upload entries that travel (bytes; divergence check)
    aggregate(state, uploads, weights, hp) -> new server state

The engine (pipeline/engine.py) owns sampling, local SGD, evaluation and checkpoints.
"""
from __future__ import annotations

import difflib

from pipeline.algorithms import fedavg, fedcurv, fedprox, importance

ALGORITHMS = {module.NAME: module for module in (fedavg, fedprox, fedcurv, importance)}


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
