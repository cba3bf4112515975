"""A file edited back and forth (pure): judged by whole-file states, never by fragments.

Each successful ``Edit``, ``MultiEdit``, ``Write`` or ``NotebookEdit`` takes one file
from one content to another: a *move* from one state to another, each told by the digest
of the whole file (``content_digest``; ``ABSENT`` for no file), made by one *change*
(the digest of the call's input). Claude Code hands both states: a hook's
``tool_response`` (and the transcript's ``toolUseResult``) carries ``originalFile``, the
file before, with ``oldString``/``newString``/``replaceAll`` or the ``content`` written
(``after_edit`` applies them); a hook also reads the file on disk.

A move made before in the person's turn is the file going back and forth, whatever tool
made each step (an ``Edit`` forth and a ``Write`` of the original back included): edit,
revert, edit makes the first move again. Its depth is twice the times a move was made
again: the first (depth 2, ``EDIT_OSCILLATION_WARN``) warns, once for the two states;
the revert after it is let through (reverting is sometimes right); the move made a third
time (depth 4) is refused before it is made when it is the exact change already made from
exactly that state (``EditHistory.would_return``): no guess, so no false refusal. Each
move counts apart, so a back-and-forth settled earlier does not count towards another in
the same file, and a cycle of versions (A, B, C, A, B, C, A...) climbs all the same. Ideas
tried one after another and each undone make no move twice, and are never warned.
"""

from __future__ import annotations

from ..light import hex_digest

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "ABSENT",
    "EDIT_OSCILLATION_WARN",
    "FILE_CHANGING_TOOLS",
    "MAX_FILES",
    "REFUSED_RETURN_AFTER_WARN",
    "SUBAGENT_TOOLS",
    "EditHistory",
    "after_edit",
    "change_digest",
    "content_digest",
    "edited_file",
    "states_of_result",
]

EDIT_OSCILLATION_WARN = 2
"""The depth (repeated moves + 1) of a file's back-and-forth that warns: edit, revert, edit."""

REFUSED_RETURN_AFTER_WARN = 2
"""How far after the depth that warned comes the one refused before it is made: warned
at 2, 3 let through (reverting is sometimes right), 4 refused."""

MAX_FILES = 32
"""Files remembered per turn; the least recently changed are forgotten first."""
MAX_MOVES = 64
"""Moves remembered per file; the oldest are forgotten first."""

FILE_CHANGING_TOOLS: frozenset[str] = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
"""Claude Code's tools whose success changes a file (their moves are followed below)."""

SUBAGENT_TOOLS: frozenset[str] = frozenset({"Task", "Agent"})
"""Claude Code's tools that run a subagent, whose run may change any file."""

ABSENT = "absent"
"""The state of a file that is not there (before a ``Write`` creates it)."""


def edited_file(tool_input: object) -> str:
    """The path a file-changing call changes ("" when its input names none)."""
    if isinstance(tool_input, dict):
        for field in ("file_path", "notebook_path", "path"):
            value = tool_input.get(field)
            if isinstance(value, str):
                return value
    return ""


def content_digest(content: str | bytes | None) -> str:
    """A file's state: the digest of its whole content (``ABSENT`` for no file)."""
    if content is None:
        return ABSENT
    if isinstance(content, bytes):
        content = content.decode("utf-8", "surrogateescape")
    return hex_digest(content, 20)


def change_digest(tool_input: object) -> str:
    """What a call asked to change, as a digest (the same input, the same change)."""
    from .masking import canonical

    return hex_digest(canonical(tool_input), 12)


def after_edit(name: str, tool_input: object, before: str | None) -> str | None:
    """The file's content after a call of ``name`` with ``tool_input`` on ``before`` (None
    for no file), as Claude Code's tools make it; None when it cannot be told (an old text
    not found, a notebook's cell)."""
    if not isinstance(tool_input, dict):
        return None
    if name == "Write":
        content = tool_input.get("content")
        return content if isinstance(content, str) else None
    if before is None:
        return None
    if name == "Edit":
        return _replaced(before, tool_input)
    if name == "MultiEdit":
        edits = tool_input.get("edits")
        if not isinstance(edits, list):
            return None
        text: str | None = before
        for edit in edits:
            text = _replaced(text, edit) if text is not None else None
        return text
    return None


def _replaced(text: str, edit: object) -> str | None:
    if not isinstance(edit, dict):
        return None
    old, new = edit.get("old_string", edit.get("oldString")), edit.get(
        "new_string", edit.get("newString"))
    if not isinstance(old, str) or not isinstance(new, str) or not old or old not in text:
        return None
    every = edit.get("replace_all", edit.get("replaceAll")) is True
    return text.replace(old, new) if every else text.replace(old, new, 1)


def states_of_result(use_result: object) -> tuple[str, str] | None:
    """(before, after) states of a file-changing call from its ``toolUseResult`` (the
    transcript's) or ``tool_response`` (a hook's): ``originalFile`` and the strings or
    content it holds; None when it holds no whole file."""
    if not isinstance(use_result, dict) or "originalFile" not in use_result:
        return None
    original = use_result.get("originalFile")
    original = original if isinstance(original, str) else None
    if original is None and use_result.get("type") == "update":
        return None  # a file too big or hidden to hand whole: its state is not known
    if "oldString" in use_result or "old_string" in use_result:
        after = _replaced(original, use_result) if original is not None else None
    elif isinstance(use_result.get("edits"), list):
        after = after_edit("MultiEdit", use_result, original)
    elif isinstance(use_result.get("content"), str):
        after = use_result["content"]
    else:
        return None
    if after is None:
        return None
    return content_digest(original), content_digest(after)


class _File:
    __slots__ = ("last", "moves", "pairs", "warned")

    def __init__(self) -> None:
        self.last = ""  # the state its last move left it in
        # (before, change) -> after, oldest first: the moves made, and what made them
        self.moves: dict[tuple[str, str], str] = {}
        # (before, after) -> how often that move was made again
        self.pairs: dict[tuple[str, str], int] = {}
        self.warned: set[tuple[str, str]] = set()  # two states the model was told of


def _pair(one: str, other: str) -> tuple[str, str]:
    return (one, other) if one <= other else (other, one)


class EditHistory:
    """The moves made to each file in one scope's turn, and how often each is made again:
    a back-and-forth's depth is twice the repeats of its move (A to B made again: 2, the
    model is told once for the two states; made a third time: 4, refused), so one settled
    earlier does not count towards another in the same file, and a cycle of versions
    (A, B, C, A, B...) still climbs."""

    __slots__ = ("_files",)

    def __init__(self) -> None:
        self._files: dict[str, _File] = {}  # path -> its moves, least recently changed first

    def note(self, path: str, before: str, after: str, change: str, *, warn_at: int = 0
             ) -> int:
        """A move of ``path`` from state ``before`` ("": not told, then the state its last
        move left it in) to ``after``, made by ``change``; the depth of its back-and-forth
        when this move warns (the first move made again between two states, at
        ``warn_at`` or deeper, once for each), else 0."""
        if not path:
            return 0
        known = self._files.pop(path, None) or _File()
        self._files[path] = known
        while len(self._files) > MAX_FILES:
            del self._files[next(iter(self._files))]
        before = before or known.last
        known.last = after
        if not before or before == after:
            return 0
        repeated = any(made_before == before and made_after == after
                       for (made_before, _), made_after in known.moves.items())
        known.moves.pop((before, change), None)
        known.moves[(before, change)] = after
        while len(known.moves) > MAX_MOVES:
            del known.moves[next(iter(known.moves))]
        if not repeated:
            return 0
        known.pairs[(before, after)] = known.pairs.get((before, after), 0) + 1
        depth = 2 * known.pairs[(before, after)]
        pair = _pair(before, after)
        if warn_at and depth >= warn_at and pair not in known.warned:
            known.warned.add(pair)
            return depth
        return 0

    def would_return(self, path: str, state: str, change: str) -> int:
        """The depth the file's back-and-forth would reach if ``change`` were made now to
        its ``state`` (read from disk): only the exact change already made from exactly
        that state repeats a move; 0 for anything else."""
        known = self._files.get(path)
        after = known.moves.get((state, change)) if known is not None else None
        if known is None or after is None:
            return 0
        return 2 * (known.pairs.get((state, after), 0) + 1)

    def deepest(self) -> int:
        """The deepest back-and-forth of any file so far (0: no move made again)."""
        return max((2 * count for known in self._files.values()
                    for count in known.pairs.values()), default=0)

    def clear(self) -> None:
        self._files.clear()

    def to_state(self) -> dict[str, Any]:
        return {"v": 3, "files": [
            [path, [[*move, count, _pair(*move) in known.warned]
                    for move, count in known.pairs.items()],
             [[before, change, after] for (before, change), after in known.moves.items()],
             known.last]
            for path, known in self._files.items()]}

    @classmethod
    def from_state(cls, state: object) -> EditHistory:
        """A history from ``to_state``; what is not understood is left out (an older
        version's is dropped: nothing is refused by mistake)."""
        history = cls()
        files = state.get("files") if isinstance(state, dict) and state.get("v") == 3 else None
        if not isinstance(files, list):
            return history
        for item in files[-MAX_FILES:]:
            if not (isinstance(item, list) and len(item) == 4 and isinstance(item[0], str)
                    and isinstance(item[1], list) and isinstance(item[2], list)):
                continue
            known = _File()
            known.last = item[3] if isinstance(item[3], str) and len(item[3]) <= 64 else ""
            for pair in item[1][-MAX_MOVES:]:
                if (isinstance(pair, list) and len(pair) == 4 and _digests(pair[:2])
                        and isinstance(pair[2], int) and 0 < pair[2] < 1000):
                    known.pairs[(pair[0], pair[1])] = pair[2]
                    if pair[3] is True:
                        known.warned.add(_pair(pair[0], pair[1]))
            for move in item[2][-MAX_MOVES:]:
                if isinstance(move, list) and len(move) == 3 and _digests(move):
                    known.moves[(move[0], move[1])] = move[2]
            history._files[item[0]] = known
        return history


def _digests(values: list[Any]) -> bool:
    return all(isinstance(value, str) and len(value) <= 64 for value in values)
