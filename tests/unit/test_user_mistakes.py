"""Issue 54's classes of user mistake, each through the real entry point (`python -m pipeline.<command>`) in a
subprocess, in a temporary project: one line on stderr starting with "error: " that names the key, file or
variable, what was wrong and what is allowed; a non-zero exit; no traceback; and every file of the project
(its bytes included) as it was before the command.

tests/unit/test_bad_input.py covers the partition, download-mirror and run-setting cases it lists; this file
covers the rest: non-finite numbers, empty or key-less run sets, run keys and names the file system cannot
hold, an empty params.yaml, corrupt or mistyped resolved files, corrupt or missing per-seed outputs for the
report, corrupt checkpoints and kept results, the FEDFORGET_* variables, a read-only reports/ and a full
disk, an algorithm module's own mistakes, `lr: 1e-2` read as 0.01, and a train started from a subfolder.

The read-only and full-disk cases mount in a private mount namespace of the one command (`unshare -m`, or
`unshare -rm` where the test is not root): a read-only bind of reports/ (root writes through chmod) and a
64 KiB tmpfs; nothing outside that command sees the mounts. Where the kernel refuses, those cases skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from support.helpers import smallest_valid_run

pytestmark = pytest.mark.e2e  # every case starts entry points in subprocesses (torch's import each time)

REPO = Path(__file__).resolve().parents[2]
TRAIN, TEST = 60, 20
UNREACHABLE_PROXY = "http://127.0.0.1:9"
RUN = smallest_valid_run(seeds=[0, 1], checkpoint_every=1)
PARAMS = {
    "profile": "default",
    "datasets": {"mnist": {"train_size": TRAIN, "test_size": TEST}},
    "partitions": {"p": {"dataset": "mnist", "scheme": "iid", "clients": 3, "seed": 0}},
    "runs": {"r": RUN},
}


# ---------------------------------------------------------------- helpers


def child_env(pythonpath: Path = REPO, **extra: str) -> dict:
    """The environment of an entry point: no FEDFORGET_* of the caller's, one thread and one worker, no
    network, no bytecode written into the project."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("FEDFORGET_") and key not in ("no_proxy", "NO_PROXY", "PYTHONPATH")
    }
    env.update(
        {
            "PYTHONPATH": str(pythonpath),
            "MPLBACKEND": "Agg",
            "CI": "1",
            "OMP_NUM_THREADS": "1",
            "FEDFORGET_THREADS": "1",
            "FEDFORGET_WORKERS": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    for key in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        env[key] = UNREACHABLE_PROXY
    env.update(extra)
    return env


def entry(
    folder: Path, *args: str, env: dict | None = None, prefix: tuple[str, ...] = (), timeout: float = 180
) -> subprocess.CompletedProcess:
    """`python -m <args>` in `folder` (after `prefix`, a command that runs it: unshare)."""
    return subprocess.run(
        [*prefix, sys.executable, "-m", *args],
        cwd=folder,
        env=env or child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (bytecode caches aside) by relative path, with its bytes."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def assert_same_files(before: dict[str, bytes], after: dict[str, bytes]) -> None:
    added, removed = sorted(set(after) - set(before)), sorted(set(before) - set(after))
    changed = sorted(name for name in set(before) & set(after) if before[name] != after[name])
    assert not (added or removed or changed), f"written: {added}; deleted: {removed}; changed: {changed}"


def assert_refused(result: subprocess.CompletedProcess, *needles: str) -> str:
    """One `error: ` line holding every needle, a non-zero exit, no traceback."""
    assert result.returncode != 0, f"exit 0; stdout: {result.stdout!r}"
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {result.stderr!r}"
    line = lines[0]
    assert line.startswith("error: "), line
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    return line


def refused_unchanged(folder: Path, args: tuple[str, ...], needles: tuple[str, ...], **how) -> str:
    """`python -m args` in `folder` refused with one line holding `needles`, the project left as it was."""
    before = snapshot(folder)
    line = assert_refused(entry(how.pop("cwd", folder), *args, **how), *needles)
    assert_same_files(before, snapshot(folder))
    return line


def write_mnist(path: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    arrays = {
        "x_train": rng.integers(0, 256, size=(TRAIN, 28, 28, 1), dtype=np.uint8),
        "y_train": np.arange(TRAIN, dtype=np.int64) % 10,
        "x_test": rng.integers(0, 256, size=(TEST, 28, 28, 1), dtype=np.uint8),
        "y_test": np.arange(TEST, dtype=np.int64) % 10,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def flip_a_byte(path: Path, offset: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2 if offset is None else offset] ^= 0xFF
    path.write_bytes(bytes(data))


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def grid_text(tmp_path_factory) -> str:
    """The grid.yaml `python -m pipeline.profile` writes for PARAMS (once per module)."""
    folder = tmp_path_factory.mktemp("grid")
    (folder / "params.yaml").write_text(yaml.safe_dump(PARAMS, sort_keys=False))
    ok(entry(folder, "pipeline.profile"))
    return (folder / "grid.yaml").read_text()


@pytest.fixture
def configured(tmp_path, grid_text):
    """make(params_text): a project holding params.yaml with `params_text` and the grid of PARAMS (and a
    dvc.yaml, as a repository's root has)."""

    def make(params_text: str) -> Path:
        folder = tmp_path / "project"
        folder.mkdir()
        (folder / "params.yaml").write_text(params_text)
        (folder / "grid.yaml").write_text(grid_text)
        (folder / "dvc.yaml").write_text("stages: {}\n")
        return folder

    return make


@pytest.fixture(scope="module")
def trained_template(tmp_path_factory) -> Path:
    """A project after every stage: downloaded (from a mirror), partitioned, resolved, run r's two seeds
    trained (kept results in .checkpoints/) and reported."""
    base = tmp_path_factory.mktemp("trained")
    write_mnist(base / "mirror" / "mnist.npz")
    folder = base / "project"
    folder.mkdir()
    (folder / "params.yaml").write_text(yaml.safe_dump(PARAMS, sort_keys=False))
    (folder / "dvc.yaml").write_text("stages: {}\n")
    env = child_env(FEDFORGET_DATA_MIRROR=str(base / "mirror"))
    for args in (
        ["pipeline.profile"],
        ["pipeline.download", "mnist"],
        ["pipeline.partition", "p"],
        ["pipeline.resolve"],
        ["pipeline.train", "r"],
        ["pipeline.report"],
    ):
        ok(entry(folder, *args, env=env, timeout=300))
    return folder


@pytest.fixture
def trained(tmp_path, trained_template) -> Path:
    folder = tmp_path / "project"
    shutil.copytree(trained_template, folder)
    return folder


def set_run(params_text: str, key: str, value: str) -> str:
    """params.yaml's text with `  <key>: <old>` (a run's or its algorithm's) given `value` as written."""
    lines = params_text.splitlines()
    matches = [i for i, line in enumerate(lines) if line.strip().startswith(f"{key}:")]
    assert len(matches) == 1, (key, params_text)
    indent = lines[matches[0]][: len(lines[matches[0]]) - len(lines[matches[0]].lstrip())]
    lines[matches[0]] = f"{indent}{key}: {value}"
    return "\n".join(lines) + "\n"


def params_with(run: dict | None = None, **top) -> str:
    params = {**PARAMS, "runs": {"r": {**RUN, **(run or {})}}, **top}
    return yaml.safe_dump(params, sort_keys=False)


# ---------------------------------------------------------------- params.yaml


NON_FINITE_KEYS = {  # the key as a run writes it, the algorithm it needs, its key path in the message
    "lr": (None, "runs.r.lr"),
    "momentum": (None, "runs.r.momentum"),
    "weight_decay": (None, "runs.r.weight_decay"),
    "mu": ({"name": "fedprox", "mu": 0.01}, "runs.r.algorithm.mu"),
    "lambda": ({"name": "fedcurv", "lambda": 1.0}, "runs.r.algorithm.lambda"),
    "global_lr": ({"name": "scaffold", "global_lr": 1.0}, "runs.r.algorithm.global_lr"),
}


@pytest.mark.parametrize("value", [".nan", ".inf"])
@pytest.mark.parametrize("key", sorted(NON_FINITE_KEYS))
def test_a_non_finite_number_is_refused(key, value, configured):
    """NaN passed the non-negative check and inf the positive one; YAML writes them `.nan` and `.inf`."""
    algorithm, path = NON_FINITE_KEYS[key]
    run = {"algorithm": algorithm} if algorithm else {"momentum": 0.5, "weight_decay": 0.001}
    folder = configured(set_run(params_with(run), key, value))
    needles = (f"{path}: {value[1:]} is not allowed", "expected a finite number")
    for args in (("pipeline.profile",), ("pipeline.config", "--check")):
        refused_unchanged(folder, args, needles)


RUN_SETS = {
    "empty": ("runs: {}\n", ("runs: empty", "expected at least one run")),
    "no_value": ("runs:\n", ("runs: None is not allowed", "expected a mapping")),
    "left_out": ("", ("runs: None is not allowed", "expected a mapping")),
}


@pytest.mark.parametrize("case", sorted(RUN_SETS))
def test_an_empty_or_key_less_run_set_is_refused(case, configured):
    """`runs: {}` once passed and made `dvc repro` delete every run's committed results."""
    text, needles = RUN_SETS[case]
    params = yaml.safe_dump({key: value for key, value in PARAMS.items() if key != "runs"}, sort_keys=False)
    folder = configured(params + text)
    for args in (("pipeline.profile",), ("pipeline.config", "--check"), ("pipeline.resolve",)):
        refused_unchanged(folder, args, needles)
    assert not (folder / "resolved").exists()


RUN_KEYS = {
    "a_number": ("12", ("runs.12: the name 12 is not allowed", "expected a string of letters, digits, _ and -")),
    "null": ("null", ("runs.None: the name None is not allowed", "expected a string of letters, digits")),
    "250_characters": (
        "x" * 250,
        ("runs.xxxxxxxxxxxxxxxxxxxx...", "a name of 250 characters is not allowed", "expected at most 100"),
    ),
}


@pytest.mark.parametrize("case", sorted(RUN_KEYS))
def test_a_run_key_that_cannot_name_a_run_is_refused(case, configured):
    """A number or null as a run's key traced back; a 250-character name failed writing resolved/<run>.json."""
    key, needles = RUN_KEYS[case]
    folder = configured(params_with().replace("\n  r:\n", f"\n  {key}:\n"))
    for args in (("pipeline.profile",), ("pipeline.config", "--check"), ("pipeline.resolve",)):
        refused_unchanged(folder, args, needles)


@pytest.mark.parametrize("text", ["", "# nothing here yet\n"], ids=["empty", "a_comment_only"])
def test_an_empty_params_file_is_refused(text, configured):
    folder = configured(text)
    refused_unchanged(
        folder,
        ("pipeline.profile",),
        ("params.yaml: expected a mapping of settings at the top level", "the file is empty"),
    )
    for args in (("pipeline.config", "--check"), ("pipeline.resolve",)):
        refused_unchanged(folder, args, ("params.yaml: expected a mapping at the top level",))


def test_lr_written_1e_2_is_the_number_0_01(configured):
    """YAML 1.1 reads `1e-2` (no dot) as a string; a user, and DVC's YAML 1.2, mean 0.01."""
    folder = configured(set_run(params_with(), "lr", "1e-2"))
    assert "lr: 1e-2" in (folder / "params.yaml").read_text()
    for args in (("pipeline.profile",), ("pipeline.config", "--check"), ("pipeline.resolve",)):
        result = entry(folder, *args)
        assert result.returncode == 0 and result.stderr == "", result.stderr
    resolved = json.loads((folder / "resolved" / "r.json").read_text())
    assert resolved["lr"] == 0.01 and isinstance(resolved["lr"], float)


# ---------------------------------------------------------------- an algorithm module's own mistakes

ALGORITHM_MISTAKES = {
    "wrong_name": (
        'NAME = "other"\n',
        ("pipeline/algorithms/mine.py: NAME is 'other'", "an algorithm's NAME is its file's name ('mine')"),
    ),
    "misspelled_hook": (
        'NAME = "mine"\n\n\ndef remeber(upload, hp):\n    return upload\n',
        ("pipeline.algorithms.mine.remeber: not a hook of the interface", "did you mean 'remember'?"),
    ),
    "syntax_error": (
        'NAME = "mine"\n\n\ndef aggregate(state, uploads, weights, hp)\n    return state\n',
        ("pipeline/algorithms/mine.py: the algorithm module cannot be imported (line 4)", "SyntaxError"),
    ),
    "failing_import": (
        'import numpy_typo\nNAME = "mine"\n',
        ("pipeline/algorithms/mine.py: the algorithm module cannot be imported", "No module named 'numpy_typo'"),
    ),
}


@pytest.mark.parametrize("case", sorted(ALGORITHM_MISTAKES))
def test_an_algorithm_modules_own_mistake_is_one_line_naming_the_module(case, tmp_path, grid_text):
    """A copy of the pipeline with one more algorithm module, pipeline/algorithms/mine.py, that a run uses:
    its mistake, raised when the module is loaded, is the one line of every entry point that reads the run,
    not the last line of a traceback."""
    source, needles = ALGORITHM_MISTAKES[case]
    folder = tmp_path / "project"
    shutil.copytree(REPO / "pipeline", folder / "pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "pipeline" / "algorithms" / "mine.py").write_text(source)
    (folder / "params.yaml").write_text(params_with({"algorithm": {"name": "mine"}}))
    (folder / "grid.yaml").write_text(grid_text)
    env = child_env(pythonpath=folder)
    for args in (("pipeline.profile",), ("pipeline.config", "--check"), ("pipeline.resolve",)):
        line = refused_unchanged(folder, args, ("runs.r.algorithm.name: ", *needles), env=env)
        assert "\n" not in line


@pytest.mark.parametrize("case", ["wrong_name", "misspelled_hook"])
def test_an_algorithm_module_broken_after_resolve_is_one_line_in_train_and_report(case, trained):
    """The module was fine when the run was resolved and broke after (an edit in progress): the train stage
    and the report, which load it too, say so in the same one line and leave the outputs as they were."""
    source, needles = ALGORITHM_MISTAKES[case]
    shutil.copytree(REPO / "pipeline", trained / "pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    module = trained / "pipeline" / "algorithms" / "mine.py"
    module.write_text('NAME = "mine"\n')  # every hook FedAvg's
    (trained / "params.yaml").write_text(params_with({"algorithm": {"name": "mine"}}))
    env = child_env(pythonpath=trained)
    for args in (("pipeline.profile",), ("pipeline.resolve",)):
        ok(entry(trained, *args, env=env))
    module.write_text(source)
    for args in (("pipeline.train", "r"), ("pipeline.report",)):
        line = refused_unchanged(trained, args, needles, env=env)
        assert "\n" not in line


# ---------------------------------------------------------------- the train stage's inputs


def test_a_truncated_resolved_file_is_refused(trained):
    path = trained / "resolved" / "r.json"
    path.write_bytes(path.read_bytes()[:100])
    refused_unchanged(
        trained,
        ("pipeline.train", "r"),
        ("resolved/r.json: not readable JSON", "run `dvc repro resolve` to write it again"),
    )


MISTYPED = {
    "rounds_a_string": ("rounds", "two", "rounds: 'two' is not allowed; expected an integer >= 1"),
    "lr_a_string": ("lr", "0.05", "lr: '0.05' is not allowed; expected a finite number >= 0"),
    "lr_nan": ("lr", float("nan"), "lr: nan is not allowed; expected a finite number >= 0"),
    "algorithm_a_list": ("algorithm", ["fedcurv"], "algorithm: ['fedcurv'] is not allowed; expected a mapping"),
    "seeds_a_string": ("seeds", "0", "seeds '0' is not a list of integers >= 0"),
    "dataset_unknown": ("dataset", "mnsit", "dataset: 'mnsit' is not allowed; expected one of mnist"),
    "another_runs_file": ("run", "q", "run: 'q' is not allowed; expected 'r'"),
}


@pytest.mark.parametrize("case", sorted(MISTYPED))
def test_a_mistyped_resolved_file_is_refused(case, trained):
    """A value of the wrong type in resolved/<run>.json (edited by hand, or written by another version)
    failed deep inside a round; it is checked as params.yaml is."""
    key, value, says = MISTYPED[case]
    path = trained / "resolved" / "r.json"
    settings = json.loads(path.read_text())
    settings[key] = value
    path.write_text(json.dumps(settings, indent=2))
    refused_unchanged(trained, ("pipeline.train", "r"), ("resolved/r.json: ", says, "dvc repro resolve"))


def test_train_from_a_subfolder_names_the_folder(trained):
    """Not "resolved/r.json: not written yet", which sent a user to rerun a stage that had run."""
    subfolder = trained / "reports"
    line = refused_unchanged(
        trained,
        ("pipeline.train", "r"),
        (f"{subfolder}: not the repository's root", "run the train stage from the root"),
        cwd=subfolder,
    )
    assert "not written yet" not in line


RUNTIME_VARIABLES = {
    "threads_zero": ({"FEDFORGET_THREADS": "0"}, ("FEDFORGET_THREADS: '0' is not allowed", "integer >= 1")),
    "threads_not_a_number": ({"FEDFORGET_THREADS": "abc"}, ("FEDFORGET_THREADS: 'abc' is not allowed", "integer >= 1")),
    "workers_negative": ({"FEDFORGET_WORKERS": "-1"}, ("FEDFORGET_WORKERS: '-1' is not allowed", "integer >= 1")),
    "checkpoints_a_file": (
        {"FEDFORGET_CHECKPOINTS": "params.yaml"},
        ("FEDFORGET_CHECKPOINTS: 'params.yaml' is a file", "expected a folder"),
    ),
    "torchrun_unknown_option": (
        {"FEDFORGET_TORCHRUN": "--bogus 3"},
        ("FEDFORGET_TORCHRUN: '--bogus 3' are not torchrun options", "--nproc-per-node 2"),
    ),
    "torchrun_unclosed_quote": (
        {"FEDFORGET_TORCHRUN": "--nproc-per-node '2"},
        ("FEDFORGET_TORCHRUN: ", "cannot be read as options (No closing quotation)"),
    ),
    "torchrun_process_count": (
        {"FEDFORGET_TORCHRUN": "--nproc-per-node many"},
        ("FEDFORGET_TORCHRUN: --nproc-per-node many is not allowed", "expected an integer >= 1, or auto, cpu or gpu"),
    ),
    "torchrun_node_count": (
        {"FEDFORGET_TORCHRUN": "--nnodes 1:2:3"},
        ("FEDFORGET_TORCHRUN: --nnodes 1:2:3 is not allowed", "expected N or MIN:MAX"),
    ),
    "torchrun_a_word": (
        {"FEDFORGET_TORCHRUN": "two processes"},
        ("FEDFORGET_TORCHRUN: 'two' in 'two processes' is not a torchrun option", "expected options only"),
    ),
}


@pytest.mark.parametrize("case", sorted(RUNTIME_VARIABLES))
def test_a_bad_runtime_variable_is_refused(case, trained):
    variables, needles = RUNTIME_VARIABLES[case]
    refused_unchanged(trained, ("pipeline.train", "r"), needles, env=child_env(**variables))


def test_a_mirror_folder_that_does_not_exist_is_refused_and_the_prepared_data_kept(trained):
    line = refused_unchanged(
        trained,
        ("pipeline.download", "mnist"),
        ("/nonexistent/mnist.npz (FEDFORGET_DATA_MIRROR): file not found", "expected a folder holding mnist.npz"),
        env=child_env(FEDFORGET_DATA_MIRROR="/nonexistent"),
    )
    assert "unset to download" in line


# ---------------------------------------------------------------- checkpoints and kept results


def kept_result(folder: Path, seed: int) -> Path:
    [path] = (folder / ".checkpoints").glob(f"r-seed{seed}-*.result.pt")
    return path


def test_a_kept_result_with_a_flipped_byte_is_refused_and_once_deleted_the_seed_trains_again(trained):
    """Kept results carry a sha256 of their bytes (pipeline.results): a changed one is refused in one line
    naming it, nothing changed; deleted, its seed trains again, to the same numbers."""
    metrics = {
        seed: (trained / "reports" / "runs" / "r" / f"seed{seed}" / "metrics.json").read_bytes() for seed in (0, 1)
    }
    path = kept_result(trained, 0)
    flip_a_byte(path)
    line = refused_unchanged(trained, ("pipeline.train", "r"), (str(path.relative_to(trained)), "checksum"))
    assert "does not match its contents (cut short or changed); delete it to train that seed again" in line
    path.unlink()
    log = ok(entry(trained, "pipeline.train", "r"))
    seed0 = next(line for line in log.splitlines() if line.startswith("r-seed0: "))
    seed1 = next(line for line in log.splitlines() if line.startswith("r-seed1: "))
    assert "from its kept result" not in seed0 and "from its kept result" in seed1
    for seed in (0, 1):
        assert (trained / "reports" / "runs" / "r" / f"seed{seed}" / "metrics.json").read_bytes() == metrics[seed]
    assert "checksum" not in ok(entry(trained, "pipeline.train", "r"))  # the new kept result is whole


# A train interrupted after round 1 (of 2), as a kill would: its checkpoint of round 1 stays in .checkpoints/.
INTERRUPTED_AT_ROUND_2 = """
import pipeline.training as training
from pipeline.train import main

real = training.run_round


def run_round(*args, **kwargs):
    if args[6] == 2:  # the round
        raise KeyboardInterrupt
    return real(*args, **kwargs)


training.run_round = run_round
main(["r", "--seed", "0", "--retrain"])
"""


def test_a_checkpoint_with_a_flipped_byte_is_refused_not_resumed_from(trained):
    """Checkpoints carry a sha256 of their bytes: a changed one is refused in one line naming it, nothing
    changed; deleted, the seed trains from round 1 to the numbers of an uninterrupted run; an unchanged
    checkpoint is resumed from (the control)."""
    metrics = (trained / "reports" / "runs" / "r" / "seed0" / "metrics.json").read_bytes()
    interrupted = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_AT_ROUND_2],
        cwd=trained,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert interrupted.returncode == 130, interrupted.stderr
    [checkpoint] = [p for p in (trained / ".checkpoints").glob("r-seed0-*.pt") if not p.name.endswith(".result.pt")]
    whole = checkpoint.read_bytes()

    flip_a_byte(checkpoint, offset=len(whole) - 100)  # in the saved state, past the checksum line
    refused_unchanged(trained, ("pipeline.train", "r", "--seed", "0"), (checkpoint.name, "checksum"))
    checkpoint.unlink()
    log = ok(entry(trained, "pipeline.train", "r", "--seed", "0"))
    assert "resuming" not in log and "checksum" not in log
    assert (trained / "reports" / "runs" / "r" / "seed0" / "metrics.json").read_bytes() == metrics

    kept_result(trained, 0).unlink()
    checkpoint.write_bytes(whole)
    log = ok(entry(trained, "pipeline.train", "r", "--seed", "0"))
    assert "r-seed0: resuming after round 1" in log and "checksum" not in log
    assert (trained / "reports" / "runs" / "r" / "seed0" / "metrics.json").read_bytes() == metrics


# ---------------------------------------------------------------- the report's inputs


@pytest.mark.parametrize("keep", [40, 0], ids=["truncated", "emptied"])
def test_the_report_refuses_a_truncated_metrics_file(trained, keep):
    path = trained / "reports" / "runs" / "r" / "seed1" / "metrics.json"
    path.write_bytes(path.read_bytes()[:keep])
    refused_unchanged(
        trained,
        ("pipeline.report",),
        ("reports/runs/r/seed1/metrics.json: not readable JSON", "retrain its run", "restore it from git"),
    )


def test_the_report_refuses_a_removed_seed_folder_naming_the_seed(trained):
    """Dropping the seed without a word switched two claims from the paired test to Welch's."""
    shutil.rmtree(trained / "reports" / "runs" / "r" / "seed1")
    refused_unchanged(
        trained,
        ("pipeline.report",),
        (
            "reports/runs/r: no results for seed 1",
            "which the run lists (resolved/r.json)",
            "retrain it (`dvc repro -f train@r`) or restore",
        ),
    )


def test_the_report_says_which_seeds_a_run_without_results_lacks(trained):
    """A run whose every seed folder is gone has no results to compare: the report builds, and its index
    lists the run's seeds as lacking (the run's claims are not run)."""
    shutil.rmtree(trained / "reports" / "runs" / "r")
    ok(entry(trained, "pipeline.report"))
    index = (trained / "reports" / "README.md").read_text()
    assert "listed but without results yet: r (seed 0, 1)" in index


# ---------------------------------------------------------------- a read-only reports/ and a full disk


def private_mounts() -> tuple[str, ...]:
    """The command prefix that runs a command in a mount namespace of its own (root in it), or a skip."""
    prefix = ("unshare", "-m") if os.geteuid() == 0 else ("unshare", "-rm")
    if shutil.which("unshare") is None:
        pytest.skip("no `unshare` to mount a read-only folder or a small file system for one command")
    probe = subprocess.run(
        [*prefix, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True, text=True, timeout=30
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot mount in a private mount namespace here ({probe.stderr.strip()})")
    return prefix


def mounted(setup: str) -> tuple[str, ...]:
    """A prefix running `setup` (shell, in the project folder) and then the command, in its own mounts."""
    return (*private_mounts(), "sh", "-c", f'{setup} && exec "$@"', "sh")


READ_ONLY_REPORTS = "mount --bind reports reports && mount -o remount,ro,bind reports"


@pytest.mark.parametrize(
    "args, needles",
    [
        (
            ("pipeline.train", "r"),
            ("reports/runs/r/.seed0.tmp: cannot be written (Read-only file system)", "make the folder writable"),
        ),
        (
            ("pipeline.report",),
            ("reports/.staging.", "cannot be written (Read-only file system)", "make reports/ writable"),
        ),
    ],
    ids=["train", "report"],
)
def test_a_read_only_reports_folder_is_refused(args, needles, trained):
    refused_unchanged(trained, args, needles, prefix=mounted(READ_ONLY_REPORTS))


READ_ONLY = "mount --bind {0} {0} && mount -o remount,ro,bind {0}"


@pytest.mark.parametrize(
    "args, folder, needles",
    [
        (("pipeline.resolve",), "resolved", ("resolved/ (", "Read-only file system", "make the folder writable")),
        (("pipeline.partition", "p"), "reports/partitions", ("Read-only file system", "make the folder writable")),
        (("pipeline.download", "mnist"), "data/prepared", ("data/prepared", "Read-only file system")),
        # The whole project read-only (entered again after the mount): grid.yaml cannot be written.
        (("pipeline.profile",), ".", ("grid.yaml", "Read-only file system")),
    ],
    ids=["resolve", "partition", "download", "profile"],
)
def test_a_read_only_output_folder_of_a_data_or_config_command_is_refused(args, folder, needles, trained):
    """download, partition, resolve and profile: one line naming the file, nothing of the project changed."""
    mirror = trained.parent / "mirror"
    write_mnist(mirror / "mnist.npz")
    env = child_env(FEDFORGET_DATA_MIRROR=str(mirror))
    setup = READ_ONLY.format(folder) + ' && cd "$PWD"'
    refused_unchanged(trained, args, needles, prefix=mounted(setup), env=env)


def test_a_full_disk_for_checkpoints_is_refused(trained):
    """The seed starts training (no kept result on the new disk) and its first checkpoint cannot be written:
    the line names that file, and nothing of the committed outputs is rewritten (timing.json once was)."""
    full = trained.parent / "full"
    full.mkdir()
    line = refused_unchanged(
        trained,
        ("pipeline.train", "r", "--seed", "0"),
        (f"{full}/r-seed0-", ": cannot be written (No space left on device)", "free space"),
        prefix=mounted(f"mount -t tmpfs -o size=64k tmpfs {full}"),
        env=child_env(FEDFORGET_CHECKPOINTS=str(full)),
    )
    assert "an output" not in line


def test_a_full_disk_for_models_is_refused_before_the_outputs_are_swapped_in(trained):
    """Written from its kept result, the seed's model does not fit on the disk: its committed folder stays
    as it was (the model is written before the folder is swapped in), and no half-written copy is left."""
    refused_unchanged(
        trained,
        ("pipeline.train", "r", "--seed", "0"),
        ("data/models/r-seed0.pt: cannot be written (No space left on device)", "free space"),
        prefix=mounted("mount -t tmpfs -o size=64k tmpfs data/models"),
    )
