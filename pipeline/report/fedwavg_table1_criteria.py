"""FedWAvg Table 1's stand-in criteria, measured per dataset (docs/papers/fedwavg-table1-criteria.md).

The criteria were written by a reader blind to the Table 1 results and committed before this module first
evaluated them (docs/claims-spec.md A11). A dataset whose centralised / federated pair misses any one is
outside the paper's regime: claims 38 and 39 leave it out and name the miss, and Table 1 labels it.

    C1 equal exposure: both runs finished their planned rounds (not diverged); centralised rounds × epochs =
       federated rounds × epochs; same model, optimiser, lr and batch; federated 5 clients, every client
       every round; centralised 1 client; the same number of training examples.
    C2 training data learned: never-learned examples at most 1 % of the training set in both runs (mean
       over seeds), and the federated clients' train loss at its last round at most 0.10 (mean over seeds).
    C3 the federated model a fair model of the data: federated / centralised final accuracy, paired by
       seed, at least 0.95 on the mean.
    C4 enough events: every seed at least 100 events in both runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.report.common import RunResult, SeededRun

NEVER_LEARNED_MAX = 0.01
LAST_TRAIN_LOSS_MAX = 0.10
ACCURACY_RATIO_MIN = 0.95
EVENTS_MIN = 100
PAPER_CLIENTS = 5
SAME_SETTINGS = ("model", "optimizer", "lr", "batch_size")


@dataclass(frozen=True)
class Criterion:
    name: str
    met: bool
    measured: str  # what the runs measure, the bar included


@dataclass(frozen=True)
class Regime:
    """One dataset's pair against the criteria."""

    dataset: str
    criteria: tuple[Criterion, ...]

    @property
    def met(self) -> bool:
        return all(c.met for c in self.criteria)

    @property
    def missed(self) -> list[Criterion]:
        return [c for c in self.criteria if not c.met]

    def missed_text(self) -> str:
        """The criteria missed with their measurements, for a claim's reason."""
        return "; ".join(f"{c.name}: {c.measured}" for c in self.missed)

    def missed_names(self) -> str:
        return ", ".join(c.name.split(" ")[0] for c in self.missed)


def example_count(result: RunResult) -> int:
    """The training examples the run counted events on: each is forgotten, unforgettable or never learned."""
    events = result.summary.get("example_events") or {}
    return sum(events.get(k, 0) for k in ("forgotten_examples", "unforgettable_examples", "never_learned_examples"))


def never_learned_share(result: RunResult) -> float:
    count = example_count(result)
    never = (result.summary.get("example_events") or {}).get("never_learned_examples", 0)
    return never / count if count else 1.0


def last_train_loss(result: RunResult) -> float | None:
    curve = result.logged_curve("train_loss")
    return curve[max(curve)] if curve else None


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def finished(result: RunResult) -> bool:
    return not result.diverged and result.summary.get("rounds_completed") == result.settings.get("rounds")


def exposure(central: SeededRun, federated: SeededRun) -> Criterion:
    """C1: the two runs present every example equally often under the same optimiser."""
    problems = []
    unfinished = [f"{run.key} seed {r.seed}" for run in (central, federated) for r in run.results if not finished(r)]
    if unfinished:
        problems.append("not finished: " + ", ".join(unfinished))
    cs, fs = central.settings, federated.settings
    c_epochs, f_epochs = cs["rounds"] * cs["local_epochs"], fs["rounds"] * fs["local_epochs"]
    if c_epochs != f_epochs:
        problems.append(f"epochs a client {c_epochs} centralised vs {f_epochs} federated")
    problems += [f"{key} {cs.get(key)} vs {fs.get(key)}" for key in SAME_SETTINGS if cs.get(key) != fs.get(key)]
    c_clients = {(r.summary.get("example_events") or {}).get("clients") for r in central.results}
    f_clients = {(r.summary.get("example_events") or {}).get("clients") for r in federated.results}
    if c_clients != {1} or f_clients != {PAPER_CLIENTS} or fs.get("client_fraction") != 1.0:
        problems.append(
            f"clients {sorted(c_clients, key=str)} centralised, {sorted(f_clients, key=str)} federated at fraction "
            f"{fs.get('client_fraction')} (wanted 1; {PAPER_CLIENTS} at 1.0)"
        )
    counts = {example_count(r) for r in central.results + federated.results}
    if len(counts) != 1:
        problems.append(f"training examples differ: {sorted(counts)}")
    measured = (
        f"{c_epochs} epochs each, the same model, optimiser, lr and batch, {PAPER_CLIENTS} federated clients every round"
        if not problems
        else "; ".join(problems)
    )
    return Criterion("C1 equal exposure", not problems, measured)


def learned(central: SeededRun, federated: SeededRun) -> Criterion:
    """C2: the examples were learned (never-learned share and the federated clients' last train loss)."""
    c_never = mean([never_learned_share(r) for r in central.results])
    f_never = mean([never_learned_share(r) for r in federated.results])
    losses = [loss for r in federated.results if (loss := last_train_loss(r)) is not None]
    f_loss = mean(losses) if len(losses) == federated.n else None
    met = c_never <= NEVER_LEARNED_MAX and f_never <= NEVER_LEARNED_MAX and f_loss is not None
    met = met and f_loss <= LAST_TRAIN_LOSS_MAX
    loss_text = "not logged for every seed" if f_loss is None else f"{f_loss:.3f}"
    measured = (
        f"never learned {100 * c_never:.2f} % centralised, {100 * f_never:.2f} % federated (bar ≤ "
        f"{100 * NEVER_LEARNED_MAX:g} %); federated last-round train loss {loss_text} (bar ≤ {LAST_TRAIN_LOSS_MAX:g})"
    )
    return Criterion("C2 training data learned", met, measured)


def fair_model(central: SeededRun, federated: SeededRun) -> Criterion:
    """C3: federated final accuracy near centralised, paired by seed."""
    by_seed = {r.seed: r.summary.get("final_accuracy") for r in central.results}
    ratios = [
        r.summary["final_accuracy"] / by_seed[r.seed]
        for r in federated.results
        if by_seed.get(r.seed) and r.summary.get("final_accuracy") is not None
    ]
    if not ratios:
        return Criterion("C3 fair model", False, "no seed has both final accuracies")
    ratio = mean(ratios)
    return Criterion(
        "C3 fair model",
        ratio >= ACCURACY_RATIO_MIN,
        f"federated / centralised final accuracy {ratio:.3f} over {len(ratios)} paired seeds (bar ≥ {ACCURACY_RATIO_MIN:g})",
    )


def enough_events(central: SeededRun, federated: SeededRun) -> Criterion:
    """C4: every seed has enough events on both sides for a ratio not decided by counting noise."""
    fewest_c = min(r.example_events or 0 for r in central.results)
    fewest_f = min(r.forgettable_total or 0 for r in federated.results)
    return Criterion(
        "C4 enough events",
        fewest_c >= EVENTS_MIN and fewest_f >= EVENTS_MIN,
        f"fewest a seed {fewest_c:,} centralised, {fewest_f:,} federated (bar ≥ {EVENTS_MIN})",
    )


def regime(dataset: str, central: SeededRun, federated: SeededRun) -> Regime:
    checks = (exposure, learned, fair_model, enough_events)
    return Regime(dataset, tuple(check(central, federated) for check in checks))


def regimes(placed: dict, datasets: list[str]) -> dict[str, Regime]:
    """{dataset: its pair against the criteria} for the datasets with both runs."""
    return {d: regime(d, placed[(d, "centralised")], placed[(d, "federated")]) for d in datasets}
