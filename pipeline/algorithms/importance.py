"""Importance From Agent (Kim, Kim & Kim 2020): EWC against the global Fisher in every client, and a
server that averages parameters weighted by the clients' Fisher, element by element.

Client k in round t receives θ_t and the global Fisher F_t and minimises (the paper's eq. 3)

    L_k(θ) + λ/2 · Σ F_t (θ − θ_t)²                    (`penalty: ewc`)

then computes its diagonal Fisher F_k at its new parameters (per-sample, as FedCurv; pipeline.fisher),
smooths it towards the global one, F_k ← γ·F_t + (1−γ)·F_k (eq. 4), and uploads θ_k and F_k.
The server (eq. 2) sets

    F_{t+1} = mean_k F_k,        θ_{t+1} = Σ_k F̄_k · θ_k,

F̄_k being F_k "normalised over each layer from a client and then over all clients, sequentially". The
reading implemented (`importance_weights`): first every layer of every client is divided by that
layer's sum, so each client brings the same total importance to each layer whatever the scale of its
loss; then, element by element, by the sum of those over the cohort, so Σ_k F̄_k = 1 everywhere and
θ_{t+1} is a per-element convex combination of the clients' parameters. Algorithm 1 writes a further
1/m in front of that sum; with weights already summing to one it would shrink θ m-fold every round,
so eq. 2 (no 1/m) is followed. Where no client has any importance for an element (exactly zero
Fisher in every client: a hidden unit no sample of the cohort activates, so its weights get no gradient),
the sample-size weights of FedAvg take over. Blank MNIST pixels are such elements too where the run
scales pixels to [0, 1] (`input_scaling: unit`, the MNIST runs' setting): a pixel that is 0 in every
sample of the cohort gives its first-layer weights no gradient and so no Fisher, and they are averaged by
sample size; with standardised inputs a blank pixel is a non-zero constant and its weights do get one.

Two choices the paper leaves open, decided here:
- Round 1: there is no global Fisher yet, so no EWC term and no smoothing (with F_0 = 0 the smoothing
  would scale the first global Fisher by 1−γ and λ's effect would grow over ~20 rounds).
- F_t is the mean over the last round's participants (Algorithm 1; section 3.2's 1/K is read as the
  same mean, since the server holds only the uploads it received).

The ablations of the paper's Table 3 are settings of this one module:
    FedAvg + L2 (= FedProx)   penalty: l2,   aggregation: samples   λ/2·‖θ − θ_t‖²
    FedAvg + EWC              penalty: ewc,  aggregation: samples
    FedAvg + weighted average penalty: none, aggregation: importance
    ours                      penalty: ewc,  aggregation: importance

`importance: rwalk` replaces the Fisher with RWalk's importance (Chaudhry et al. 2018), which combines
the Fisher with the path-integral score the engine accumulates along the client's local trajectory
(pipeline.path_score). The score is in other units than the Fisher (its size depends on the learning rate and
the number of steps), so each layer's score is rescaled to that layer's total Fisher, and the RWalk
importance is the mean of the two: it has the Fisher's mass layer by layer, so λ keeps its meaning
across Table 4 (only how the importance is spread over a layer's elements differs).
"""

from __future__ import annotations

import torch

from pipeline.algorithms.common import weighted_sum
from pipeline.path_score import PathScore
from pipeline.fisher import client_fisher
from pipeline.checks import check_choice, check_fraction, check_int, check_nonnegative, check_positive

NAME = "importance"
HYPERPARAMS = {
    "lambda": 1.0e5,
    "penalty": "ewc",
    "aggregation": "importance",
    "importance": "fisher",
    "gamma": 0.9,
    "fisher_samples": None,
    "fisher_labels": "true",
    "rwalk_decay": 0.9,
    "rwalk_epsilon": 1.0e-8,
}
PENALTIES = ("ewc", "l2", "none")
AGGREGATIONS = ("importance", "samples")
IMPORTANCES = ("fisher", "rwalk")


def check(path, hp):
    problems = check_nonnegative(f"{path}.lambda", hp["lambda"])
    problems += check_choice(f"{path}.penalty", hp["penalty"], PENALTIES)
    problems += check_choice(f"{path}.aggregation", hp["aggregation"], AGGREGATIONS)
    problems += check_choice(f"{path}.importance", hp["importance"], IMPORTANCES)
    problems += check_fraction(f"{path}.gamma", hp["gamma"], low_open=False, high=1.0)
    if hp["fisher_samples"] is not None:
        problems += check_int(f"{path}.fisher_samples", hp["fisher_samples"], 1)
    problems += check_choice(f"{path}.fisher_labels", hp["fisher_labels"], ("true", "sampled"))
    problems += check_fraction(f"{path}.rwalk_decay", hp["rwalk_decay"], low_open=False, high=1.0)
    problems += check_positive(f"{path}.rwalk_epsilon", hp["rwalk_epsilon"])
    return problems


def uses_importance(hp) -> bool:
    """Whether clients compute and upload an importance at all (FedAvg + L2 does not)."""
    return hp["penalty"] == "ewc" or hp["aggregation"] == "importance"


def sent_down(hp):
    # The global Fisher goes down whenever clients use it: for the EWC term, and for eq. 4's smoothing
    # of their upload (the weighted-average ablation too, which has no EWC term).
    return ("fisher",) if uses_importance(hp) else ()


def sent_up(hp):
    return ("params", "fisher") if uses_importance(hp) else ("params",)


def init_state(global_params, num_clients, hp):
    # "fisher" is None until the first aggregation: round 1 has no global importance to use.
    return {"params": global_params, "fisher": None}


def shared_context(state, hp):
    return {"global": state["params"], "fisher": state["fisher"]}


def penalty(params, shared, ctx, hp):
    weight = penalty_weight(shared, hp)
    if weight is None:
        return torch.zeros(())
    total = sum((weight[n] * (params[n] - shared["global"][n]) ** 2).sum() for n in params)
    return 0.5 * hp["lambda"] * total


def penalty_affine(shared, ctx, hp):
    """∂penalty/∂θ = λ·F_t·(θ − θ_t) (EWC) or λ·(θ − θ_t) (L2) as scale·θ − offset: (λF_t, λF_t·θ_t) or
    (λ, λθ_t); None without a term."""
    weight = penalty_weight(shared, hp)
    if weight is None:
        return None
    scale = {n: hp["lambda"] * weight[n] for n in shared["global"]}
    return scale, {n: scale[n] * value for n, value in shared["global"].items()}


def penalty_weight(shared, hp):
    """Per-element weight of the quadratic: F_t for EWC, 1 for L2, None when there is no term."""
    if hp["lambda"] == 0:
        return None
    if hp["penalty"] == "l2":
        return {n: 1.0 for n in shared["global"]}
    if hp["penalty"] == "ewc" and shared["fisher"] is not None:
        return shared["fisher"]
    return None


def local_tracker(hp):
    """RWalk observes each client's local trajectory (its path score); the Fisher variant observes nothing."""
    if uses_importance(hp) and hp["importance"] == "rwalk":
        return lambda: PathScore(hp["rwalk_decay"], hp["rwalk_epsilon"])
    return None


def client_upload(local, hp):
    if not uses_importance(hp):
        return {"params": local.params}
    path_score = local.tracked["path_score"] if local.tracked else None
    return upload_from(local.params, client_fisher(local, hp), hp, local.shared, path_score)


def upload_from(params, fisher, hp, shared=None, path_score=None):
    """θ_k and the smoothed importance (eq. 4) from a client's parameters, Fisher and path score."""
    if not uses_importance(hp):
        return {"params": params}
    importance = rwalk_importance(fisher, path_score) if hp["importance"] == "rwalk" else fisher
    return {"params": params, "fisher": smooth(importance, (shared or {}).get("fisher"), hp["gamma"])}


def smooth(local: dict, global_fisher: dict | None, gamma: float) -> dict:
    """Eq. 4: F_k ← γ·F_t + (1−γ)·F_k; unchanged while there is no global Fisher yet."""
    if global_fisher is None:
        return local
    return {n: gamma * global_fisher[n] + (1.0 - gamma) * local[n] for n in local}


def rwalk_importance(fisher: dict, path_score: dict) -> dict:
    """½·(Fisher + path score), the score of each layer first rescaled to that layer's total Fisher:
    every layer keeps the Fisher's total mass. A layer with no score (none at all: a parameter `freeze`
    holds fixed takes no step) keeps its Fisher alone."""
    combined = {}
    for name, f in fisher.items():
        score = path_score.get(name)
        if score is not None and float(score.sum()) > 0:
            combined[name] = 0.5 * (f + (f.sum() / score.sum()) * score)
        else:
            combined[name] = f
    return combined


def importance_weights(importances: list[dict], sample_weights: list[float]) -> list[dict]:
    """F̄_k of eq. 2: each client's layer divided by its sum, then each element by its cohort sum.

    Elements that no client finds important take the sample-size weights instead."""
    per_layer = [
        {n: f / f.sum() if float(f.sum()) > 0 else torch.zeros_like(f) for n, f in imp.items()} for imp in importances
    ]
    weights = [dict() for _ in importances]
    for name in importances[0]:
        total = sum(layer[name] for layer in per_layer)
        covered = total > 0
        safe_total = torch.where(covered, total, torch.ones_like(total))
        for k, layer in enumerate(per_layer):
            weights[k][name] = torch.where(covered, layer[name] / safe_total, torch.full_like(total, sample_weights[k]))
    return weights


# A per-element weight counts as moved from FedAvg's when it differs from its client's sample-size weight
# by more than this fraction of it.
MOVED_FRACTION = 0.1


def weight_spread(element_weights: list[dict], sample_weights: list[float]) -> dict:
    """How far the per-element weights F̄_k are from the sample-size weights p_k that FedAvg would use:
    the mean over clients and elements of |F̄_k − p_k| / p_k, and the share of (client, element) pairs
    moved by more than MOVED_FRACTION of p_k. Both near 0: the aggregation is practically FedAvg's (with
    γ = 0.9 every upload is 90 % the global Fisher after round 1; issue 37). 0-d tensors: no read-back."""
    deviations = torch.cat(
        [((w[name] - p).abs() / p).flatten() for w, p in zip(element_weights, sample_weights) for name in w]
    )
    return {
        "importance_weight_deviation": deviations.mean(),
        "importance_weight_moved_share": (deviations > MOVED_FRACTION).float().mean(),
    }


def aggregate(state, uploads, weights, hp):
    if not uses_importance(hp):
        return {**state, "params": weighted_sum(uploads, weights, "params")}
    fishers = [up["fisher"] for up in uploads]
    global_fisher = {n: sum(f[n] for f in fishers) / len(fishers) for n in fishers[0]}
    if hp["aggregation"] != "importance":
        return {"params": weighted_sum(uploads, weights, "params"), "fisher": global_fisher}
    element_weights = importance_weights(fishers, weights)
    params = {n: sum(w[n] * up["params"][n] for w, up in zip(element_weights, uploads)) for n in uploads[0]["params"]}
    return {"params": params, "fisher": global_fisher, "round_log": weight_spread(element_weights, weights)}
