"""A researcher's variation, end to end: `dvc exp run -S` on one run's key changes that run's resolved/
file and nothing else, retrains exactly its seeds (and the report), and leaves params.yaml as it was but
for the key; a fresh clone without DVC's cache is already up to date, and its first `-S` trains only the
varied run; editing a docstring of the download, partition or resolve stage's code retrains nothing.

The runs share settings through a template (params.yaml's `template:` key), the case YAML anchors broke:
DVC's `-S` wrote into the object an anchor shares, so one run's change moved its siblings."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from support.helpers import Repo, train_stage

pytestmark = pytest.mark.e2e

# Written in the layout DVC's own YAML writer gives (block lists), as the real params.yaml is, so that a
# `-S` rewrites nothing but the key it names.
PARAMS_TEXT = """\
profile: default
datasets:
  mnist:
    train_size: 300
    test_size: 60
partitions:
  shards:
    dataset: mnist
    scheme: shards
    clients: 6
    shards_per_client: 2
    seed: 0
# Both runs take their settings from `base`; the default profile scales their rounds.
templates:
  base:
    paper: fedcurv
    partition: shards
    model: mlp_200
    rounds: 4
    client_fraction: 1.0
    local_epochs: 1
    batch_size: 32
    lr: 0.05
    seeds:
    - 0
    - 1
    targets:
    - 0.9
    scaled:
      rounds: 2
runs:
  fedcurv_e10_fedavg:
    template: base
    algorithm: {name: fedavg}
  # A small lr, so that the curve is not at 100 % after a round.
  fedcurv_e10_fedprox:
    template: base
    lr: 0.005
    algorithm: {name: fedprox, mu: 0.01}
"""
VARIED, OTHER = "fedcurv_e10_fedprox", "fedcurv_e10_fedavg"
# One key of each kind: a run's own top-level key, an algorithm key, and a `scaled` key the run inherits
# from its template (`++`: add it to this run, Hydra's override grammar, which `-S` speaks).
OVERRIDES = (f"runs.{VARIED}.lr=0.01", f"runs.{VARIED}.algorithm.mu=0.5", f"++runs.{VARIED}.scaled.rounds=3")
VARIED_STAGES = {train_stage(VARIED)}  # one stage trains both its seeds


def template_repo(pipeline_repo) -> Repo:
    repo = pipeline_repo(yaml.safe_load(PARAMS_TEXT))
    (repo.root / "params.yaml").write_text(PARAMS_TEXT)  # the same settings, in DVC's layout, with comments
    repo.run("dvc", "repro", timeout=300)
    repo.commit("baseline results")
    return repo


def changed_files(repo: Repo, folder: str) -> set[str]:
    return set(repo.run("git", "diff", "--name-only", "HEAD", "--", folder).split())


def changed_lines(repo: Repo, path: str) -> list[str]:
    diff = repo.run("git", "diff", "-U0", "HEAD", "--", path).splitlines()
    return [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def test_set_param_changes_exactly_the_run_it_names_and_retrains_exactly_its_seeds(pipeline_repo):
    repo = template_repo(pipeline_repo)
    for override in OVERRIDES:
        ran = repo.stages_run("dvc", "exp", "run", "-S", override, timeout=300)
        assert ran == {"resolve", *VARIED_STAGES, "report"}, (override, ran)
        assert changed_files(repo, "resolved") == {f"resolved/{VARIED}.json"}, override
        key, value = override.lstrip("+").rsplit("=", 1)
        lines = changed_lines(repo, "params.yaml")
        # the key's line (and, for a key the run inherits, its new `scaled:` parent); no other line moved
        assert any(line.startswith("+") and f"{key.rsplit('.', 1)[1]}: {value}" in line for line in lines), (
            override,
            lines,
        )
        assert len(lines) <= 3, (override, lines)
        assert repo.params()["runs"][OTHER] == {"template": "base", "algorithm": {"name": "fedavg"}}
        repo.commit(override)

    # A plain `-S` on a key the run only inherits is refused (Hydra: use `+`/`++`), and nothing changes.
    before = (repo.root / "params.yaml").read_text()
    result = subprocess.run(
        ["dvc", "exp", "run", "-S", f"runs.{VARIED}.local_epochs=2"],
        cwd=repo.root,
        env=repo.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0 and "set-param" in result.stdout + result.stderr
    assert (repo.root / "params.yaml").read_text() == before


def test_a_fresh_clone_is_up_to_date_and_its_first_variation_trains_only_that_run(pipeline_repo):
    repo = template_repo(pipeline_repo)
    clone_root = repo.root.parent / "clone"
    repo.run("git", "clone", "-q", str(repo.root), str(clone_root))
    clone = Repo(
        clone_root, repo.root.parent / "mirror", repo.root.parent / "home", {"CI": "1", "FEDFORGET_THREADS": "1"}
    )
    status = clone.run("dvc", "status")
    # No cache: the prepared data and the partitions' arrays are missing, and only their stages say so.
    assert "train@" not in status and "report" not in status and "resolve" not in status, status
    ran = clone.stages_run("dvc", "exp", "run", "-S", OVERRIDES[1], timeout=300)
    assert {stage for stage in ran if "train@" in stage} == VARIED_STAGES, ran
    assert "report" in ran


def test_editing_docstrings_and_comments_of_engine_data_and_resolve_code_reruns_only_the_fingerprint(pipeline_repo):
    """Stages depend on the fingerprints of their code's syntax trees (fingerprint/), not on its bytes: a
    docstring and a comment added to engine, data and resolve modules rerun the fingerprint stage (its
    dependencies are the files), whose digests do not change, so nothing downstream reruns."""
    repo = template_repo(pipeline_repo)
    for module in (
        "rounds",
        "training",
        "algorithms/fedprox",
        "runs",
        "download",
        "partition",
        "partitioners",
        "resolve",
    ):
        path = repo.root / "pipeline" / f"{module}.py"
        text = path.read_text()
        path.write_text(text.replace('"""', '"""Edited. ', 1) + "# a comment at the end\n")
    ran = repo.stages_run("dvc", "repro", timeout=300)
    assert ran == {"fingerprint"}, ran
    # dvc.lock records the fingerprint stage's new dependency hashes; its outputs and everything else are unchanged
    assert repo.run("git", "status", "--porcelain", "--", "fingerprint", "resolved", "reports") == ""
    assert "up to date" in repo.run("dvc", "status")


def test_a_bad_value_fails_the_pipeline_and_leaves_the_last_good_outputs(pipeline_repo):
    """resolve's outputs are in git, not in DVC's cache: DVC deleting them before a run that then fails on
    a user's mistake would lose them (`dvc checkout` cannot bring them back)."""
    repo = template_repo(pipeline_repo)
    kept = {
        path: path.read_bytes()
        for folder in ("resolved", "reports")
        for path in (repo.root / folder).rglob("*")
        if path.is_file()
    }
    text = (repo.root / "params.yaml").read_text()
    (repo.root / "params.yaml").write_text(text.replace("    lr: 0.005", "    lr: -1"))
    result = subprocess.run(["dvc", "repro"], cwd=repo.root, env=repo.env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "runs.fedcurv_e10_fedprox.lr" in result.stdout + result.stderr
    now = {
        path: path.read_bytes()
        for folder in ("resolved", "reports")
        for path in (repo.root / folder).rglob("*")
        if path.is_file()
    }
    assert now == kept
