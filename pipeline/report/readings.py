"""A claim's declared readings and the verdict over them; multiplicity; the setting a claim was decided on.

Declared readings (docs/claims-spec.md, committed before the results they read): the ways a careful reader
would read a claim (the paper's round, a window, the whole period; a threshold and its neighbours; the
paper's own reading and ours). Each reading is decided by the rule (report.seeds.compare); a reading of
several comparisons corrects them by Holm before the all-of combination (`reading`). A claim is **held**
or **failed** only when every reading gives that verdict, **inconclusive** when none decides, and
**reading-dependent** otherwise, with each reading's verdict shown (`verdict`).

Across the ledger, Holm over the claims: a claim's p is the p that decides its weakest reading
(`claim_p`), and a held or failed claim stays so after the correction only if its adjusted p is below α;
a reading-dependent claim keeps only the readings whose own p would survive in its place (`ledger_holm`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pipeline.partition_sizes import partition_sizes, training_split
from pipeline.partitioners import PartitionError
from pipeline.report.seeds import ALPHA, FAILED, HELD, INCONCLUSIVE, Comparison, combine

READING_DEPENDENT = "reading-dependent"
NOT_MEASURED = "not measured"  # a declared reading this profile's runs cannot give (the row says why)
STAR = "★"  # marks the paper's own reading
PUBLISHED = Path(__file__).with_name("published.yaml")


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
    inconclusive after the correction. A reading-dependent claim is decided again over its readings, each
    held or failed reading kept only where its own p, standing as the claim's in the ledger, survives
    Holm (`corrected_readings`): one whose deciding readings all fall is inconclusive after the correction.
    Inconclusive claims stay so."""
    run = [c for c in claims if c.status != "not run"]
    tested = [c for c in run if c.p is not None]
    pvalues = [c.p for c in tested]
    adjusted = dict(zip((c.id for c in tested), holm_adjust(pvalues)))
    out = {}
    for c in run:
        p = adjusted.get(c.id)
        if c.status in (HELD, FAILED):
            status = c.status if p is not None and p < alpha else INCONCLUSIVE
        elif c.status == READING_DEPENDENT and getattr(c, "readings", None):
            at = next((i for i, t in enumerate(tested) if t.id == c.id), None)
            status = verdict(corrected_readings(c.readings, pvalues, at, alpha))
        else:
            status = c.status
        out[c.id] = (p, status)
    return out


def corrected_readings(
    readings: Sequence[Reading], pvalues: Sequence[float], at: int | None, alpha: float = ALPHA
) -> list[Reading]:
    """A reading-dependent claim's readings after the ledger's Holm: each held or failed reading's p put in
    the claim's place `at` among the ledger's `pvalues` (appended where the claim has none) and adjusted;
    a reading whose adjusted p is not below α becomes inconclusive."""
    out = []
    for r in readings:
        if r.status not in (HELD, FAILED) or r.p is None:
            out.append(r)
            continue
        ps = list(pvalues)
        where = at if at is not None else len(ps)
        if at is None:
            ps.append(r.p)
        else:
            ps[at] = r.p
        kept = holm_adjust(ps)[where] < alpha
        out.append(r if kept else dataclasses.replace(r, status=INCONCLUSIVE))
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

    def dataset_words(self) -> str:
        """The dataset trained, the paper's it stands in for where it is a stand-in, and the mirror copy's note."""
        data = PRETTY.get(self.dataset, self.dataset)
        if self.dataset != self.paper_dataset:
            data += f" standing in for {PRETTY.get(self.paper_dataset, self.paper_dataset)}"
        return data + (f" ({self.copy})" if self.copy else "")

    def cell(self) -> str:
        data = self.dataset_words()
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


def samples_a_client(partition: dict | None) -> str | None:
    """Each client's training samples under a partition's settings, worded ("200", "17-288"), from the
    partitioner's own arithmetic (pipeline/partition_sizes.py); None where only the data decides them."""
    if not partition or partition.get("dataset") is None:
        return None
    split = training_split(partition["dataset"], None)
    if split is None:
        return None
    try:
        sizes = partition_sizes(partition, split).train_sizes
    except (KeyError, PartitionError):
        return None
    if not sizes:
        return None
    low, high = min(sizes), max(sizes)
    return f"{low}" if low == high else f"{low}-{high}"


def partition_changes(ours: dict, theirs: dict) -> list[tuple[str, str]]:
    """Where a stand-in partition differs from the paper's: the clients and each client's training samples
    (a shard size alone says neither; the paper may give none)."""
    changed = []
    if ours.get("clients") != theirs.get("clients") and ours.get("clients") is not None:
        changed.append((f"{ours['clients']} clients", f"{theirs.get('clients') or 'the data decides'}"))
    ours_n, theirs_n = samples_a_client(ours), samples_a_client(theirs)
    if ours_n is not None and ours_n != theirs_n:
        changed.append((f"{ours_n} training samples a client", theirs_n or "the data decides"))
    return changed


@functools.cache
def settings_not_given(paper: str) -> frozenset[str]:
    """The settings `paper`'s text does not give (published.yaml `not_given`): the paper profile's value
    for them is ours, and a setting cell must not set it beside the stand-in's as the paper's."""
    published = yaml.safe_load(PUBLISHED.read_text()) or {}
    return frozenset((published.get(paper) or {}).get("not_given", ()))


def setting_of(runs: Sequence, records: Path | None = None) -> Setting:
    """The setting the first of `runs` trained (the claim's runs share it but for the method under test),
    from its resolved settings' `scaled` record: each scaled key as ours (the paper's)."""
    run = runs[0]
    scaled = {
        k: v
        for k, v in (run.scaled or {}).items()
        if k not in ("seeds", "probe_rounds") and v.get("paper") != v.get("used")
    }
    not_given = settings_not_given(run.settings.get("paper", ""))
    changed = []
    for key, form in SETTING_KEYS:
        if key in scaled:
            ours, theirs = scaled[key]["used"], scaled[key]["paper"]
            paper_words = (
                f"not given; our paper profile: {setting_value(key, form, theirs)}"
                if key in not_given
                else setting_value(key, form, theirs)
            )
            changed.append((setting_value(key, form, ours), paper_words))
    if "partition" in scaled and run.paper_partition and run.partition:
        changed += partition_changes(run.partition, run.paper_partition)
    dataset = run.settings.get("dataset", "")
    return Setting(
        dataset, partition_dataset(run.paper_partition, dataset), dataset_copy(records, dataset), tuple(changed)
    )
