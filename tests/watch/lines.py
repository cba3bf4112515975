"""Transcript lines shaped like those Claude Code 2.1.328 writes, for live tests.

Unlike the unit builders, every line is stamped with the current time (a loop the
watcher finds in a file that appeared with old history does not fire), and each method
returns the lines it made so a test can append them to a file one write at a time.
"""

from __future__ import annotations

import itertools
import os
import re
import time
import uuid as uuidlib
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

VERSION = "2.1.328"
CONDITION = "all tests in test/auth pass"
NOT_MET = "The condition is not met yet."
SAME = "I am still working on getting the auth tests to pass."
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude-code-2.1.328"


def now_stamp(offset: float = 0.0) -> str:
    moment = datetime.fromtimestamp(time.time() + offset, tz=timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Lines:
    """Makes the lines of one session; ``cwd`` decides its project folder."""

    _ids = itertools.count(1)

    def __init__(self, session_id: str | None = None, cwd: str = "/home/dev/proj",
                 *, sidechain: bool = False, age: float = 0.0) -> None:
        self.session_id = session_id or str(uuidlib.uuid4())
        self.cwd = cwd
        self.sidechain = sidechain
        self.age = age  # seconds in the past to stamp the lines with
        self._parent: str | None = None
        self.answer_uuids: list[str] = []

    @property
    def project(self) -> str:
        return re.sub(r"[^A-Za-z0-9]", "-", self.cwd)

    def path_in(self, root: Path) -> Path:
        return root / self.project / f"{self.session_id}.jsonl"

    def entry(self, kind: str, **body: Any) -> bytes:
        uuid = str(uuidlib.uuid4())
        entry: dict[str, Any] = {"parentUuid": self._parent, "isSidechain": self.sidechain,
                                 "type": kind, **body, "uuid": uuid,
                                 "timestamp": now_stamp(-self.age), "userType": "external",
                                 "entrypoint": "cli", "cwd": self.cwd,
                                 "sessionId": self.session_id, "version": VERSION,
                                 "gitBranch": "master"}
        self._parent = uuid
        return orjson.dumps(entry)

    def prompt(self, text: str = "Fix the failing tests in test/auth.") -> list[bytes]:
        return [self.entry("user", message={"role": "user", "content": text},
                           promptId=str(uuidlib.uuid4()))]

    def goal(self, condition: str = CONDITION) -> list[bytes]:
        return [
            self.entry("attachment", attachment={"type": "goal_status", "met": False,
                                                 "sentinel": True, "condition": condition}),
            self.entry("user", message={"role": "user", "content":
                       f"<command-name>/goal</command-name>\n            <command-args>"
                       f"{condition}</command-args>"}),
            self.entry("system", subtype="local_command", content=f"Goal set: {condition}"),
            self.entry("user", isMeta=True, message={"role": "user", "content":
                       f'A session-scoped Stop hook is now active with condition: '
                       f'"{condition}". Briefly acknowledge the goal, then start.'}),
        ]

    def reprompt(self, condition: str = CONDITION) -> list[bytes]:
        """The three lines a blocking /goal evaluation writes."""
        return [
            self.entry("user", isMeta=True, message={"role": "user", "content":
                       f"Stop hook feedback:\n[{condition}]: {NOT_MET}"}),
            self.entry("attachment", attachment={"type": "goal_status", "met": False,
                                                 "condition": condition, "reason": NOT_MET}),
            self.summary(prevented=False),
        ]

    def summary(self, *, prevented: bool) -> bytes:
        return self.entry("system", subtype="stop_hook_summary", hookCount=1,
                          hookInfos=[{"command": CONDITION}], hookErrors=[],
                          preventedContinuation=prevented, stopReason="", hasOutput=True,
                          level="suggestion")

    def api_request(self) -> bytes:
        return orjson.dumps({"type": "api-request", "sessionId": self.session_id,
                             "id": str(uuidlib.uuid4()), "timestamp": now_stamp(),
                             "version": VERSION, "params": {"max_tokens": 128000}})

    def answer(self, text: str = SAME, *, tool: bool = False, output: str = "1 failing"
               ) -> list[bytes]:
        """One reply; with ``tool``, a Bash call, its result and a closing text."""
        lines = [self.api_request()]
        message_id = f"msg_{next(self._ids):024x}"
        if tool:
            tool_id = f"toolu_{message_id}"
            lines.append(self.entry("assistant", message=_message(
                message_id, [{"type": "tool_use", "id": tool_id, "name": "Bash",
                              "input": {"command": "npm test"}}], "tool_use")))
            lines.append(self.entry("user", message={"role": "user", "content": [
                {"tool_use_id": tool_id, "type": "tool_result", "content": output}]},
                toolUseResult={"stdout": output, "stderr": ""}))
            message_id = f"msg_{next(self._ids):024x}"
        lines.append(self.entry("assistant", message=_message(
            message_id, [{"type": "text", "text": text}], "end_turn")))
        self.answer_uuids.append(orjson.loads(lines[-1])["uuid"])
        return lines

    def cleared(self, condition: str = CONDITION) -> list[bytes]:
        return [self.entry("attachment", attachment={"type": "goal_status", "met": True,
                                                     "sentinel": True, "condition": condition})]

    def loop(self, replies: int, text: str = SAME) -> list[bytes]:
        """``replies`` re-prompts, each answered with ``text``."""
        lines: list[bytes] = []
        for _ in range(replies):
            lines += self.reprompt()
            lines += self.answer(text)
        return lines

    def goal_loop(self, replies: int, text: str = SAME) -> list[bytes]:
        """/goal, the answer to its kickoff, then ``replies`` re-prompted answers."""
        return self.prompt() + self.answer("Working on it.", tool=True) + self.goal() + (
            self.answer(text) + self.loop(replies, text))


def _message(message_id: str, content: list[dict[str, Any]], stop_reason: str
             ) -> dict[str, Any]:
    return {"id": message_id, "type": "message", "role": "assistant",
            "model": "claude-opus-5-5", "content": content, "stop_reason": stop_reason,
            "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 10}}


def data(lines: Iterable[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def append(path: Path, lines: Iterable[bytes] | bytes) -> None:
    """Append whole lines (or raw bytes) in one write, as Claude Code does."""
    payload = lines if isinstance(lines, bytes) else data(lines)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, payload)
    finally:
        os.close(fd)


def fixture_lines(scenario: str) -> list[bytes]:
    """The real transcript of a recorded scenario, timestamps moved to now."""
    (path,) = sorted((FIXTURES / scenario / "transcripts").glob("*/*.jsonl"))
    stamp = now_stamp().encode()
    return [re.sub(rb'"timestamp":"[^"]*"', b'"timestamp":"' + stamp + b'"', line)
            for line in path.read_bytes().splitlines() if line.strip()]


def fixture_session(scenario: str) -> tuple[str, str]:
    """(project folder, session id) of a recorded scenario."""
    (path,) = sorted((FIXTURES / scenario / "transcripts").glob("*/*.jsonl"))
    return path.parent.name, path.stem
