"""The forgetting probes' files and figures: a probed round's record as JSON (and back), the TCE-style
three-panel heatmap, the forgettable examples per client over rounds. The measurements themselves are
pipeline.forgetting's pure functions.
"""

from __future__ import annotations

import json
import math

import numpy as np
import torch

from pipeline.errors import UserError
from pipeline.forgetting import local_client_forgetting
from pipeline.io import atomic_path, write_json

# At most this many clients get a tick label each on a heatmap axis; more get a few evenly spaced.
ALL_TICKS_UP_TO = 20
# At most this many clients get a legend entry on the forgettable-examples plot.
LEGEND_UP_TO = 12


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


def write_probes(path, records: dict[int, dict]) -> None:
    """Every probed round's record in one JSON object keyed by the round, atomically; tensors become lists
    and NaN becomes null.

    A local-client-forgetting record has keys round, clients (the cohort's client ids, in the order
    of the matrices' rows and columns), post (K×K), prior (K), difference (K×K) and F (K). A record
    must not use None for anything but a missing number: it reads back as NaN.
    """
    write_json(path, _plain(records))


def _load_object(path) -> dict:
    """The JSON object in `path`, refused in one line when missing, cut short or not an object."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise UserError(f"{path}: probe file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UserError(f"{path}: not a probe JSON file ({error})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: a probe file must hold a JSON object, found {type(data).__name__}")
    return data


def read_probes(path) -> dict[int, dict]:
    """Read the records written by `write_probes`, {round: record}; every null reads back as NaN."""
    data = _load_object(path)
    if not all(key.isdigit() and isinstance(record, dict) for key, record in data.items()):
        raise UserError(f"{path}: a probes file maps round numbers to records; retrain its run or restore it from git")
    return {int(key): _unplain(record) for key, record in data.items()}


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
        difference, average = (
            t.numpy() for t in local_client_forgetting(torch.from_numpy(post), torch.from_numpy(prior))
        )
    k = post.shape[0]
    clients = [str(c) for c in record.get("clients", range(k))]
    if (
        len(clients) != k
        or post.shape != (k, k)
        or prior.shape != (k,)
        or difference.shape != (k, k)
        or average.shape != (k,)
    ):
        raise ValueError(
            f"inconsistent probe record: {len(clients)} clients, post {post.shape}, "
            f"prior {prior.shape}, difference {difference.shape}, F {average.shape}"
        )

    # The difference panel: K columns of F_ki, one blank (NaN, drawn as background) column, then F_k.
    with_average = np.full((k, k + 2), np.nan)
    with_average[:, :k] = difference
    with_average[:, k + 1] = average
    panels = [
        ("difference  F_ki = Acc_k(w_t^i) − Acc_k(w_{t−1}),  F_k", with_average, "RdBu", -1.0, 1.0),
        ("post  Acc_k(w_t^i)", post, "viridis", 0.0, 1.0),
        ("prior  Acc_k(w_{t−1})", np.broadcast_to(prior[:, None], (k, k)), "viridis", 0.0, 1.0),
    ]
    ticks = tick_positions(k)
    for ax, (name, data, cmap_name, vmin, vmax) in zip(axes, panels):
        cmap = matplotlib.colormaps[cmap_name].with_extremes(bad="white")
        image = ax.imshow(
            np.ma.masked_invalid(data), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest"
        )
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
