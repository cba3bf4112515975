"""Helpers for the hook tests: the real fixture transcripts, and a recorded turn replayed
through the hooks Stop by Stop, as Claude Code runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transcripts import fixture_transcript

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "plugin" / "hooks" / "launch.py"
LAUNCHER_MODULE = LAUNCHER.with_name("loop_killer_launch.py")  # what launch.py runs
SAME_TEXT = "I am still working on getting the auth tests to pass."
PROMPT_ID = "182dc0eb-5aaa-4580-9bd2-a2b300a8e060"  # stop_input's: one per person's prompt


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def entry(line: bytes) -> dict[str, Any]:
    return json.loads(line)


def is_reprompt(line: bytes) -> bool:
    value = entry(line)
    content = (value.get("message") or {}).get("content")
    return value.get("type") == "user" and isinstance(content, str) and content.startswith(
        "Stop hook feedback:")


def is_assistant(line: bytes) -> bool:
    return entry(line).get("type") == "assistant"


def assistant_text(line: bytes) -> str:
    content = entry(line)["message"]["content"]
    return "\n".join(block["text"] for block in content if block.get("type") == "text")


@dataclass(frozen=True)
class Stop:
    """One Stop of a recorded loop: the answer it ends, and where that answer sits."""

    number: int  # answers to re-prompts so far, this one included (0: not a re-prompt's)
    first: int  # line index of the reply's first assistant line
    index: int  # line index of the reply's last assistant line
    text: str  # the reply's text blocks, joined (what last_assistant_message holds)
    timestamp: str
    uuid: str  # of the reply's last line
    reprompted: bool  # stop_hook_active


def _message_id(line: bytes) -> str:
    return str(entry(line)["message"].get("id") or entry(line)["uuid"])


def stops(lines: list[bytes]) -> list[Stop]:
    """Every Stop of a transcript, in order: one per final reply (no tool use pending)."""
    result = []
    reprompts_seen = 0
    answering_reprompt = False
    index = 0
    while index < len(lines):
        line = lines[index]
        if is_reprompt(line):
            answering_reprompt = True
        elif _is_persons(line):
            answering_reprompt = False
        if not is_assistant(line):
            index += 1
            continue
        first, message_id = index, _message_id(line)
        while index + 1 < len(lines) and is_assistant(lines[index + 1]) and _message_id(
                lines[index + 1]) == message_id:
            index += 1
        last = entry(lines[index])
        if last["message"].get("stop_reason") in ("end_turn", "stop_sequence") and not last.get(
                "isApiErrorMessage"):
            if answering_reprompt:
                reprompts_seen += 1
            text = "\n".join(assistant_text(lines[i]) for i in range(first, index + 1)
                             if assistant_text(lines[i]))
            result.append(Stop(reprompts_seen if answering_reprompt else 0, first, index, text,
                               last["timestamp"], last["uuid"], answering_reprompt))
        index += 1
    return result


def answer(lines: list[bytes], number: int) -> Stop:
    """The Stop of the ``number``-th answer to a re-prompt (1-based)."""
    return next(stop for stop in stops(lines) if stop.number == number)


def is_tool_result(line: bytes) -> bool:
    content = (entry(line).get("message") or {}).get("content")
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content)


def write(path: Path, lines: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(lines))
    return path


def stop_input(transcript: Path | str, *, session_id: str = "", message: str | None = SAME_TEXT,
               active: bool = True, mod: bool = False, **extra: Any) -> dict[str, Any]:
    """A Stop hook input like Claude Code 2.1.328 sends."""
    transcript = str(transcript)
    data: dict[str, Any] = {
        "session_id": session_id or Path(transcript).stem,
        "transcript_path": transcript,
        "cwd": "/home/dev/proj",
        "prompt_id": PROMPT_ID,
        "permission_mode": "default",
        "effort": {"level": "medium"},
        "hook_event_name": "Stop",
        "stop_hook_active": active,
        "background_tasks": [],
        "session_crons": [],
    }
    if message is not None:
        data["last_assistant_message"] = message
    if mod:
        data["loop_killer_mod"] = {"version": 1}
    data.update(extra)
    return data


def raw(data: dict[str, Any] | bytes | str) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode()
    return json.dumps(data).encode()


def hook_env(**extra: str) -> dict[str, str]:
    """The test's environment (own HOME, no multiplexer) plus ``extra``."""
    env = dict(os.environ)
    env.update(extra)
    return env


def run_hook_process(data: dict[str, Any] | bytes | str, *, env: dict[str, str] | None = None,
                     argv: list[str] | None = None, timeout: float = 30,
                     ) -> subprocess.CompletedProcess[bytes]:
    """Run the hook as Claude Code does: a process, the input on stdin."""
    return subprocess.run(
        argv or [sys.executable, "-m", "loop_killer.hooks"], input=raw(data),
        capture_output=True, env=env or hook_env(), timeout=timeout, check=False,
    )


def journal(state: Path) -> list[dict[str, Any]]:
    path = state / "detections.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _is_persons(line: bytes) -> bool:
    value = entry(line)
    return (value.get("type") == "user" and not value.get("isMeta")
            and not is_tool_result(line) and not is_reprompt(line))


def hook_inputs(lines: list[bytes], session_id: str, transcript: str
                ) -> list[tuple[int, dict[str, Any]]]:
    """The hook inputs Claude Code hands on for ``lines``, in order, each with the index of
    the line it follows: ``UserPromptSubmit`` for a person's prompt, ``PostToolUse`` (or
    ``PostToolUseFailure``) for each result, ``Stop`` for each final reply (its text the
    ``last_assistant_message``, none when empty; ``stop_hook_active`` when it answers a
    re-prompt)."""
    base = {"session_id": session_id, "transcript_path": transcript, "cwd": "/home/dev/proj",
            "prompt_id": PROMPT_ID}
    finals = {stop.index: stop for stop in stops(lines)}
    calls: dict[str, dict[str, Any]] = {}
    inputs: list[tuple[int, dict[str, Any]]] = []
    prompts = sum(map(_is_persons, lines))  # each a turn of its own; the last's is PROMPT_ID
    for index, line in enumerate(lines):
        value = entry(line)
        if _is_persons(line):
            prompts -= 1
            base["prompt_id"] = f"{PROMPT_ID}-{prompts}" if prompts else PROMPT_ID
            content = value["message"]["content"]
            inputs.append((index, {**base, "hook_event_name": "UserPromptSubmit",
                                   "prompt": content if isinstance(content, str) else ""}))
        elif is_assistant(line):
            for block in value["message"]["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    calls[block["id"]] = block
            if index in finals:
                stop = finals[index]
                inputs.append((index, stop_input(transcript, message=stop.text or None,
                                                 active=stop.reprompted, **base)))
        elif is_tool_result(line):
            for block in value["message"]["content"]:
                call = calls.get(block.get("tool_use_id", "")) if isinstance(block, dict) else None
                if call is None:
                    continue
                failed = block.get("is_error") is True
                result = ({"error": block.get("content")} if failed else
                          {"tool_response": value.get("toolUseResult", block.get("content"))})
                inputs.append((index, {**base, "tool_name": call["name"],
                                       "tool_input": call["input"], "tool_use_id": call["id"],
                                       "hook_event_name": "PostToolUseFailure" if failed
                                       else "PostToolUse", **result}))
    return inputs


def replay(lines: list[bytes], path: Path, *, env: dict[str, str], before: int | None = None,
           session_id: str = "") -> list[dict[str, Any] | None]:
    """Run the hooks of a recorded turn in order, in this process, the transcript written
    up to each hook's line as it runs: every Stop's output, in order. ``before``: stop short
    of the Stop of the ``before``-th answer to a re-prompt (its tool calls run, its reply
    not written), which the test then runs itself: in a process of its own too, since the
    last Stop is taken to be an API round trip old (not a twin's)."""
    from loop_killer.hooks.stop_hook import run_input as stop_hook
    from loop_killer.hooks.tool_hook import run_input as tool_hook
    from loop_killer.state import session as store
    from loop_killer.state.files import state_dir_text

    session_id = session_id or path.stem
    lines = [line if line.endswith(b"\n") else line + b"\n" for line in lines]
    cut = answer(lines, before).first if before is not None else len(lines)
    outputs: list[dict[str, Any] | None] = []
    for index, data in hook_inputs(lines[:cut], session_id, str(path)):
        write(path, lines[: index + 1])
        if data["hook_event_name"] == "Stop":
            outputs.append(stop_hook(data, env=env))
        else:
            tool_hook(data, env=env)
    write(path, lines[:cut])
    record = store.state_path(state_dir_text(env), session_id)
    kept = store.load(record)
    if kept is not None and isinstance(store.turn_of(kept).get("at"), float):
        kept["turn"]["at"] -= 1.0  # the next reply comes an API round trip later
        store.save_turn(record, kept)
    return outputs


def fired(lines: list[bytes], outputs: list[dict[str, Any] | None]) -> list[int]:
    """Which answers to a re-prompt (1-based) ``replay``'s Stops stopped the turn for."""
    return [stop.number for stop, output in zip(stops(lines), outputs, strict=False)
            if output is not None and output.get("continue") is False]


def looping_stop(path: Path, env: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """goal-same replayed through the hooks up to its 3rd answer to a re-prompt: that
    answer's Stop input (``extra`` added), which fires."""
    lines = lines_of(fixture_transcript("goal-same"))
    replay(lines, path, env=env or hook_env(), before=3)
    return stop_input(path, message=answer(lines, 3).text, **extra)
