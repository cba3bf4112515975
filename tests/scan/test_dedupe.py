"""One reply, counted once, across the whole history (issue 19): a reply is known by its
(message.id, requestId) in every file, its copy with the most tokens kept; a loop owns its
replies, and a copy of a loop is not a second loop. Every session in ``--json`` carries
its tokens, checked against a small independent counter on every fixture history."""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from loop_killer.scan.files import find_transcripts
from loop_killer.scan.pool import scan_transcripts
from loop_killer.scan.prices import PriceTable
from loop_killer.scan.summary import Collector, Summary
from transcripts import FIXTURES, Transcript, Use, scan_bytes, total

SAME = "I am still working on the auth tests; the condition is not met yet."

A = "aaaaaaaa-2222-4333-8444-555555555555"
B = "bbbbbbbb-2222-4333-8444-555555555555"


def _summary(*files: tuple[Transcript, str, bool], order: int = 1) -> Summary:
    """The summary of these sessions' files (session, path, subagent), fed in ``order``."""
    collector = Collector(PriceTable())
    results = [scan_bytes(session.data(), path=path, project="-home-dev-proj",
                          session_id="" if subagent else session.session_id,
                          subagent=subagent) for session, path, subagent in files]
    for result in results[::order]:
        collector.add(result)
    return collector.summary()


def _same_loop(session: Transcript, uses: list[Use]) -> None:
    session.prompt("go")
    session.goal()
    for use in uses:
        session.reprompt()
        session.reply(SAME, use)


def _tokens(summary: Summary) -> dict[str, int]:
    return {row.session_id: row.tokens.total for row in summary.sessions}


@pytest.mark.parametrize("order", [1, -1])
def test_a_resumed_sessions_copy_is_counted_once_and_is_not_a_second_loop(order: int) -> None:
    uses = [Use(100 + i, 10) for i in range(5)]
    original = Transcript(A)
    _same_loop(original, uses)
    resumed = Transcript(B)
    resumed.lines = [line.replace(A.encode(), B.encode()) for line in original.lines]
    resumed._count = original._count  # later lines come after the copy
    resumed.prompt("and now the docs")
    resumed.reply("Done.", Use(7, 3))
    summary = _summary((original, f"/p/{A}.jsonl", False), (resumed, f"/p/{B}.jsonl", False),
                       order=order)
    assert len(summary.loops) == 1 and summary.duplicate_loops == 1
    (loop,) = summary.loops
    assert loop.session_id == A and loop.tokens.total == total(uses)
    assert summary.tokens.total == total(uses)
    # the copy belongs to the original; the resumed session has its own reply only
    assert _tokens(summary) == {A: total(uses), B: 10}
    assert summary.duplicate_replies == len(uses)


def test_a_reply_replayed_after_a_new_prompt_is_counted_once() -> None:
    uses = [Use(100 + i, 10) for i in range(5)]
    session = Transcript(A)
    _same_loop(session, uses)
    replayed = session.lines[-12:]  # the last replies and their re-prompts, written again
    session.prompt("again")
    session.lines += replayed
    summary = _summary((session, f"/p/{A}.jsonl", False))
    assert _tokens(summary) == {A: total(uses)}
    assert len(summary.loops) == 1 and summary.loops[0].tokens.total == total(uses)


def test_a_reply_replayed_into_a_subagents_file_belongs_to_the_main_session() -> None:
    main = Transcript(A)
    main.prompt("go")
    main.reply("Looking.", Use(50, 5))
    agent = Transcript(A, sidechain=True, model="claude-haiku-4-5-20251001")
    agent.user("find it")
    agent.lines += main.lines[-1:]  # the main thread's reply, replayed
    agent.reply("Found it.", Use(20, 2), message_id="msg_agent_1")
    summary = _summary((main, f"/p/{A}.jsonl", False),
                       (agent, f"/p/{A}/subagents/agent-x.jsonl", True))
    assert _tokens(summary) == {A: 55 + 22}
    (row,) = summary.sessions
    assert {m.model: m.tokens.total for m in row.models} == {
        "claude-sonnet-4-5-20250929": 55, "claude-haiku-4-5-20251001": 22}


def test_the_same_message_id_with_a_new_request_id_is_another_reply() -> None:
    session = Transcript(A)
    session.prompt("go")
    session.reply("First try.", Use(10, 1), message_id="msg_same")
    session.reply("Second try.", Use(20, 2), message_id="msg_same")
    first, second = session.lines[-2:]
    session.lines[-1] = second.replace(b'"requestId":"req_msg_same"',
                                       b'"requestId":"req_again"')
    assert first != session.lines[-1]
    assert _tokens(_summary((session, f"/p/{A}.jsonl", False))) == {A: 33}
    # the same request id again: one reply, its larger copy
    session.lines[-1] = second
    assert _tokens(_summary((session, f"/p/{A}.jsonl", False))) == {A: 22}


def test_lines_without_ids_are_each_a_reply() -> None:
    session = Transcript(A)
    session.prompt("go")
    for text in ("one", "two"):
        session.entry("assistant", {"message": {
            "type": "message", "role": "assistant", "model": "claude-opus-4-5-20251101",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 5, "output_tokens": 5}}})
    assert _tokens(_summary((session, f"/p/{A}.jsonl", False))) == {A: 20}


def test_the_copy_with_the_most_tokens_is_kept_across_files() -> None:
    cut = Transcript(A)
    cut.prompt("go")
    cut.reply("Half", Use(10, 1), message_id="msg_x")
    whole = Transcript(B)
    whole.prompt("go")
    whole.reply("Half and the rest", Use(10, 40), message_id="msg_x")
    summary = _summary((cut, f"/p/{A}.jsonl", False), (whole, f"/p/{B}.jsonl", False))
    assert _tokens(summary) == {A: 0, B: 50}


# -- every fixture history, against an independent counter ------------------------------


def _histories() -> list[Path]:
    roots = sorted(FIXTURES.glob("claude-code-*/*/transcripts"))
    return [*roots, FIXTURES / "real-transcripts"]


def _as_projects(history: Path, into: Path) -> Path:
    """The history as a folder of project folders (loose files get one each)."""
    for item in history.iterdir():
        if item.is_dir():
            shutil.copytree(item, into / item.name)
        elif item.suffix == ".jsonl":
            (into / item.stem).mkdir(parents=True)
            shutil.copy(item, into / item.stem / item.name)
    return into


def _reference(root: Path) -> dict[str, dict[str, int]]:
    """Tokens per session, counted the plain way: every assistant line's usage, one per
    (message.id or the line's uuid, requestId), the copy with the most tokens; a copy in
    several files belongs to the file that began first (then ended first, then by path);
    a file's session is its name, a subagent's file's the one its lines name."""
    best: dict[tuple[str, str], tuple[int, tuple[str, str, str], str, dict[str, int]]] = {}
    for path in sorted(root.rglob("*.jsonl")):
        entries: list[dict[str, Any]] = []
        for raw in path.read_bytes().splitlines():
            try:
                entry = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(entry, dict):
                entries.append(entry)
        session = path.stem if not path.name.startswith("agent-") else next(
            (e["sessionId"] for e in entries if isinstance(e.get("sessionId"), str)), "")
        replies = [e for e in entries if e.get("type") == "assistant"
                   and isinstance(e.get("message"), dict)
                   and isinstance(e["message"].get("usage"), dict)
                   and not e.get("isApiErrorMessage")]
        times = sorted(e.get("timestamp", "") for e in replies if e.get("timestamp"))
        rank = (times[0] if times else "\uffff", times[-1] if times else "", str(path))
        for entry in replies:
            usage = entry["message"]["usage"]
            counts = {name: usage.get(field) or 0 for name, field in (
                ("input", "input_tokens"), ("output", "output_tokens"),
                ("cache_read", "cache_read_input_tokens"),
                ("cache_creation", "cache_creation_input_tokens"))}
            key = (entry["message"].get("id") or entry.get("uuid", ""),
                   entry.get("requestId") or "")
            size = sum(counts.values())
            known = best.get(key)
            if known is None or size > known[0] or (size == known[0] and rank < known[1]):
                best[key] = (size, rank, session, counts)
    sessions: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for size, _, session, counts in best.values():
        for name, count in counts.items():
            sessions[session][name] += count
        sessions[session]["total"] += size
    return {session: dict(counts) for session, counts in sessions.items()}


@pytest.mark.parametrize("history", _histories(),
                         ids=lambda p: str(p.relative_to(FIXTURES).parent))
def test_tokens_per_session_equal_an_independent_count(history: Path, tmp_path: Path) -> None:
    root = _as_projects(history, tmp_path / "projects")
    collector = Collector(PriceTable())
    for result in scan_transcripts(find_transcripts(root).transcripts, jobs=1):
        collector.add(result)
    found = {row.session_id: row.tokens.to_dict() for row in collector.summary().sessions
             if row.tokens.total}
    expected = _reference(root)
    assert found == {session: counts for session, counts in expected.items()
                     if counts["total"]}
