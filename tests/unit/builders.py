"""Tiny helpers that write realistic Claude Code transcript lines, as bytes.

Lines are shaped like those the real Claude Code 2.1.328 wrote in
``tests/fixtures/claude-code-2.1.328/``: compact JSON (orjson), the usual envelope
(``parentUuid``, ``isSidechain: false``, ``uuid``, ``timestamp``, ``sessionId``,
``version``...), one assistant line per content block sharing ``message.id``, the final
``stop_reason`` written on every line of a reply (including a thinking line before its
text line), Stop-hook re-prompts as isMeta user lines followed by a ``goal_status`` or
``hook_blocking_error`` attachment and a ``system/stop_hook_summary`` line.

Uuids and timestamps are deterministic so tests can name the lines they expect.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
from loop_killer.engine.reader import Step
from loop_killer.engine.run import Detection

SESSION = "a26ba613-efc5-4fa5-919a-77fca5250a20"
CWD = "/home/dev/proj"
VERSION = "2.1.328"
CONDITION = "all tests in test/auth pass"
NOT_MET = "The condition is not met yet."
KICKOFF = (
    'A session-scoped Stop hook is now active with condition: "{condition}". Briefly '
    "acknowledge the goal, then immediately start (or continue) working toward it \u2014 "
    "treat the condition itself as your directive and do not pause to ask the user what to "
    "do. The hook will block stopping until the condition holds."
)
API_ERROR_TEXT = (
    "API Error: 529 Overloaded. This is a server-side issue, usually temporary \u2014 try "
    "again in a moment."
)
_START = datetime(2026, 11, 29, 23, 42, 25, tzinfo=timezone.utc)
_AUTO = object()


def dumps(entry: Any) -> bytes:
    """Compact JSON, as Claude Code writes it."""
    return orjson.dumps(entry)


class Transcript:
    """Appends transcript lines; ``data()`` gives the file's bytes.

    ``stop_reasons=False`` writes ``stop_reason: null`` on every assistant line (as some
    versions do). ``sidechain=True`` marks every line ``isSidechain: true`` (a subagent).
    """

    def __init__(
        self,
        session_id: str = SESSION,
        *,
        stop_reasons: bool = True,
        sidechain: bool = False,
        uuid_prefix: str = "0000",
    ) -> None:
        self.session_id = session_id
        self.stop_reasons = stop_reasons
        self.sidechain = sidechain
        self.lines: list[bytes] = []
        self._prefix = uuid_prefix
        self._count = 0
        self._messages = 0
        self._parent: str | None = None
        self.last_tool_use_id = ""

    # -- plumbing ---------------------------------------------------------------------

    def _next(self) -> tuple[str, str]:
        self._count += 1
        uuid = f"{self._prefix}0000-0000-4000-8000-{self._count:012x}"
        when = _START + timedelta(milliseconds=10 * self._count)
        return uuid, when.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def entry(self, kind: str, body: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """Append one line of type ``kind`` (body fields first, envelope around them)."""
        uuid, timestamp = self._next()
        entry: dict[str, Any] = {"parentUuid": self._parent, "isSidechain": self.sidechain}
        entry["type"] = kind
        entry.update(body)
        entry.update(extra)
        entry.setdefault("uuid", uuid)
        entry.setdefault("timestamp", timestamp)
        entry.update(
            {
                "userType": "external",
                "entrypoint": "sdk-cli",
                "cwd": CWD,
                "sessionId": self.session_id,
                "version": VERSION,
                "gitBranch": "master",
            }
        )
        self.lines.append(dumps(entry))
        self._parent = entry["uuid"]
        return entry

    def raw(self, line: bytes) -> None:
        """Append a line as is (garbage, a hand-made shape...)."""
        self.lines.append(line)

    def data(self) -> bytes:
        return b"".join(line + b"\n" for line in self.lines)

    # -- user side --------------------------------------------------------------------

    def user(self, content: str | list[dict[str, Any]], **extra: Any) -> str:
        return self.entry("user", {"message": {"role": "user", "content": content}}, **extra)[
            "uuid"
        ]

    def prompt(self, text: str = "Fix the failing tests in test/auth.") -> str:
        """A person's typed prompt."""
        return self.user(text, origin={"kind": "human"}, promptSource="typed")

    def slash_command(self, name: str, args: str = "") -> str:
        return self.user(
            f"<command-name>/{name}</command-name>\n            <command-message>{name}"
            f"</command-message>\n            <command-args>{args}</command-args>"
        )

    def goal(self, condition: str = CONDITION) -> str:
        """``/goal <condition>`` as headless 2.1.328 writes it; returns the kickoff's uuid."""
        self.slash_command("goal", condition)
        self.system("local_command", content=f"Goal set: {condition}")
        self.goal_status(met=False, sentinel=True, condition=condition)
        return self.user(KICKOFF.format(condition=condition), isMeta=True)

    def reprompt(
        self,
        text: str | None = None,
        *,
        condition: str | None = CONDITION,
        blocks: bool = False,
    ) -> str:
        """A Stop hook blocked: the re-prompt line, its attachment and the summary line.

        ``condition`` set: a /goal evaluation (``goal_status`` attachment); None: a command
        hook (``hook_blocking_error`` attachment). ``blocks`` writes the content as a list
        of text blocks instead of a string.
        """
        if text is None:
            reason = f"[{condition}]: {NOT_MET}" if condition else "Keep working."
            text = f"Stop hook feedback:\n{reason}"
        content: Any = [{"type": "text", "text": text}] if blocks else text
        uuid = self.user(content, isMeta=True)
        if condition:
            self.goal_status(met=False, condition=condition, reason=NOT_MET)
        else:
            self.attachment("hook_blocking_error", blockingError=text, hookName="Stop")
        self.system("stop_hook_summary", hookCount=1, preventedContinuation=False)
        return uuid

    def tool_result(self, tool_use_id: str, output: str = "ok", *, is_error: bool = False) -> str:
        block = {"tool_use_id": tool_use_id, "type": "tool_result", "content": output,
                 "is_error": is_error}
        return self.user([block], toolUseResult={"stdout": output, "stderr": ""})

    def interrupt(self, *, for_tool_use: bool = False) -> str:
        text = "[Request interrupted by user" + (" for tool use]" if for_tool_use else "]")
        return self.user([{"type": "text", "text": text}])

    def compact(self, summary: str = "This session is being continued from a previous "
                "conversation that ran out of context.") -> str:
        """A compaction: the boundary line, then the summary user line."""
        self.system("compact_boundary", content="Conversation compacted",
                    compactMetadata={"trigger": "auto", "preTokens": 160000})
        return self.user(summary, isCompactSummary=True, isVisibleInTranscriptOnly=True)

    # -- assistant side ---------------------------------------------------------------

    def reply(
        self,
        text: str | None = "",
        *,
        thinking: str | None = None,
        tool: str | None = None,
        stop_reason: Any = _AUTO,
        message_id: str | None = None,
    ) -> str:
        """One API reply, one line per block (thinking, text, tool_use), same message.id.

        Returns the uuid of the reply's last line. With ``tool`` the last line is a
        ``tool_use`` block whose id is ``toolu_<message id>``.
        """
        self._messages += 1
        message_id = message_id or f"msg_{self._prefix}{self._messages:020x}"
        if stop_reason is _AUTO:
            stop_reason = ("tool_use" if tool else "end_turn") if self.stop_reasons else None
        blocks: list[dict[str, Any]] = []
        if thinking is not None:
            blocks.append({"type": "thinking", "thinking": thinking, "signature": "mocksig_0"})
        if text is not None:
            blocks.append({"type": "text", "text": text})
        if tool:
            self.last_tool_use_id = f"toolu_{message_id}"
            blocks.append({"type": "tool_use", "id": self.last_tool_use_id, "name": tool,
                           "input": {"command": "npm test"}})
        uuid = ""
        for index, block in enumerate(blocks):
            uuid = self.assistant_line([block], message_id, stop_reason, apiBlockIndex=index)
        return uuid

    def assistant_line(
        self, content: Any, message_id: str, stop_reason: Any = "end_turn", **extra: Any
    ) -> str:
        message = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-5-5",
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }
        return self.entry("assistant", {"message": message}, **extra)["uuid"]

    def tool_round(self, before: str, output: str, after: str, tool: str = "Bash") -> str:
        """Text + tool call, the tool's result, then the closing text (an answer with work)."""
        self.reply(before, tool=tool)
        self.tool_result(self.last_tool_use_id, output)
        return self.reply(after)

    def api_error(self, text: str = API_ERROR_TEXT, *, flagged: bool = True) -> str:
        """The synthetic reply Claude Code writes when the API keeps failing."""
        extra = {"isApiErrorMessage": True, "error": "server_error"} if flagged else {}
        for attempt in (1, 2):
            self.system("api_error", level="error", retryAttempt=attempt, maxRetries=10)
        return self.assistant_line(
            [{"type": "text", "text": text}], f"synthetic-{self._count}", "stop_sequence",
            **extra,
        )

    # -- everything else --------------------------------------------------------------

    def goal_status(self, *, met: bool, condition: str = CONDITION, sentinel: bool = False,
                    reason: str | None = None) -> str:
        attachment: dict[str, Any] = {"type": "goal_status", "met": met}
        if sentinel:
            attachment["sentinel"] = True
        attachment["condition"] = condition
        if reason is not None:
            attachment["reason"] = reason
        return self.entry("attachment", {"attachment": attachment})["uuid"]

    def attachment(self, kind: str, **fields: Any) -> str:
        return self.entry("attachment", {"attachment": {"type": kind, **fields}})["uuid"]

    def system(self, subtype: str, **fields: Any) -> str:
        return self.entry("system", {"subtype": subtype, **fields})["uuid"]

    def noise(self) -> None:
        """Bookkeeping lines of 2.1.328 that carry no conversation."""
        self.lines.append(dumps({"type": "queue-operation", "operation": "enqueue",
                                 "timestamp": "2026-11-29T23:42:25.000Z",
                                 "sessionId": self.session_id}))
        self.attachment("prompt_snapshot", systemPrompt=["You are an agent."])
        self.lines.append(dumps({"type": "api-request", "sessionId": self.session_id,
                                 "id": f"req-{self._count}", "params": {"max_tokens": 128000}}))
        self.lines.append(dumps({"type": "last-prompt", "lastPrompt": "x",
                                 "sessionId": self.session_id}))
        self.lines.append(dumps({"type": "some-future-type", "x": [1, 2, 3]}))

    # -- whole scenarios --------------------------------------------------------------

    def loop(self, texts: list[str], **reprompt: Any) -> list[str]:
        """One re-prompt and one plain answer per text; returns the answers' uuids."""
        uuids = []
        for text in texts:
            self.reprompt(**reprompt)
            uuids.append(self.reply(text))
        return uuids


def line(**fields: Any) -> bytes:
    """One hand-made line (for shapes the builder does not write)."""
    return dumps(fields)


def found(steps: list[Step]) -> list[Detection]:
    """The detections among a reader's steps."""
    return [d for step in steps for d in step.detections]
