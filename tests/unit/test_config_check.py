"""`python -m pipeline.config --check` on inputs it used to let through (issue 38, part 4): partitions that
cannot be built, shards that leave data out, batches above a client's data, a key given twice, a YAML
syntax error. Each refusal is one `error: ` line naming the key or file, exit 2, no traceback.

Most cases call the entry point in-process (the same `exit_on_user_error` wrapper as on the command line,
without a 3 s interpreter start each); one runs it as a real command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipeline import config, partition
from pipeline.download import write_prepared
from support.helpers import smallest_valid_run

REPO = Path(__file__).resolve().parents[2]
RUN = smallest_valid_run()


def params_with(partition_settings: dict, runs: dict | None = None, datasets: dict | None = None) -> dict:
    """Full-size datasets unless told: their sizes and class counts are known before download."""
    return {
        "profile": "default",
        "datasets": datasets or {"mnist": {}, "cifar10": {}},
        "partitions": {"p": partition_settings},
        "runs": runs or {"r": RUN},
    }  # an empty `runs` is refused


def write_project(folder: Path, params: dict) -> None:
    """params.yaml, and the grid.yaml `python -m pipeline.profile` would write where the params are valid."""
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    if not config.check_params(config.load_params(folder / "params.yaml")):
        grid = config.derive_grid(config.load_params(folder / "params.yaml"))
        (folder / "grid.yaml").write_text(yaml.safe_dump({"grid": grid}, sort_keys=True))


def entry_point(main, args, capsys) -> tuple[int, str, str]:
    try:
        main(args)
        code = 0
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def check(capsys) -> tuple[int, str, str]:
    return entry_point(config.main, ["--check"], capsys)


def assert_one_error(code: int, out: str, err: str, *needles: str) -> str:
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


# ---------------------------------------------------------------- partitions that cannot be built

UNBUILDABLE = {
    "more_clients_than_samples": (
        {"dataset": "mnist", "scheme": "iid", "clients": 100000, "seed": 0},
        ["partitions.p.clients", "100000 clients", "60000 samples", "1..60000"],
    ),
    "six_clusters_of_two_classes_on_ten": (
        {
            "dataset": "cifar10",
            "scheme": "clusters",
            "cluster_sizes": [1] * 6,
            "classes_per_cluster": 2,
            "samples_per_client": 100,
            "seed": 0,
        },
        ["partitions.p.classes_per_cluster", "2 classes x 6 clusters", "10 classes"],
    ),
    "samples_per_client_beyond_the_cluster": (
        {
            "dataset": "cifar10",
            "scheme": "clusters",
            "cluster_sizes": [2, 7],
            "classes_per_cluster": 2,
            "samples_per_client": 1500,
            "seed": 0,
        },
        ["partitions.p.samples_per_client", "7 clients x 1500 samples", "10000 samples of classes"],
    ),
    "shard_size_beyond_the_data": (
        {"dataset": "mnist", "scheme": "shards", "clients": 96, "shards_per_client": 2, "shard_size": 400, "seed": 0},
        ["partitions.p.shard_size", "192 one-label blocks", "only 143"],
    ),
    "sorted_shards_beyond_the_data": (
        {
            "dataset": "mnist",
            "scheme": "shards",
            "clients": 100,
            "shards_per_client": 2,
            "shard_size": 301,
            "shard_cut": "sorted",
            "seed": 0,
        },
        ["partitions.p.shard_size", "need 200 blocks", "only 199"],
    ),
    "val_fraction_leaving_nothing": (
        {"dataset": "mnist", "scheme": "iid", "clients": 60000, "val_fraction": 0.9, "seed": 0},
        ["partitions.p.val_fraction", "0.9", "no training samples"],
    ),
    "subset_too_small_for_its_clusters": (  # a subset's class mix is unknown; its size alone refuses this
        {"dataset": "mnist", "scheme": "clusters", "cluster_sizes": [3, 3], "samples_per_client": 11, "seed": 0},
        ["partitions.p.samples_per_client", "6 clients x 11 samples", "60 samples"],
    ),
}


@pytest.mark.parametrize("case", sorted(UNBUILDABLE))
def test_a_partition_that_cannot_be_built_is_refused_by_the_check(case, tmp_path, monkeypatch, capsys):
    settings, needles = UNBUILDABLE[case]
    monkeypatch.chdir(tmp_path)
    datasets = {"mnist": {"train_size": 60, "test_size": 20}} if case.startswith("subset") else None
    write_project(tmp_path, params_with(settings, datasets=datasets))
    assert_one_error(*check(capsys), *needles)


def test_the_same_partitions_within_the_data_pass(tmp_path, monkeypatch, capsys):
    """The control: one step inside each boundary above is fine."""
    monkeypatch.chdir(tmp_path)
    inside = [
        {"dataset": "mnist", "scheme": "iid", "clients": 60000, "val_fraction": 0.5, "seed": 0},
        {"dataset": "cifar10", "scheme": "clusters", "cluster_sizes": [1] * 5, "samples_per_client": 100, "seed": 0},
        {"dataset": "cifar10", "scheme": "clusters", "cluster_sizes": [2, 7], "samples_per_client": 1428, "seed": 0},
        {"dataset": "mnist", "scheme": "shards", "clients": 71, "shards_per_client": 2, "shard_size": 400, "seed": 0},
        {
            "dataset": "mnist",
            "scheme": "shards",
            "clients": 100,
            "shards_per_client": 2,
            "shard_size": 300,
            "shard_cut": "sorted",
            "seed": 0,
        },
    ]
    for settings in inside:
        write_project(tmp_path, params_with(settings))
        code, out, err = check(capsys)
        assert code == 0 and "ok" in out, (settings, err)


# ---------------------------------------------------------------- allowed, but said


def test_shards_that_leave_data_out_print_how_many_in_the_check_and_the_stage(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    settings = {
        "dataset": "mnist",
        "scheme": "shards",
        "clients": 5,
        "shards_per_client": 2,
        "shard_size": 5,
        "shard_cut": "sorted",
        "seed": 0,
    }
    write_project(tmp_path, params_with(settings, datasets={"mnist": {"train_size": 60, "test_size": 20}}))
    expected = (
        "warning: partitions.p: the shards hold 50 of dataset mnist's 60 training samples; 10 (16.7%) "
        "are left out (shard_size and the class counts decide how many)"
    )
    code, out, err = check(capsys)
    assert code == 0 and "ok" in out
    assert err.splitlines() == [expected]
    rng = np.random.default_rng(0)
    write_prepared(
        "mnist",
        {
            "x_train": rng.integers(0, 256, (60, 28, 28, 1), dtype=np.uint8),
            "y_train": np.arange(60, dtype=np.int64) % 10,
            "x_test": rng.integers(0, 256, (20, 28, 28, 1), dtype=np.uint8),
            "y_test": np.arange(20, dtype=np.int64) % 10,
        },
    )
    code, out, err = entry_point(partition.main, ["p"], capsys)
    assert code == 0, err
    assert err.splitlines() == [expected]  # the same line, counted from what the stage built


def test_shards_that_use_every_sample_say_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_project(
        tmp_path,
        params_with(
            {
                "dataset": "mnist",
                "scheme": "shards",
                "clients": 100,
                "shards_per_client": 2,
                "shard_size": 300,
                "shard_cut": "sorted",
                "seed": 0,
            }
        ),
    )
    assert check(capsys)[2] == ""


def test_a_batch_above_some_clients_data_is_a_warning(tmp_path, monkeypatch, capsys):
    """A warning, not a refusal: full-batch local training is a setting of its own (FedAvg's B = infinity)."""
    monkeypatch.chdir(tmp_path)
    settings = {"dataset": "mnist", "scheme": "iid", "clients": 2000, "seed": 0}  # 30 samples each
    runs = {
        "r": {**RUN, "batch_size": 50},
        "s": {**RUN, "batch_size": 10, "scaled": {"batch_size": 64}},
        "fits": {**RUN, "batch_size": 30},
    }
    write_project(tmp_path, params_with(settings, runs=runs))
    code, out, err = check(capsys)
    assert code == 0 and "ok" in out
    assert err.splitlines() == [
        (
            "warning: runs.r.batch_size: 50 is more than the 30 training samples of 2000 of the 2000 clients of "
            "partition p; those train full-batch (one step an epoch)"
        ),
        (
            "warning: runs.s.scaled.batch_size: 64 is more than the 30 training samples of 2000 of the 2000 clients "
            "of partition p; those train full-batch (one step an epoch)"
        ),
    ]


def test_the_real_params_pass_the_check(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    code, out, err = check(capsys)
    assert code == 0 and out.startswith("params.yaml: ok"), err
    assert all(line.startswith("warning: ") for line in err.splitlines()), err


# ---------------------------------------------------------------- params.yaml as text

VALID_TEXT = """\
profile: default
datasets:
  mnist: {train_size: 60, test_size: 20}
partitions:
  p: {dataset: mnist, scheme: iid, clients: 3, seed: 0}
runs: {}
"""


def test_a_run_defined_twice_is_refused_with_both_line_numbers(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    run = (
        "  r:\n    partition: p\n    model: mlp_200\n    rounds: 2\n    client_fraction: 1.0\n"
        "    local_epochs: 1\n    batch_size: 8\n    lr: {lr}\n    algorithm: {{name: fedavg}}\n"
    )
    text = VALID_TEXT.replace("runs: {}\n", "runs:\n" + run.format(lr=0.05) + run.format(lr=0.1))
    (tmp_path / "params.yaml").write_text(text)
    assert_one_error(
        *check(capsys), "params.yaml", "line 16", "'r' under runs", "lines 7 and 16", "remove or rename one"
    )


def test_a_key_twice_at_any_level_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    text = VALID_TEXT.replace(
        "  p: {dataset: mnist, scheme: iid, clients: 3, seed: 0}",
        "  p:\n    dataset: mnist\n    clients: 3\n    scheme: iid\n    clients: 4\n    seed: 0",
    )
    (tmp_path / "params.yaml").write_text(text)
    assert_one_error(*check(capsys), "'clients' under partitions.p", "lines 7 and 9")
    (tmp_path / "params.yaml").write_text(VALID_TEXT + "profile: paper\n")
    assert_one_error(*check(capsys), "'profile' at the top level", "lines 1 and 7")


def test_anchors_aliases_and_merge_keys_are_not_duplicates(tmp_path, monkeypatch, capsys):
    """A key a mapping merges in (`<<: *base`) and then sets itself is an override: allowed, as YAML means."""
    monkeypatch.chdir(tmp_path)
    text = VALID_TEXT.replace(
        "runs: {}\n",
        """\
runs:
  a: &base
    partition: p
    model: mlp_200
    rounds: 2
    client_fraction: 1.0
    local_epochs: 1
    batch_size: 8
    lr: 0.05
    algorithm: &fedavg {name: fedavg}
    scaled: &scaled {rounds: 1}
  b:
    <<: *base
    lr: 0.1
    algorithm: *fedavg
    scaled:
      <<: *scaled
      rounds: 2
""",
    )
    (tmp_path / "params.yaml").write_text(text)
    assert config.read_yaml(tmp_path / "params.yaml") == yaml.safe_load(text)  # the same meaning
    params = config.load_params(tmp_path / "params.yaml")
    assert params["runs"]["b"]["lr"] == 0.1 and params["runs"]["b"]["scaled"] == {"rounds": 2}
    assert params["runs"]["b"]["rounds"] == 2 and params["runs"]["a"]["lr"] == 0.05
    write_project(tmp_path, params)
    (tmp_path / "params.yaml").write_text(text)  # back to the anchored text, grid.yaml from its meaning
    code, out, err = check(capsys)
    assert code == 0 and "ok" in out, err


@pytest.mark.parametrize(
    "broken, needles",
    [
        ("runs: [1, 2\n", ["line 7", "did not find expected ',' or ']'", "flow sequence started at line 6"]),
        ("runs:\n  a: 1\n    b: 2\n", ["line 8", "mapping values are not allowed"]),
        ("runs:\n\tr: 1\n", ["line 7", "cannot start any token"]),
    ],
)
def test_a_yaml_syntax_error_names_the_line_and_the_reason(broken, needles, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(VALID_TEXT.replace("runs: {}\n", broken))
    line = assert_one_error(*check(capsys), "params.yaml: not valid YAML", *needles)
    assert "column" in line


def test_the_command_refuses_a_duplicate_in_one_line_without_a_traceback(tmp_path):
    (tmp_path / "params.yaml").write_text(VALID_TEXT + "datasets: {}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.config", "--check"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert_one_error(
        result.returncode,
        result.stdout,
        result.stderr,
        "params.yaml: line 7",
        "'datasets' at the top level",
        "lines 2 and 7",
    )
