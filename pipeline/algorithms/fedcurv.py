"""FedCurv (Shoham et al. 2019): EWC's Fisher penalty between clients, kept cheap by two server sums.

Client k at round t minimises (the paper's eq. 3)

    L_k(θ) + λ Σ_{j≠k} (θ − θ_j)ᵀ diag(F_j) (θ − θ_j),

θ_j and F_j being client j's last trained parameters and the diagonal Fisher there. Section 3.1
expands the sum: with u = Σ_j F_j and v = Σ_j F_j·θ_j kept by the server, client k evaluates it from
u − F_k and v − F_k·θ_k (its own term subtracted; `client_context`), which `penalty` evaluates:

    λ [ θᵀ(u − F_k)θ − 2 θᵀ(v − F_k·θ_k) + Σ(w − F_k·θ_k²) ],   w = Σ_j F_j·θ_j².

The last term is a constant (no gradient); it is kept so the value equals the explicit sum exactly
(tests/test_algorithms.py checks this against the pairwise form).

Which uploads the sums cover (`sums_over`): the paper uses every client every round (C = 1), where
both readings agree. With C < 1, `latest` keeps every client's most recent upload in the sums (the
paper's footnote: the method "can be easily adapted"; eq. 3 sums over all other nodes), `participants`
uses only this round's cohort.

The Fisher is the diagonal empirical Fisher (`fisher_labels: true`) or the one with labels sampled from
the model (`sampled`), averaged over per-sample squared gradients of `fisher_samples` of the client's
samples (null: all of them), computed by pipeline.fisher at the client's new parameters.
"""

from __future__ import annotations

import torch

from pipeline.algorithms.common import weighted_sum, zeros_like
from pipeline.fisher import client_fisher
from pipeline.checks import check_choice, check_int, check_nonnegative

NAME = "fedcurv"
HYPERPARAMS = {"lambda": 1.0, "fisher_samples": None, "fisher_labels": "true", "sums_over": "latest"}


def check(path, hp):
    problems = check_nonnegative(f"{path}.lambda", hp["lambda"])
    if hp["fisher_samples"] is not None:
        problems += check_int(f"{path}.fisher_samples", hp["fisher_samples"], 1)
    problems += check_choice(f"{path}.fisher_labels", hp["fisher_labels"], ("true", "sampled"))
    problems += check_choice(f"{path}.sums_over", hp["sums_over"], ("latest", "participants"))
    return problems


def sent_down(hp):
    return ("u", "v")  # besides θ (section 3.1: "two additional elements ... of the same size as θ")


def sent_up(hp):
    return ("params", "fisher", "fisher_params")


def init_state(global_params, num_clients, hp):
    zero = zeros_like(global_params)
    # Each client's own last upload (F_k, F_k·θ_k, F_k·θ_k²) is kept in the engine's per-client store
    # (state["clients"], see `remember`): in deployment the client keeps it. "summed" lists the clients
    # whose uploads are in u and v; "carried_sums" (only while sums are carried from round to round, C < 1)
    # holds them, and Σ F·θ², in float64 (`latest_sums`). Σ F·θ² is on the model's device and in its
    # dtype, as the sums that replace it are.
    like = next(iter(global_params.values()))
    return {
        "params": global_params,
        "u": zero,
        "v": dict(zero),
        "w_total": torch.zeros((), dtype=like.dtype, device=like.device),
        "summed": [],
    }


def client_context(state, client, hp):
    """The sums with the client's own last upload taken out: u − F_k, v − F_k·θ_k and the constant.

    Subtracted once per round here rather than at every local step."""
    own = state["clients"].get(client) if client in state["summed"] else None
    if own is None:
        return {"fisher_others": state["u"], "anchor_others": state["v"], "constant": state["w_total"]}
    return {
        # u − F_k is a sum of the others' Fishers, never negative; float32 cancellation can make it
        # slightly so where the client's own Fisher dominates (its own classes' output rows).
        "fisher_others": {n: (state["u"][n] - own["fisher"][n]).clamp_min(0) for n in state["u"]},
        "anchor_others": {n: state["v"][n] - own["fisher_params"][n] for n in state["v"]},
        "constant": state["w_total"] - own["fisher_params2"],
    }


def penalty(params, shared, ctx, hp):
    quadratic = linear = 0.0
    for name, theta in params.items():
        quadratic = quadratic + (ctx["fisher_others"][name] * theta * theta).sum()
        linear = linear + (ctx["anchor_others"][name] * theta).sum()
    return hp["lambda"] * (quadratic - 2.0 * linear + ctx["constant"])


def penalty_affine(shared, ctx, hp):
    """∂penalty/∂θ = 2λ[(u − F_k)·θ − (v − F_k·θ_k)] as scale·θ − offset: (2λ(u − F_k), 2λ(v − F_k·θ_k));
    None at λ = 0 (the engine then adds no penalty term). Works on stacked cohorts too."""
    if hp["lambda"] == 0:
        return None
    return (
        {n: 2.0 * hp["lambda"] * f for n, f in ctx["fisher_others"].items()},
        {n: 2.0 * hp["lambda"] * a for n, a in ctx["anchor_others"].items()},
    )


def client_upload(local, hp):
    return upload_from(local.params, client_fisher(local, hp), hp)


def upload_from(params, fisher, hp, shared=None):
    """θ_k, F_k, F_k·θ_k and Σ F_k·θ_k² from a client's parameters and Fisher."""
    fisher_params = {name: fisher[name] * params[name] for name in params}
    return {
        "params": params,
        "fisher": fisher,
        "fisher_params": fisher_params,
        "fisher_params2": sum((fisher_params[n] * params[n]).sum() for n in params),
    }


def remember(upload, hp):
    """What the server keeps of a client's upload until its next one."""
    return {key: upload[key] for key in ("fisher", "fisher_params", "fisher_params2")}


def aggregate(state, uploads, weights, hp):
    """θ ← weighted mean of the cohort; u, v and Σ F·θ² ← sums over the uploads `sums_over` says: every
    client's latest (the per-client store, this round's uploads already in it) or this round's only."""
    carried = None
    if hp["sums_over"] == "latest":
        (u, v, w_total), carried = latest_sums(state, uploads)
        summed = sorted(state["clients"])
    else:
        summed = [up["client"] for up in uploads]
        kept = [remember(up, hp) for up in uploads]
        u, v, w_total = sums(kept)
    new = {"params": weighted_sum(uploads, weights, "params"), "u": u, "v": v, "w_total": w_total, "summed": summed}
    return new if carried is None else {**new, "carried_sums": carried}


def sums(entries: list) -> tuple:
    """Σ F, Σ F·θ and Σ F·θ² over remembered entries."""
    ones = [1.0] * len(entries)
    return (
        weighted_sum(entries, ones, "fisher"),
        weighted_sum(entries, ones, "fisher_params"),
        sum(entry["fisher_params2"] for entry in entries),
    )


def latest_sums(state, uploads) -> tuple:
    """The sums over every client's latest upload, and the float64 totals they were carried in (None
    when taken afresh), kept up to date in O(cohort): the previous totals plus this round's entries
    minus the ones they replace (issue 17: with C = 0.1 of 100 clients a re-sum read 100 entries a
    round, this reads 20). When every stored client uploaded this round (C = 1, and the first round)
    there is nothing to carry over, and the sums are taken afresh in the entries' own precision: the
    same numbers as a re-sum. The totals are carried in float64 because a float32 running sum loses
    small entries for good when a large one is taken out (1.0 + 99 × 1e-9, less the 1.0, is 0 in
    float32): carried in float64 they stay within float32 rounding of a fresh sum
    (tests/test_algorithms.py: 30 rounds of random cohorts, and that case)."""
    store, previous = state["clients"], state.get("previous_clients")
    uploaded = [up["client"] for up in uploads]
    if previous is None or set(uploaded) == set(store) or set(state["summed"]) != set(previous):
        return sums([store[client] for client in sorted(store)]), None
    names = list(state["u"])
    # {"fisher": Σ F, "fisher_params": Σ F·θ, "fisher_params2": Σ F·θ²} in float64; on the first carried
    # round, taken afresh (once) over the previous store
    carried = state.get("carried_sums") or totals64([previous[client] for client in sorted(previous)], names)
    exact = carry(
        carried,
        totals64([store[client] for client in uploaded], names),
        totals64([previous[client] for client in uploaded if client in previous], names),
    )
    dtype = state["w_total"].dtype
    # Σ F is a sum of non-negative entries; float64 cancellation may leave it a hair below zero.
    u = {n: t.clamp_min(0).to(dtype) for n, t in exact["fisher"].items()}
    v = {n: t.to(dtype) for n, t in exact["fisher_params"].items()}
    return (u, v, exact["fisher_params2"].to(dtype)), exact


def totals64(entries: list, names: list) -> dict:
    """Σ F, Σ F·θ and Σ F·θ² over remembered entries (`remember`), in float64; zeros for no entries."""
    zero = torch.zeros((), dtype=torch.float64)

    def total(value_of):
        return sum((torch.as_tensor(value_of(entry)).double() for entry in entries), zero)

    return {
        "fisher": {n: total(lambda e: e["fisher"][n]) for n in names},
        "fisher_params": {n: total(lambda e: e["fisher_params"][n]) for n in names},
        "fisher_params2": total(lambda e: e["fisher_params2"]),
    }


def carry(total, added, removed):
    """total + added − removed, name by name."""
    if isinstance(total, dict):
        return {key: carry(total[key], added[key], removed[key]) for key in total}
    return total + added - removed
