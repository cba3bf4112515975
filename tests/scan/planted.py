"""Planted histories: transcript lines shaped like Claude Code's, with chosen token usage.

Compact JSON, the usual envelope, one assistant line per content block sharing one
``message.id`` with the reply's ``usage`` repeated on each line (as 2.1.x writes them),
Stop-hook re-prompts as isMeta user lines followed by a ``goal_status`` attachment and a
``system/stop_hook_summary`` line, tool results as user lines with ``tool_result`` blocks,
and bookkeeping lines (attachments, api-request records, progress, snapshots) that a scan
must skip.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson

CONDITION = "all tests in test/auth pass"
KICKOFF = (f'A session-scoped Stop hook is now active with condition: "{CONDITION}". '
           "Briefly acknowledge the goal, then immediately start working toward it.")
START = datetime(2026, 3, 1, 9, 0, 0, tzinfo=timezone.utc)
MODEL = "claude-sonnet-4-5-20250929"


@dataclass(frozen=True)
class Use:
    """A reply's usage: input, output, cache read, cache creation."""

    input: int
    output: int
    cache_read: int = 0
    cache_creation: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_creation

    def json(self) -> dict[str, Any]:
        return {"input_tokens": self.input, "output_tokens": self.output,
                "cache_read_input_tokens": self.cache_read,
                "cache_creation_input_tokens": self.cache_creation,
                "service_tier": "standard"}


def total(uses: list[Use]) -> int:
    return sum(use.total for use in uses)


class Session:
    """Appends one session's lines; ``data()`` is the file's bytes."""

    def __init__(self, session_id: str = "11111111-2222-4333-8444-555555555555", *,
                 cwd: str = "/home/dev/proj", sidechain: bool = False, model: str = MODEL,
                 start: datetime = START) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.sidechain = sidechain
        self.model = model
        self.lines: list[bytes] = []
        self._n = 0
        self._messages = 0
        self._parent: str | None = None
        self._start = start

    # -- plumbing -------------------------------------------------------------------------

    def _next(self) -> tuple[str, str]:
        self._n += 1
        uuid = f"{self.session_id[:8]}-0000-4000-8000-{self._n:012x}"
        when = self._start + timedelta(seconds=self._n)
        return uuid, when.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def at(self, index: int = -1) -> str:
        """The timestamp of line ``index`` (as written)."""
        return str(orjson.loads(self.lines[index])["timestamp"])

    def entry(self, kind: str, body: dict[str, Any], **extra: Any) -> str:
        uuid, timestamp = self._next()
        entry: dict[str, Any] = {"parentUuid": self._parent, "isSidechain": self.sidechain,
                                 "userType": "external", "cwd": self.cwd,
                                 "sessionId": self.session_id, "version": "2.1.332",
                                 "gitBranch": "main", "type": kind}
        entry.update(body)
        entry.update(extra)
        entry["uuid"] = uuid
        entry["timestamp"] = timestamp
        self.lines.append(orjson.dumps(entry))
        self._parent = uuid
        return uuid

    def raw(self, line: bytes) -> None:
        self.lines.append(line)

    def data(self) -> bytes:
        return b"".join(line + b"\n" for line in self.lines)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.data())
        return path

    # -- the person and the hooks ---------------------------------------------------------

    def user(self, content: Any, **extra: Any) -> str:
        return self.entry("user", {"message": {"role": "user", "content": content}}, **extra)

    def prompt(self, text: str = "Fix the failing tests in test/auth.") -> str:
        return self.user(text)

    def goal(self) -> str:
        """``/goal`` set: the goal_status sentinel and the kickoff (a meta turn start)."""
        self.goal_status(met=False, sentinel=True)
        return self.user(KICKOFF, isMeta=True)

    def reprompt(self) -> str:
        uuid = self.user(f"Stop hook feedback:\n[{CONDITION}]: The condition is not met yet.",
                         isMeta=True)
        self.goal_status(met=False, reason="The condition is not met yet.")
        self.entry("system", {"subtype": "stop_hook_summary", "hookCount": 1,
                              "preventedContinuation": False})
        return uuid

    def goal_status(self, *, met: bool, sentinel: bool = False, reason: str = "") -> str:
        attachment: dict[str, Any] = {"type": "goal_status", "met": met, "condition": CONDITION}
        if sentinel:
            attachment["sentinel"] = True
        if reason:
            attachment["reason"] = reason
        return self.entry("attachment", {"attachment": attachment})

    # -- the model ------------------------------------------------------------------------

    def reply(self, text: str | None, use: Use, *, thinking: str | None = None,
              tools: list[tuple[str, Any]] | None = None, message_id: str | None = None,
              growing: bool = False) -> list[str]:
        """One API reply: a line per block (thinking, text, tool_use...), one message id,
        ``use`` repeated on every line (``growing``: earlier lines carry smaller counts,
        as older versions wrote them while streaming). Returns the tool_use ids."""
        self._messages += 1
        message_id = message_id or f"msg_{self.session_id[:8]}_{self._messages:06d}"
        blocks: list[dict[str, Any]] = []
        if thinking is not None:
            blocks.append({"type": "thinking", "thinking": thinking, "signature": "sig"})
        if text is not None:
            blocks.append({"type": "text", "text": text})
        ids = []
        for index, (name, tool_input) in enumerate(tools or []):
            tool_id = f"toolu_{message_id}_{index}"
            ids.append(tool_id)
            blocks.append({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
        stop = "tool_use" if tools else "end_turn"
        for index, block in enumerate(blocks):
            usage = use
            if growing and index < len(blocks) - 1:
                usage = Use(use.input, 1, use.cache_read, use.cache_creation)
            message = {"id": message_id, "type": "message", "role": "assistant",
                       "model": self.model, "content": [block], "stop_reason": stop,
                       "stop_sequence": None, "usage": usage.json()}
            self.entry("assistant", {"message": message}, requestId=f"req_{message_id}")
        return ids

    def results(self, *results: tuple[str, Any] | tuple[str, Any, bool]) -> str:
        """Tool results: (tool_use_id, content[, is_error])."""
        blocks = []
        for result in results:
            tool_id, content = result[0], result[1]
            is_error = bool(result[2]) if len(result) > 2 else False
            blocks.append({"tool_use_id": tool_id, "type": "tool_result", "content": content,
                           "is_error": is_error})
        return self.user(blocks, toolUseResult={"stdout": str(results[0][1]), "stderr": ""})

    def tool_round(self, command: str, output: str, use: Use, *, is_error: bool = False
                   ) -> str:
        """One reply that runs ``command`` in Bash, then its result."""
        (tool_id,) = self.reply(None, use, tools=[("Bash", {"command": command,
                                                             "description": "run"})])
        return self.results((tool_id, output, is_error))

    # -- bookkeeping a scan must skip -----------------------------------------------------

    def noise(self, size: int = 2000) -> None:
        filler = "x" * size
        self.entry("attachment", {"attachment": {"type": "skill_listing", "content": filler}})
        self.lines.append(orjson.dumps({"type": "api-request-shape", "sessionId": self.session_id,
                                        "shape": {"messages": [{"role": "user",
                                                                "type": "user"}] * 3},
                                        "blob": filler}))
        self.lines.append(orjson.dumps({"type": "progress", "data": {"type": "bash_progress",
                                                                     "output": filler},
                                        "sessionId": self.session_id}))
        self.lines.append(orjson.dumps({"type": "file-history-snapshot", "messageId": "m",
                                        "snapshot": {"trackedFileBackups": {"a.py": filler}}}))

    def cost_state(self, usd: float) -> None:
        self.lines.append(orjson.dumps({
            "type": "cost-state", "sessionId": self.session_id, "totalCostUSD": usd,
            "modelUsage": {self.model: {"inputTokens": 1, "outputTokens": 1, "costUSD": usd}},
            "hasUnknownModelCost": False}))
