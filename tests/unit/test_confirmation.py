"""Confirmatory samples (docs/methodology.md, "A confirmatory sample"): a run that trains another run's
settings on fresh seeds, in params.yaml, and the claims it names decided on those seeds alone, in the
reports, with every other claim and the tables left on the run's own seeds."""

from __future__ import annotations

import copy
import csv
import dataclasses
import json
import subprocess

import pytest
from test_report import report_context
from test_report_tce import PUBLISHED, ROOT, p_paired, seeded, table_rows

from pipeline.config import check_params, load_params
from pipeline.errors import UserError
from pipeline.report import tce
from pipeline.report.common import SeededRun
from pipeline.report.confirmation import build_with_confirmations, sample_problems
from pipeline.runs import expand_templates, resolve_run

BASE = load_params(ROOT / "params.yaml")
FRESH = list(range(8, 32))


def params_with(**samples) -> dict:
    """The real params.yaml's runs and templates (unexpanded: the test expands them) plus `samples`."""
    import yaml

    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["runs"].update(copy.deepcopy(samples))
    return raw


def sample(run: str, claims=("tce_less_forgetting",), **extra) -> dict:  # a claim no committed sample names
    return {
        "confirms": {"run": run, "claims": list(claims)},
        "profiles": ["default"],
        "scaled": {"seeds": [40, 41, 42]},
        **extra,
    }


# ---------------------------------------------------------------- params.yaml


def test_a_sample_trains_the_runs_settings_on_its_own_seeds_in_its_own_profile():
    params = expand_templates(params_with(s=sample("tce_cifar10_tce_gn")))
    default = {**params, "profile": "default"}
    mine, theirs = resolve_run(default, "s"), resolve_run(default, "tce_cifar10_tce_gn")
    differ = {k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k)}
    assert differ == {"seeds", "key", "run", "confirms", "scaled"}
    assert mine["seeds"] == [40, 41, 42] and theirs["seeds"] == list(range(8))
    assert {k: v for k, v in mine["scaled"].items() if k != "seeds"} == {
        k: v for k, v in theirs["scaled"].items() if k != "seeds"
    }
    # the run it confirms is in the one-GPU-day profile by its gpu_day block; the sample, default only, is not
    assert "gpu_day" in params["runs"]["tce_cifar10_tce_gn"] and "gpu_day" not in params["runs"]["s"]
    assert check_params(params) == []


@pytest.mark.parametrize(
    "entry, message",
    [
        (sample("tce_cifar10_tce_gn", lr=0.5), "runs.s: lr not allowed in a confirmatory sample"),
        (
            {**sample("tce_cifar10_tce_gn"), "scaled": {"seeds": [40], "rounds": 5}},
            "runs.s: scaled.rounds not allowed in a confirmatory sample",
        ),
        (sample("no_such_run"), "runs.s.confirms.run: 'no_such_run' is not another run"),
        (sample("tce_cifar10_tce_gn", claims=()), "runs.s.confirms.claims: [] is not allowed"),
        ({**sample("tce_cifar10_tce_gn"), "confirms": {"run": "tce_cifar10_tce_gn"}}, "runs.s.confirms: "),
    ],
)
def test_a_sample_that_would_change_more_than_its_seeds_is_one_line(entry, message):
    with pytest.raises(UserError) as error:
        expand_templates(params_with(s=entry))
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_a_sample_of_a_sample_is_refused():
    with pytest.raises(UserError, match="runs.t.confirms.run: s is itself a confirmatory sample"):
        expand_templates(params_with(s=sample("tce_cifar10_tce_gn"), t=sample("s")))


def test_a_seed_the_run_already_has_is_refused_per_profile():
    params = expand_templates(params_with(s={**sample("tce_cifar10_tce_gn"), "scaled": {"seeds": [7, 8]}}))
    assert check_params(params) == [
        "runs.s.seeds: [7] in the default profile are tce_cifar10_tce_gn's; a "
        "confirmatory sample takes fresh seeds only"
    ]
    params = expand_templates(params_with(s={**sample("tce_cifar10_tce_gn"), "profiles": ["default", "paper"]}))
    assert check_params(params) == [
        "runs.s.seeds: [0, 1, 2] in the paper profile are tce_cifar10_tce_gn's; a "
        "confirmatory sample takes fresh seeds only"
    ]


# ---------------------------------------------------------------- the reports


def as_sample(run: SeededRun, key: str, confirms: str, claims: list[str]) -> SeededRun:
    for result in run.results:
        result.settings["confirms"] = {"run": confirms, "claims": claims}
    return SeededRun(key, run.results, partition=run.partition)


# The runs' own seeds 0-2: TCE (BN) 40 / 45 / 50 % against FedAvg (BN) 38 / 42.5 / 47 %, held (paired p = 0.013).
# The sample's seeds 8-11: TCE (BN) 1, 2, 1.5 and 2.5 points *below* FedAvg (BN): failed by the sample alone.
OWN = {"tce_bn": [0.40, 0.45, 0.50], "fedavg_bn": [0.38, 0.425, 0.47]}
SAMPLE = {"tce_bn": [0.30, 0.33, 0.36, 0.38], "fedavg_bn": [0.31, 0.35, 0.375, 0.405]}
BN_CLAIM = "tce_bn_beats_fedavg_bn_cifar10"


def bn_runs(claims=(BN_CLAIM,)) -> dict:
    runs = {
        "tce_bn": seeded("tce_bn", "tce", "batch", 0.1, OWN["tce_bn"]),
        "fedavg_bn": seeded("fedavg_bn", "ce", "batch", 0.1, OWN["fedavg_bn"]),
        "tce_gn": seeded("tce_gn", "tce", "group", 0.1, [0.41, 0.44, 0.52]),
    }
    for key, method in (("tce_bn", ("tce", "batch")), ("fedavg_bn", ("ce", "batch"))):
        fresh = seeded(key, *method, 0.1, SAMPLE[key], seeds=[8, 9, 10, 11])
        runs[f"{key}_confirm"] = as_sample(fresh, f"{key}_confirm", key, list(claims))
    return runs


def test_the_sample_alone_decides_the_claim_it_names(tmp_path):
    claims = {c.id: c for c in build_with_confirmations(tce, report_context(tmp_path, "tce", bn_runs(), PUBLISHED))}
    claim = claims[BN_CLAIM]
    (comparison,) = claim.comparisons
    # by hand, TCE (BN) minus FedAvg (BN) on seeds 8-11: -1, -2, -1.5, -2.5 points
    assert comparison.p == pytest.approx(p_paired([-1.0, -2.0, -1.5, -2.5]), rel=1e-6)
    assert claim.status == "failed" and claim.seeds == "4 vs 4"
    assert claim.test == "paired t (confirmatory sample, seeds 8-11)"
    assert claim.evidence.startswith("confirmatory sample, fresh seeds 8-11 (fedavg_bn_confirm, tce_bn_confirm): ")
    assert "Before it, on the runs' own seeds (3 vs 3): held (paired t-test over 3 seeds: p = 0.0131)" in claim.evidence


def test_a_claim_decided_on_a_sample_has_a_table_of_that_samples_seeds(tmp_path):
    """reports/tce/sample_<claim>.md: each seed of the sample with the two sides' values, the values the
    verdict came from (checked against SAMPLE as written above, in points)."""
    context = report_context(tmp_path, "tce", bn_runs(), PUBLISHED)
    build_with_confirmations(tce, context)
    with (context.out_dir / f"sample_{BN_CLAIM}.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    primary = [r for r in rows if r["comparison"] == "1" and r["reading"] == rows[0]["reading"]]
    assert [int(r["seed"]) for r in primary] == [8, 9, 10, 11]
    assert [float(r["first"]) for r in primary] == pytest.approx([100 * v for v in SAMPLE["tce_bn"]])
    assert [float(r["second"]) for r in primary] == pytest.approx([100 * v for v in SAMPLE["fedavg_bn"]])
    assert [float(r["first − second"]) for r in primary] == pytest.approx([-1.0, -2.0, -1.5, -2.5])
    assert "fresh seeds 8-11: failed" in (context.out_dir / f"sample_{BN_CLAIM}.md").read_text()
    assert not (context.out_dir / "sample_tce_bn_near_gn.md").exists()  # not decided on a sample


def test_other_claims_and_the_tables_read_the_runs_own_seeds(tmp_path):
    context = report_context(tmp_path, "tce", bn_runs(), PUBLISHED)
    claims = {c.id: c for c in build_with_confirmations(tce, context)}
    near = claims["tce_bn_near_gn"]  # reads TCE (BN), which has a sample, but is not named by it
    assert near.seeds == "3 vs 3" and "confirmatory" not in near.evidence + near.test
    (row,) = [r for r in table_rows(context.out_dir / "table1.md") if r[1] == "0.1"]
    assert "(n=3)" in row[2 + 2 * tce.TABLE_METHODS.index("tce_bn")]  # Table 1 has no FedAvg (BN) column


def test_an_undecided_sample_says_it_is_the_last(tmp_path):
    runs = bn_runs()
    for key, values in (("tce_bn_confirm", [0.30, 0.33, 0.36, 0.38]), ("fedavg_bn_confirm", [0.31, 0.32, 0.37, 0.37])):
        for result, value in zip(runs[key].results, values):
            result.summary["final_test_accuracy"] = value
            result.accuracy = [value - 0.1, value]  # the validation curve (VAL) moves with the last model (LM)
    claim = {c.id: c for c in build_with_confirmations(tce, report_context(tmp_path, "tce", runs, PUBLISHED))}[BN_CLAIM]
    assert claim.status == "inconclusive"
    assert claim.power.startswith("after its confirmatory sample, which stays its last: effect ")


def test_a_sample_naming_a_claim_the_report_does_not_make_is_one_line(tmp_path):
    with pytest.raises(UserError) as error:
        build_with_confirmations(tce, report_context(tmp_path, "tce", bn_runs(claims=["tce_typo"]), PUBLISHED))
    assert str(error.value).startswith(
        "runs.fedavg_bn_confirm, tce_bn_confirm: confirms claim 'tce_typo', which "
        "the tce report does not make; expected one of "
    )


def test_a_sample_not_yet_trained_or_on_other_seeds_leaves_the_first_verdict(tmp_path):
    runs = bn_runs()
    runs["tce_bn_confirm"].wanted = [8, 9, 10, 11, 12]  # the grid asks for seed 12, which has no results yet
    claim = {c.id: c for c in build_with_confirmations(tce, report_context(tmp_path, "tce", runs, PUBLISHED))}[BN_CLAIM]
    assert claim.status == "held" and claim.seeds == "3 vs 3" and not claim.sample
    assert claim.evidence.endswith("cannot decide it yet: tce_bn_confirm: seeds 12 not trained")
    runs = bn_runs()
    runs["fedavg_bn_confirm"].results.pop()
    claim = {c.id: c for c in build_with_confirmations(tce, report_context(tmp_path, "tce", runs, PUBLISHED))}[BN_CLAIM]
    assert claim.status == "held" and claim.evidence.endswith(
        "its runs have different seeds: fedavg_bn_confirm: 8-10; tce_bn_confirm: 8-11"
    )


# TCE's margin at C = 0.05 against C = 0.1 reads four runs; its sample has all four. On the sample's seeds 8-11
# the margins (points) are 4, 5, 3, 6 at C = 0.05 and 1, 1.5, 1, 2 at C = 0.1; on the runs' own seeds 0-2 they
# are equal (2, 2, 2 against 2, 2, 2.5: inconclusive).
def c_runs(with_c005_sample: bool = True) -> dict:
    def run(key, loss, finals, fraction, seeds, sample_of=None):
        made = seeded(
            key, loss, "group", 0.1, finals, seeds=seeds, probe_rounds=() if fraction != 0.1 else (1, 20, 28, 40)
        )
        for result in made.results:
            result.settings["client_fraction"] = fraction
        return as_sample(made, key, sample_of, ["tce_margin_C"]) if sample_of else made

    runs = {
        "ce": run("ce", "ce", [0.50, 0.52, 0.54], 0.1, [0, 1, 2]),
        "tce": run("tce", "tce", [0.52, 0.54, 0.565], 0.1, [0, 1, 2]),
        "ce05": run("ce05", "ce", [0.40, 0.42, 0.44], 0.05, [0, 1, 2]),
        "tce05": run("tce05", "tce", [0.42, 0.44, 0.46], 0.05, [0, 1, 2]),
        "ce_confirm": run("ce_confirm", "ce", [0.50, 0.51, 0.52, 0.53], 0.1, FRESH[:4], "ce"),
        "tce_confirm": run("tce_confirm", "tce", [0.51, 0.525, 0.53, 0.55], 0.1, FRESH[:4], "tce"),
    }
    if with_c005_sample:
        runs["ce05_confirm"] = run("ce05_confirm", "ce", [0.40, 0.40, 0.41, 0.41], 0.05, FRESH[:4], "ce05")
        runs["tce05_confirm"] = run("tce05_confirm", "tce", [0.44, 0.45, 0.44, 0.47], 0.05, FRESH[:4], "tce05")
    return runs


def margin_claim(tmp_path, runs, samples=None):
    context = report_context(tmp_path, "tce", runs, PUBLISHED)
    context = dataclasses.replace(context, samples=samples or {})
    return {c.id: c for c in build_with_confirmations(tce, context)}["tce_margin_C"]


def test_the_margin_claim_is_decided_on_all_four_runs_samples_paired_by_seed(tmp_path):
    claim = margin_claim(tmp_path, c_runs())
    (comparison,) = claim.comparisons
    assert comparison.p == pytest.approx(p_paired([4 - 1, 5 - 1.5, 3 - 1, 6 - 2]), rel=1e-6)
    assert (
        claim.status == "held" and claim.seeds == "4 vs 4" and claim.test.endswith("(confirmatory sample, seeds 8-11)")
    )
    assert "Before it, on the runs' own seeds (3 vs 3): inconclusive" in claim.evidence


def test_a_planned_sample_without_results_leaves_the_first_verdict(tmp_path):
    planned = {
        "ce05_confirm": {"run": "ce05", "claims": ["tce_margin_C"]},
        "tce05_confirm": {"run": "tce05", "claims": ["tce_margin_C"]},
    }
    claim = margin_claim(tmp_path, c_runs(with_c005_sample=False), planned)
    assert claim.status == "inconclusive" and claim.seeds == "3 vs 3" and not claim.sample
    assert claim.evidence.endswith("cannot decide it yet: ce05_confirm, tce05_confirm not trained")


def test_a_sample_that_does_not_cover_every_run_of_the_claim_does_not_decide_it(tmp_path):
    # only the C = 0.1 pair sampled: the margin at C = 0.05 would come from seeds 0-2, already read
    runs = c_runs(with_c005_sample=False)
    for key in ("ce_confirm", "tce_confirm"):
        for result in runs[key].results:
            result.settings["confirms"]["claims"] = ["tce_margin_C"]
    claim = margin_claim(tmp_path, runs)
    assert claim.status == "inconclusive" and claim.seeds == "3 vs 3" and not claim.sample
    assert claim.evidence.endswith(
        "cannot decide it yet: a comparison does not read the sample's seeds alone (a run of the claim has no sample?)"
    )


def test_a_second_sample_for_one_claim_is_refused(tmp_path):
    runs = bn_runs()
    again = seeded("again", "tce", "batch", 0.1, SAMPLE["tce_bn"], seeds=[40, 41, 42, 43])
    runs["again"] = as_sample(again, "again", "tce_bn", [BN_CLAIM])
    with pytest.raises(
        UserError,
        match=r"^runs.tce_bn_confirm.confirms: a second sample of tce_bn for claim "
        r"'tce_bn_beats_fedavg_bn_cifar10' \(the first: again\); a claim gets one$",
    ):
        build_with_confirmations(tce, report_context(tmp_path, "tce", runs, PUBLISHED))
    params = expand_templates(
        params_with(s=sample("tce_cifar10_tce_gn"), t={**sample("tce_cifar10_tce_gn"), "scaled": {"seeds": [50]}})
    )
    assert check_params(params) == [
        "runs.t.confirms: a second sample of tce_cifar10_tce_gn for claim "
        "'tce_less_forgetting' (the first: s); a claim gets one"
    ]


def test_claims_of_makes_the_claims_build_makes(tmp_path):
    runs = {k: v for k, v in c_runs().items() if not k.endswith("_confirm")}
    context = report_context(tmp_path, "tce", runs, PUBLISHED)
    built, alone = tce.build(context), tce.claims_of(context)
    assert [(c.id, c.status, c.evidence, c.seeds) for c in built] == [
        (c.id, c.status, c.evidence, c.seeds) for c in alone
    ]


def test_a_misspelt_claim_id_is_found_before_the_sample_trains(monkeypatch, capsys):
    """`python -m pipeline.report --check-samples` (and the report stage, before it reads a result) names it."""
    from pipeline.report import __main__ as report_main

    params = load_params(ROOT / "params.yaml")
    assert sample_problems(params) == []
    params["runs"]["tce_cifar10_tce_gn_confirm"]["confirms"]["claims"] = ["tce_margin_c"]
    (line,) = sample_problems(params)
    assert (
        line.startswith(
            "runs.tce_cifar10_tce_gn_confirm.confirms.claims: 'tce_margin_c' is not a claim of the "
            "tce report; expected one of "
        )
        and "tce_margin_C" in line
    )
    monkeypatch.setattr(report_main, "load_checked_params", lambda: params)
    with pytest.raises(SystemExit) as exit_:
        report_main.main(["--check-samples"])
    assert exit_.value.code != 0
    err = capsys.readouterr().err
    assert "'tce_margin_c' is not a claim of the tce report" in err and "Traceback" not in err


def test_the_committed_plan_is_pinned():
    """The plan of 2026-11-27 (docs/methodology.md): which claims each sample decides (the TCE samples in the
    morning, FedWAvg's Table 3 sample later that morning, each before it trained). Changing it after the
    samples were read would bring an earlier verdict back, or move a sample onto another claim."""
    plan = {
        k: (r["confirms"]["run"], r["confirms"]["claims"], r["scaled"]["seeds"])
        for k, r in BASE["runs"].items()
        if r.get("confirms")
    }
    both, seeds_24, seeds_16 = ["tce_gn_beats_fedavg_cifar10", "tce_margin_C"], list(range(8, 32)), list(range(8, 24))
    assert plan == {
        "tce_cifar10_tce_gn_confirm": ("tce_cifar10_tce_gn", both, seeds_24),
        "tce_cifar10_fedavg_gn_confirm": ("tce_cifar10_fedavg_gn", both, seeds_24),
        "tce_c0p05_tce_gn_confirm": ("tce_c0p05_tce_gn", ["tce_margin_C"], seeds_24),
        "tce_c0p05_fedavg_gn_confirm": ("tce_c0p05_fedavg_gn", ["tce_margin_C"], seeds_24),
        "tce_cifar10_tce_bn_confirm": ("tce_cifar10_tce_bn", [BN_CLAIM], seeds_16),
        "tce_cifar10_fedavg_bn_confirm": ("tce_cifar10_fedavg_bn", [BN_CLAIM], seeds_16),
        "fedwavg_t3_c46_fedavg_confirm": ("fedwavg_t3_c46_fedavg", ["t3_minority_forgotten"], list(range(3, 36))),
    }


def test_the_report_stage_says_a_bad_sample_in_one_line(monkeypatch, capsys):
    """The report stage's main refuses a second sample as one `error:` line and exit code 2, no traceback."""
    from pipeline.report import __main__ as report_main

    def refuse():
        raise UserError("runs.t.confirms: a second sample of r for claim 'c' (the first: s); a claim gets one")

    monkeypatch.setattr(report_main, "load_checked_params", refuse)
    with pytest.raises(SystemExit) as exit_:
        report_main.main([])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        "error: runs.t.confirms: a second sample of r for claim 'c' (the first: s); a claim gets one\n"
    )


def test_fedwavgs_claims_alone_are_the_claims_its_report_builds(tmp_path):
    """claims_of (what a confirmatory sample is decided by) places the runs as build does: on the committed
    results, the same ids, statuses and evidence."""
    import yaml

    from pipeline.config import GRID_FILE, read_yaml
    from pipeline.report import fedwavg
    from pipeline.report.__main__ import PUBLISHED, planned_samples
    from pipeline.report.common import ReportContext, load_results

    params = load_params(ROOT / "params.yaml")
    grid = read_yaml(ROOT / GRID_FILE)["grid"]
    resolved = {run: ROOT / "resolved" / f"{run}.json" for run in grid["runs"]}
    # A run added to params.yaml but not resolved yet (no `dvc repro` since; tests/e2e/test_readme_pasted.py)
    # has no results either; a committed resolved file that is missing is a failure.
    tracked = set(
        subprocess.run(["git", "ls-files", "resolved"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    )
    seeds = {
        run: json.loads(path.read_text())["seeds"]
        for run, path in resolved.items()
        if path.is_file() or f"resolved/{run}.json" in tracked
    }
    results = load_results(seeds, ROOT / "reports" / "runs", params.get("partitions") or {})
    context = ReportContext(
        "default",
        results,
        yaml.safe_load(PUBLISHED.read_text())["fedwavg"],
        tmp_path,
        ROOT / "reports" / "partitions",
        frozenset(grid["partitions"]),
        planned_samples(params, grid),
    )
    built, alone = fedwavg.build(context), fedwavg.claims_of(context)
    assert [(c.id, c.status, c.evidence) for c in alone] == [(c.id, c.status, c.evidence) for c in built]
