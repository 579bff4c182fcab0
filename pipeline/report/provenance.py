"""What trained the numbers a report reads: each seed's CPU kind, commit and code digest, from its timing.json.

A verdict's seeds are comparable bit for bit only when one CPU kind (the processor's name, its kernels,
AVX2 or AVX-512, and the threads a process) and one code digest trained them (docs/methodology.md,
"Seeds, bytes and CPUs"); the ledger says how many of each are under it, so that a mixed ledger is
visible where it is read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pipeline.report.common import NOT_RECORDED, RunResult, SeededRun, cpu_kind


def commit(timing: dict) -> str:
    return timing.get("commit") or NOT_RECORDED


def code_digest(timing: dict) -> str:
    return timing.get("code") or NOT_RECORDED


def seed_results(results: dict[str, SeededRun]) -> list[RunResult]:
    return [seed for run in results.values() for seed in run.results]


def tally(values: Iterable[str]) -> list[tuple[str, int]]:
    """Each distinct value with its count, most frequent first (ties by name, for stable output)."""
    return sorted(Counter(values).items(), key=lambda item: (-item[1], item[0]))


def digests_by_algorithm(seeds: list[RunResult]) -> dict[str, set[str]]:
    """{algorithm: the code digests its seeds name}: one each when one engine trained them all."""
    found: dict[str, set[str]] = {}
    for seed in seeds:
        algorithm = (seed.settings.get("algorithm") or {}).get("name", "?")
        found.setdefault(algorithm, set()).add(code_digest(seed.timing))
    return found


def digests_text(digests: dict[str, set[str]]) -> str:
    """'code digests per algorithm: fedavg 1, fedcurv 2 and seeds without one', or 'not recorded' at all."""
    if all(found == {NOT_RECORDED} for found in digests.values()):
        return "code digests: not recorded"
    return "code digests per algorithm: " + ", ".join(
        f"{name} {len(found - {NOT_RECORDED})}{' and seeds without one' if NOT_RECORDED in found else ''}"
        for name, found in sorted(digests.items())
    )


def counted(pairs: list[tuple[str, int]]) -> str:
    return "; ".join(f"{name} ({n})" for name, n in pairs)


def trained_by_line(results: dict[str, SeededRun]) -> str:
    """The ledger's line under its totals: the seeds, the CPU kinds, commits and code digests they came from."""
    seeds = seed_results(results)
    if not seeds:
        return "**Trained by**: no seed has results yet."
    kinds = tally(cpu_kind(s.timing) for s in seeds)
    commits = tally(commit(s.timing) for s in seeds)
    digests = digests_by_algorithm(seeds)
    one_engine = all(len(d) == 1 and NOT_RECORDED not in d for d in digests.values())
    # The bytes depend on the CPU kind and the code, not on the commit: a regeneration resumed at a later
    # commit with the same code digests is still one (its commits are listed).
    if len(kinds) == 1 and kinds[0][0] != NOT_RECORDED and one_engine:
        at = f"commit {commits[0][0]}" if len(commits) == 1 else f"commits {counted(commits)}"
        return (
            f"**Trained by**: all {len(seeds)} seeds on one machine kind ({kinds[0][0]}), one code digest per "
            f"algorithm, at {at}: regenerated together."
        )
    return (
        f"**Trained by** (not shown to be one regeneration): {len(seeds)} seeds on {len(kinds)} CPU kind(s): "
        f"{counted(kinds)}; commits: {counted(commits)}; {digests_text(digests)}"
        + ". Seeds of one claim from different CPU kinds or code differ at float32 rounding or more "
        "(docs/methodology.md, 'Seeds, bytes and CPUs')."
    )


def provenance_section(results: dict[str, SeededRun]) -> list[str]:
    """reports/README.md's table: per CPU kind and commit, how many seeds of which runs."""
    groups: dict[tuple[str, str], dict[str, int]] = {}
    for key, run in sorted(results.items()):
        for seed in run.results:
            runs = groups.setdefault((cpu_kind(seed.timing), commit(seed.timing)), {})
            runs[key] = runs.get(key, 0) + 1
    if not groups:
        return []
    lines = [
        "## What trained them",
        "",
        "Each seed's timing.json names its CPU kind (threads a process), the commit and the code digest "
        "it trained under; seeds are bit-for-bit reproducible on their own kind only.",
        "",
        "| CPU kind | commit | seeds | runs |",
        "|---|---|---|---|",
    ]
    for (kind, at), runs in sorted(groups.items(), key=lambda item: (-sum(item[1].values()), item[0])):
        lines.append(f"| {kind} | {at} | {sum(runs.values())} | {len(runs)}: {', '.join(sorted(runs))} |")
    return lines + [""]


def provenance_counts(results: dict[str, SeededRun]) -> dict[str, int]:
    """For reports/claims.json: how many CPU kinds and commits are under the ledger (one kind after a
    regeneration), and the seeds that name neither."""
    seeds = seed_results(results)
    return {
        "cpu_kinds": len({cpu_kind(s.timing) for s in seeds}),
        "commits": len({commit(s.timing) for s in seeds}),
        "seeds_without_machine": sum(cpu_kind(s.timing) == NOT_RECORDED for s in seeds),
    }
