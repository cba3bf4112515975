"""The Stop hook for reply N may find its tool call in the transcript and not yet its
result (Claude Code writes it a moment later): a CI run on the real 2.1.250 stopped a goal
re-running one failing command an answer late for this. The tool-call hooks have counted
that result already: the Stop hook asks them, and fires where the watcher fires."""

from __future__ import annotations

from pathlib import Path

from loop_killer.engine.reader import detect_transcript
from loop_killer.hook.stop_hook import run
from loop_killer.tools.hook import run_input as tool_hook
from transcripts import CWD, Transcript

from .kit import raw, stop_input

SAME = "The auth tests still fail the same way; I will run them again."
FAILING = "Exit code 1\nFAIL test/auth/login.test.js"


def _env(tmp_path: Path, rules_off: str = "") -> dict[str, str]:
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude")}
    return {**env, "LOOP_KILLER_RULES_OFF": rules_off} if rules_off else env


def _post_tool_use(session: Transcript, env: dict[str, str]) -> None:
    """What Claude Code runs after each call: the tool-call hooks count its result."""
    tool_hook({"hook_event_name": "PostToolUseFailure", "session_id": session.session_id,
               "transcript_path": "", "cwd": CWD, "tool_name": "Bash",
               "tool_input": {"command": "npm test"}, "tool_use_id": session.last_tool_use_id,
               "error": FAILING}, env=env)


def _fired_at(tmp_path: Path, *, lagging: bool, rules_off: str = "") -> int:
    """``rules_off``: for the Stop hook only (the tool-call hooks counted before)."""
    env = _env(tmp_path)
    stop_env = _env(tmp_path, rules_off)
    session = Transcript()
    session.prompt("Make the auth tests pass.")
    session.goal()
    session.run("npm test", FAILING, is_error=True)
    _post_tool_use(session, env)
    session.reply("The auth tests fail; I am on it.")
    path = session.path_in(tmp_path / "projects")
    for number in range(1, 6):
        session.reprompt()
        session.run("npm test", FAILING, is_error=True)
        _post_tool_use(session, env)
        result_line = session.lines[-1]
        session.reply(SAME)
        lines = list(session.lines)
        if lagging:  # the hook runs before Claude Code writes the call's result
            lines.remove(result_line)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        output = run(raw(stop_input(path, message=SAME)), env=stop_env)
        if output is not None and output.get("continue") is False:
            return number
    return 0


def test_the_hook_fires_where_the_watcher_fires_when_the_result_is_written_late(
        tmp_path: Path) -> None:
    whole = Transcript()
    whole.prompt("Make the auth tests pass.")
    whole.goal()
    whole.run("npm test", FAILING, is_error=True)
    whole.reply("The auth tests fail; I am on it.")
    for _ in range(3):
        whole.reprompt()
        whole.run("npm test", FAILING, is_error=True)
        whole.reply(SAME)
    (detection,) = detect_transcript(whole.data())  # the watcher: at the 3rd answer
    assert detection.rule == "SAME_REPLY_TURNS" and detection.run_length == 3
    assert _fired_at(tmp_path / "written", lagging=False) == 3
    assert _fired_at(tmp_path / "lagging", lagging=True) == 3


def test_with_the_tool_repeat_rule_off_its_stale_counts_are_not_asked(tmp_path: Path
                                                                       ) -> None:
    """Off, the tool-call hooks keep no counts and reset none: what they counted before
    it was switched off is no word on reply N's call, which stays work while its result
    is not written (the re-prompt rules still stop the loop, later: IDLE_TURNS is off
    here too, so nothing fires within five answers)."""
    assert _fired_at(tmp_path, lagging=True, rules_off="TOOL_REPEAT,IDLE_TURNS") == 0
