"""A scripted stand-in for the Anthropic Messages API, for driving the real Claude Code offline.

One `MockAnthropic` per test: it binds 127.0.0.1 on a free port, answers `POST /v1/messages`
(streaming SSE or plain JSON) from a script, and records every request so a test can assert
how many model calls Claude Code made and what it sent.

Requests are classified by shape, which is how Claude Code 2.1.x tells them apart too:
- "main": the agent loop (a non-empty `tools` list);
- "evaluator": the /goal condition check (no tools; `output_config.format` asks for a JSON
  schema with `ok` and `reason`);
- "other": anything else (title generation, quota probes, ...), answered with a short text.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # Self is in typing only from 3.11; the project supports 3.10
    from typing_extensions import Self

__all__ = [
    "ApiError",
    "EvaluatorPolicy",
    "MockAnthropic",
    "RecordedRequest",
    "Reply",
    "ReplyScript",
    "RequestKind",
    "ToolCall",
    "classify_request",
    "last_user_text",
]

log = logging.getLogger(__name__)

RequestKind = Literal["main", "evaluator", "other"]

DEFAULT_MODEL = "claude-opus-5-5"
NOT_MET_REASON = "The condition is not met yet."
MET_REASON = "The condition is met."


@dataclass(frozen=True)
class ToolCall:
    """One `tool_use` block the scripted model emits, e.g. ToolCall("Bash", {"command": "ls"})."""

    name: str
    input: dict[str, Any]
    id: str | None = None  # generated when None; Claude Code only needs it unique per reply


@dataclass(frozen=True)
class ApiError:
    """An HTTP error answer instead of a message (529 overloaded_error is what the API sends
    when it is busy; Claude Code retries those)."""

    status: int = 529
    type: str = "overloaded_error"
    message: str = "Overloaded"


@dataclass(frozen=True)
class Reply:
    """One scripted model reply.

    Blocks are emitted in the order thinking, text, tool calls (the order the real API uses).
    `thinking=""` still emits a thinking block (the "omitted thinking" shape); None emits none.
    `stop_reason` defaults to "tool_use" when there are tool calls, else "end_turn".
    `delay` waits before any byte is sent; `chunk_delay` streams the text word by word with
    that pause between words (so a test can interrupt mid-stream). With no text, thinking
    nor tool calls the reply is one empty text block, or, `no_content`, no block at all (a
    model with nothing to say: Claude Code writes no line for it).
    """

    text: str | None = None
    thinking: str | None = None
    tool_calls: Sequence[ToolCall] = ()
    error: ApiError | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    stop_reason: str | None = None
    model: str | None = None  # default: the model the request asked for
    no_content: bool = False


@dataclass(frozen=True)
class EvaluatorPolicy:
    """How the /goal evaluator answers. Not met forever by default; `met_on=N` answers met on
    the Nth check (1-based). `decide(check_index, body) -> (ok, reason)` overrides both."""

    met_on: int | None = None
    reason: str = NOT_MET_REASON
    met_reason: str = MET_REASON
    delay: float = 0.0
    decide: Callable[[int, dict[str, Any]], tuple[bool, str]] | None = None

    def verdict(self, check_index: int, body: dict[str, Any]) -> dict[str, Any]:
        if self.decide is not None:
            ok, reason = self.decide(check_index, body)
        else:
            ok = self.met_on is not None and check_index + 1 >= self.met_on
            reason = self.met_reason if ok else self.reason
        return {"ok": ok, "reason": reason}


# A dynamic main script: (index among main requests, 0-based; request body) -> reply.
ReplyScript = Callable[[int, dict[str, Any]], Reply]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the mock saw it. `index` counts within its kind, from 0."""

    time: float
    kind: RequestKind
    index: int
    path: str
    model: str | None
    stream: bool
    last_user_text: str
    body: dict[str, Any]
    answer: dict[str, Any] = field(default_factory=dict)  # what the mock replied (summary)

    def to_json(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "kind": self.kind,
            "index": self.index,
            "path": self.path,
            "model": self.model,
            "stream": self.stream,
            "last_user_text": self.last_user_text,
            "answer": self.answer,
            "body": self.body,
        }


def _content_text(content: Any) -> str:
    """Text of a message's content, which is either a string or a list of blocks."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_result":
                parts.append(_content_text(block.get("content", "")))
    return "\n".join(p for p in parts if p)


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last `role: user` message (text blocks and tool_result contents)."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return _content_text(message.get("content"))
    return ""


def _output_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = (body.get("output_config") or {}).get("format")
    if isinstance(fmt, dict) and isinstance(fmt.get("schema"), dict):
        return fmt["schema"]
    return None


def classify_request(body: dict[str, Any]) -> RequestKind:
    """main: non-empty tools; evaluator: no tools and an {ok, reason} output schema; else other."""
    if body.get("tools"):
        return "main"
    schema = _output_schema(body)
    if schema is not None:
        props = schema.get("properties") or {}
        if "ok" in props and "reason" in props:
            return "evaluator"
    return "other"


def _placeholder_for(schema: dict[str, Any]) -> Any:
    """A minimal value satisfying a JSON schema, so structured 'other' requests parse."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else "string"
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties") or {}
        required = schema.get("required") or list(props)
        return {name: _placeholder_for(props.get(name) or {}) for name in required}
    if kind == "array":
        return []
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return 0
    return "OK"


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def _usage(output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": 10,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def _blocks(reply: Reply) -> list[dict[str, Any]]:
    """The complete content blocks of a reply (used for JSON answers and as the SSE source)."""
    blocks: list[dict[str, Any]] = []
    if reply.thinking is not None:
        blocks.append(
            {"type": "thinking", "thinking": reply.thinking, "signature": "sig-" + uuid.uuid4().hex}
        )
    if reply.text is not None:
        blocks.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id or _new_id("toolu"),
                "name": call.name,
                "input": call.input,
            }
        )
    if not blocks and not reply.no_content:
        blocks.append({"type": "text", "text": ""})
    return blocks


def _stop_reason(reply: Reply) -> str:
    if reply.stop_reason:
        return reply.stop_reason
    return "tool_use" if reply.tool_calls else "end_turn"


def _words(text: str) -> list[str]:
    """Split text into chunks that concatenate back to it exactly (word plus trailing space)."""
    chunks: list[str] = []
    current = ""
    for ch in text:
        current += ch
        if ch == " ":
            chunks.append(current)
            current = ""
    if current:
        chunks.append(current)
    return chunks or [""]


def _sse_events(reply: Reply, model: str) -> Iterator[tuple[str, dict[str, Any], float]]:
    """(event name, data, pause before sending) for one streamed reply, in API order."""
    blocks = _blocks(reply)
    out_tokens = max(1, sum(len(json.dumps(b)) // 4 for b in blocks))
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": _new_id("msg"),
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": _usage(1),
            },
        },
        0.0,
    )
    for index, block in enumerate(blocks):
        kind = block["type"]
        if kind == "text":
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": index,
                 "content_block": {"type": "text", "text": ""}},
                0.0,
            )
            pieces = _words(block["text"]) if reply.chunk_delay > 0 else [block["text"]]
            for n, piece in enumerate(pieces):
                yield (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index,
                     "delta": {"type": "text_delta", "text": piece}},
                    reply.chunk_delay if n else 0.0,
                )
        elif kind == "thinking":
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": index,
                 "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
                0.0,
            )
            if block["thinking"]:
                yield (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index,
                     "delta": {"type": "thinking_delta", "thinking": block["thinking"]}},
                    0.0,
                )
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index,
                 "delta": {"type": "signature_delta", "signature": block["signature"]}},
                0.0,
            )
        elif kind == "tool_use":
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": index,
                 "content_block": {"type": "tool_use", "id": block["id"],
                                   "name": block["name"], "input": {}}},
                0.0,
            )
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index,
                 "delta": {"type": "input_json_delta",
                           "partial_json": json.dumps(block["input"])}},
                0.0,
            )
        yield ("content_block_stop", {"type": "content_block_stop", "index": index}, 0.0)
    yield (
        "message_delta",
        {"type": "message_delta",
         "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
         "usage": {"output_tokens": out_tokens}},
        0.0,
    )
    yield ("message_stop", {"type": "message_stop"}, 0.0)


def _json_message(reply: Reply, model: str) -> dict[str, Any]:
    blocks = _blocks(reply)
    return {
        "id": _new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": _usage(max(1, sum(len(json.dumps(b)) // 4 for b in blocks))),
    }


def _summary(reply: Reply) -> dict[str, Any]:
    if reply.error is not None:
        return {"error": reply.error.status, "type": reply.error.type}
    out: dict[str, Any] = {}
    if reply.text is not None:
        out["text"] = reply.text
    if reply.thinking is not None:
        out["thinking"] = reply.thinking
    if reply.tool_calls:
        out["tool_calls"] = [{"name": c.name, "input": c.input} for c in reply.tool_calls]
    return out


class MockAnthropic:
    """Scripted Messages API on 127.0.0.1. Use as a context manager or call start()/stop().

    main: replies for main requests, consumed in order (then `default`), or a ReplyScript.
    evaluator: the /goal verdict policy. other_text: the answer to unclassified requests.
    log_path: if set, every request is also appended to this JSONL file.
    """

    def __init__(
        self,
        main: Sequence[Reply] | ReplyScript = (),
        *,
        default: Reply | None = None,
        evaluator: EvaluatorPolicy | None = None,
        other_text: str = "OK.",
        log_path: Path | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        # Re-entrant: a ReplyScript runs under the lock and may call count()/requests().
        self._lock = threading.RLock()
        self._records: list[RecordedRequest] = []
        self._counts: dict[str, int] = {"main": 0, "evaluator": 0, "other": 0}
        self._changed = threading.Condition(self._lock)
        self._host = host
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.log_path = log_path
        self.script_errors: list[str] = []  # exceptions raised by a ReplyScript / decide()
        self.configure(main, default=default, evaluator=evaluator, other_text=other_text)

    # -- script ---------------------------------------------------------------------------

    def configure(
        self,
        main: Sequence[Reply] | ReplyScript = (),
        *,
        default: Reply | None = None,
        evaluator: EvaluatorPolicy | None = None,
        other_text: str | None = None,
    ) -> None:
        """Replace the script. The main-reply position restarts at the next main request."""
        with self._lock:
            self._main_script: ReplyScript | None = main if callable(main) else None
            self._main_list: list[Reply] = [] if callable(main) else list(main)
            self._main_offset = self._counts["main"]
            self._default = default or Reply(text="OK.")
            self._evaluator = evaluator or EvaluatorPolicy()
            self._evaluator_offset = self._counts["evaluator"]
            if other_text is not None:
                self._other_text = other_text

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
        if self._server is not None:
            return self
        handler = type("Handler", (_Handler,), {"mock": self})
        self._server = ThreadingHTTPServer((self._host, 0), handler)
        self._server.daemon_threads = True  # a hung client must not block stop()
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
            name=f"mock-anthropic-{self.port}", daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("mock API not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}"

    # -- inspection -----------------------------------------------------------------------

    def requests(self, kind: RequestKind | None = None) -> list[RecordedRequest]:
        """Recorded /v1/messages requests (all kinds, or one kind), oldest first."""
        with self._lock:
            return [r for r in self._records if kind is None or r.kind == kind]

    def count(self, kind: RequestKind) -> int:
        with self._lock:
            return self._counts[kind]

    def wait_for_count(self, kind: RequestKind, n: int, timeout: float) -> int:
        """Block until at least n requests of `kind` arrived; returns the count (may be < n)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._counts[kind] < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            return self._counts[kind]

    # -- request handling (called from server threads) ------------------------------------

    def _record(self, path: str, body: dict[str, Any]) -> Reply:
        """Classify, choose the answer and record the request, atomically."""
        kind = classify_request(body)
        with self._lock:
            index = self._counts[kind]
            self._counts[kind] = index + 1
            try:
                reply, summary = self._choose(kind, index, body)
            except Exception as exc:  # a broken test script: make it visible, never a hang
                log.exception("mock api: %s script raised", kind)
                self.script_errors.append(f"{kind}[{index}]: {exc!r}")
                reply = Reply(error=ApiError(400, "invalid_request_error",
                                             f"mock script raised {exc!r}"))
                summary = _summary(reply)
            record = RecordedRequest(
                time=time.time(),
                kind=kind,
                index=index,
                path=path,
                model=body.get("model"),
                stream=bool(body.get("stream")),
                last_user_text=last_user_text(body),
                body=body,
                answer=summary,
            )
            self._records.append(record)
            self._changed.notify_all()
            if self.log_path is not None:
                with open(self.log_path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")
        return reply

    def _choose(
        self, kind: RequestKind, index: int, body: dict[str, Any]
    ) -> tuple[Reply, dict[str, Any]]:
        """The reply for one request (caller holds the lock) and a summary for the record."""
        if kind == "main":
            pos = index - self._main_offset
            if self._main_script is not None:
                reply = self._main_script(pos, body)
            elif pos < len(self._main_list):
                reply = self._main_list[pos]
            else:
                reply = self._default
            return reply, _summary(reply)
        if kind == "evaluator":
            verdict = self._evaluator.verdict(index - self._evaluator_offset, body)
            # A text block holding the JSON object is what Claude Code parses for
            # output_config.format (the fixtures' goal_status reasons came out this way).
            return Reply(text=json.dumps(verdict), delay=self._evaluator.delay), verdict
        schema = _output_schema(body)  # e.g. session-title generation asks for {"title"}
        text = json.dumps(_placeholder_for(schema)) if schema is not None else self._other_text
        reply = Reply(text=text)
        return reply, _summary(reply)


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive; streamed answers use chunked transfer encoding, like the API."""

    protocol_version = "HTTP/1.1"
    mock: MockAnthropic  # set on the per-server subclass

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("mock api: " + format, *args)

    # -- probes ---------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._send_json(200, {"ok": True})

    # -- API ------------------------------------------------------------------------------

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, _error_body("invalid_request_error", "body is not JSON"))
            return
        path = self.path.split("?", 1)[0]
        if path.rstrip("/") != "/v1/messages":
            self._answer_other_path(path, body)
            return
        reply = self.mock._record(path, body)
        model = str(body.get("model") or DEFAULT_MODEL)
        if reply.delay > 0:
            time.sleep(reply.delay)  # the scripted latency of this reply: not a wait
        if reply.error is not None:
            err = reply.error
            self._send_json(err.status, _error_body(err.type, err.message))
            return
        if body.get("stream"):
            self._stream(reply, reply.model or model)
        else:
            self._send_json(200, _json_message(reply, reply.model or model))

    def _answer_other_path(self, path: str, body: dict[str, Any]) -> None:
        if path.endswith("/count_tokens"):
            self._send_json(200, {"input_tokens": 100})
        else:
            self._send_json(200, {"ok": True})

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", _new_id("req"))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, reply: Reply, model: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", _new_id("req"))
        self.end_headers()
        try:
            for event, data, pause in _sse_events(reply, model):
                if pause > 0:
                    time.sleep(pause)  # scripted: a stream that arrives slowly
                self._chunk(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
            self._chunk(b"")  # terminating zero-length chunk
        except (BrokenPipeError, ConnectionResetError):
            # The client hung up mid-stream (an interrupt): normal, not an error.
            self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}
