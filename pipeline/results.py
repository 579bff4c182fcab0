"""Checkpoints and kept results, under FEDFORGET_CHECKPOINTS (default .checkpoints/, git-ignored).

A seed in training is checkpointed every `checkpoint_every` rounds: `<run>-seed<s>-<digest>.pt`, the
digest naming everything its numbers depend on (pipeline.training.checkpoint_key), so a killed `dvc
repro` resumes where it stopped and a changed setting or engine never resumes. A finished seed's result
(its history, probes and last model; not the server state) is kept instead:
`<run>-seed<s>-<digest>.result.pt`. A train stage that reruns because only the code that writes outputs
changed (pipeline.fingerprint's NOT_NUMERIC) writes them again from it, without training; to retrain,
remove the result (`python -m pipeline.train RUN --retrain`).

Files are written whole or not at all (pipeline.io.atomic_path) and carry a sha256 of their bytes: a
file cut short or changed is refused in one line naming it, never resumed from.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import subprocess
from pathlib import Path

import torch

from pipeline import distributed
from pipeline.errors import UserError
from pipeline.io import atomic_path


def machine_kind(device: torch.device) -> str:
    """The processor a checkpoint was written on, part of its key: another CPU kind (AVX-512 or not) or GPU
    can round differently, so a run resumed there would mix two machines' numbers."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        avx512 = " avx512f" in Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: the model name alone
        avx512 = False
    return distributed.cpu_model() + (" avx512f" if avx512 else "")


def current_commit() -> str:
    """The commit the working tree is at, "-dirty" when the code or params differ from it (outputs that a
    running `dvc repro` writes do not count), or "unknown" outside git: recorded with a seed's result, so
    that a reader knows which code trained it."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        head = git("rev-parse", "--short=12", "HEAD")
        changed = git("status", "--porcelain", "--", "pipeline", "params.yaml")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head + "-dirty" * bool(changed)) if head else "unknown"


def save_torch(obj, path: Path) -> None:
    """torch.save, atomically, through an open file: given a path, torch names the archive's folder after
    the file, here the temporary one with its random suffix, so the same tensors gave different bytes on
    every run; through a file object the folder is always `archive`."""
    with naming_failures(path), atomic_path(path) as tmp, open(tmp, "wb") as handle:
        torch.save(obj, handle)


@contextlib.contextmanager
def naming_failures(path: Path):
    """A write of `path` that fails (a full disk, a read-only folder) as an OSError naming `path` (issue 54):
    a failed write() names no file, and torch's archive writer raises a RuntimeError with the OSError as
    its context. The train stage reports it in one line (pipeline.train.writing_failed)."""
    try:
        yield
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(path)) from None
    except RuntimeError as error:
        cause = error.__context__
        if isinstance(cause, OSError):
            raise OSError(cause.errno, cause.strerror, str(path)) from None
        raise


def save_checked(obj, path: Path) -> None:
    """`obj` saved with the sha256 of its serialised bytes in front, atomically."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    payload = buffer.getvalue()
    with naming_failures(path), atomic_path(path) as tmp, open(tmp, "wb") as handle:
        handle.write(hashlib.sha256(payload).hexdigest().encode() + b"\n")
        handle.write(payload)


def load_checked(path: Path, device: torch.device | str = "cpu"):
    """What `save_checked` wrote, or None where there is none. A file cut short or with changed bytes is
    refused (issue 54): nothing is trained on a state that is not the one saved, and deleting the file is
    the user's call (the seed then trains again from round 1)."""
    if not path.is_file():
        return None
    raw = path.read_bytes()
    digest, _, payload = raw.partition(b"\n")
    if hashlib.sha256(payload).hexdigest().encode() != digest:
        raise UserError(
            f"{path}: its checksum does not match its contents (cut short or changed); delete it to train "
            "that seed again from round 1"
        )
    return torch.load(io.BytesIO(payload), weights_only=False, map_location=device)


class Store:
    """One folder of checkpoints and kept results."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def checkpoint_path(self, key: str, digest: str) -> Path:
        return self.folder / f"{key}-{digest}.pt"

    def result_path(self, key: str, digest: str) -> Path:
        return self.folder / f"{key}-{digest}.result.pt"

    def checkpoint(self, key: str, digest: str, device: torch.device) -> dict | None:
        return load_checked(self.checkpoint_path(key, digest), device)

    def save_checkpoint(self, key: str, digest: str, payload: dict) -> None:
        path = self.checkpoint_path(key, digest)
        save_checked(payload, path)
        for stale in self.folder.glob(f"{key}-*.pt"):
            if stale != path:
                stale.unlink(missing_ok=True)

    def kept(self, key: str, digest: str) -> dict | None:
        return load_checked(self.result_path(key, digest))

    def keep(self, key: str, digest: str, fields: dict) -> None:
        """A finished seed's result, in place of its checkpoints (and of results of other code)."""
        path = self.result_path(key, digest)
        save_checked(fields, path)
        self.forget(key, keep=path)

    def forget(self, key: str, keep: Path | None = None) -> None:
        """Every checkpoint and kept result of (run, seed) `key` but `keep`."""
        for stale in self.folder.glob(f"{key}-*.pt"):
            if stale != keep:
                stale.unlink(missing_ok=True)
