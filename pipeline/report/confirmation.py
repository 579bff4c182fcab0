"""Confirmatory samples: a claim decided on fresh seeds planned for it (docs/methodology.md, "A confirmatory
sample").

A run with `confirms: {run: R, claims: [ids]}` in params.yaml trains R's settings again on seeds R never had.
Each named claim is built a second time with the sample standing in for R (under R's key, so every lookup by
settings finds it), and that build's verdict replaces the first; the first stays in the evidence. Tables and
every other claim read R's own seeds only (ReportContext.runs_of).
"""
from __future__ import annotations

import dataclasses

from pipeline.errors import UserError
from pipeline.report.common import Claim, ReportContext, SeededRun


def plans(context: ReportContext, paper: str) -> dict[str, dict[str, SeededRun]]:
    """claim id -> {the run it confirms: its sample}, for the paper's samples that have results."""
    planned: dict[str, dict[str, SeededRun]] = {}
    for run in context.results.values():
        plan = run.settings.get("confirms")
        if run.paper == paper and plan:
            for claim_id in plan["claims"]:
                planned.setdefault(claim_id, {})[plan["run"]] = run
    return planned


def seeds_words(seeds: list[int]) -> str:
    """'8-31' for a consecutive block, else the seeds listed."""
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def confirmed(first: Claim, sample: Claim, runs: dict[str, SeededRun]) -> Claim:
    """The claim as its sample decides it, with the earlier seeds' verdict in its evidence."""
    seeds = sorted({s for run in runs.values() for s in run.seeds})
    earlier = "; ".join(c.reason for c in first.comparisons) or first.evidence
    evidence = (f"confirmatory sample, fresh seeds {seeds_words(seeds)} ({', '.join(sorted(r.key for r in runs.values()))}): "
                f"{sample.evidence}. Before it, on the runs' own seeds ({first.seeds}): {first.status} ({earlier})")
    return dataclasses.replace(sample, evidence=evidence, sample=f"confirmatory sample, seeds {seeds_words(seeds)}")


def incomplete(runs: dict[str, SeededRun]) -> str:
    """Why a sample cannot decide yet ("" when it can): a seed not trained, or runs on different seeds (a
    comparison would no longer pair them)."""
    missing = {r.key: r.missing_seeds for r in runs.values() if r.missing_seeds}
    if missing:
        return "; ".join(f"{key}: seeds {seeds_words(seeds)} not trained" for key, seeds in sorted(missing.items()))
    seed_lists = {tuple(r.seeds) for r in runs.values()}
    if len(seed_lists) > 1:
        return "its runs have different seeds: " + "; ".join(
            f"{r.key}: {seeds_words(r.seeds)}" for r in sorted(runs.values(), key=lambda r: r.key))
    return ""


def pending(first: Claim, runs: dict[str, SeededRun], why: str) -> Claim:
    """The claim on its runs' own seeds, saying that its sample cannot decide it yet."""
    return dataclasses.replace(first, evidence=f"{first.evidence}. Its confirmatory sample "
                                               f"({', '.join(sorted(r.key for r in runs.values()))}) cannot decide "
                                               f"it yet: {why}")


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
            names = ", ".join(sorted(r.key for r in runs.values()))
            raise UserError(f"runs.{names}: confirms claim {claim_id!r}, which the {paper} report does not make; "
                            f"expected one of {', '.join(ids)}")
        if not hasattr(module, "claims_of"):
            raise UserError(f"runs.{next(iter(runs.values())).key}: the {paper} report cannot read a confirmatory "
                            "sample yet (it has no claims_of)")
    out = []
    for claim in claims:
        runs = planned.get(claim.id)
        if runs is None:
            out.append(claim)
            continue
        why = incomplete(runs)
        if why:
            out.append(pending(claim, runs, why))
            continue
        swapped = dataclasses.replace(context, results={**context.results, **runs})
        (sample,) = [c for c in module.claims_of(swapped) if c.id == claim.id]
        out.append(confirmed(claim, sample, runs))
    return out
