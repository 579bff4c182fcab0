"""The forgetting measurements that reports and algorithms use, as pure functions on tensors.

- Local client forgetting (Legate et al., TCE): how much one round of local training on client i
  changes the accuracy on client k's test data, relative to the global model the round started from.
- Forgettable examples (Hong et al. 2022, FedWAvg section 3.1): examples a client's local model
  predicts correctly before aggregation that the aggregated global model then gets wrong.
- Example-forgetting events (Toneva et al. 2019): correct at one presentation, wrong at the next.
- A per-client accuracy summary (mean, spread, worst client).

The probes only evaluate models; they never change training (no parameter, optimiser state or random
stream). Their files and figures are pipeline.probe_files'.
"""

from __future__ import annotations

import math

import torch

# ---------------------------------------------------------------------------------------------------
# Measurements


def local_client_forgetting(post: torch.Tensor, prior: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Local client forgetting F_ki and each client's average forgetting F_k (TCE, Legate et al.).

    With Acc_k(w) the accuracy on client k's local test data, w_t^i the model of client i at round t
    (after its local training, before aggregation) and w_{t-1} the global model at the end of round
    t-1, the paper defines F_ki = Acc_k(w_t^i) - Acc_k(w_{t-1}) and F_k = 1/(K-1) Σ_{i≠k} F_ki, K the
    number of clients in the round's cohort.

    Index convention (the equation's, which we follow): rows k are whose *data* the accuracy is
    measured on, columns i are whose *local model* is evaluated. The caption of the paper's Figure 1
    swaps the two ("F_ik, the forgetting of the model of the k-th client evaluated on the i-th
    client's data"); the equation, not the caption, is the definition here.

    post[k, i] = Acc_k(w_t^i)  (shape [K, K]); prior[k] = Acc_k(w_{t-1})  (shape [K]).
    Returns (difference, F): difference[k, i] = post[k, i] - prior[k] (so the diagonal is a client's
    change on its own data) and F[k] = mean of difference[k, i] over i ≠ k (the diagonal is left
    out). With K == 1 there is no other client, and F is NaN.
    """
    post = torch.as_tensor(post)
    prior = torch.as_tensor(prior)
    if post.dim() != 2 or post.shape[0] != post.shape[1]:
        raise ValueError(f"post must be a square [K, K] matrix, got shape {tuple(post.shape)}")
    if prior.shape != post.shape[:1]:
        raise ValueError(f"prior must have shape [{post.shape[0]}], got {tuple(prior.shape)}")
    dtype = torch.promote_types(torch.promote_types(post.dtype, prior.dtype), torch.get_default_dtype())
    post, prior = post.to(dtype), prior.to(dtype)
    k = post.shape[0]
    difference = post - prior.unsqueeze(1)
    if k < 2:
        return difference, torch.full((k,), math.nan, dtype=dtype, device=post.device)
    off_diagonal = ~torch.eye(k, dtype=torch.bool, device=post.device)
    average = (difference * off_diagonal).sum(dim=1) / (k - 1)
    return difference, average


def forgettable_counts(local_correct: torch.Tensor, global_correct: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Forgettable examples per client (FedWAvg, Hong et al. 2022, section 3.1).

    An example is forgettable when "the local model will succeed in predicting these data before
    aggregation but global model after aggregation will not": the paper's F[n] ← count(Ŷ == Y &&
    Ŷ_g ≠ Y). Rows are clients, padded to a common length N; `valid` is False on the padding, which
    never counts. All three are boolean [C, N]; returns a long tensor [C].
    """
    for name, value in (("local_correct", local_correct), ("global_correct", global_correct), ("valid", valid)):
        if value.dtype != torch.bool or value.dim() != 2:
            raise ValueError(f"{name} must be a 2-D bool tensor, got {value.dtype} of shape {tuple(value.shape)}")
    if not local_correct.shape == global_correct.shape == valid.shape:
        raise ValueError(
            f"shapes differ: local_correct {tuple(local_correct.shape)}, "
            f"global_correct {tuple(global_correct.shape)}, valid {tuple(valid.shape)}"
        )
    return (local_correct & ~global_correct & valid).sum(dim=1, dtype=torch.long)


def new_presentation_record(size: int, device=None) -> dict:
    """A client's presentation history in a compact form: `last` is its examples' correctness at their
    latest presentation (-1: never presented yet), `forgets` their forgetting events so far."""
    return {
        "last": torch.full((size,), -1, dtype=torch.int8, device=device),
        "forgets": torch.zeros(size, dtype=torch.int32, device=device),
    }


def record_presentations(record: dict, positions: torch.Tensor, correct: torch.Tensor) -> int:
    """Add presentations, in training order, to a client's record (in place); returns the forgetting
    events they contain. `positions[s, b]` is which of the client's examples step s presented in slot b
    (-1: none, a padded slot), `correct[s, b]` whether the forward pass of that step got it right.

    A forgetting event (Toneva et al. 2019, as FedWAvg's Table 1 counts them) is a wrong presentation of
    an example whose previous presentation was right: a wrong first presentation is no event, and an
    example never learned has none. Counted as they stream in, without keeping every presentation
    (tests/oracles.py holds the dense count over all presentations that the tests compare it with).
    Within a step an example appears at most once, so steps are applied one after another."""
    last, forgets = record["last"], record["forgets"]
    events = torch.zeros((), dtype=torch.int64, device=last.device)  # summed on the device, read once
    for step_positions, step_correct in zip(positions, correct):
        present = step_positions >= 0
        where, now = step_positions[present], step_correct[present]
        forgotten = (last[where] == 1) & ~now
        forgets[where] += forgotten.to(forgets.dtype)
        events += forgotten.sum()
        last[where] = now.to(last.dtype)
    return int(events)


def presentation_summary(records: dict) -> dict:
    """Toneva et al.'s counts over all clients' examples: forgetting events, examples forgotten at least
    once, unforgettable (learned, never forgotten) and never learned (never right at a presentation,
    or never presented). Only clients that trained at least once have a record: with C < 1 the
    examples of a client never sampled are in none of these counts."""
    last = torch.cat([r["last"] for r in records.values()]) if records else torch.zeros(0, dtype=torch.int8)
    forgets = torch.cat([r["forgets"] for r in records.values()]) if records else torch.zeros(0, dtype=torch.int32)
    learned = (forgets > 0) | (last == 1)
    return {
        "forgetting_events": int(forgets.sum()),
        "forgotten_examples": int((forgets > 0).sum()),
        "unforgettable_examples": int((learned & (forgets == 0)).sum()),
        "never_learned_examples": int((~learned).sum()),
    }


def accuracy_spread(per_client: torch.Tensor) -> dict:
    """Mean, spread and extremes of per-client accuracies (shape [K], K ≥ 1).

    sd is the sample standard deviation (divisor K - 1), NaN for a single client. worst_client is the
    index (position in `per_client`, not a client id) of the lowest accuracy, the first on ties.
    """
    values = torch.as_tensor(per_client, dtype=torch.float64).flatten()
    if values.numel() == 0:
        raise ValueError("accuracy_spread needs at least one client")
    sd = float(values.std(correction=1)) if values.numel() > 1 else math.nan
    return {
        "mean": float(values.mean()),
        "sd": sd,
        "min": float(values.min()),
        "worst_client": int(torch.argmin(values)),
        "max": float(values.max()),
    }
