"""Oscillating edits (pure): a file edited back to a content it had before in this turn.

A shape no agent we know of catches: the model edits a file, reverts the edit, edits it
again, going back and forth between two versions (each edit a different call, so the
tool-repeat count never grows). ``EditHistory`` keeps, per file, the changes made in the
person's turn (digests only). A change is a *return* when it takes the file back to a
content it had before:

* an ``Edit`` (or ``MultiEdit``) that undoes an earlier change to the file (its new text
  was that change's old text, and the other way round);
* a ``Write`` of a content the file was written with before in the turn.

On the ``EDIT_OSCILLATION_WARN``-th return of a file (edit, revert, edit: the 2nd) the
model is told it is going back and forth (``rules.RULE_EDIT_OSCILLATION``). Only a
warning: reverting is sometimes right.
"""

from __future__ import annotations

from ..digest import hex_digest
from .masking import canonical

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    from typing import Any

__all__ = ["EDIT_OSCILLATION_WARN", "MAX_FILES", "EditHistory", "edited_file"]

EDIT_OSCILLATION_WARN = 2
"""Returns of one file to an earlier content in a turn (edit, revert, edit) that warn."""

MAX_FILES = 32
"""Files remembered per turn; the least recently changed are forgotten first."""
_MAX_MOVES = 16  # changes remembered per file


def edited_file(tool_input: object) -> str:
    """The path a file-changing call changes ("" when its input names none)."""
    if isinstance(tool_input, dict):
        for field in ("file_path", "notebook_path", "path"):
            value = tool_input.get(field)
            if isinstance(value, str):
                return value
    return ""


def _moves(name: str, tool_input: dict[str, Any]) -> tuple[str, str] | None:
    """(this change, the change that would undo it), as digests; None when unknown."""
    if name == "Write" and isinstance(tool_input.get("content"), str):
        content = "=" + _digest(tool_input["content"])
        return content, content  # writing it again is the return
    if name == "Edit":
        old, new = tool_input.get("old_string"), tool_input.get("new_string")
        if isinstance(old, str) and isinstance(new, str):
            return f"{_digest(old)}>{_digest(new)}", f"{_digest(new)}>{_digest(old)}"
    if name == "MultiEdit" and isinstance(tool_input.get("edits"), list):
        edits = [(e.get("old_string"), e.get("new_string")) for e in tool_input["edits"]
                 if isinstance(e, dict)]
        undo = [(new, old) for old, new in reversed(edits)]
        return _digest(canonical(edits)), _digest(canonical(undo))
    return None


class EditHistory:
    """The changes made to each file in one scope's turn, and their returns."""

    __slots__ = ("_files",)

    def __init__(self) -> None:
        # file digest -> [returns, moves (oldest first)]; insertion order is recency
        self._files: dict[str, tuple[int, list[str]]] = {}

    def note(self, name: str, tool_input: object) -> int:
        """A successful change by a file-changing call; how many times it has taken the
        file back to an earlier content in this turn (0 when this change did not)."""
        if not isinstance(tool_input, dict):
            return 0
        path = edited_file(tool_input)
        moves = _moves(name, tool_input)
        if not path or moves is None:
            return 0
        move, undo = moves
        key = _digest(path)
        returns, seen = self._files.pop(key, (0, []))
        went_back = undo in seen
        if went_back:
            returns += 1
        seen = [*seen[-(_MAX_MOVES - 1):], move]
        self._files[key] = (returns, seen)
        while len(self._files) > MAX_FILES:
            del self._files[next(iter(self._files))]
        return returns if went_back else 0

    def clear(self) -> None:
        self._files.clear()

    def to_state(self) -> dict[str, Any]:
        return {key: [returns, moves] for key, (returns, moves) in self._files.items()}

    @classmethod
    def from_state(cls, state: object) -> EditHistory:
        """What ``to_state`` gave; anything not understood is left out."""
        history = cls()
        if not isinstance(state, dict):
            return history
        for key, value in list(state.items())[-MAX_FILES:]:
            if (isinstance(key, str) and isinstance(value, list) and len(value) == 2
                    and isinstance(value[0], int) and not isinstance(value[0], bool)
                    and 0 <= value[0] < 1000 and isinstance(value[1], list)
                    and all(isinstance(move, str) for move in value[1])):
                history._files[key] = (value[0], list(value[1][-_MAX_MOVES:]))
        return history


def _digest(text: str) -> str:
    return hex_digest(text, 16)
