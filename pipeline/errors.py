"""The one exception type for user mistakes, and the wrapper that turns it into a one-line exit.

Anything a user can cause (a bad param, a missing or corrupt file, no network) raises `UserError`
with a message that names the key path or file, what was wrong and what is allowed. Entry points run
through `exit_on_user_error`, so such a mistake prints one line and exits non-zero, never a traceback.
Bugs (any other exception) still show their traceback: those are ours to fix.

A file a command cannot write or read (a full disk, a read-only folder, no permission) is a user's
problem too: `refuse_disk_errors` turns it into one line naming the file and what to do (issue 54), for
`download`, `partition`, `resolve` and `profile`; the train and report commands say it themselves
(pipeline/train.py `writing_failed`, the report's main). Every output goes through pipeline/io.py's atomic
writes, so a refused write leaves the last good file whole.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import sys
from collections.abc import Iterator


class UserError(Exception):
    """A problem in the user's params, files or environment, reported as one line."""


def exit_on_user_error(main):
    @functools.wraps(main)
    def wrapped(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except UserError as error:
            lines = str(error).splitlines() or ["unknown error"]
            for line in lines:
                print(f"error: {line}", file=sys.stderr)
            sys.exit(2)
        except KeyboardInterrupt:
            print("error: interrupted", file=sys.stderr)
            sys.exit(130)

    return wrapped


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
