"""The forgetting measurements that reports and algorithms use, as pure functions on tensors.

- Local client forgetting (Legate et al., TCE): how much one round of local training on client i
  changes the accuracy on client k's test data, relative to the global model the round started from.
- Forgettable examples (Hong et al. 2022, FedWAvg section 3.1): examples a client's local model
  predicts correctly before aggregation that the aggregated global model then gets wrong.
- Example-forgetting events (Toneva et al. 2019): correct at one presentation, wrong at the next.
- A per-client accuracy summary (mean, spread, worst client).

Plus the JSON files ("probes") that hold a round's measurements and their plots. The probes only
evaluate models; they never change training (no parameter, optimiser state or random stream).
"""
from __future__ import annotations

import json
import math

import numpy as np
import torch

from pipeline.errors import UserError
from pipeline.io import atomic_path, write_json

# At most this many clients get a tick label each on a heatmap axis; more get a few evenly spaced.
ALL_TICKS_UP_TO = 20
# At most this many clients get a legend entry on the forgettable-examples plot.
LEGEND_UP_TO = 12


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


def forgettable_counts(local_correct: torch.Tensor, global_correct: torch.Tensor,
                       valid: torch.Tensor) -> torch.Tensor:
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
        raise ValueError(f"shapes differ: local_correct {tuple(local_correct.shape)}, "
                         f"global_correct {tuple(global_correct.shape)}, valid {tuple(valid.shape)}")
    return (local_correct & ~global_correct & valid).sum(dim=1, dtype=torch.long)


def new_presentation_record(size: int, device=None) -> dict:
    """A client's presentation history in a compact form: `last` is its examples' correctness at their
    latest presentation (-1: never presented yet), `forgets` their forgetting events so far."""
    return {"last": torch.full((size,), -1, dtype=torch.int8, device=device),
            "forgets": torch.zeros(size, dtype=torch.int32, device=device)}


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
    return {"forgetting_events": int(forgets.sum()), "forgotten_examples": int((forgets > 0).sum()),
            "unforgettable_examples": int((learned & (forgets == 0)).sum()),
            "never_learned_examples": int((~learned).sum())}


def accuracy_spread(per_client: torch.Tensor) -> dict:
    """Mean, spread and extremes of per-client accuracies (shape [K], K ≥ 1).

    sd is the sample standard deviation (divisor K - 1), NaN for a single client. worst_client is the
    index (position in `per_client`, not a client id) of the lowest accuracy, the first on ties.
    """
    values = torch.as_tensor(per_client, dtype=torch.float64).flatten()
    if values.numel() == 0:
        raise ValueError("accuracy_spread needs at least one client")
    sd = float(values.std(correction=1)) if values.numel() > 1 else math.nan
    return {"mean": float(values.mean()), "sd": sd, "min": float(values.min()),
            "worst_client": int(torch.argmin(values)), "max": float(values.max())}


# ---------------------------------------------------------------------------------------------------
# Probe files


def _plain(value):
    """Tensors and arrays as lists, numpy scalars as Python ones, NaN as None (JSON null)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().tolist()
    elif isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _unplain(value):
    """The inverse of `_plain` for what JSON gives back: every null becomes NaN."""
    if isinstance(value, dict):
        return {key: _unplain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_unplain(item) for item in value]
    return math.nan if value is None else value


def write_probe(path, record: dict) -> None:
    """Write a probe record as JSON, atomically; tensors become lists and NaN becomes null.

    A local-client-forgetting record has keys round, clients (the cohort's client ids, in the order
    of the matrices' rows and columns), post (K×K), prior (K), difference (K×K) and F (K). A record
    must not use None for anything but a missing number: it reads back as NaN.
    """
    write_json(path, _plain(record))


def read_probe(path) -> dict:
    """Read a probe record written by `write_probe`; every null reads back as NaN."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise UserError(f"{path}: probe file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UserError(f"{path}: not a probe JSON file ({error})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: a probe file must hold a JSON object, found {type(data).__name__}")
    return _unplain(data)


# ---------------------------------------------------------------------------------------------------
# Plots


def _array(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=float)  # None (a NaN read back or not) becomes nan


def tick_positions(count: int) -> list[int]:
    """Positions 0..count-1 to label: all of them up to ALL_TICKS_UP_TO, else about six, ends included."""
    if count <= ALL_TICKS_UP_TO:
        return list(range(count))
    return sorted({int(round(p)) for p in np.linspace(0, count - 1, 6)})


def plot_forgetting_heatmaps(path, record: dict, title: str) -> None:
    """One PNG with three heatmaps side by side, like the TCE paper's Figure 1.

    "difference": F_ki (rows k = client data, columns i = client model), then after a blank column
    F_k, on a diverging map centred at 0 (-1..1); "post": Acc_k(w_t^i); "prior": Acc_k(w_{t-1}),
    the same for every column (0..1). Ticks are the record's client ids. `difference` and `F` are
    computed from post and prior when the record lacks them.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2))
    try:
        draw_forgetting_row(fig, axes, record)
        fig.suptitle(title)
        fig.tight_layout()
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=100)
    finally:
        plt.close(fig)


def draw_forgetting_row(fig, axes, record: dict, label: str = "") -> None:
    """The three heatmaps of one probe record on three axes (`label` prefixes each panel's title)."""
    import matplotlib

    post, prior = _array(record["post"]), _array(record["prior"])
    if "difference" in record and "F" in record:
        difference, average = _array(record["difference"]), _array(record["F"])
    else:
        difference, average = (t.numpy() for t in local_client_forgetting(torch.from_numpy(post),
                                                                          torch.from_numpy(prior)))
    k = post.shape[0]
    clients = [str(c) for c in record.get("clients", range(k))]
    if len(clients) != k or post.shape != (k, k) or prior.shape != (k,) or difference.shape != (k, k) \
            or average.shape != (k,):
        raise ValueError(f"inconsistent probe record: {len(clients)} clients, post {post.shape}, "
                         f"prior {prior.shape}, difference {difference.shape}, F {average.shape}")

    # The difference panel: K columns of F_ki, one blank (NaN, drawn as background) column, then F_k.
    with_average = np.full((k, k + 2), np.nan)
    with_average[:, :k] = difference
    with_average[:, k + 1] = average
    panels = [("difference  F_ki = Acc_k(w_t^i) − Acc_k(w_{t−1}),  F_k", with_average, "RdBu", -1.0, 1.0),
              ("post  Acc_k(w_t^i)", post, "viridis", 0.0, 1.0),
              ("prior  Acc_k(w_{t−1})", np.broadcast_to(prior[:, None], (k, k)), "viridis", 0.0, 1.0)]
    ticks = tick_positions(k)
    for ax, (name, data, cmap_name, vmin, vmax) in zip(axes, panels):
        cmap = matplotlib.colormaps[cmap_name].with_extremes(bad="white")
        image = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=vmin, vmax=vmax,
                          aspect="auto", interpolation="nearest")
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        ax.set_title(f"{label}{name}", fontsize=10)
        ax.set_xlabel("client model i")
        ax.set_ylabel("client data k")
        xticks, xlabels = list(ticks), [clients[t] for t in ticks]
        if data is with_average:
            xticks.append(k + 1)
            xlabels.append("F_k")
            ax.axvline(k + 0.5, color="black", linewidth=1.0)
        ax.set_xticks(xticks)
        ax.set_xticklabels(xlabels, rotation=90 if k > 10 else 0, fontsize=8)
        ax.set_yticks(ticks)
        ax.set_yticklabels([clients[t] for t in ticks], fontsize=8)


def plot_forgettable_curves(path, rounds: list[int], counts: dict[int, list[int]], title: str) -> None:
    """Forgettable examples per client over rounds, one line per client, as a PNG.

    counts[client] holds one value per entry of `rounds`; None or NaN where the client was not in
    that round's cohort (drawn as a gap). Keys may be ints or, as read back from JSON, strings.
    The legend names the clients when there are at most LEGEND_UP_TO of them.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    rounds = list(rounds)
    for client, values in counts.items():
        if len(values) != len(rounds):
            raise ValueError(f"client {client}: {len(values)} counts for {len(rounds)} rounds")

    def order(client):
        try:
            return (0, int(client), "")
        except (TypeError, ValueError):
            return (1, 0, str(client))

    fig, ax = plt.subplots(figsize=(8, 4.5))
    try:
        for client in sorted(counts, key=order):
            ax.plot(rounds, _array(counts[client]), marker=".", linewidth=1.0, label=f"client {client}")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_xlabel("round")
        ax.set_ylabel("forgettable examples")
        ax.set_title(title)
        if 0 < len(counts) <= LEGEND_UP_TO:
            ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=100)
    finally:
        plt.close(fig)
