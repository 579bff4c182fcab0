"""FedWAvg (the FedWAvg paper's Algorithm 1): FedAvg whose averaging weights follow each client's
count of forgettable examples, so the clients the global model forgets most weigh most.

A client's forgettable examples are its training samples its local model classified right before
aggregation and the new global model gets wrong (line 11; the engine's RoundView.forgettable, shared
with the forgetting probes so it is computed once). In the rounds r that are multiples of `period` (the
paper's t) the counts F_n are refreshed, and each aggregation weighs client n by eq. 2,

    W_n = (1 − α) + α · N · F_n / Σ_m F_m,

so Σ_n W_n = N and line 15's (1/N) Σ_n θ_n·W_n is a weighted mean. α = 0 is FedAvg.

When the counts are taken: line 11 of round r compares the local model of round r − 1 with the global
model aggregated from it, i.e. what `after_aggregate` sees at the end of round r − 1; so they are taken
there, at the end of round r − 1 when r is a multiple of `period`, and weigh round r's aggregation and
the following ones until the next refresh. Round 1 uses F = ones (line 2): FedAvg's weights.

Choices the paper leaves open (it has every client in every round, equal-sized clients):
- N and the sums run over the round's cohort (all clients when C = 1, as in the paper).
- A cohort member not yet counted (C < 1; it has never taken part in a counted round) stands in with
  the mean count of the cohort members that were counted, so its W is about 1; if none was, every
  count is one (line 2), i.e. FedAvg's weights.
- If Σ F = 0 (no client forgot anything) norm(F) is undefined: every W is 1 (FedAvg's weights).
- Clients holding unequal amounts of data: W multiplies the engine's sample-size weights p_n and the
  products are renormalised, p_n·W_n / Σ_m p_m·W_m; with equal sizes this is the paper's W_n / N.
The count is one integer per client every `period` rounds; it is left out of the bytes curves
(4 bytes against the model's megabytes).
"""

from __future__ import annotations

from pipeline.algorithms.common import weighted_sum
from pipeline.checks import check_int, is_number

NAME = "fedwavg"
HYPERPARAMS = {"alpha": 0.3, "period": 1}


def check(path, hp):
    alpha = hp["alpha"]
    problems = []
    if not is_number(alpha) or not 0 <= alpha < 1:
        problems.append(f"{path}.alpha: {alpha!r} is not allowed; expected a number in [0, 1) (eq. 2)")
    return problems + check_int(f"{path}.period", hp["period"], 1)


def init_state(global_params, num_clients, hp):
    # client -> its last forgettable count; a client not in it has not been counted yet
    return {"params": global_params, "forgettable": {}}


def cohort_counts(counts: dict, cohort: list[int]) -> list[float]:
    """F_n for the cohort: a client not yet counted stands in with the counted members' mean; ones
    when no member was counted (Algorithm 1, line 2)."""
    known = [float(counts[k]) for k in cohort if k in counts]
    if not known:
        return [1.0] * len(cohort)
    stand_in = sum(known) / len(known)
    return [float(counts[k]) if k in counts else stand_in for k in cohort]


def averaging_weights(counts: list[float], sample_weights: list[float], alpha: float) -> list[float]:
    """Eq. 2's W_n times the sample-size weights, renormalised (the paper's W_n / N for equal sizes)."""
    total = sum(counts)
    size = len(counts)
    factors = [1.0] * size if total == 0 else [(1 - alpha) + alpha * size * f / total for f in counts]
    products = [w * p for w, p in zip(factors, sample_weights)]
    norm = sum(products)
    return [p / norm for p in products]


def aggregate(state, uploads, weights, hp):
    counts = cohort_counts(state["forgettable"], [up["client"] for up in uploads])
    return {**state, "params": weighted_sum(uploads, averaging_weights(counts, weights, hp["alpha"]), "params")}


def after_aggregate(state, view, hp):
    """At the end of round r − 1, refresh the cohort's counts for round r when r is a multiple of
    `period` (lines 10-11)."""
    if (view.round + 1) % hp["period"] != 0:
        return state
    counts = dict(state["forgettable"])
    counts.update(zip(view.cohort, (int(c) for c in view.forgettable.tolist())))
    return {**state, "forgettable": counts}
