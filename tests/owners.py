"""Files owned by another user, for the tests that prove loop-killer ignores them: only
root can give a file away, so elsewhere those tests skip, saying so (and under CI=true,
where the suite runs as root, they must run)."""

from __future__ import annotations

import os
from pathlib import Path

from must_run import unavailable

NOBODY = 65534
"""The uid and gid of ``nobody``: a user other than the one running the tests."""


def give_to_another_user(path: Path) -> None:
    """Make ``nobody`` the owner of ``path`` (skip the test where this process cannot)."""
    try:
        os.chown(path, NOBODY, NOBODY)
    except PermissionError:
        unavailable(f"cannot give a file to another user as uid {os.geteuid()} "
                    "(only root can chown): run the suite as root to test it")
