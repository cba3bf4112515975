"""Record real Claude Code transcripts for tests/fixtures/claude-code-<version>/.

Runs the real binary offline with the e2e harness (own HOME, own git project, scripted
Messages API, no loop-killer plugin: what Claude Code itself writes), then stores each
scenario like tests/fixtures/claude-code-2.1.328/: ``transcripts/<project folder>/<session>
.jsonl`` with the scratch folder renamed ``/home/dev/<scenario>``, and ``meta.json`` (what
was scripted, how it ended, the loop facts a detector should see, and ``observed``: facts
read from the files with the json module alone).

    cd tests && python -m e2e.record_fixture 2.1.332 goal-same goal-with-tools

``observe`` reproduces the ``observed`` block of the 2.1.328 fixtures exactly (a test pins
that), so the two versions' meta.json files say the same things the same way.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from transcripts import CONDITION, FIXTURES

from .harness import (
    HeadlessResult,
    Sandbox,
    assistant_messages,
    entry_text,
    project_folder_name,
    read_jsonl,
    run_headless,
)
from .mock_api import EvaluatorPolicy, MockAnthropic, Reply, ToolCall

GOAL = f"/goal {CONDITION}"
SAME = "I am still working on getting the auth tests to pass."
DELAY = 0.3  # as in the 2.1.328 recordings
FIXTURE_ROOT = "/home/dev"
_KICKOFF_CHARS = 40  # "meta:" triggers keep the kickoff's first 40 characters
_WORD = re.compile(r"[\w']+")


# -- reading a transcript with the json module alone ------------------------------------------


def _entry_key(entry: dict[str, Any]) -> str:
    kind = str(entry.get("type"))
    if kind == "system" and entry.get("subtype"):
        return f"system/{entry['subtype']}"
    attachment = entry.get("attachment")
    if kind == "attachment" and isinstance(attachment, dict) and attachment.get("type"):
        return f"attachment/{attachment['type']}"
    return kind


def _blocks(entry: dict[str, Any]) -> list[dict[str, Any]]:
    content = (entry.get("message") or {}).get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _is_tool_result(entry: dict[str, Any]) -> bool:
    return any(b.get("type") == "tool_result" for b in _blocks(entry))


def _trigger(user: dict[str, Any] | None) -> str:
    """What a reply answered: the last user line before it."""
    if user is None:
        return "none"
    if _is_tool_result(user):
        return "tool_result"
    text = entry_text(user)
    if text.startswith("Stop hook feedback:"):
        return "stop_hook_feedback"
    if user.get("isMeta"):
        return "meta:" + text[:_KICKOFF_CHARS]
    return "human"


def _is_human_prompt(entry: dict[str, Any]) -> bool:
    if entry.get("type") != "user" or entry.get("isMeta") or _is_tool_result(entry):
        return False
    text = entry_text(entry)
    return not text.startswith(("<", "[Request interrupted", "Stop hook feedback:"))


def _jaccard(a: str, b: str) -> float:
    left, right = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    union = left | right
    return round(len(left & right) / len(union), 3) if union else 1.0


def observe(path: Path) -> dict[str, Any]:
    """The ``observed`` block of a fixture's meta.json for one transcript file."""
    entries = read_jsonl(path)
    counts: dict[str, int] = {}
    for entry in entries:
        counts[_entry_key(entry)] = counts.get(_entry_key(entry), 0) + 1
    messages = assistant_messages(entries)
    texts = ["".join(entry_text(line) for line in group) for group in messages]
    triggers = []
    for group in messages:
        first = entries.index(next(e for e in entries if e.get("uuid") == group[0]["uuid"]))
        users = [e for e in entries[:first] if e.get("type") == "user"]
        triggers.append(_trigger(users[-1] if users else None))
    feedback = [entry_text(e) for e in entries
                if e.get("type") == "user" and entry_text(e).startswith("Stop hook feedback:")]
    blocks = [b for e in entries if e.get("type") == "assistant" for b in _blocks(e)]
    return {
        "entry_type_counts": counts,
        "assistant_messages": len(messages),
        "assistant_texts": texts,
        "assistant_triggers": triggers,
        "stop_hook_feedback_count": len(feedback),
        "stop_hook_feedback_distinct": list(dict.fromkeys(feedback)),
        "replies_after_stop_feedback": triggers.count("stop_hook_feedback"),
        "consecutive_text_jaccard": [_jaccard(a, b) for a, b in pairwise(texts)],
        "tool_uses": [str(b.get("name")) for b in blocks if b.get("type") == "tool_use"],
        "thinking_blocks": sum(b.get("type") == "thinking" for b in blocks),
        "api_error_messages": [
            {"text": entry_text(e), "error": e.get("error"),
             "apiErrorStatus": e.get("apiErrorStatus")}
            for e in entries if e.get("type") == "assistant" and e.get("isApiErrorMessage")],
        "interrupt_markers": [entry_text(e) for e in entries if e.get("type") == "user"
                              and entry_text(e).startswith("[Request interrupted")],
        "human_prompts": [entry_text(e) for e in entries if _is_human_prompt(e)],
        "goal_status": [
            {k: v for k, v in e["attachment"].items() if k != "type"} for e in entries
            if e.get("type") == "attachment" and isinstance(e.get("attachment"), dict)
            and e["attachment"].get("type") == "goal_status"],
    }


# -- scenarios ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """One recording: how the mock is scripted, how claude is run, what it must show."""

    scripted: dict[str, Any]
    configure: Callable[[MockAnthropic], None]
    extra_args: tuple[str, ...] = ()

    @property
    def run_mode(self) -> str:
        args = "".join(f" {a}" for a in self.extra_args)
        return f"headless: claude -p '{GOAL}' --output-format json{args}"


def _goal_same(mock: MockAnthropic) -> None:
    mock.configure(default=Reply(text=SAME, delay=DELAY), evaluator=EvaluatorPolicy())


VARIED = [  # the texts of the 2.1.328 goal-varied recording
    "Acknowledged: I will make the auth suite green.",
    "Reading login.test.js reveals a missing helper import.",
    "Next, inspect how sessions expire inside middleware code.",
    "Token refresh logic looks broken around clock skew.",
    "Patched password hashing; bcrypt rounds were misconfigured earlier.",
    "Database fixtures need seeding before each spec runs.",
    "Mocking OAuth callbacks now, since network calls fail offline.",
    "Rate limiter resets between cases after adding teardown hooks.",
    "CSRF headers get verified properly once cookies carry SameSite.",
    "Session cookies now expire exactly when the spec expects.",
    "Password reset emails are queued instead of sent inline.",
]


def _goal_varied(mock: MockAnthropic) -> None:
    mock.configure([Reply(text=t, delay=DELAY) for t in VARIED], evaluator=EvaluatorPolicy())


def _goal_with_tools(mock: MockAnthropic) -> None:
    def script(index: int, body: dict[str, Any]) -> Reply:
        last = index // 2 == 3  # round 4
        if index % 2 == 0:
            output = "4 passed, 0 failed" if last else "3 passed, 1 failed"
            return Reply(text="Running the auth tests.", delay=DELAY, tool_calls=[
                ToolCall("Bash", {"command": f"echo 'auth tests: {output}'",
                                  "description": "Run the auth tests"})])
        text = ("All 4 auth tests pass now." if last
                else "One auth test still fails; I will keep working on it.")
        return Reply(text=text, delay=DELAY)

    mock.configure(script, evaluator=EvaluatorPolicy(
        met_on=4, reason="One auth test still fails.",
        met_reason="The transcript shows 'auth tests: 4 passed, 0 failed'."))


SCENARIOS: dict[str, Scenario] = {
    "goal-same": Scenario(
        scripted={"main": f"every main reply is the same text: {SAME!r}",
                  "evaluator": "always {ok:false, reason:'The condition is not met yet.'}",
                  "mock_delay_s": DELAY},
        configure=_goal_same),
    "goal-varied": Scenario(
        scripted={"main": f"{len(VARIED)} distinct sentences with little word overlap, in "
                          "order (the 2.1.328 recording's)",
                  "evaluator": "always {ok:false, reason:'The condition is not met yet.'}",
                  "mock_delay_s": DELAY},
        configure=_goal_varied),
    "goal-with-tools": Scenario(
        scripted={"main": "4 rounds; each round = (1) text 'Running the auth tests.' + Bash "
                          "tool_use echo 'auth tests: 3 passed, 1 failed' (round 4: '4 passed, "
                          "0 failed'), (2) after the tool_result, text 'One auth test still "
                          "fails; I will keep working on it.' (round 4: 'All 4 auth tests "
                          "pass now.')",
                  "evaluator": "checks 1-3 {ok:false, reason:'One auth test still fails.'}; "
                               "check 4 {ok:true, reason:\"The transcript shows 'auth tests: "
                               "4 passed, 0 failed'.\"}",
                  "mock_delay_s": DELAY},
        configure=_goal_with_tools, extra_args=("--allowedTools", "Bash")),
}


# -- recording ----------------------------------------------------------------------------------


def _ended_by(result: HeadlessResult, observed: dict[str, Any]) -> str:
    out = result.output or {}
    how = (f"rc {result.returncode}, subtype {out.get('subtype')}, num_turns "
           f"{out.get('num_turns')}, terminal_reason {out.get('terminal_reason')}")
    counts = observed["entry_type_counts"]
    statuses = observed["goal_status"]
    if statuses and statuses[-1].get("met") is True and not statuses[-1].get("sentinel"):
        return (f"evaluator verdict met on check {len(statuses) - 1}: goal_status "
                f"{{met:true, ...}}; {how}")
    if counts.get("system/informational"):
        return ("Claude Code's Stop-hook block cap after "
                f"{observed['stop_hook_feedback_count']} consecutive blocks "
                f"(system/informational warning); {how}")
    return how


def _expected(observed: dict[str, Any]) -> dict[str, Any]:
    tools = observed["tool_uses"]
    return {
        "assistant_replies": observed["assistant_messages"],
        "replies_to_stop_hook_feedback": observed["replies_after_stop_feedback"],
        "stop_hook_feedback_messages": observed["stop_hook_feedback_count"],
        "tool_used": bool(tools),
        "tool_calls": len(tools),
    }


def _renamed(text: str, scratch: Path) -> str:
    """Scratch paths (and their project-folder form) moved under /home/dev."""
    text = text.replace(str(scratch), FIXTURE_ROOT)
    return text.replace(project_folder_name(scratch), project_folder_name(FIXTURE_ROOT))


def record(version: str, name: str, binary: Path, out_root: Path) -> Path:
    """Run one scenario on ``binary`` and store it under out_root/<name>/."""
    scenario = SCENARIOS[name]
    scratch = Path(tempfile.mkdtemp(prefix="lkrec")).resolve()
    try:
        with MockAnthropic() as mock:
            scenario.configure(mock)
            sandbox = Sandbox.create(scratch / name, mock)
            result = run_headless(sandbox, GOAL, version=binary,
                                  extra_args=scenario.extra_args, timeout=180)
        if result.returncode != 0 or result.timed_out:
            raise RuntimeError(f"{name}: claude failed ({result.returncode}): {result.stderr}")
        target = out_root / name
        shutil.rmtree(target, ignore_errors=True)
        files = []
        projects = sandbox.home / ".claude" / "projects"
        for path in sorted(projects.rglob("*.jsonl")):
            relative = _renamed(str(path.relative_to(projects)), scratch)
            stored = target / "transcripts" / relative
            stored.parent.mkdir(parents=True, exist_ok=True)
            text = _renamed(path.read_text(encoding="utf-8"), scratch)
            if str(scratch) in text or scratch.name in text:
                raise RuntimeError(f"{name}: scratch path left in {relative}")
            stored.write_text(text, encoding="utf-8")
            files.append(str(stored.relative_to(target)))
        observed = {f: observe(target / f) for f in files}
        main = [f for f in files if "subagents" not in f]
        meta = {
            "run_mode": scenario.run_mode,
            "scripted": scenario.scripted,
            "ended_by": _ended_by(result, observed[main[0]]),
            "expected_loop_detection": _expected(observed[main[0]]),
            "scenario": name,
            "claude_code_version": version,
            "transcript_files": files,
            "observed": observed,
        }
        (target / "meta.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
        return target
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    from .harness import claude_binary

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version")
    parser.add_argument("scenarios", nargs="*", default=sorted(SCENARIOS))
    parser.add_argument("--out", type=Path, default=None,
                        help="default: tests/fixtures/claude-code-<version>/")
    args = parser.parse_args(argv)
    binary = claude_binary(args.version)
    if binary is None:
        print(f"Claude Code {args.version} is not installed (scripts/install-claude-code)",
              file=sys.stderr)
        return 1
    out_root = args.out or FIXTURES / f"claude-code-{args.version}"
    for name in args.scenarios:
        print(f"{name}: {record(args.version, name, binary, out_root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
