"""Shared by the end-to-end tests: a temporary git + DVC repository holding a copy of the pipeline, and a
tiny generated dataset mirror (so nothing is downloaded)."""

from __future__ import annotations

import copy
import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipeline.paths import PLOTTED_CURVES

REPO = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
VENV_BIN = Path(sys.executable).parent
STAGE_LINE = re.compile(r"Running stage '([^']+)'")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_paper(path: Path) -> str:
    """The text of a paper under ../shared/papers, which the published-number tests read. Missing, the
    test is skipped on a workstation but fails in CI (env CI set), which runs with ../shared beside the
    clone: there a missing paper must not pass as a skip."""
    if not path.is_file():
        message = f"paper text not found: {path}"
        if in_ci():
            pytest.fail(f"{message} (CI runs with ../shared beside the clone)")
        pytest.skip(message)
    return path.read_text()


def train_stage(run: str) -> str:
    """DVC's name for a run's train stage, in the root dvc.yaml: one stage a run, training all the seeds
    resolved/<run>.json lists."""
    return f"train@{run}"


SEED_LINE = re.compile(r"^(\S+-seed\d+): (?:ok|diverged)\b(.*)$", re.MULTILINE)


def trained_and_kept(output: str) -> tuple[set[str], set[str]]:
    """The (run, seed) keys a train stage's output says it trained, and those it says it took from their
    kept results without training (pipeline.train's line for each seed)."""
    lines = SEED_LINE.findall(output)
    kept = {key for key, rest in lines if "from its kept result" in rest}
    return {key for key, _ in lines} - kept, kept


def write_mirror(folder: Path, train_size: int = 600, test_size: int = 100, learnable: bool = False) -> None:
    """<folder>/mnist.npz in the prepared-dataset format. Random images by default; with `learnable`,
    each label is a fixed random pattern plus noise, so a model can learn it in a round or two."""
    rng = np.random.default_rng(0)
    folder.mkdir()
    if learnable:
        prototypes = rng.integers(0, 256, size=(10, 28, 28, 1)).astype(np.float64)

        def images(labels):
            noise = rng.integers(0, 256, size=(len(labels), 28, 28, 1))
            return np.clip(0.5 * prototypes[labels] + 0.5 * noise, 0, 255).astype(np.uint8)

        y_train = rng.integers(0, 10, size=train_size).astype(np.int64)
        y_test = rng.integers(0, 10, size=test_size).astype(np.int64)
        arrays = {"x_train": images(y_train), "y_train": y_train, "x_test": images(y_test), "y_test": y_test}
    else:
        arrays = {
            "x_train": rng.integers(0, 256, size=(train_size, 28, 28, 1), dtype=np.uint8),
            "y_train": rng.integers(0, 10, size=train_size).astype(np.int64),
            "x_test": rng.integers(0, 256, size=(test_size, 28, 28, 1), dtype=np.uint8),
            "y_test": rng.integers(0, 10, size=test_size).astype(np.int64),
        }
    with open(folder / "mnist.npz", "wb") as handle:
        np.savez(handle, **arrays)


def copy_project(root: Path, dvc_yaml: dict | None = None) -> None:
    """pipeline/, pyproject.toml and dvc.yaml (the real one, or `dvc_yaml` in its place) into `root`."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "pipeline", root / "pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root)
    shutil.copy(REPO / ".dvcignore", root)  # __pycache__/ is no part of the fingerprint stage's pipeline/
    if dvc_yaml is None:
        shutil.copy(REPO / "dvc.yaml", root)
    else:
        (root / "dvc.yaml").write_text(yaml.safe_dump(dvc_yaml, sort_keys=False))


class Repo:
    def __init__(self, root: Path, mirror: Path, home: Path, extra_env: dict | None = None):
        self.root = root
        self.env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("PYTHONPATH", "no_proxy", "NO_PROXY", "GIT_DIR", "GIT_WORK_TREE")
        }
        self.env.update(
            {
                "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                "FEDFORGET_DATA_MIRROR": str(mirror),
                "MPLBACKEND": "Agg",
                "DVC_NO_ANALYTICS": "1",
                "DVC_SITE_CACHE_DIR": str(home / "dvc-site-cache"),
                "HOME": str(home),  # a git and dvc global config of its own
                "GIT_AUTHOR_NAME": "test",
                "GIT_AUTHOR_EMAIL": "test@example.com",
                "GIT_COMMITTER_NAME": "test",
                "GIT_COMMITTER_EMAIL": "test@example.com",
                # Nothing here needs the network; refuse it at once rather than wait on it.
                "http_proxy": "http://127.0.0.1:9",
                "https_proxy": "http://127.0.0.1:9",
                "HTTP_PROXY": "http://127.0.0.1:9",
                "HTTPS_PROXY": "http://127.0.0.1:9",
            }
        )
        self.env.update(extra_env or {})

    def run(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        result = subprocess.run(
            list(args), cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        output = result.stdout + result.stderr
        if check:
            assert result.returncode == 0, f"{' '.join(args)} exited {result.returncode}:\n{output}"
        return output

    def start(self, *args: str, timeout: float = 120) -> str:
        """A command that leaves daemons behind (`dvc queue start`): its output goes through a file, since
        DVC's detached workers inherit the command's open descriptors, and a pipe they hold would keep
        `subprocess.run` waiting until they finish."""
        log = self.root.parent / "start.log"
        with open(log, "w") as handle:
            result = subprocess.run(
                list(args),
                cwd=self.root,
                env=self.env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
            )
        output = log.read_text()
        assert result.returncode == 0, f"{' '.join(args)} exited {result.returncode}:\n{output}"
        return output

    def stages_run(self, *args: str, timeout: float = 120) -> set[str]:
        return set(STAGE_LINE.findall(self.run(*args, timeout=timeout)))

    def params(self) -> dict:
        return yaml.safe_load((self.root / "params.yaml").read_text())

    def train_every_run(self, seed: int = 0, timeout: float = 300) -> None:
        """`pipeline.train` of every run in params.yaml, one seed."""
        for run in self.params()["runs"]:
            self.run(sys.executable, "-m", "pipeline.train", run, "--seed", str(seed), timeout=timeout)

    def curve(self, run: str, name: str, seed: int = 0) -> dict[int, float]:
        """A run's logged curve `name` as {round: value}; {} where the run logged no such curve."""
        folder = self.root / "reports" / "runs" / run / f"seed{seed}"
        if name in PLOTTED_CURVES:  # a file of its own, its column named by the curve's last part
            if not (folder / PLOTTED_CURVES[name]).exists():
                return {}
            with (folder / PLOTTED_CURVES[name]).open() as handle:
                column = name.rsplit("/", 1)[-1]
                return {int(row["step"]): float(row[column]) for row in csv.DictReader(handle, delimiter="\t")}
        if not (folder / "curves.tsv").exists():
            return {}
        with (folder / "curves.tsv").open() as handle:  # every other curve: `curve`, `step`, `value`
            rows = csv.DictReader(handle, delimiter="\t")
            return {int(row["step"]): float(row["value"]) for row in rows if row["curve"] == name}

    def write_params(self, params: dict) -> None:
        (self.root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    def init_git_dvc(self) -> None:
        self.run("git", "init", "-q")
        self.run("dvc", "init", "-q")
        self.commit("pipeline")

    def commit(self, message: str) -> None:
        self.run("git", "add", "-A")
        self.run("git", "commit", "-q", "-m", message)


def lines_until(process: subprocess.Popen, text: str) -> list[str]:
    """A process's output lines up to the one that holds `text` (all of them if it ends first)."""
    lines: list[str] = []
    for line in process.stdout:
        lines.append(line.strip())
        if text in line:
            break
    return lines


def finished(process: subprocess.Popen, timeout: float = 240) -> str:
    """A process's whole output, once it has exited 0."""
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output[-3000:]
    return output


def smallest_valid_run(**overrides) -> dict:
    """A run every check accepts, on a partition named `p`: FedCurv (lambda 1) with the MLP, two rounds of
    one epoch over every client, batch 8; `overrides` replace or add keys. A new dict each call."""
    return {
        "paper": "fedcurv",
        "partition": "p",
        "model": "mlp_200",
        "rounds": 2,
        "client_fraction": 1.0,
        "local_epochs": 1,
        "batch_size": 8,
        "lr": 0.05,
        "algorithm": {"name": "fedcurv", "lambda": 1.0},
        **overrides,
    }


TINY_FEDCURV_RUN = {
    "paper": "fedcurv",
    "partition": "shards",
    "model": "mlp_200",
    "rounds": 2,
    "client_fraction": 1.0,
    "local_epochs": 1,
    "batch_size": 32,
    "lr": 0.05,
    "seeds": [0],
    "targets": [0.9],
}


def tiny_fedcurv_run(**overrides) -> dict:
    """A two-round FedCurv-paper run on MNIST shard clients (no algorithm: the caller adds one), with
    `overrides` (e.g. seeds, targets, lr); a fresh copy each call, so a test may change it."""
    return copy.deepcopy({**TINY_FEDCURV_RUN, **overrides})


def tiny_fedcurv_params(algorithms: dict[str, dict]) -> dict:
    """A two-seed, two-round FedCurv-paper project on 300 MNIST images in 6 shard clients: a run
    `fedcurv_e10_<name>` for each algorithm given ({name: its algorithm mapping})."""
    run = tiny_fedcurv_run(seeds=[0, 1])
    return {
        "profile": "default",
        "datasets": {"mnist": {"train_size": 300, "test_size": 60}},
        "partitions": {
            "shards": {"dataset": "mnist", "scheme": "shards", "clients": 6, "shards_per_client": 2, "seed": 0}
        },
        "runs": {
            f"fedcurv_e10_{name}": {**run, "algorithm": dict(algorithm)} for name, algorithm in algorithms.items()
        },
    }
