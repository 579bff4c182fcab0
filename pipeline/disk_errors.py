"""A file the data and config commands cannot write or read (a full disk, a read-only folder, no
permission) as one line and exit 2, never a traceback (issue 54).

The train and report commands say this themselves (pipeline/train.py `writing_failed`, the report's
main); this wrapper does it for `download`, `partition`, `resolve` and `profile`. It lives apart from
pipeline/errors.py because that module is in the train stages' fingerprint: moving this there re-keys
every train stage, so it waits for the next full retrain. Every output these commands write goes through
pipeline/io.py's atomic writes, so a refused write leaves the last good file whole.
"""

from __future__ import annotations

import contextlib
import errno
import functools
from collections.abc import Iterator

from pipeline.errors import UserError

# What to do about each kind of failure, by errno; any other OSError gets the generic line.
ADVICE = {
    errno.ENOSPC: "free space on that disk, then rerun",
    errno.EDQUOT: "free space within your quota, then rerun",
    errno.EROFS: "the file system is read-only: make the folder writable, then rerun",
    errno.EACCES: "no permission: make the folder writable for you, then rerun",
    errno.EPERM: "no permission: make the folder writable for you, then rerun",
}


def disk_error_line(error: OSError, folder: str = "") -> str:
    """One line naming the file (inside `folder` where the system gave only its name there), what the system
    said and what to do."""
    where = error.filename or "a file"
    if folder:
        where = f"{folder}/ ({where})"
    said = error.strerror or str(error)
    return f"{where}: cannot be read or written ({said}); {ADVICE.get(error.errno, 'check the path and the disk, then rerun')}"


@contextlib.contextmanager
def writing_into(folder) -> Iterator[None]:
    """Name `folder` in the line of a disk error met while replacing it (a folder swapped in whole reports
    only the bare name of the file it could not remove)."""
    try:
        yield
    except OSError as error:
        raise UserError(disk_error_line(error, str(folder))) from None


def refuse_disk_errors(main):
    """Run `main`, turning an OSError into a UserError (which `exit_on_user_error`, applied outside this
    wrapper, prints as one line with exit 2)."""

    @functools.wraps(main)
    def wrapped(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except OSError as error:
            raise UserError(disk_error_line(error)) from None

    return wrapped
