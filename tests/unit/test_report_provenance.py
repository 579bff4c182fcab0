"""What trained the ledger's seeds (pipeline/report/provenance.py): counted by hand on constructed timings."""

from __future__ import annotations

from pipeline.report.common import RunResult, SeededRun
from pipeline.report.provenance import provenance_counts, provenance_section, trained_by_line

EPYC_512 = {"type": "cpu", "name": "AMD EPYC", "cpu_capability": "AVX512", "threads": 1}
EPYC_AVX2 = {"type": "cpu", "name": "AMD EPYC", "cpu_capability": "AVX2", "threads": 1}


def seed(run: str, s: int, algorithm: str, device: dict | None, commit: str | None, code: str | None) -> RunResult:
    timing: dict = {"seconds_total": 1.0}
    timing.update({k: v for k, v in (("device", device), ("commit", commit), ("code", code)) if v is not None})
    return RunResult(run, s, {"algorithm": {"name": algorithm}}, {}, [1], [0.5], timing)


def runs(*seeds: RunResult) -> dict[str, SeededRun]:
    grouped: dict[str, list[RunResult]] = {}
    for result in seeds:
        grouped.setdefault(result.key, []).append(result)
    return {key: SeededRun(key, results) for key, results in grouped.items()}


def test_one_regeneration_is_named_as_one_cpu_kind_one_commit():
    results = runs(
        seed("a", 0, "fedavg", EPYC_512, "c0ffee", "d1"),
        seed("a", 1, "fedavg", EPYC_512, "c0ffee", "d1"),
        seed("b", 0, "fedcurv", EPYC_512, "c0ffee", "d2"),
    )
    line = trained_by_line(results)
    assert line.startswith("**Trained by**: all 3 seeds on one machine kind (AMD EPYC, AVX512, 1 thread)")
    assert "commit c0ffee" in line
    assert provenance_counts(results) == {"cpu_kinds": 1, "commits": 1, "seeds_without_machine": 0}


def test_three_kinds_as_the_committed_ledger_has_them_are_counted_and_called_mixed():
    # 2 seeds on the EPYC with AVX-512, 1 on the one without, 1 from before timing.json named a machine.
    results = runs(
        seed("a", 0, "fedavg", EPYC_512, None, None),
        seed("a", 1, "fedavg", EPYC_512, None, None),
        seed("b", 0, "fedavg", EPYC_AVX2, None, None),
        seed("b", 1, "fedavg", None, None, None),
    )
    line = trained_by_line(results)
    assert "not shown to be one regeneration" in line
    assert (
        "4 seeds on 3 CPU kind(s): AMD EPYC, AVX512, 1 thread (2); AMD EPYC, AVX2, 1 thread (1); not recorded (1)"
        in line
    )
    assert "commits: not recorded (4); code digests: not recorded" in line
    assert provenance_counts(results) == {"cpu_kinds": 3, "commits": 1, "seeds_without_machine": 1}


def test_one_kind_but_two_code_digests_for_an_algorithm_is_not_one_regeneration():
    results = runs(
        seed("a", 0, "fedavg", EPYC_512, "c0ffee", "d1"),
        seed("b", 0, "fedavg", EPYC_512, "c0ffee", "d9"),
    )
    line = trained_by_line(results)
    assert "not shown to be one regeneration" in line and "code digests per algorithm: fedavg 2" in line


def test_seeds_with_and_without_a_code_digest_are_both_named():
    results = runs(seed("a", 0, "fedavg", EPYC_512, "c0ffee", "d1"), seed("a", 1, "fedavg", EPYC_512, "c0ffee", None))
    assert "code digests per algorithm: fedavg 1 and seeds without one" in trained_by_line(results)


def test_two_commits_with_the_same_code_and_kind_are_still_one_regeneration():
    # A regeneration resumed at a later commit whose code digests are the same: the bytes are the same.
    results = runs(seed("a", 0, "fedavg", EPYC_512, "c0ffee", "d1"), seed("a", 1, "fedavg", EPYC_512, "beef00", "d1"))
    line = trained_by_line(results)
    assert "regenerated together" in line and "at commits beef00 (1); c0ffee (1)" in line
    assert provenance_counts(results)["commits"] == 2


def test_the_index_table_groups_seeds_by_kind_and_commit_largest_first():
    results = runs(
        seed("a", 0, "fedavg", EPYC_AVX2, "c0ffee", "d1"),
        seed("b", 0, "fedavg", EPYC_512, "c0ffee", "d1"),
        seed("b", 1, "fedavg", EPYC_512, "c0ffee", "d1"),
        seed("c", 0, "fedavg", EPYC_512, "c0ffee", "d1"),
    )
    rows = [line for line in provenance_section(results) if line.startswith("| AMD")]
    assert rows == [
        "| AMD EPYC, AVX512, 1 thread | c0ffee | 3 | 2: b, c |",
        "| AMD EPYC, AVX2, 1 thread | c0ffee | 1 | 1: a |",
    ]


def test_a_gpu_seed_is_named_by_its_device_and_no_results_say_so():
    gpu = {"type": "cuda", "name": "NVIDIA H200"}
    results = runs(seed("a", 0, "fedavg", gpu, "c0ffee", "d1"))
    assert "one machine kind (NVIDIA H200 (cuda))" in trained_by_line(results)
    assert trained_by_line({}) == "**Trained by**: no seed has results yet."
    assert provenance_section({}) == []


def test_the_ledger_and_verify_draw_the_same_line_between_cpu_kinds():
    # One definition of a CPU kind: seeds the ledger names apart, `pipeline.verify` compares as other kinds
    # (and vice versa), so a verify run never calls bytes from another kind a regression.
    from pipeline.report.common import cpu_identity, cpu_kind

    two_threads = {**EPYC_512, "threads": 2}
    xeon = {**EPYC_512, "name": "Intel Xeon"}
    devices = [EPYC_512, EPYC_AVX2, two_threads, xeon]
    for a in devices:
        for b in devices:
            same_label = cpu_kind({"device": a}) == cpu_kind({"device": b})
            assert same_label == (cpu_identity(a) == cpu_identity(b)), (a, b)
    assert cpu_kind({"device": two_threads}) == "AMD EPYC, AVX512, 2 threads"


def test_a_claims_setting_names_the_cpu_kinds_only_where_its_runs_mix_them():
    from pipeline.report.common import mixed_cpu_note

    xeon = {"type": "cpu", "name": "Intel(R) Xeon(R) Processor", "cpu_capability": "AVX512", "threads": 1}
    one = runs(seed("a", 0, "fedavg", EPYC_512, "c", "d"), seed("b", 0, "fedavg", EPYC_512, "c", "d"))
    assert mixed_cpu_note(one.values()) == ""
    mixed = runs(
        seed("a", 0, "fedavg", EPYC_512, "c", "d"),
        seed("b", 0, "fedavg", EPYC_512, "c", "d"),
        seed("c", 0, "fedavg", xeon, "c", "d"),
    )
    assert mixed_cpu_note(mixed.values()) == (
        "; trained on 2 CPU kinds: AMD EPYC, AVX512, 1 thread (a, b); Intel(R) Xeon(R) Processor, AVX512, 1 thread (c)"
    )
