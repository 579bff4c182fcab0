"""pipeline/errors.py's disk errors: a full disk or a read-only folder met by download, partition, resolve or profile
is one line naming the file with what to do, and exit 2. The errors are constructed (the errno a full disk
or a read-only mount gives) so that these run everywhere; tests/unit/test_user_mistakes.py meets the
read-only case on a real mount where the kernel allows one."""

from __future__ import annotations

import errno
import os

import pytest

from pipeline import download, partition, profile, resolve
from pipeline.errors import disk_error_line

PARAMS = {
    "profile": "default",
    "datasets": {"mnist": {}},
    "partitions": {"p": {"dataset": "mnist", "scheme": "iid", "clients": 1, "seed": 0}},
    "runs": {},
}


@pytest.mark.parametrize(
    "code, advice",
    [
        (errno.ENOSPC, "free space on that disk, then rerun"),
        (errno.EROFS, "the file system is read-only: make the folder writable, then rerun"),
        (errno.EACCES, "no permission: make the folder writable for you, then rerun"),
        (errno.EIO, "check the path and the disk, then rerun"),
    ],
)
def test_the_line_names_the_file_what_the_system_said_and_what_to_do(code, advice):
    line = disk_error_line(OSError(code, os.strerror(code), "resolved/run.json"))
    assert line == f"resolved/run.json: cannot be read or written ({os.strerror(code)}); {advice}"


def full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "out/file.json")


@pytest.mark.parametrize("command", ["resolve", "profile", "download", "partition"])
def test_each_command_turns_a_full_disk_into_one_line_and_exit_2(command, monkeypatch, capsys, tmp_path):
    """Everything before the write is stubbed to succeed; the write itself meets ENOSPC."""
    if command == "resolve":
        module, argv = resolve, []
        monkeypatch.setattr(resolve, "load_checked_params", lambda *a, **k: PARAMS)
        monkeypatch.setattr(resolve, "write_resolved", full_disk)
    elif command == "profile":
        module, argv = profile, []
        params_file = tmp_path / "params.yaml"
        params_file.write_text("profile: default\n")
        monkeypatch.setattr(profile, "PARAMS_FILE", params_file)
        monkeypatch.setattr(profile, "expand_templates", lambda params: params)
        monkeypatch.setattr(profile, "check_params", lambda params: [])
        monkeypatch.setattr(profile, "derive_grid", lambda params: {**PARAMS, "datasets": [], "runs": {}})
        monkeypatch.setattr(profile, "write_text", full_disk)
    elif command == "download":
        module, argv = download, ["mnist"]
        monkeypatch.setattr(download, "load_checked_params", lambda *a, **k: PARAMS)
        monkeypatch.setattr(download, "prepare", lambda *a: None)
        monkeypatch.setattr(download, "write_prepared", full_disk)
    else:
        module, argv = partition, ["p"]
        monkeypatch.setattr(partition, "load_checked_params", lambda *a, **k: PARAMS)
        monkeypatch.setattr(partition, "load_prepared_with_sha256", lambda *a: ({"y_train": None}, "0" * 64))
        monkeypatch.setattr(partition, "make_partition", lambda *a: {"train": []})
        monkeypatch.setattr(partition, "write_partition", full_disk)
    with pytest.raises(SystemExit) as exited:
        module.main(argv)
    assert exited.value.code == 2
    # resolve replaces resolved/ whole, so its line names that folder too (errors.writing_into)
    where = "resolved/ (out/file.json)" if command == "resolve" else "out/file.json"
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: {where}: cannot be read or written (No space left on device); free space on that disk, then rerun"
    ]
