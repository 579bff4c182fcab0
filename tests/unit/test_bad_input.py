"""The entry points refuse bad input with one `error: ` line naming the key path or file, a non-zero exit,
no traceback, and no output written.

Every case runs the real entry point in a subprocess, in a temporary folder holding a params.yaml, the
grid.yaml that `python -m pipeline.profile` writes from it, and a tiny prepared (or mirrored) MNIST.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipeline import download
from support.helpers import smallest_valid_run

pytestmark = pytest.mark.e2e  # each case starts entry points in subprocesses (torch's import each time)

REPO = Path(__file__).resolve().parents[2]
TRAIN, TEST = 60, 20  # declared in params as datasets.mnist.train_size / test_size
UNREACHABLE_PROXY = "http://127.0.0.1:9"  # connection refused at once: a download fails fast, network or not


# ---------------------------------------------------------------- helpers


def tiny_mnist(train=TRAIN, test=TEST, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "x_train": rng.integers(0, 256, size=(train, 28, 28, 1), dtype=np.uint8),
        "y_train": np.arange(train, dtype=np.int64) % 10,
        "x_test": rng.integers(0, 256, size=(test, 28, 28, 1), dtype=np.uint8),
        "y_test": np.arange(test, dtype=np.int64) % 10,
    }


def base_params(partition: dict | None = None) -> dict:
    partition = partition or {"dataset": "mnist", "scheme": "iid", "clients": 3, "seed": 0}
    return {
        "profile": "default",
        "datasets": {"mnist": {"train_size": TRAIN, "test_size": TEST}},
        "partitions": {"p": partition},
        "runs": {"r": GOOD_RUN},
    }  # an empty `runs` is refused


def write_params(folder: Path, params: dict) -> None:
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def child_env(mirror: Path | None = None) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in (download.MIRROR_ENV, "no_proxy", "NO_PROXY")}
    env["PYTHONPATH"] = str(REPO)
    env["MPLBACKEND"] = "Agg"
    for key in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        env[key] = UNREACHABLE_PROXY
    if mirror is not None:
        env[download.MIRROR_ENV] = str(mirror)
    return env


def run(folder: Path, *args: str, mirror: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=folder,
        env=child_env(mirror),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def base_grid(tmp_path_factory) -> str:
    """The grid.yaml that `python -m pipeline.profile` writes for base_params() (run once per module)."""
    folder = tmp_path_factory.mktemp("grid")
    write_params(folder, base_params())
    result = run(folder, "pipeline.profile")
    assert result.returncode == 0, result.stderr
    return (folder / "grid.yaml").read_text()


def prepare(folder: Path, monkeypatch, arrays: dict | None = None) -> None:
    monkeypatch.chdir(folder)
    download.write_prepared("mnist", arrays or tiny_mnist())


def assert_one_error_line(result: subprocess.CompletedProcess, *needles: str) -> str:
    assert result.returncode != 0, f"exit 0; stdout: {result.stdout!r}"
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {result.stderr!r}"
    line = lines[0]
    assert line.startswith("error: "), line
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    return line


def assert_not_written(path: Path) -> None:
    assert not path.exists(), f"{path} was written"
    if path.parent.is_dir():
        stray = [p.name for p in path.parent.iterdir() if p.name.startswith(".")]
        assert not stray, f"temporary files left in {path.parent}: {stray}"


@pytest.fixture
def project(tmp_path: Path, monkeypatch, base_grid):
    """make(partition): a folder with the grid.yaml of valid params and a prepared tiny MNIST, then
    params.yaml with `partition` as `p` (a partition's settings, not its dataset, leave the grid as is)."""

    def make(partition: dict) -> Path:
        (tmp_path / "grid.yaml").write_text(base_grid)
        prepare(tmp_path, monkeypatch)
        write_params(tmp_path, base_params(partition))
        return tmp_path

    return make


# ---------------------------------------------------------------- the partition stage

DIRICHLET = {"dataset": "mnist", "scheme": "dirichlet", "clients": 3, "alpha": 0.5, "seed": 0}
CLUSTERS = {"dataset": "mnist", "scheme": "clusters", "cluster_sizes": [1, 1], "samples_per_client": 5, "seed": 0}

PARTITION_CASES = {
    "unknown_scheme": (
        {"dataset": "mnist", "scheme": "stripes", "clients": 3, "seed": 0},
        ["partitions.p.scheme", "'stripes'"],
    ),
    "alpha_zero": ({**DIRICHLET, "alpha": 0}, ["partitions.p.alpha", "> 0"]),
    "alpha_negative": ({**DIRICHLET, "alpha": -0.5}, ["partitions.p.alpha", "> 0"]),
    "more_clients_than_samples": (
        {"dataset": "mnist", "scheme": "iid", "clients": TRAIN + 1, "seed": 0},
        ["partitions.p.clients", f"{TRAIN + 1} clients", f"{TRAIN} samples"],
    ),
    # 6 samples a class: 10 one-label blocks of 4, not the 14 asked for. The subset's size alone would
    # allow 15 (its class mix is not known before download), so the stage itself refuses this one.
    "shards_unsatisfiable": (
        {"dataset": "mnist", "scheme": "shards", "clients": 7, "shards_per_client": 2, "shard_size": 4, "seed": 0},
        ["partitions.p.shard_size", "only 10"],
    ),
    "overlapping_cluster_classes": (
        {**CLUSTERS, "cluster_classes": [[0, 1], [1, 2]]},
        ["partitions.p.cluster_classes", "overlap"],
    ),
    "too_many_classes_per_cluster": (
        {**CLUSTERS, "cluster_sizes": [1, 1, 1, 1], "classes_per_cluster": 3},
        ["partitions.p.classes_per_cluster", "10 classes"],
    ),
    "typo_key": (
        {key if key != "alpha" else "alpah": value for key, value in DIRICHLET.items()},
        ["partitions.p.alpah", "did you mean 'alpha'?"],
    ),
    "unknown_dataset_of_partition": (
        {"dataset": "mnsit", "scheme": "iid", "clients": 3, "seed": 0},
        ["partitions.p.dataset", "'mnsit'"],
    ),
    "val_fraction_too_large": (
        {"dataset": "mnist", "scheme": "iid", "clients": 3, "seed": 0, "val_fraction": 0.95},
        ["partitions.p.val_fraction", "0.95"],
    ),
}


@pytest.mark.parametrize("case", sorted(PARTITION_CASES))
def test_partition_refuses_bad_params(case, project):
    partition, needles = PARTITION_CASES[case]
    folder = project(partition)
    assert_one_error_line(run(folder, "pipeline.partition", "p"), *needles)
    assert_not_written(folder / "data" / "partitions" / "p")


def test_the_same_project_with_good_params_partitions_fine(project):
    # The control for the cases above: the setup itself is sound, so their failures come from the bad value.
    folder = project(DIRICHLET)
    result = run(folder, "pipeline.partition", "p")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert {p.name for p in (folder / "data" / "partitions" / "p").iterdir()} == {"clients.npz"}
    assert {p.name for p in (folder / "reports" / "partitions" / "p").iterdir()} == {
        "label_counts.json",
        "meta.json",
        "label_mix.png",
    }
    for records in ("data", "reports"):
        assert not [p.name for p in (folder / records / "partitions").iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("case", ["overlapping_cluster_classes", "alpha_zero", "typo_key", "unknown_scheme"])
def test_config_check_refuses_bad_params(case, project):
    partition, needles = PARTITION_CASES[case]
    folder = project(partition)
    result = run(folder, "pipeline.config", "--check")
    assert_one_error_line(result, *needles)
    assert result.stdout == ""


def test_partition_refuses_an_unknown_partition_name(project):
    folder = project(DIRICHLET)
    assert_one_error_line(run(folder, "pipeline.partition", "q"), "partitions.q", "no such partition")
    assert_not_written(folder / "data" / "partitions" / "q")


def test_out_of_date_grid_is_refused(project):
    folder = project(DIRICHLET)
    params = base_params(DIRICHLET)
    params["partitions"]["q"] = {"dataset": "mnist", "scheme": "iid", "clients": 2, "seed": 0}
    write_params(folder, params)  # a partition added without rerunning pipeline.profile
    for args in (["pipeline.partition", "p"], ["pipeline.config", "--check"]):
        assert_one_error_line(run(folder, *args), "grid.yaml", "out of date", "pipeline.profile")
    assert_not_written(folder / "data" / "partitions" / "p")


def test_partition_refuses_a_prepared_file_changed_after_writing(project):
    folder = project(DIRICHLET)
    path = folder / "data" / "prepared" / "mnist.npz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert_one_error_line(run(folder, "pipeline.partition", "p"), "data/prepared/mnist.npz", "checksum")
    assert_not_written(folder / "data" / "partitions" / "p")


def test_partition_refuses_a_dataset_not_prepared_yet(project):
    folder = project(DIRICHLET)
    (folder / "data" / "prepared" / "mnist.npz").unlink()
    assert_one_error_line(run(folder, "pipeline.partition", "p"), "data/prepared/mnist.npz", "download@mnist")
    assert_not_written(folder / "data" / "partitions" / "p")


# ---------------------------------------------------------------- the download stage


@pytest.fixture
def download_project(tmp_path: Path, base_grid):
    """make(params=None) -> (project folder, empty mirror folder), params.yaml = params or base_params()."""

    def make(params: dict | None = None) -> tuple[Path, Path]:
        folder, mirror = tmp_path / "project", tmp_path / "mirror"
        folder.mkdir()
        mirror.mkdir()
        (folder / "grid.yaml").write_text(base_grid)
        write_params(folder, params or base_params())
        return folder, mirror

    return make


def save_mirror(mirror: Path, arrays: dict) -> Path:
    path = mirror / "mnist.npz"
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)
    return path


def bad_mirror_arrays(case: str) -> dict:
    arrays = tiny_mnist()
    if case == "wrong_shape":
        arrays["x_train"] = arrays["x_train"][..., 0]
    elif case == "wrong_dtype":
        arrays["x_train"] = arrays["x_train"].astype(np.float32)
    elif case == "wrong_label_dtype":
        arrays["y_test"] = arrays["y_test"].astype(np.int32)
    elif case == "labels_out_of_range":
        arrays["y_train"] = arrays["y_train"].copy()
        arrays["y_train"][3] = 10
    elif case == "missing_key":
        del arrays["y_test"]
    elif case == "wrong_size":
        arrays["x_train"], arrays["y_train"] = arrays["x_train"][:-1], arrays["y_train"][:-1]
    return arrays


MIRROR_CASES = {
    "wrong_shape": ["x_train", "shape", "28 x 28 x 1"],
    "wrong_dtype": ["x_train", "dtype float32", "uint8"],
    "wrong_label_dtype": ["y_test", "dtype int32", "int64"],
    "labels_out_of_range": ["y_train", "labels", "0..9"],
    "missing_key": ["missing key(s) y_test"],
    "wrong_size": ["train split", f"{TRAIN - 1} samples", f"expected {TRAIN}"],
}


@pytest.mark.parametrize("case", sorted(MIRROR_CASES))
def test_download_refuses_a_bad_mirror_file(case, download_project):
    folder, mirror = download_project()
    path = save_mirror(mirror, bad_mirror_arrays(case))
    result = run(folder, "pipeline.download", "mnist", mirror=mirror)
    assert_one_error_line(result, str(path), *MIRROR_CASES[case])
    assert_not_written(folder / "data" / "prepared" / "mnist.npz")


def test_download_from_a_good_mirror_works(download_project):
    # The control for the mirror cases: the same setup with a valid file succeeds.
    folder, mirror = download_project()
    save_mirror(mirror, tiny_mnist())
    result = run(folder, "pipeline.download", "mnist", mirror=mirror)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert sorted(p.name for p in (folder / "data" / "prepared").iterdir()) == ["mnist.npz"]
    assert sorted(p.name for p in (folder / "reports" / "datasets").iterdir()) == ["mnist.json"]


def test_download_refuses_a_missing_mirror_file(download_project):
    folder, mirror = download_project()
    result = run(folder, "pipeline.download", "mnist", mirror=mirror)
    assert_one_error_line(result, str(mirror / "mnist.npz"), "not found", download.MIRROR_ENV)
    assert_not_written(folder / "data" / "prepared" / "mnist.npz")


def test_download_refuses_a_truncated_mirror_file(download_project):
    folder, mirror = download_project()
    path = save_mirror(mirror, tiny_mnist())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    result = run(folder, "pipeline.download", "mnist", mirror=mirror)
    assert_one_error_line(result, str(path), "not a readable .npz")
    assert_not_written(folder / "data" / "prepared" / "mnist.npz")


def test_download_without_mirror_or_internet_points_to_the_mirror(download_project):
    folder, _ = download_project()
    result = run(folder, "pipeline.download", "mnist", mirror=None, timeout=120)
    assert_one_error_line(result, "mnist", "cannot download", download.MIRROR_ENV)
    assert_not_written(folder / "data" / "prepared" / "mnist.npz")


def test_download_refuses_an_unknown_dataset_name(download_project):
    folder, mirror = download_project()
    result = run(folder, "pipeline.download", "cifar11", mirror=mirror)
    assert_one_error_line(result, "datasets.cifar11", "unknown dataset")
    assert_not_written(folder / "data" / "prepared" / "cifar11.npz")


@pytest.mark.parametrize("entry", [["pipeline.download", "mnsit"], ["pipeline.config", "--check"]])
def test_unknown_dataset_in_params_is_refused_with_a_suggestion(entry, download_project):
    params = base_params()
    params["datasets"] = {"mnsit": {"train_size": TRAIN, "test_size": TEST}}
    params["partitions"] = {}
    folder, mirror = download_project(params)
    assert_one_error_line(run(folder, *entry, mirror=mirror), "datasets.mnsit", "did you mean 'mnist'?")
    assert_not_written(folder / "data" / "prepared" / "mnsit.npz")


@pytest.mark.parametrize(
    "overrides, needle",
    [
        ({"train_size": "sixty"}, "datasets.mnist.train_size"),
        ({"train_sise": 60}, "datasets.mnist.train_sise"),
        ([60, 20], "datasets.mnist"),
    ],
    ids=["not_an_integer", "typo", "not_a_mapping"],
)
def test_download_refuses_bad_dataset_overrides(overrides, needle, download_project):
    params = base_params()
    params["datasets"]["mnist"] = overrides
    folder, mirror = download_project(params)
    save_mirror(mirror, tiny_mnist())
    assert_one_error_line(run(folder, "pipeline.download", "mnist", mirror=mirror), needle)
    assert_not_written(folder / "data" / "prepared" / "mnist.npz")


# ---------------------------------------------------------------- the train stage and runs

GOOD_RUN = smallest_valid_run()

RUN_CASES = {
    "client_fraction_zero": ({"client_fraction": 0}, ["runs.r.client_fraction", "(0, 1.0]"]),
    "client_fraction_above_one": ({"client_fraction": 1.5}, ["runs.r.client_fraction", "1.5"]),
    "local_epochs_zero": ({"local_epochs": 0}, ["runs.r.local_epochs", ">= 1"]),
    "batch_size_fractional": ({"batch_size": 2.5}, ["runs.r.batch_size", "integer"]),
    "rounds_zero": ({"rounds": 0}, ["runs.r.rounds", ">= 1"]),
    "lr_negative": ({"lr": -0.1}, ["runs.r.lr", "> 0"]),
    "momentum_one": ({"momentum": 1.0}, ["runs.r.momentum", "[0, 1)"]),
    "unknown_partition": ({"partition": "q"}, ["runs.r.partition", "'q'"]),
    "unknown_model": ({"model": "resnet1000"}, ["runs.r.model", "'resnet1000'", "mlp_200"]),
    "unknown_algorithm": ({"algorithm": {"name": "fedavgg"}}, ["runs.r.algorithm.name", "did you mean 'fedavg'?"]),
    "negative_lambda": ({"algorithm": {"name": "fedcurv", "lambda": -1}}, ["runs.r.algorithm.lambda", ">= 0"]),
    "algorithm_key_typo": (
        {"algorithm": {"name": "fedcurv", "lamda": 1}},
        ["runs.r.algorithm.lamda", "did you mean 'lambda'?"],
    ),
    "fisher_labels_unknown": (
        {"algorithm": {"name": "fedcurv", "fisher_labels": "soft"}},
        ["runs.r.algorithm.fisher_labels", "'soft'"],
    ),
    "run_key_typo": ({"local_epoch": 1}, ["runs.r.local_epoch", "did you mean 'local_epochs'?"]),
    "scaled_bad_value": ({"scaled": {"lr": 0}}, ["runs.r.scaled.lr", "> 0"]),
    "targets_not_accuracies": ({"targets": [90]}, ["runs.r.targets", "(0, 1]"]),
    "scaled_left_empty": ({"scaled": None}, ["runs.r.scaled", "expected a mapping"]),
    "partition_given_as_a_list": ({"partition": ["p"]}, ["runs.r.partition", "['p']"]),
    "algorithm_name_given_as_a_list": ({"algorithm": {"name": ["fedavg"]}}, ["runs.r.algorithm.name"]),
    "seeds_empty": ({"seeds": []}, ["runs.r.seeds", "non-empty list"]),
    "seeds_negative": ({"seeds": [0, -1]}, ["runs.r.seeds", ">= 0"]),
    "seeds_duplicate": ({"seeds": [0, 1, 1]}, ["runs.r.seeds", "1 listed twice"]),
    "seeds_not_a_list": ({"seeds": 3}, ["runs.r.seeds", "list of integers"]),
    "probe_rounds_zero": ({"probe_rounds": [0]}, ["runs.r.probe_rounds", ">= 1"]),
    "probe_rounds_duplicate": ({"probe_rounds": [1, 1]}, ["runs.r.probe_rounds", "listed twice"]),
    "probe_rounds_after_the_last": ({"probe_rounds": [1, 5]}, ["runs.r.probe_rounds", "[5]", "[1, 2]"]),
    "probe_clients_zero": ({"probe_clients": 0}, ["runs.r.probe_clients", ">= 1"]),
    "forgettable_every_negative": ({"forgettable_every": -1}, ["runs.r.forgettable_every", ">= 0"]),
    "example_events_not_bool": ({"example_events": "yes"}, ["runs.r.example_events", "true or false"]),
    "optimizer_unknown": ({"optimizer": "adamw"}, ["runs.r.optimizer", "'adamw'", "sgd, adam"]),
    "momentum_with_adam": ({"optimizer": "adam", "momentum": 0.9}, ["runs.r.momentum", "sgd only"]),
    "betas_out_of_range": ({"optimizer": "adam", "betas": [0.9, 1.0]}, ["runs.r.betas", "[0, 1)"]),
    "eps_zero": ({"eps": 0}, ["runs.r.eps", "> 0"]),
    "loss_unknown": ({"loss": "focal"}, ["runs.r.loss", "'focal'", "ce, tce"]),
    "input_scaling_unknown": ({"input_scaling": "minmax"}, ["runs.r.input_scaling", "standardize, unit"]),
    "paper_unknown": ({"paper": "fedsgd"}, ["runs.r.paper", "'fedsgd'"]),
}


@pytest.mark.parametrize("case", sorted(RUN_CASES))
def test_resolve_stage_refuses_bad_run_settings(case, project):
    """The resolve stage (the only one that reads runs from params.yaml) and the check both refuse."""
    overrides, needles = RUN_CASES[case]
    folder = project(DIRICHLET)
    params = base_params(DIRICHLET)
    params["runs"] = {"r": {**GOOD_RUN, **overrides}}
    write_params(folder, params)
    assert_one_error_line(run(folder, "pipeline.resolve"), *needles)
    assert_not_written(folder / "resolved")
    assert_one_error_line(run(folder, "pipeline.config", "--check"), *needles)


def test_a_run_without_a_paper_is_valid(project):
    folder = project(DIRICHLET)
    params = base_params(DIRICHLET)
    params["runs"] = {"mine": {k: v for k, v in GOOD_RUN.items() if k != "paper"}}
    write_params(folder, params)
    assert run(folder, "pipeline.profile").returncode == 0
    result = run(folder, "pipeline.config", "--check")
    assert result.returncode == 0, result.stderr
    assert run(folder, "pipeline.resolve").returncode == 0
    assert json.loads((folder / "resolved" / "mine.json").read_text())["paper"] is None


def test_train_without_a_resolved_run_says_which_stage_to_run(project):
    folder = project(DIRICHLET)
    params = base_params(DIRICHLET)
    params["runs"] = {"r": GOOD_RUN}  # a run of the grid (a name that is none: tests/test_train_cli.py)
    write_params(folder, params)
    assert run(folder, "pipeline.profile").returncode == 0
    (folder / "dvc.yaml").write_text("stages: {}\n")  # the train command runs from a repository's root
    result = run(folder, "pipeline.train", "r", "--seed", "0")
    assert_one_error_line(result, "resolved/r.json", "dvc repro resolve")
    assert_not_written(folder / "reports" / "runs" / "r")


def test_a_run_name_with_a_dot_is_refused(project):
    folder = project(DIRICHLET)
    params = base_params(DIRICHLET)
    params["runs"] = {"r.1": GOOD_RUN}
    write_params(folder, params)
    assert_one_error_line(run(folder, "pipeline.config", "--check"), "runs.r.1", "letters, digits")
