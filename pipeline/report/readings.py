"""A claim's declared readings and the verdict over them; multiplicity; the setting a claim was decided on.

Declared readings (docs/claims-spec.md, committed before the results they read): the ways a careful reader
would read a claim (the paper's round, a window, the whole period; a threshold and its neighbours; the
paper's own reading and ours). Each reading is decided by the rule (report.seeds.compare); a reading of
several comparisons corrects them by Holm before the all-of combination (`reading`). A claim is **held**
or **failed** only when every reading gives that verdict, **inconclusive** when none decides, and
**reading-dependent** otherwise, with each reading's verdict shown (`verdict`).

Across the ledger, Holm over the claims: a claim's p is the p that decides its weakest reading
(`claim_p`), and a held or failed claim stays so after the correction only if its adjusted p is below α
(`ledger_holm`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.report.seeds import ALPHA, FAILED, HELD, INCONCLUSIVE, Comparison, combine

READING_DEPENDENT = "reading-dependent"
NOT_MEASURED = "not measured"  # a declared reading this profile's runs cannot give (the row says why)
STAR = "★"  # marks the paper's own reading


def holm_adjust(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the input's order: the i-th smallest p times
    (m − i + 1), made non-decreasing along that order, capped at 1."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted, running = [1.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def _status(p: float, effect: float | None, alpha: float) -> str:
    if p < alpha and (effect or 0.0) > 0:
        return HELD
    if p < alpha and (effect or 0.0) < 0:
        return FAILED
    return INCONCLUSIVE


def with_holm(comparisons: Sequence[Comparison], alpha: float = ALPHA) -> list[Comparison]:
    """The comparisons with their p-values Holm-adjusted over those that have one, and each status decided
    again on its adjusted p (a comparison with no test keeps its own). One comparison: unchanged."""
    pvalues = {i: c.p for i, c in enumerate(comparisons) if c.p is not None}
    tested = list(pvalues)
    if len(tested) < 2:
        return list(comparisons)
    adjusted = dict(zip(tested, holm_adjust(list(pvalues.values()))))
    out = []
    for i, c in enumerate(comparisons):
        if i not in adjusted:
            out.append(c)
            continue
        status = _status(adjusted[i], c.effect, alpha)
        note = f"; Holm over {len(tested)}: p = {adjusted[i]:.3g}"
        if status != c.status:
            note += f", {status} (was {c.status})"
        out.append(dataclasses.replace(c, status=status, p=adjusted[i], reason=c.reason + note))
    return out


@dataclass
class Reading:
    """One declared reading of a claim, decided."""

    name: str
    status: str  # held | failed | inconclusive | not measured
    comparisons: list[Comparison]  # Holm-adjusted within the reading
    evidence: str
    primary: bool = False  # the paper's own reading

    @property
    def label(self) -> str:
        return f"{self.name}{' ' + STAR if self.primary else ''}"

    @property
    def p(self) -> float | None:
        """The p that decides the reading: held, the largest (every comparison must be held); failed, the
        smallest among the failed ones (one failure fails it); else the smallest there is."""
        tested = [(c.p, c.status) for c in self.comparisons if c.p is not None]
        if not tested:
            return None
        if self.status == HELD:
            return max(p for p, _ in tested)
        if self.status == FAILED:
            return min(p for p, status in tested if status == FAILED)
        return min(p for p, _ in tested)


def reading(
    name: str, comparisons: Sequence[Comparison], evidence: str = "", primary: bool = False, status: str | None = None
) -> Reading:
    """A reading decided by its comparisons, Holm-corrected when there are several and combined all-of
    (held when every one is held, failed when one is); `status` overrides the combination for a reading
    whose comparisons combine otherwise (a count, an 'any of')."""
    adjusted = with_holm(comparisons)
    decided = status if status is not None else combine(c.status for c in adjusted)
    text = evidence or "; ".join(c.reason for c in adjusted)
    return Reading(name, decided, adjusted, text, primary)


def not_measured(name: str, why: str, primary: bool = False) -> Reading:
    return Reading(name, NOT_MEASURED, [], why, primary)


def verdict(readings: Iterable[Reading]) -> str:
    """held / failed when every measured reading says so, inconclusive when none decides, else
    reading-dependent."""
    statuses = [r.status for r in readings if r.status != NOT_MEASURED]
    if not statuses:
        return INCONCLUSIVE
    if all(s == HELD for s in statuses):
        return HELD
    if all(s == FAILED for s in statuses):
        return FAILED
    if all(s == INCONCLUSIVE for s in statuses):
        return INCONCLUSIVE
    return READING_DEPENDENT


def claim_p(readings: Iterable[Reading]) -> float | None:
    """The p across the ledger's correction: the largest over the claim's readings (the weakest one decides
    whether every reading agrees)."""
    ps = [r.p for r in readings if r.status != NOT_MEASURED and r.p is not None]
    return max(ps) if ps else None


def ledger_holm(claims: Sequence, alpha: float = ALPHA) -> dict[str, tuple[float | None, str]]:
    """Holm across the ledger: {claim id: (adjusted p, status after the correction)} for every claim that
    was run. A held or failed claim keeps its verdict when its adjusted p is below α; otherwise it is
    inconclusive after the correction; the others keep theirs."""
    run = [c for c in claims if c.status != "not run"]
    tested = [c for c in run if c.p is not None]
    adjusted = dict(zip((c.id for c in tested), holm_adjust([c.p for c in tested])))
    out = {}
    for c in run:
        p = adjusted.get(c.id)
        kept = c.status in (HELD, FAILED) and p is not None and p < alpha
        out[c.id] = (p, c.status if kept or c.status not in (HELD, FAILED) else INCONCLUSIVE)
    return out


def readings_cell(readings: Sequence[Reading]) -> str:
    """Each reading's verdict, the paper's own first: the ledger's sensitivity column."""
    ordered = sorted(readings, key=lambda r: not r.primary)
    return "; ".join(f"{r.label}: {r.status}" + (f" (p = {r.p:.3g})" if r.p is not None else "") for r in ordered)


# ---------------------------------------------------------------- what was trained, beside the paper

PRETTY = {
    "mnist": "MNIST",
    "fashion_mnist": "Fashion-MNIST",
    "cifar10": "CIFAR-10",
    "cifar100": "CIFAR-100",
    "svhn": "SVHN",
    "femnist": "FEMNIST",
}
SETTING_KEYS = (
    ("model", "{}"),
    ("rounds", "{} rounds"),
    ("local_epochs", "E = {}"),
    ("batch_size", "B = {}"),
    ("client_fraction", "C = {}"),
    ("lr", "lr {}"),
    ("norm", "{} norm"),
)


def setting_value(key: str, form: str, value) -> str:
    """One scaled key's value as the setting cell words it: a run without a normalisation layer has "no norm",
    and a key the paper leaves unset is "its default"."""
    if value is None:
        return "no norm" if key == "norm" else "its default"
    return form.format(value)


@dataclass(frozen=True)
class Setting:
    """What a claim's runs trained, beside the paper's: `used` differs from `paper` where the profile scaled."""

    dataset: str
    paper_dataset: str
    copy: str = ""  # the mirror copy's stand-in note (reports/datasets/<name>.json), where it is one
    changed: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # (ours, the paper's) per scaled key

    def cell(self) -> str:
        data = PRETTY.get(self.dataset, self.dataset)
        if self.dataset != self.paper_dataset:
            data += f" standing in for {PRETTY.get(self.paper_dataset, self.paper_dataset)}"
        if self.copy:
            data += f" ({self.copy})"
        parts = [data] + [f"{ours} (paper: {theirs})" for ours, theirs in self.changed]
        return (
            "; ".join(parts)
            if len(parts) > 1 or self.dataset != self.paper_dataset or self.copy
            else f"{data}; the paper's settings"
        )


def dataset_copy(records: Path | None, dataset: str) -> str:
    """How the mirror's copy of `dataset` differs from the original (its record's `copy`), or ""."""
    if records is None or not (records / f"{dataset}.json").is_file():
        return ""
    record = json.loads((records / f"{dataset}.json").read_text())
    return record.get("copy", "") if record.get("stand_in") else ""


def partition_dataset(partition: dict | None, default: str) -> str:
    return (partition or {}).get("dataset") or default


def setting_of(runs: Sequence, records: Path | None = None) -> Setting:
    """The setting the first of `runs` trained (the claim's runs share it but for the method under test),
    from its resolved settings' `scaled` record: each scaled key as ours (the paper's)."""
    run = runs[0]
    scaled = {
        k: v
        for k, v in (run.scaled or {}).items()
        if k not in ("seeds", "probe_rounds") and v.get("paper") != v.get("used")
    }
    changed = []
    for key, form in SETTING_KEYS:
        if key in scaled:
            ours, theirs = scaled[key]["used"], scaled[key]["paper"]
            changed.append((setting_value(key, form, ours), setting_value(key, form, theirs)))
    if "partition" in scaled and run.paper_partition and run.partition:
        ours_p, theirs_p = run.partition, run.paper_partition
        for name in ("clients", "shard_size", "samples_per_client"):
            if ours_p.get(name) != theirs_p.get(name) and ours_p.get(name) is not None:
                label = name.replace("_", " ")
                theirs_value = theirs_p.get(name)
                changed.append(
                    (f"{label} {ours_p[name]}", f"{theirs_value}" if theirs_value is not None else f"no {label}")
                )
    dataset = run.settings.get("dataset", "")
    return Setting(
        dataset, partition_dataset(run.paper_partition, dataset), dataset_copy(records, dataset), tuple(changed)
    )
