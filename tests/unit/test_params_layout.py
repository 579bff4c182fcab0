"""params.yaml under `dvc exp run -S`: runs share settings through templates, the file is kept in the layout
DVC's own YAML writer gives, and an override of one run's key changes that run's resolved settings and no
other's. DVC's writer is called directly (dvc.utils.hydra.apply_overrides, what `-S` runs), so every run
of the real params.yaml can be checked in seconds; tests/test_e2e_set_param.py runs `dvc exp run -S`."""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import pytest
import yaml
from dvc.utils.hydra import apply_overrides

from pipeline.config import load_params
from pipeline.errors import UserError
from pipeline.runs import expand_templates, resolve_run

REPO = Path(__file__).resolve().parents[2]


def overridden(tmp_path: Path, *overrides: str) -> Path:
    path = tmp_path / "params.yaml"
    shutil.copy(REPO / "params.yaml", path)
    apply_overrides(path, list(overrides))
    return path


def resolved_all(path: Path) -> dict:
    params = load_params(path)
    return {
        profile: {key: resolve_run({**params, "profile": profile}, key) for key in params["runs"]}
        for profile in ("default", "paper")
    }


def test_params_yaml_is_a_fixed_point_of_dvcs_yaml_writer(tmp_path):
    """A no-op override rewrites the whole file through DVC's writer: nothing may change, not a comment
    (ruamel drops a comment that follows a list value when DVC replaces the list, as it does on every -S)."""
    path = overridden(tmp_path, "profile=default")
    assert path.read_text() == (REPO / "params.yaml").read_text()


# (override, the run it names): a run's own key, an algorithm key, a scaled key set by the run itself, and
# keys the run inherits from its template (`++`), in each paper's runs.
OVERRIDES = [
    ("runs.fedcurv_e10_fedprox.algorithm.mu=0.5", "fedcurv_e10_fedprox"),
    ("runs.fedcurv_e50_fedprox.scaled.algorithm.mu=0.5", "fedcurv_e50_fedprox"),
    ("++runs.fedcurv_e10_fedavg.scaled.rounds=7", "fedcurv_e10_fedavg"),
    ("++runs.fedcurv_e10_fedavg.lr=0.02", "fedcurv_e10_fedavg"),
    ("++runs.tce_cifar10_tce_gn.scaled.lr=0.05", "tce_cifar10_tce_gn"),
    ("++runs.fedwavg_t1_svhn_federated.scaled.rounds=7", "fedwavg_t1_svhn_federated"),
    ("++runs.fedwavg_t1_mnist_federated.scaled.rounds=7", "fedwavg_t1_mnist_federated"),
    ("++runs.importance_mnist_mlp_fedavg.seeds=[0,1,2,3]", "importance_mnist_mlp_fedavg"),
]


@pytest.mark.parametrize("override,run", OVERRIDES)
def test_an_override_changes_exactly_the_run_it_names(tmp_path, override, run):
    before = resolved_all(REPO / "params.yaml")
    path = overridden(tmp_path, override)
    after = resolved_all(path)
    # the run and its confirmatory samples, which train its settings on other seeds (runs.confirmed_run)
    follows = {run} | {
        key for key, r in load_params(path)["runs"].items() if (r.get("confirms") or {}).get("run") == run
    }
    for profile in before:
        moved = {key for key in before[profile] if before[profile][key] != after[profile][key]}
        # the paper profile ignores `scaled`, so a scaled key moves the default profile's run only
        assert moved <= follows, (profile, moved)
    assert {key for key in before["default"] if before["default"][key] != after["default"][key]} == follows
    # and params.yaml changed on the key's lines (its value, a list's items, a new `scaled:` parent for
    # `++`), nowhere else
    leaf = override.split("=", 1)[0].rsplit(".", 1)[1]
    diff = difflib.unified_diff(
        (REPO / "params.yaml").read_text().splitlines(), path.read_text().splitlines(), n=0, lineterm=""
    )
    changed = [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed and all(
        f"{leaf}:" in line or line[1:].strip().startswith("- ") or line[1:].strip() == "scaled:" for line in changed
    ), changed
    assert sum(line.startswith("-") for line in changed) <= 1, changed


def test_a_template_chain_expands_with_the_runs_own_keys_winning_and_scaled_merged_key_by_key():
    params = {
        "templates": {
            "base": {"lr": 0.1, "rounds": 10, "scaled": {"rounds": 2, "lr": 0.5}},
            "child": {"template": "base", "rounds": 20, "scaled": {"rounds": 3}},
        },
        "runs": {
            "a": {"template": "child", "lr": 0.2, "scaled": {"batch_size": 8}},
            "b": {"template": "base", "algorithm": {"name": "fedavg"}},
            "c": {"lr": 0.3},
        },
    }
    runs = expand_templates(params)["runs"]
    # worked by hand: a <- child <- base
    assert runs["a"] == {"lr": 0.2, "rounds": 20, "scaled": {"rounds": 3, "lr": 0.5, "batch_size": 8}}
    assert runs["b"] == {"lr": 0.1, "rounds": 10, "scaled": {"rounds": 2, "lr": 0.5}, "algorithm": {"name": "fedavg"}}
    assert runs["c"] == {"lr": 0.3}
    assert "template" not in runs["a"] and params["runs"]["a"]["template"] == "child"  # the input is untouched


@pytest.mark.parametrize(
    "templates,message",
    [
        ({}, "runs.a.template: 'missing' is not a template"),
        ({"missing": {"template": "missing"}}, "names itself through missing -> missing"),
        ({"missing": [1, 2]}, "templates.missing: list is not allowed"),
    ],
)
def test_a_bad_template_is_one_line(templates, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")) as error:
        expand_templates({"templates": templates, "runs": {"a": {"template": "missing"}}})
    assert "\n" not in str(error.value)


def test_no_yaml_anchors_remain_in_params_yaml():
    text = (REPO / "params.yaml").read_text()
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    assert "<<:" not in code and "&" not in code and "*" not in code
    assert yaml.safe_load(text)["templates"]  # the shared settings are templates now


@pytest.mark.xfail(
    strict=True,
    reason=(
        "known defect, fixed at the next re-keying (docs/history/history.md): a run's resolved settings record "
        "a scaled seed list under `scaled.seeds`, which inputs.settings_hash does not leave out, so a seed added to a run "
        "whose seeds are scaled retrains that run's other seeds; fixing it re-keys every kept result"
    ),
)
def test_a_seed_added_to_a_run_leaves_its_other_seeds_checkpoint_keys_unchanged(tmp_path, monkeypatch):
    """A run's kept results are keyed by its resolved settings (pipeline.inputs.settings_hash): a longer seed
    list under `scaled` (the default profile running more seeds than the paper's) must not enter the key,
    or adding a seed retrains the run's others instead of training the one added."""
    import json

    from pipeline.inputs import settings_hash
    from pipeline.resolve import write_resolved
    from pipeline.settings import seed_settings

    params = {**load_params(REPO / "params.yaml"), "profile": "default"}
    run = "fedcurv_e50_fedavg"
    expanded = expand_templates(params)
    seeds = resolve_run(expanded, run)["seeds"]
    assert "seeds" in expanded["runs"][run]["scaled"] and len(seeds) > 1
    more = {
        **expanded,
        "runs": {run: {**expanded["runs"][run], "scaled": {**expanded["runs"][run]["scaled"], "seeds": seeds + [99]}}},
    }
    keys = {}
    for name, variant in (("as committed", {**expanded, "runs": {run: expanded["runs"][run]}}), ("one more", more)):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        write_resolved(variant, [run])
        resolved = json.loads((tmp_path / name / "resolved" / f"{run}.json").read_text())
        keys[name] = settings_hash(seed_settings(resolved, seeds[0]))
    assert keys["as committed"] == keys["one more"]
