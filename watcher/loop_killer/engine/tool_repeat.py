"""Tool-repeat loops: the same tool call giving the same result, again and again (pure). A
different result starts at 1; the person speaking, a file change or a task's news resets all."""

from __future__ import annotations

from ..light import Value, hex_digest, loads
from .calls import (
    ANSWERED_BY_PERSON,
    CWD_MARK,
    call_key,
    call_label,
    is_ignored,
    is_refusal,
    moved_to,
    person_answered,
)
from .edits import (
    EDIT_OSCILLATION_WARN,
    FILE_CHANGING_TOOLS,
    REFUSED_RETURN_AFTER_WARN,
    SUBAGENT_TOOLS,
    EditHistory,
    change_digest,
    edited_file,
)
from .masking import result_key
from .rules import RULE_EDIT_OSCILLATION
from .shell import SHELL_TOOLS
from .waiting import WAIT_MINUTES, waits

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    from typing import Any, Final

    from .pairing import ToolPairing
    from .transcript import AssistantPart, Event, ToolCall, ToolResult

__all__ = ["DEFAULT_IGNORED", "MAX_CALLS", "RULE_TOOL_REPEAT", "STATE_VERSION",
           "TOOL_CALL_RULES", "TOOL_REPEAT_BLOCK", "TOOL_REPEAT_STOP", "TOOL_REPEAT_WARN",
           "ToolRepeat", "ToolRepeatCounter", "notice_result", "repeat_label", "result_digest"]

TOOL_REPEAT_WARN = 3  # identical results in a row on which the model is told to stop
TOOL_REPEAT_BLOCK = 4  # identical results after which the next attempt is refused
TOOL_REPEAT_STOP = 3  # refused attempts of one call that end the turn

RULE_TOOL_REPEAT: Final = "TOOL_REPEAT"
TOOL_CALL_RULES: Final = (RULE_TOOL_REPEAT, RULE_EDIT_OSCILLATION)  # the tool-call hooks'

# Tools never counted (``fnmatch`` patterns allowed); polling tools wait instead.
DEFAULT_IGNORED: frozenset[str] = frozenset()

_NOTICE_IDS = ("task-id", "tool-use-id", "output-file")  # differ in every notice


def notice_result(prompt: str) -> str:
    """What a background task's notice says happened, as a result digest."""
    said = prompt[:65536]
    for tag in _NOTICE_IDS:
        start = said.find(f"<{tag}>")
        end = said.find(f"</{tag}>", start)
        if start >= 0 and end >= 0:
            said = said[:start] + said[end + len(tag) + 3:]
    return result_digest(said, is_error=False)


_NOTICE_CALL = "<background task notice>"  # the last notice's place among the calls
MAX_CALLS = 200  # calls remembered per counter, the least recently seen forgotten first
STATE_VERSION = 1


class ToolRepeat(Value):
    """Where one call stands: ``count`` same results in a row; ``shape``: another rule it hits."""

    __slots__ = ("call", "name", "tool_use_id", "count", "shape", "shape_count", "waited")
    call: str
    name: str
    tool_use_id: str
    count: int
    shape: str
    shape_count: int
    waited: float

    def __init__(self, call: str, name: str, tool_use_id: str, count: int, shape: str = "",
                 shape_count: int = 0, waited: float = 0.0) -> None:
        self._set(call=call, name=name, tool_use_id=tool_use_id, count=count, shape=shape,
                  shape_count=shape_count, waited=waited)

    @property
    def warn(self) -> bool:
        return self.count == TOOL_REPEAT_WARN

    @property
    def blocked(self) -> bool:  # (its next attempt is refused)
        return self.count >= TOOL_REPEAT_BLOCK


def repeat_label(repeat: ToolRepeat, limit: int = 80) -> str:
    """``call_label`` of the call a ToolRepeat is about, from its key alone."""
    call = repeat.call.split(CWD_MARK, 1)[0]
    rest = call[len(repeat.name) + 1:] if call.startswith(repeat.name + " ") else call
    if repeat.name in SHELL_TOOLS:
        return call_label(repeat.name, {"command": rest}, limit)
    try:
        tool_input = loads(rest)
    except ValueError:
        tool_input = rest
    return call_label(repeat.name, tool_input, limit)


def _digest(text: str) -> str:
    return hex_digest(text, 20)


class ToolRepeatCounter:
    """Counts identical results per call for one scope (a session, or one subagent).
    ``now`` times the calls that wait; unknown, they never count."""

    __slots__ = ("_block", "_calls", "_changes", "_edits", "_oscillation", "_pairing",
                 "_progress", "_refused", "_waited_last", "ignored", "wait")

    def __init__(self, *, ignored: frozenset[str] = DEFAULT_IGNORED, block: int = TOOL_REPEAT_BLOCK,
                 oscillation: int = EDIT_OSCILLATION_WARN, wait: float = WAIT_MINUTES * 60) -> None:
        self.ignored = ignored
        self._block = block
        self._oscillation = oscillation  # a file's depth that warns (0: never)
        self.wait = wait  # seconds a waiting call's result may stay the same
        self._edits = EditHistory()
        self._calls: dict[str, _Last] = {}  # call digest -> _Last, least recently seen first
        self._changes = 0  # file changes made in the turn
        self._progress = 0  # new results in the turn (a result its call had not given)
        self._waited_last = False  # the last call waited: the one right after waits too
        # call digest -> (attempts refused with nothing new between, ``_progress`` then)
        self._refused: dict[str, tuple[int, int]] = {}
        self._pairing: ToolPairing | None = None  # ``feed``'s, made on its first call

    @property
    def refused_return(self) -> int:
        """The depth of a file's back-and-forth refused (0: rule off)."""
        return self._oscillation + REFUSED_RETURN_AFTER_WARN if self._oscillation else 0

    def __len__(self) -> int:
        return len(self._calls)

    def record(self, name: str, tool_input: object, content: object, is_error: bool,
               tool_use_id: str = "", *, cwd: str = "", now: float | None = None,
               move: tuple[str, str] | None = None) -> ToolRepeat:
        """Count one result of a call (our own refusal counts nothing); where it stands."""
        return self.record_call(call_key(name, tool_input, cwd), name, content, is_error,
                                tool_use_id, tool_input=tool_input, now=now, move=move)

    def record_call(self, call: str, name: str, content: object, is_error: bool,
                    tool_use_id: str = "", *, result: str | None = None, failed: bool | None = None,
                    tool_input: object = None, now: float | None = None, tree: str | None = None,
                    move: tuple[str, str] | None = None) -> ToolRepeat:
        """``record`` of a call already keyed. ``result``: its digest if known; ``failed``:
        unless ``is_error`` says; ``tree``: the tree's fingerprint ("": not told, changed;
        None: not measured); ``move``: an edit's file states, if known."""
        failed = is_error if failed is None else failed
        if name in ANSWERED_BY_PERSON and person_answered(content, is_error=failed):
            self.reset()
            return ToolRepeat(call, name, tool_use_id, 0)
        if is_ignored(name, self.ignored):
            return ToolRepeat(call, name, tool_use_id, 0)
        digest = _digest(call)
        if is_refusal(content, is_error=is_error):
            return ToolRepeat(call, name, tool_use_id, self._count(digest))
        if result is None:
            result = result_digest(content, is_error=is_error)
        itself = waits(name, tool_input)
        waiting, self._waited_last = self._waited_last or itself, itself
        last = self._calls.pop(digest, None)
        same = last is not None and self._same(last, result, failed, tree, waiting)
        since = last[3] if last is not None and same else (now or 0.0)
        waited = 0.0
        if not same:
            count = 1
            self._progress += 1
        elif waiting:
            count, waited = self._waiting(last, since, now)
        else:
            count = last[1] + 1 if last is not None else 1
        shape, shape_count = "", 0
        # The session's own edit and a subagent's run change the files (any other writer
        # is measured: the tree's fingerprint); an edit that left its file as it was is none.
        if name in FILE_CHANGING_TOOLS:
            if count == 1 and not failed and not (move and move[0] == move[1]):
                self._changes += 1
                depth = self._edits.note(edited_file(tool_input), *move, change_digest(tool_input),
                                         warn_at=self._oscillation) if move else 0
                if depth:
                    shape, shape_count = RULE_EDIT_OSCILLATION, depth
        elif name in SUBAGENT_TOOLS and count == 1:
            self._changes += 1
        kept_tree = tree if tree is not None else (last[4] if last is not None and same else "")
        self._calls[digest] = (result, count, self._changes, since, kept_tree, failed,
                               self._progress, waiting)
        while len(self._calls) > MAX_CALLS:
            del self._calls[next(iter(self._calls))]
        return ToolRepeat(call, name, tool_use_id, count, shape, shape_count, waited)

    def would_repeat(self, call: str, name: str, result: str, *, failed: bool,
                     tool_input: object = None) -> bool:
        """Whether a result would repeat as far as the session knows (then measure the tree)."""
        if name in FILE_CHANGING_TOOLS or is_ignored(name, self.ignored):
            return False
        last = self._calls.get(_digest(call))
        return last is not None and self._may_repeat(last, result, failed,
                                                     self.waits(name, tool_input))

    def waits(self, name: str, tool_input: object) -> bool:
        """Whether this call waits (``waiting.waits``) or comes right after one that does."""
        return self._waited_last or waits(name, tool_input)

    def _may_repeat(self, last: _Last, result: str, failed: bool, waiting: bool) -> bool:
        """No change since, and the same result or (not waiting) a failure after a failure
        with no new result of any call between."""
        if last[2] != self._changes:
            return False
        return last[0] == result or (failed and last[5] and last[6] == self._progress
                                     and not waiting)

    def _same(self, last: _Last, result: str, failed: bool, tree: str | None,
              waiting: bool) -> bool:
        """``_may_repeat``, and no change the tree's fingerprint shows."""
        if not self._may_repeat(last, result, failed, waiting):
            return False
        if last[0] != result and not tree:
            return False
        return tree is None or (bool(tree) and (not last[4] or tree == last[4]))

    def _waiting(self, last: _Last | None, since: float, now: float | None) -> tuple[int, float]:
        """(count, seconds waited) of a waiting call's same result: 1 within the bound."""
        if last is None or not since or now is None or now - since < self.wait:
            return 1, 0.0
        return max(last[1] + 1, self._block), now - since

    def count(self, name: str, tool_input: object, *, cwd: str = "") -> int:
        if is_ignored(name, self.ignored):
            return 0
        return self._count(_digest(call_key(name, tool_input, cwd)))

    def _count(self, digest: str) -> int:
        last = self._calls.get(digest)
        return last[1] if last is not None and last[2] == self._changes else 0

    def _waited(self, call: str, now: float | None) -> float:
        """Seconds a waiting call's result has stayed the same (0: another call, unknown)."""
        last = self._calls.get(_digest(call))
        if last is None or not last[3] or now is None or not last[7]:
            return 0.0
        return max(0.0, now - last[3])

    def refusal(self, name: str, tool_input: object, tool_use_id: str = "", *, cwd: str = "",
                now: float | None = None, file_state: str | None = None) -> ToolRepeat | None:
        """Where the call stands when its next attempt must be refused, else None. ``cwd``:
        PreToolUse's; ``file_state``: for an edit, its file's state on disk, if read."""
        moved = moved_to(name, tool_input, cwd)
        for folder in (cwd, moved) if moved else (cwd,):
            count = self.count(name, tool_input, cwd=folder)
            if count >= self._block:
                call = call_key(name, tool_input, folder)
                return ToolRepeat(call, name, tool_use_id, count, waited=self._waited(call, now))
        if self.refused_return and name in FILE_CHANGING_TOOLS and file_state is not None:
            depth = self._edits.would_return(edited_file(tool_input), file_state,
                                             change_digest(tool_input))
            if depth >= self.refused_return:  # (keyed by the file alone)
                return ToolRepeat(f"{RULE_EDIT_OSCILLATION} {edited_file(tool_input)}", name,
                                  tool_use_id, 0, RULE_EDIT_OSCILLATION, depth)
        return None

    def note_notice(self, result: str) -> bool:
        """A background task ended; whether that is news (the same notice again is none)."""
        digest = _digest(_NOTICE_CALL)
        last = self._calls.pop(digest, None)
        news = last is None or last[0] != result
        if news:
            self._changes += 1
            self._progress += 1
        self._calls[digest] = (result, 1, self._changes, 0.0, "", False, self._progress, False)
        return news

    def refusable(self) -> bool:
        """Whether any call's next attempt would be refused now."""
        # (+ 2: the next time one of its moves is made again)
        if self.refused_return and self._edits.deepest() + 2 >= self.refused_return:
            return True
        return any(count >= self._block and changes == self._changes
                   for _, count, changes, *_ in self._calls.values())

    @property
    def refused(self) -> int:
        """The most attempts of one call refused with nothing new between them."""
        return max((count for count, _ in self._refused.values()), default=0)

    def note_refusal(self, refusal: ToolRepeat) -> int:
        """One more attempt refused; how many in a row with nothing new between them."""
        digest = _digest(refusal.call)
        count, at = self._refused.pop(digest, (0, self._progress))
        count = count + 1 if at == self._progress else 1
        self._refused[digest] = (count, self._progress)
        while len(self._refused) > MAX_CALLS:
            del self._refused[next(iter(self._refused))]
        return count

    def reset(self) -> None:  # (the person spoke)
        self._calls.clear()
        self._changes = 0
        self._progress = 0
        self._waited_last = False
        self._refused.clear()
        self._edits.clear()

    def feed(self, event: Event) -> list[ToolRepeat]:
        """Take one transcript event; one ToolRepeat per tool result it counted."""
        pairing = self._pairing
        if pairing is None:
            from .pairing import ToolPairing  # (the hooks never feed events)

            pairing = self._pairing = ToolPairing()
        return [repeat for _, _, repeat in self.feed_pairs(event, [
            (part, call, call_key(call.name, call.input, result.cwd), result)
            for part, call, result in pairing.pair(event)])]

    def feed_pairs(self, event: Event, pairs: list[tuple[AssistantPart, ToolCall, str,
                                                         ToolResult]]
                   ) -> list[tuple[AssistantPart, ToolCall, ToolRepeat]]:
        """Count the (part, call, key, result) ``event`` completed, with part and call."""
        from .pairing import ToolPairing

        if ToolPairing.starts_afresh(event):
            self.reset()
        return [(part, call, self.record_call(
                    key, call.name, result.content, result.is_error, result.tool_use_id,
                    tool_input=call.input, move=result.move,
                    now=event_seconds(event) if self.waits(call.name, call.input) else None))
                for part, call, key, result in pairs]

    def to_state(self) -> dict[str, Any]:
        """The counts as a small JSON-ready value (digests only; no pairing)."""
        return {"v": STATE_VERSION, "changes": self._changes, "progress": self._progress,
                "waited_last": self._waited_last,
                "refused": {digest: list(refused) for digest, refused in self._refused.items()},
                "calls": [[call, *last] for call, last in self._calls.items()],
                "edits": self._edits.to_state()}

    @classmethod
    def from_state(cls, state: object, *, ignored: frozenset[str] = DEFAULT_IGNORED,
                   block: int = TOOL_REPEAT_BLOCK, oscillation: int = EDIT_OSCILLATION_WARN,
                   wait: float = WAIT_MINUTES * 60) -> ToolRepeatCounter:
        """A counter from ``to_state``; what is not understood is left out."""
        counter = cls(ignored=ignored, block=block, oscillation=oscillation, wait=wait)
        if not isinstance(state, dict) or state.get("v") != STATE_VERSION:
            return counter
        calls = state.get("calls")
        if not isinstance(calls, list):
            return counter
        counter._changes = _small(state.get("changes"))
        counter._progress = _small(state.get("progress"))
        counter._waited_last = state.get("waited_last") is True
        counter._edits = EditHistory.from_state(state.get("edits"))
        refused = state.get("refused")
        if isinstance(refused, dict):
            for digest, kept in list(refused.items())[-MAX_CALLS:]:
                # (an older version's plain count: as if nothing came since)
                count, at = (kept if isinstance(kept, list) and len(kept) == 2
                             else (kept, counter._progress))
                if isinstance(digest, str) and _small(count) > 0:
                    counter._refused[digest] = (_small(count), _small(at))
        for item in calls[-MAX_CALLS:]:
            if (isinstance(item, list) and 3 <= len(item) <= 9 and isinstance(item[0], str)
                    and isinstance(item[1], str) and _small(item[2]) > 0):
                changes = _small(item[3]) if len(item) >= 4 else 0
                since = _moment(item[4]) if len(item) >= 5 else 0.0
                tree = item[5] if len(item) >= 6 and isinstance(item[5], str) else ""
                failed = len(item) >= 7 and item[6] is True
                # (an older state has no progress: nothing new since, as it was then)
                progress = _small(item[7]) if len(item) >= 8 else counter._progress
                waiting = len(item) == 9 and item[8] is True
                counter._calls.pop(item[0], None)
                counter._calls[item[0]] = (item[1], item[2], changes, since, tree[:80], failed,
                                           progress, waiting)
        return counter


# A call's last result: (result digest, count, the turn's file changes then, since when
# (0: unknown), tree fingerprint ("": not taken), failed, the turn's new results then, waits)
_Last = tuple[str, int, int, float, str, bool, int, bool]


def event_seconds(event: Event) -> float | None:
    timestamp = getattr(event, "timestamp", "")
    if not isinstance(timestamp, str) or not timestamp:
        return None
    from .transcript import parse_timestamp  # (the hooks never feed events)

    return parse_timestamp(timestamp)


def _moment(value: object) -> float:  # (read back: a plain positive number, else 0)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e11:
        return float(value)
    return 0.0


def _small(value: object) -> int:  # (read back: a plain int in range, else 0)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1_000_000:
        return value
    return 0


def result_digest(content: object, *, is_error: bool) -> str:
    """What the counter keeps of a result: ``result_key``'s digest."""
    return _digest(result_key(content, is_error=is_error))
