"""The one exception type for user mistakes, and the wrapper that turns it into a one-line exit.

Anything a user can cause (a bad param, a missing or corrupt file, no network) raises `UserError`
with a message that names the key path or file, what was wrong and what is allowed. Entry points run
through `exit_on_user_error`, so such a mistake prints one line and exits non-zero, never a traceback.
Bugs (any other exception) still show their traceback: those are ours to fix.
"""

from __future__ import annotations

import functools
import sys


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
