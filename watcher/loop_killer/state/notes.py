"""Things said to the person once: a marker file per thing said, ``<state>/notes/<key>``.

Created exclusively (never through a link: ``paths.state_folder``), so concurrent
hooks say a thing once between them. When the marker cannot be written, the thing is
said anyway: saying it twice beats never saying it.
"""

from __future__ import annotations

import os

from .files import create_new
from .paths import is_plain_id, state_folder_text

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a hook imports this module
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["NOTES_DIR", "first_time"]

NOTES_DIR = "notes"


def first_time(state: Path | str, key: str) -> bool:
    """True the first time ``key`` is asked about (and whenever that cannot be told)."""
    if not is_plain_id(key):
        raise ValueError(f"not a plain key: {key!r}")
    try:
        return create_new(os.path.join(state_folder_text(state, NOTES_DIR, create=True), key))
    except OSError:
        return True
