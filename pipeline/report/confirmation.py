"""Confirmatory samples: a claim decided on fresh seeds planned for it (docs/methodology.md, "A confirmatory
sample").

A run with `confirms: {run: R, claims: [ids]}` in params.yaml trains R's settings again on seeds R never had.
Each named claim is built a second time with the sample standing in for R (under R's key, so every lookup by
settings finds it), and that build's verdict replaces the first; the first stays in the evidence. Tables and
every other claim read R's own seeds only (ReportContext.runs_of).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pipeline.errors import UserError
from pipeline.report.common import Claim, ReportContext, SeededRun, seed_range, write_table
from pipeline.report.seeds import EXACT_UNPAIRED, MANN_WHITNEY, WELCH


def plans(context: ReportContext, paper: str) -> dict[str, dict[str, SeededRun | str]]:
    """claim id -> {the run it confirms: its sample, or the sample's key where it has no results yet}, for the
    paper's samples: those with results, and those the profile plans (context.samples). Two samples of one run
    for one claim are an error: there is one sample a claim (docs/methodology.md)."""
    found = {
        run.key: (run.settings["confirms"], run)
        for run in context.results.values()
        if run.paper == paper and run.settings.get("confirms")
    }
    papers = {run.key: run.paper for run in context.results.values()}
    for key, plan in context.samples.items():
        if key not in found and papers.get(plan["run"]) == paper:
            found[key] = (plan, key)
    planned: dict[str, dict[str, SeededRun | str]] = {}
    for key, (plan, sample) in sorted(found.items()):
        for claim_id in plan["claims"]:
            other = planned.setdefault(claim_id, {}).get(plan["run"])
            if other is not None:
                raise UserError(
                    f"runs.{key}.confirms: a second sample of {plan['run']} for claim {claim_id!r} (the "
                    f"first: {other if isinstance(other, str) else other.key}); a claim gets one"
                )
            planned[claim_id][plan["run"]] = sample
    return planned


def confirmed(first: Claim, sample: Claim, runs: dict[str, SeededRun]) -> Claim:
    """The claim as its sample decides it, with the earlier seeds' verdict in its evidence."""
    seeds = sorted({s for run in runs.values() for s in run.seeds})
    earlier = "; ".join(c.reason for c in first.comparisons) or first.evidence
    evidence = (
        f"confirmatory sample, fresh seeds {seed_range(seeds)} ({', '.join(sorted(r.key for r in runs.values()))}): "
        f"{sample.evidence}. Before it, on the runs' own seeds ({first.seeds}): {first.status} ({earlier})"
    )
    return dataclasses.replace(sample, evidence=evidence, sample=f"confirmatory sample, seeds {seed_range(seeds)}")


def incomplete(runs: dict[str, SeededRun | str]) -> str:
    """Why a sample cannot decide yet ("" when it can): a run or seed not trained, or runs on different seeds
    (a comparison would no longer pair them)."""
    untrained = sorted(r for r in runs.values() if isinstance(r, str))
    if untrained:
        return f"{', '.join(untrained)} not trained"
    trained = [r for r in runs.values() if isinstance(r, SeededRun)]
    missing = {r.key: r.missing_seeds for r in trained if r.missing_seeds}
    if missing:
        return "; ".join(f"{key}: seeds {seed_range(seeds)} not trained" for key, seeds in sorted(missing.items()))
    seed_lists = {tuple(r.seeds) for r in trained}
    if len(seed_lists) > 1:
        return "its runs have different seeds: " + "; ".join(
            f"{r.key}: {seed_range(r.seeds)}" for r in sorted(trained, key=lambda r: r.key)
        )
    return ""


def unpaired(sample: Claim, runs: dict[str, SeededRun | str]) -> str:
    """Why the sample's claim did not compare on the sample's seeds alone ("" when it did): a claim that reads
    a run the sample does not cover would set the sample against seeds already read (Welch's test where the
    seeds differ, or sides of different sizes where some seeds have no value)."""
    n = len(next(r for r in runs.values() if isinstance(r, SeededRun)).seeds)
    if any(
        c.test in (WELCH, EXACT_UNPAIRED, MANN_WHITNEY) or (c.n_first, c.n_second) != (n, n) for c in sample.comparisons
    ):
        return "a comparison does not read the sample's seeds alone (a run of the claim has no sample?)"
    return ""


def key_of(run: SeededRun | str) -> str:
    return run if isinstance(run, str) else run.key


def pending(first: Claim, runs: dict[str, SeededRun | str], why: str) -> Claim:
    """The claim on its runs' own seeds, saying that its sample cannot decide it (yet)."""
    return dataclasses.replace(
        first,
        evidence=f"{first.evidence}. Its confirmatory sample "
        f"({', '.join(sorted(key_of(r) for r in runs.values()))}) cannot decide "
        f"it yet: {why}",
    )


def build_with_confirmations(module, context: ReportContext) -> list[Claim]:
    """module.build(context) (tables, figures, claims), each claim that a sample confirms decided again on
    it by module.claims_of (the same claims, nothing written)."""
    paper = module.PAPER
    claims = module.build(context)
    planned = plans(context, paper)
    if not planned:
        return claims
    ids = [c.id for c in claims]
    for claim_id, runs in planned.items():
        if claim_id not in ids:
            names = ", ".join(sorted(key_of(r) for r in runs.values()))
            raise UserError(
                f"runs.{names}: confirms claim {claim_id!r}, which the {paper} report does not make; "
                f"expected one of {', '.join(ids)}"
            )
        if not hasattr(module, "claims_of"):
            raise UserError(
                f"runs.{key_of(next(iter(runs.values())))}: the {paper} report cannot read a "
                "confirmatory sample yet (it has no claims_of)"
            )
    out = []
    for claim in claims:
        runs = planned.get(claim.id)
        why = incomplete(runs) if runs is not None else ""
        if runs is None or why:
            out.append(claim if runs is None else pending(claim, runs, why))
            continue
        swapped = dataclasses.replace(context, results={**context.results, **runs})
        (sample,) = [c for c in module.claims_of(swapped) if c.id == claim.id]
        why = unpaired(sample, runs)
        if why:
            out.append(pending(claim, runs, why))
            continue
        out.append(confirmed(claim, sample, runs))
        write_sample_table(context.out_dir, sample, runs)
    return out


def sample_rows(claim: Claim) -> list[list]:
    """One row per seed of each comparison of each reading: the values the verdict was computed from."""
    rows: list[list] = []
    readings = claim.readings or [None]
    for reading in readings:
        comparisons = reading.comparisons if reading is not None else claim.comparisons
        label = reading.label if reading is not None else "the claim"
        for number, comparison in enumerate(comparisons, 1):
            if not comparison.sides:
                continue
            first, second = comparison.sides
            by_seed = {seed: value for seed, value in second}
            for index, (seed, value) in enumerate(first):
                other = by_seed.get(seed) if seed is not None else (second[index][1] if index < len(second) else None)
                difference = value - other if value is not None and other is not None else None
                rows.append([label, number, "—" if seed is None else seed, value, other, difference])
    return rows


def write_sample_table(out_dir, claim: Claim, runs: dict[str, SeededRun | str]) -> None:
    """reports/<paper>/sample_<claim id>.md and .csv: the seeds of the confirmatory sample that decided the
    claim, each comparison's per-seed values (a claim decided on a sample is shown on that sample)."""
    seeds = sorted({s for run in runs.values() if isinstance(run, SeededRun) for s in run.seeds})
    notes = [
        f"Decided on the confirmatory sample {', '.join(sorted(key_of(r) for r in runs.values()))}, fresh "
        f"seeds {seed_range(seeds)}: {claim.status}.",
        "Each reading's comparisons in the order its evidence gives them (the claims ledger, reports/"
        "claims.md); `first` is the side the claim says is better.",
        "NC: a seed without a value (diverged, or never reached the target), ranked as its run's worst "
        "outcome by the rule (docs/methodology.md).",
        f"The claim: {claim.text}.",
    ] + ([f"Trained (ours, beside the paper's): {claim.setting}."] if claim.setting else [])
    write_table(
        out_dir,
        f"sample_{claim.id}",
        f"The seeds that decide {claim.id}",
        ["reading", "comparison", "seed", "first", "second", "first − second"],
        sample_rows(claim),
        notes,
    )


def claim_ids(paper: str, published: dict) -> list[str] | None:
    """The ids of the claims a paper's report makes (None: its report cannot read a sample): its claims_of on
    no runs, where every claim is "not run" but named."""
    import importlib

    module = importlib.import_module(f"pipeline.report.{paper}")
    if not hasattr(module, "claims_of"):
        return None
    empty = ReportContext("default", {}, published, Path("."), Path("."), frozenset())
    return [c.id for c in module.claims_of(empty)]


def sample_problems(params: dict) -> list[str]:
    """One line for each claim a sample names that its run's paper does not make (`python -m pipeline.report
    --check-samples`, and the report stage before it reads any result), so that a misspelt id is found before
    the sample trains. It lives here, not in pipeline.config: the engine's commands do not import the reports."""
    import yaml

    published = yaml.safe_load(Path(__file__).with_name("published.yaml").read_text())
    problems = []
    for key, run in (params.get("runs") or {}).items():
        plan = run.get("confirms")
        if not plan:
            continue
        paper = run.get("paper")
        ids = claim_ids(paper, published[paper]) if paper in published else None
        if ids is None:
            problems.append(
                f"runs.{key}.confirms: the report of {paper or 'a run of no paper'} cannot read a "
                "confirmatory sample (it has no claims_of)"
            )
            continue
        problems += [
            f"runs.{key}.confirms.claims: {c!r} is not a claim of the {paper} report; expected one of {', '.join(ids)}"
            for c in plan["claims"]
            if c not in ids
        ]
    return problems
