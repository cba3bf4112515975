"""A file edited back and forth (pure), judged by whole-file states, never by fragments. A move
from one state (digest) to another made again in the turn is a back-and-forth of depth twice
its repeats: 2 warns, 4 is refused if made from exactly that state (``would_return``)."""

from __future__ import annotations

from ..light import hex_digest

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ABSENT", "EDIT_OSCILLATION_WARN", "FILE_CHANGING_TOOLS", "MAX_FILES",
           "REFUSED_RETURN_AFTER_WARN", "SUBAGENT_TOOLS", "EditHistory", "after_edit",
           "change_digest", "content_digest", "edited_file", "states_of_result"]

EDIT_OSCILLATION_WARN = 2  # the depth that warns: edit, revert, edit
REFUSED_RETURN_AFTER_WARN = 2  # warned at 2, 3 let through (reverting is sometimes right)
MAX_FILES = 32  # files remembered per turn, the least recently changed forgotten first
MAX_MOVES = 64  # moves remembered per file, the oldest forgotten first

FILE_CHANGING_TOOLS: frozenset[str] = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
SUBAGENT_TOOLS: frozenset[str] = frozenset({"Task", "Agent"})  # their runs may change any file
ABSENT = "absent"  # the state of a file that is not there


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
    """The file's content after the call on ``before`` (None: no file); None if unknown."""
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
    """(before, after) states from a ``toolUseResult`` or ``tool_response``, if whole."""
    if not isinstance(use_result, dict) or "originalFile" not in use_result:
        return None
    original = use_result.get("originalFile")
    original = original if isinstance(original, str) else None
    if original is None and use_result.get("type") == "update":
        return None  # (a file too big or hidden to hand whole)
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
        self.moves: dict[tuple[str, str], str] = {}  # (before, change) -> after, oldest first
        self.pairs: dict[tuple[str, str], int] = {}  # (before, after) -> times made again
        self.warned: set[tuple[str, str]] = set()  # two states the model was told of


def _pair(one: str, other: str) -> tuple[str, str]:
    return (one, other) if one <= other else (other, one)


class EditHistory:
    """The moves made to each file in one scope's turn, and how often each was made again."""

    __slots__ = ("_files",)

    def __init__(self) -> None:
        self._files: dict[str, _File] = {}  # path -> its moves, least recently changed first

    def note(self, path: str, before: str, after: str, change: str, *, warn_at: int = 0) -> int:
        """A move of ``path`` (``before`` "": from its last state); the depth if it warns."""
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
        """The depth ``change`` made now to ``state`` (from disk) would reach; else 0."""
        known = self._files.get(path)
        after = known.moves.get((state, change)) if known is not None else None
        if known is None or after is None:
            return 0
        return 2 * (known.pairs.get((state, after), 0) + 1)

    def deepest(self) -> int:
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
        """A history from ``to_state``, what is not understood left out."""
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
