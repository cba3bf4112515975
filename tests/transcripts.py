"""The one builder of Claude Code transcript lines for the tests, and the suite's shared
constants (the /goal condition, the fixtures folder).

Lines are shaped like those the real Claude Code 2.1.328 wrote in
``tests/fixtures/claude-code-2.1.328/``: compact JSON (orjson), the usual envelope
(``parentUuid``, ``isSidechain``, ``uuid``, ``timestamp``, ``sessionId``, ``version``...),
one assistant line per content block sharing ``message.id`` and ``requestId``, the reply's
``usage`` and final ``stop_reason`` written on every line of it (a thinking line before
its text line too), Stop-hook re-prompts as isMeta user lines followed by a
``goal_status`` or ``hook_blocking_error`` attachment and a ``system/stop_hook_summary``
line, tool results as user lines with ``tool_result`` blocks, and bookkeeping lines
(snapshots, api-request records, progress...) a reader must skip.

``Transcript`` writes a session's lines into ``lines`` and returns the uuid of the line a
call is named after. By default its uuids and timestamps are deterministic (one second
apart from ``START``); ``start=None`` stamps every line with the current time instead (a
watcher ignores a loop it finds in old history). ``Lines`` is a live ``Transcript`` for
the watcher tests whose calls return the lines they made, to append to a file one write
at a time.
"""

from __future__ import annotations

import os
import re
import uuid as uuidlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from loop_killer.engine.judge import Detection
from loop_killer.engine.reader import Step

if TYPE_CHECKING:
    from loop_killer.scan.records import FileResult

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIXTURES_328 = FIXTURES / "claude-code-2.1.328"  # the scenarios recorded from the real 2.1.328
CONDITION = "all tests in test/auth pass"
NOT_MET = "The condition is not met yet."
SAME = "I am still working on getting the auth tests to pass."
SESSION = "a26ba613-efc5-4fa5-919a-77fca5250a20"
CWD = "/home/dev/proj"
VERSION = "2.1.328"
MODEL = "claude-sonnet-4-5-20250929"
START = datetime(2026, 3, 1, 9, 0, 0, tzinfo=timezone.utc)
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
BASH = ("Bash", {"command": "npm test"})  # a tool call, for Transcript.reply(tools=[...])
_AUTO = object()


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


def stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Transcript:
    """Appends one session's lines; ``data()`` is the file's bytes.

    ``stop_reasons=False`` writes ``stop_reason: null`` on every assistant line (as some
    versions do); ``sidechain=True`` marks every line ``isSidechain: true`` (a subagent).
    Uuids and message ids start with ``uuid_prefix`` (8 hex digits; the session id's first
    8 unless told): two builders of one session need two prefixes. ``start=None``: every
    line stamped with the current time, ``age`` seconds ago.
    """

    def __init__(self, session_id: str = SESSION, *, cwd: str = CWD, sidechain: bool = False,
                 stop_reasons: bool = True, model: str = MODEL,
                 start: datetime | None = START, age: float = 0.0,
                 uuid_prefix: str | None = None) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.sidechain = sidechain
        self.stop_reasons = stop_reasons
        self.model = model
        self.lines: list[bytes] = []
        self.answer_uuids: list[str] = []  # the last line of each reply without a tool call
        self.tool_use_ids: list[str] = []  # of the last reply
        self._start = start
        self._age = age
        self._prefix = uuid_prefix or session_id[:8]
        self._count = 0
        self._messages = 0
        self._parent: str | None = None

    # -- plumbing -------------------------------------------------------------------------

    @property
    def project(self) -> str:
        """The project folder Claude Code names after ``cwd``."""
        return re.sub(r"[^A-Za-z0-9]", "-", self.cwd)

    def path_in(self, root: Path) -> Path:
        return root / self.project / f"{self.session_id}.jsonl"

    def _next(self) -> tuple[str, str]:
        self._count += 1
        uuid = f"{self._prefix}-0000-4000-8000-{self._count:012x}"
        if self._start is None:
            return uuid, stamp(datetime.now(timezone.utc) - timedelta(seconds=self._age))
        return uuid, stamp(self._start + timedelta(seconds=self._count))

    def entry(self, kind: str, body: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """Append one line of type ``kind`` (body fields first, envelope around them)."""
        uuid, timestamp = self._next()
        entry: dict[str, Any] = {"parentUuid": self._parent, "isSidechain": self.sidechain}
        entry["type"] = kind
        entry.update(body)
        entry.update(extra)
        entry.setdefault("uuid", uuid)
        entry.setdefault("timestamp", timestamp)
        entry.update({"userType": "external", "entrypoint": "cli", "cwd": self.cwd,
                      "sessionId": self.session_id, "version": VERSION,
                      "gitBranch": "master"})
        self.lines.append(orjson.dumps(entry))
        self._parent = entry["uuid"]
        return entry

    def raw(self, line: bytes) -> None:
        """Append a line as is (garbage, a hand-made shape...)."""
        self.lines.append(line)

    def data(self) -> bytes:
        return data(self.lines)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.data())
        return path

    # -- the person and the hooks ---------------------------------------------------------

    def user(self, content: str | list[dict[str, Any]], **extra: Any) -> str:
        return str(self.entry("user", {"message": {"role": "user", "content": content}},
                              **extra)["uuid"])

    def prompt(self, text: str = "Fix the failing tests in test/auth.") -> str:
        """A person's typed prompt."""
        return self.user(text, origin={"kind": "human"}, promptSource="typed")

    def slash_command(self, name: str, args: str = "") -> str:
        return self.user(
            f"<command-name>/{name}</command-name>\n            <command-message>{name}"
            f"</command-message>\n            <command-args>{args}</command-args>"
        )

    def goal(self, condition: str = CONDITION) -> str:
        """``/goal <condition>`` as 2.1.328 writes it; returns the kickoff's uuid."""
        self.slash_command("goal", condition)
        self.system("local_command", content=f"Goal set: {condition}")
        self.goal_status(met=False, sentinel=True, condition=condition)
        return self.user(KICKOFF.format(condition=condition), isMeta=True)

    def reprompt(self, text: str | None = None, *, condition: str | None = CONDITION,
                 blocks: bool = False) -> str:
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
        self.summary(prevented=False)
        return uuid

    def summary(self, *, prevented: bool) -> str:
        """The ``stop_hook_summary`` line a Stop hook run ends with."""
        return self.system("stop_hook_summary", hookCount=1,
                           hookInfos=[{"command": CONDITION}], hookErrors=[],
                           preventedContinuation=prevented, stopReason="", hasOutput=True,
                           level="suggestion")

    def tool_result(self, tool_use_id: str, output: str = "ok", *, is_error: bool = False
                    ) -> str:
        return self.results((tool_use_id, output, is_error))

    def results(self, *results: tuple[str, Any] | tuple[str, Any, bool]) -> str:
        """Tool results in one line: (tool_use_id, content[, is_error])."""
        blocks = [{"tool_use_id": result[0], "type": "tool_result", "content": result[1],
                   "is_error": bool(result[2]) if len(result) > 2 else False}
                  for result in results]
        return self.user(blocks, toolUseResult={"stdout": str(results[0][1]), "stderr": ""})

    def interrupt(self, *, for_tool_use: bool = False) -> str:
        text = "[Request interrupted by user" + (" for tool use]" if for_tool_use else "]")
        return self.user([{"type": "text", "text": text}])

    def nudge(self) -> str:
        """Claude Code's own line after a reply with no visible output, before it asks the
        model again (2.1.250 to 2.1.332)."""
        return self.user("[Your previous response had no visible output. Please continue and "
                         "produce a user-visible response.]", isMeta=True, turnCompanion=True)

    def reprompts_of_one_stop(self, *reasons: str) -> list[str]:
        """Two or more Stop hooks blocked one Stop: their re-prompts, then one summary."""
        uuids = [self.user(f"Stop hook feedback:\n{reason}", isMeta=True) for reason in reasons]
        self.summary(prevented=False)
        return uuids

    def compact(self, summary: str = "This session is being continued from a previous "
                "conversation that ran out of context.") -> str:
        """A compaction: the boundary line, then the summary user line."""
        self.system("compact_boundary", content="Conversation compacted",
                    compactMetadata={"trigger": "auto", "preTokens": 160000})
        return self.user(summary, isCompactSummary=True, isVisibleInTranscriptOnly=True)

    def goal_status(self, *, met: bool, condition: str = CONDITION, sentinel: bool = False,
                    reason: str | None = None) -> str:
        fields: dict[str, Any] = {"met": met}
        if sentinel:
            fields["sentinel"] = True
        fields["condition"] = condition
        if reason is not None:
            fields["reason"] = reason
        return self.attachment("goal_status", **fields)

    def attachment(self, kind: str, **fields: Any) -> str:
        return str(self.entry("attachment", {"attachment": {"type": kind, **fields}})["uuid"])

    def system(self, subtype: str, **fields: Any) -> str:
        return str(self.entry("system", {"subtype": subtype, **fields})["uuid"])

    # -- the model ------------------------------------------------------------------------

    def reply(self, text: str | None = "", use: Use = Use(10, 10), *,
              thinking: str | None = None, tools: Sequence[tuple[str, Any]] = (),
              stop_reason: Any = _AUTO, message_id: str | None = None,
              growing: bool = False) -> str:
        """One API reply: a line per block (thinking, text, a tool_use per (name, input) in
        ``tools``: their ids in ``tool_use_ids``), one message id, ``use`` on every line
        (``growing``: earlier lines carry smaller counts, as older versions wrote them while
        streaming). Returns the uuid of the reply's last line."""
        self._messages += 1
        message_id = message_id or f"msg_{self._prefix}_{self._messages:06d}"
        if stop_reason is _AUTO:
            stop_reason = ("tool_use" if tools else "end_turn") if self.stop_reasons else None
        blocks: list[dict[str, Any]] = []
        if thinking is not None:
            blocks.append({"type": "thinking", "thinking": thinking, "signature": "mocksig_0"})
        if text is not None:
            blocks.append({"type": "text", "text": text})
        self.tool_use_ids = [f"toolu_{message_id}_{index}" for index in range(len(tools))]
        blocks += [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}
                   for tool_id, (name, tool_input) in zip(self.tool_use_ids, tools, strict=True)]
        uuid = ""
        for index, block in enumerate(blocks):
            usage = use
            if growing and index < len(blocks) - 1:
                usage = Use(use.input, 1, use.cache_read, use.cache_creation)
            uuid = self.assistant_line([block], message_id, stop_reason, usage,
                                       apiBlockIndex=index, requestId=f"req_{message_id}")
        if not tools:
            self.answer_uuids.append(uuid)
        return uuid

    @property
    def last_tool_use_id(self) -> str:
        return self.tool_use_ids[-1]

    def assistant_line(self, content: Any, message_id: str, stop_reason: Any = "end_turn",
                       use: Use = Use(10, 10), *, model: str | None = None,
                       **extra: Any) -> str:
        message = {"id": message_id, "type": "message", "role": "assistant",
                   "model": model or self.model, "content": content, "stop_reason": stop_reason,
                   "stop_sequence": None, "usage": use.json()}
        return str(self.entry("assistant", {"message": message}, **extra)["uuid"])

    def run(self, command: str, output: str = "ok", use: Use = Use(10, 10), *,
            before: str | None = None, is_error: bool = False) -> str:
        """A reply running ``command`` in Bash (after the text ``before``, if any), then
        its result. Returns the result's uuid."""
        self.reply(before, use, tools=[("Bash", {"command": command})])
        return self.tool_result(self.last_tool_use_id, output, is_error=is_error)

    def tool_round(self, before: str | None, output: str, after: str) -> str:
        """Text + a Bash call, its result, then the closing text (an answer with work)."""
        self.run("npm test", output, before=before)
        return self.reply(after)

    def api_error(self, text: str = API_ERROR_TEXT, *, flagged: bool = True) -> str:
        """The synthetic reply Claude Code writes when the API keeps failing."""
        extra = {"isApiErrorMessage": True, "error": "server_error"} if flagged else {}
        for attempt in (1, 2):
            self.system("api_error", level="error", retryAttempt=attempt, maxRetries=10)
        return self.assistant_line([{"type": "text", "text": text}],
                                   f"synthetic-{self._count}", "stop_sequence",
                                   model="<synthetic>", **extra)

    # -- bookkeeping a reader must skip ---------------------------------------------------

    def api_request(self) -> None:
        _, timestamp = self._next()
        self.lines.append(orjson.dumps({
            "type": "api-request", "sessionId": self.session_id, "id": f"req-{self._count}",
            "timestamp": timestamp, "version": VERSION, "params": {"max_tokens": 128000}}))

    def noise(self, size: int = 2000) -> None:
        """Bookkeeping lines that carry no conversation (``size``: their filler's)."""
        filler = "x" * size
        self.lines.append(orjson.dumps({"type": "queue-operation", "operation": "enqueue",
                                        "timestamp": stamp(START),
                                        "sessionId": self.session_id}))
        self.attachment("prompt_snapshot", systemPrompt=["You are an agent."])
        self.attachment("skill_listing", content=filler)
        self.api_request()
        self.lines.append(orjson.dumps({"type": "api-request-shape", "sessionId": self.session_id,
                                        "shape": {"messages": [{"role": "user",
                                                                "type": "user"}] * 3},
                                        "blob": filler}))
        self.lines.append(orjson.dumps({"type": "progress", "data": {"type": "bash_progress",
                                                                     "output": filler},
                                        "sessionId": self.session_id}))
        self.lines.append(orjson.dumps({"type": "file-history-snapshot", "messageId": "m",
                                        "snapshot": {"trackedFileBackups": {"a.py": filler}}}))
        self.lines.append(orjson.dumps({"type": "last-prompt", "lastPrompt": "x",
                                        "sessionId": self.session_id}))
        self.lines.append(orjson.dumps({"type": "some-future-type", "x": [1, 2, 3]}))

    def cost_state(self, usd: float) -> None:
        self.lines.append(orjson.dumps({
            "type": "cost-state", "sessionId": self.session_id, "totalCostUSD": usd,
            "modelUsage": {self.model: {"inputTokens": 1, "outputTokens": 1, "costUSD": usd}},
            "hasUnknownModelCost": False}))

    # -- whole scenarios ------------------------------------------------------------------

    def loop(self, texts: list[str], **reprompt: Any) -> list[str]:
        """One re-prompt and one plain answer per text; returns the answers' uuids."""
        uuids = []
        for text in texts:
            self.reprompt(**reprompt)
            uuids.append(self.reply(text))
        return uuids


class Lines:
    """A live session for the watcher tests: a ``Transcript`` stamped with the current time
    (``age`` seconds ago), its ids drawn at random (two builders of one session never
    collide), each call returning the lines it made."""

    def __init__(self, session_id: str | None = None, cwd: str = CWD, *,
                 sidechain: bool = False, age: float = 0.0) -> None:
        self.transcript = Transcript(session_id or str(uuidlib.uuid4()), cwd=cwd,
                                     sidechain=sidechain, start=None, age=age,
                                     uuid_prefix=uuidlib.uuid4().hex[:8])
        self.session_id = self.transcript.session_id
        self.project = self.transcript.project
        self.answer_uuids = self.transcript.answer_uuids
        self.path_in = self.transcript.path_in

    def _made(self, build: Callable[[Transcript], object]) -> list[bytes]:
        before = len(self.transcript.lines)
        build(self.transcript)
        return self.transcript.lines[before:]

    def prompt(self, text: str = "Fix the failing tests in test/auth.") -> list[bytes]:
        return self._made(lambda t: t.prompt(text))

    def goal(self) -> list[bytes]:
        return self._made(Transcript.goal)

    def reprompt(self) -> list[bytes]:
        """The three lines a blocking /goal evaluation writes."""
        return self._made(Transcript.reprompt)

    def cleared(self) -> list[bytes]:
        """The goal_status sentinel of a goal met (or cleared)."""
        return self._made(lambda t: t.goal_status(met=True, sentinel=True))

    def summary(self, *, prevented: bool) -> bytes:
        (line,) = self._made(lambda t: t.summary(prevented=prevented))
        return line

    def api_request(self) -> bytes:
        (line,) = self._made(Transcript.api_request)
        return line

    def answer(self, text: str = SAME, *, tool: bool = False, output: str = "1 failing"
               ) -> list[bytes]:
        """One reply after its api-request line; with ``tool``, a Bash call, its result and
        a closing text."""
        def build(t: Transcript) -> None:
            t.api_request()
            if tool:
                t.run("npm test", output)
            t.reply(text)
        return self._made(build)

    def loop(self, replies: int, text: str = SAME) -> list[bytes]:
        """``replies`` re-prompts, each answered with ``text``."""
        return [line for _ in range(replies) for line in self.reprompt() + self.answer(text)]

    def goal_loop(self, replies: int, text: str = SAME) -> list[bytes]:
        """/goal, the answer to its kickoff, then ``replies`` re-prompted answers."""
        return self.prompt() + self.answer("Working on it.", tool=True) + self.goal() + (
            self.answer(text) + self.loop(replies, text))


def line(**fields: Any) -> bytes:
    """One hand-made line (for shapes the builder does not write)."""
    return orjson.dumps(fields)


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


def fixture_transcript(scenario: str) -> Path:
    """The main transcript of a scenario recorded from the real 2.1.328 (the first by name,
    where it has two sessions)."""
    found = sorted((FIXTURES_328 / scenario / "transcripts").glob("*/*.jsonl"))
    assert found, f"no transcript for {scenario}"
    return found[0]


def fixture_lines(scenario: str) -> list[bytes]:
    """The real transcript of a recorded scenario, timestamps moved to now."""
    now = stamp(datetime.now(timezone.utc)).encode()
    return [re.sub(rb'"timestamp":"[^"]*"', b'"timestamp":"' + now + b'"', line)
            for line in fixture_transcript(scenario).read_bytes().splitlines()
            if line.strip()]


def fixture_session(scenario: str) -> tuple[str, str]:
    """(project folder, session id) of a recorded scenario."""
    path = fixture_transcript(scenario)
    return path.parent.name, path.stem


def found(steps: list[Step]) -> list[Detection]:
    """The detections among a reader's steps."""
    return [d for step in steps for d in step.detections]


def scan_bytes(data: bytes, *, chunk_size: int = 1 << 20, path: str = "",
               project: str = "", session_id: str = "", subagent: bool = False,
               prefilter: bool = True) -> FileResult:
    """Scan a whole transcript held in memory, fed in chunks of ``chunk_size`` bytes."""
    from loop_killer.scan.transcript import TranscriptScan

    scan = TranscriptScan(path=path, project=project, session_id=session_id,
                          subagent=subagent, prefilter=prefilter)
    for offset in range(0, len(data), max(1, chunk_size)):
        scan.feed(data[offset: offset + chunk_size])
    return scan.finish()
