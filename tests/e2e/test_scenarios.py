"""The product, proven on the real Claude Code binary (offline, scripted API).

Counting: in a /goal run the first reply answers the goal's kickoff message, which is not
a re-prompt; the run is made of the answers to the re-prompts after it. So the loop must
end on main request 4 (SAME_REPLY_TURNS: kickoff + 3 answers) or 7 (IDLE_TURNS: kickoff +
6 answers), and no main request may follow.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from transcripts import CONDITION
from waits import wait_for

from .harness import (
    Sandbox,
    TuiSession,
    assistant_texts,
    entry_text,
    goal_statuses,
    install_plugin,
    installed_plugins,
    read_jsonl,
    run_headless,
    stop_hook_feedback,
)
from .mock_api import EvaluatorPolicy, MockAnthropic, Reply, ToolCall

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "plugin"
GOAL = f"/goal {CONDITION}"
SAME = "I am still working on getting the auth tests to pass."
VARIED = [
    "Acknowledged: I will make the auth suite green.",
    "Reading login.test.js reveals a missing helper import.",
    "Next, inspect how sessions expire inside middleware.",
    "Token refresh logic looks broken around clock skew.",
    "Patched password hashing; bcrypt rounds were misconfigured.",
    "Database fixtures need seeding before each spec runs.",
    "Mocking OAuth callbacks now, since network calls fail offline.",
    "Rate limiter resets between cases after adding teardown.",
    "CSRF headers get verified properly once cookies carry tokens.",
    "Session cookies now expire exactly when the spec expects.",
]
BLOCKING_HOOK_REASON = "Keep working: the tests are not passing yet."
SETTLE = 1.5  # seconds without a new main request before we call the loop over


# -- helpers ------------------------------------------------------------------------------


def _state_dir(sandbox: Sandbox) -> Path:
    return sandbox.home / ".claude" / "loop-killer"


def journal(sandbox: Sandbox) -> list[dict[str, Any]]:
    path = _state_dir(sandbox) / "detections.jsonl"
    return read_jsonl(path) if path.exists() else []


def journal_events(sandbox: Sandbox, event: str) -> list[dict[str, Any]]:
    return [record for record in journal(sandbox) if record.get("event") == event]


def outcomes(sandbox: Sandbox) -> list[str]:
    """Every outcome recorded: journal lines, then the mod's records not yet folded in."""
    found = [record["outcome"] for record in journal_events(sandbox, "outcome")]
    for path in sorted((_state_dir(sandbox) / "outcomes").glob("*.json")):
        found.append(json.loads(path.read_text() or "{}").get("status"))
    return found


def one_line(text: str) -> str:
    """Screen or output text with its wrapping undone (whitespace runs made one space)."""
    return " ".join(text.split())


CLEARED_LINE = ("loop-killer: SAME_REPLY_TURNS (3 similar replies to re-prompts): loop stopped, "
                "goal cleared.")
NO_GOAL_LINE = ("loop-killer: SAME_REPLY_TURNS (3 similar replies to re-prompts): loop "
                "stopped; no goal was set.")
PAUSED_LINE = ("loop-killer: SAME_REPLY_TURNS (3 similar replies to re-prompts): loop stopped, "
               "goal only paused: type /goal clear to clear it")


def cleared(entries: list[dict[str, Any]]) -> bool:
    """The proof line: /goal clear wrote goal_status met:true, sentinel:true."""
    return any(s.get("met") is True and s.get("sentinel") is True for s in goal_statuses(entries))


def notices(entries: list[dict[str, Any]]) -> list[str]:
    """What Claude Code showed the person on loop-killer's behalf, from the transcript."""
    found = []
    for entry in entries:
        attachment = entry.get("attachment") or {}
        texts = [attachment.get("content"), attachment.get("message")]
        if entry.get("type") == "system":
            texts += [entry.get("content"), entry.get("stopReason")]
        found += [t for t in texts if isinstance(t, str) and "loop-killer" in t]
    return found


def settled_main_count(mock: MockAnthropic, *, settle: float = SETTLE) -> int:
    """The number of main requests once no new one has arrived for `settle` seconds.

    A quiet window, kept: nothing marks the last request (the claim is that none follows).
    The mock is waited on, woken by each new request, rather than polled."""
    count = mock.count("main")
    while (now := mock.wait_for_count("main", count + 1, settle)) > count:
        count = now
    return count


def write_blocking_stop_hook(project: Path) -> None:
    """A plain command Stop hook (no /goal) that blocks every time."""
    script = project / ".claude" / "block.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        "import json, sys\n"
        "sys.stdin.read()\n"
        f"print(json.dumps({{'decision': 'block', 'reason': {BLOCKING_HOOK_REASON!r}}}))\n"
    )
    settings = {"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": f"{sys.executable} {script}"}]}]}}
    (project / ".claude" / "settings.json").write_text(json.dumps(settings))


class Watcher:
    """The real `loop-killer-watch`, against the sandbox's HOME."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.output = sandbox.root / "watcher.out"
        exe = Path(sys.executable).with_name("loop-killer-watch")
        argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "loop_killer.watch.main"]
        env = sandbox.env
        self.proc = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=self.output.open("wb"),
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        heartbeat = _state_dir(sandbox) / "watcher.json"

        def started() -> bool:
            assert self.proc.poll() is None, self.text()
            return heartbeat.exists()

        wait_for(started, 20, lambda: f"the watcher to start:\n{self.text()}", every=0.05)

    def text(self) -> str:
        return self.output.read_text(errors="replace") if self.output.exists() else ""

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = 15) -> str:
        text = ""

        def matched() -> bool:
            nonlocal text
            text = self.text()
            return predicate(text)

        wait_for(matched, timeout, lambda: f"the watcher's output to match:\n{text}",
                 every=0.1)
        return text

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


@pytest.fixture
def watcher(sandbox: Sandbox) -> Iterator[Callable[[], Watcher]]:
    started: list[Watcher] = []

    def start() -> Watcher:
        started.append(Watcher(sandbox))
        return started[-1]

    yield start
    for w in started:
        w.stop()


def _assert_stopped_and_cleared(
    sandbox: Sandbox, mock: MockAnthropic, *, main: int, rule: str, output: dict | None
) -> list[dict[str, Any]]:
    assert settled_main_count(mock) == main
    entries = sandbox.read_transcript()
    assert cleared(entries), "no goal_status met:true sentinel line in the transcript"
    assert any(rule in n for n in notices(entries)), notices(entries)
    assert "cleared" in outcomes(sandbox), outcomes(sandbox)
    if output is not None:  # -p prints the one line: the rule, then the result of /goal clear
        assert output["result"].startswith(f"loop-killer: {rule} ("), output["result"]
        assert output["result"].endswith("): loop stopped, goal cleared."), output["result"]
        assert "\n" not in output["result"]
    return entries


# -- with mods (2.1.332, 2.1.328): headless -----------------------------------------------


def test_identical_replies_end_on_the_third_answer_and_the_goal_is_cleared(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_mods: Path
) -> None:
    mock_api.configure(default=Reply(text=SAME, delay=0.05), evaluator=EvaluatorPolicy())
    rc, output, stderr = run_headless(sandbox, GOAL, version=claude_mods, plugin_dir=PLUGIN)
    assert rc == 0, stderr
    entries = _assert_stopped_and_cleared(
        sandbox, mock_api, main=4, rule="SAME_REPLY_TURNS", output=output)
    assert assistant_texts(entries) == [SAME] * 4
    detections = journal_events(sandbox, "detection")
    assert [d["rule"] for d in detections] == ["SAME_REPLY_TURNS"]


def test_a_goal_loop_in_a_session_started_with_agent_ends_as_any_other(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    """``claude --agent NAME``: the main session's Stop input names the agent
    (``agent_type``) with no ``agent_id`` (2.1.332). Taken for a subagent's, the loop ran
    to Claude Code's own cap (9 requests) with the goal left set."""
    agents = sandbox.project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "fixer.md").write_text(
        "---\nname: fixer\ndescription: Fixes failing tests.\n---\nYou fix failing tests.\n")
    mock_api.configure(default=Reply(text=SAME, delay=0.05), evaluator=EvaluatorPolicy())
    rc, output, stderr = run_headless(sandbox, GOAL, version=claude_332, plugin_dir=PLUGIN,
                                      extra_args=["--agent", "fixer"])
    assert rc == 0, stderr
    entries = _assert_stopped_and_cleared(
        sandbox, mock_api, main=4, rule="SAME_REPLY_TURNS", output=output)
    assert {"type": "agent-setting", "agentSetting": "fixer"}.items() <= next(
        e for e in entries if e.get("type") == "agent-setting").items()  # it ran as fixer
    assert assistant_texts(entries) == [SAME] * 4


@pytest.mark.parametrize("empty", [Reply(text="", delay=0.05),
                                   Reply(no_content=True, delay=0.05)], ids=["text", "no-content"])
def test_a_model_answering_every_re_prompt_with_nothing_is_stopped_on_the_third(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_mods: Path, empty: Reply
) -> None:
    """Empty replies: Claude Code nudges once ("no visible output"), then re-prompts on;
    its Stop input holds no text, or the last reply that had some. Before, nothing
    counted them and only Claude Code's cap of 9 blocks ended the turn."""
    mock_api.configure([Reply(text="Acknowledged; starting on the auth tests.")],
                       default=empty, evaluator=EvaluatorPolicy())
    rc, output, stderr = run_headless(sandbox, GOAL, version=claude_mods, plugin_dir=PLUGIN)
    assert rc == 0, stderr
    # The kickoff's answer, the first empty reply and the one after the nudge, two more.
    _assert_stopped_and_cleared(sandbox, mock_api, main=5, rule="SAME_REPLY_TURNS",
                                output=output)
    detections = journal_events(sandbox, "detection")
    assert [(d["rule"], d["count"]) for d in detections] == [("SAME_REPLY_TURNS", 3)]


def test_varied_replies_end_on_the_sixth_answer_by_idle_turns(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_mods: Path
) -> None:
    mock_api.configure([Reply(text=t, delay=0.05) for t in VARIED], evaluator=EvaluatorPolicy())
    rc, output, stderr = run_headless(sandbox, GOAL, version=claude_mods, plugin_dir=PLUGIN)
    assert rc == 0, stderr
    entries = _assert_stopped_and_cleared(
        sandbox, mock_api, main=7, rule="IDLE_TURNS", output=output)
    assert assistant_texts(entries) == VARIED[:7]


def test_replies_with_tool_work_are_never_stopped(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_mods: Path
) -> None:
    def script(index: int, body: dict) -> Reply:
        # Real work: each run of the tests gets further (a run that printed the same
        # every time would be the other kind of loop, tool-repeat, warned on its 3rd).
        if index % 2 == 0:
            passed = 3 + index // 2
            return Reply(text="Running the auth tests.", tool_calls=[
                ToolCall("Bash", {"command": f"echo 'auth tests: {passed} passed, 1 failed'",
                                  "description": "Run the auth tests"})])
        return Reply(text="One auth test still fails; I will keep working on it.")

    mock_api.configure(script, evaluator=EvaluatorPolicy(met_on=4))
    rc, output, stderr = run_headless(sandbox, GOAL, version=claude_mods, plugin_dir=PLUGIN,
                                      extra_args=["--allowedTools", "Bash"])
    assert rc == 0, stderr
    assert output is not None and output.get("terminal_reason") != "stop_hook_prevented"
    assert settled_main_count(mock_api) == 8  # 4 rounds of tool call + closing text
    entries = sandbox.read_transcript()
    final = goal_statuses(entries)[-1]
    assert final["met"] is True and not final.get("sentinel")  # the evaluator ended it
    assert journal_events(sandbox, "detection") == []
    assert notices(entries) == []


def test_a_plain_blocking_stop_hook_is_stopped_without_claiming_a_goal(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_mods: Path
) -> None:
    write_blocking_stop_hook(sandbox.project)
    mock_api.configure(default=Reply(text=SAME, delay=0.05))
    rc, output, stderr = run_headless(sandbox, "Fix the failing tests in test/auth.",
                                      version=claude_mods, plugin_dir=PLUGIN)
    assert rc == 0, stderr
    assert output is not None and output.get("result") == NO_GOAL_LINE, output
    assert settled_main_count(mock_api) == 4
    entries = sandbox.read_transcript()
    assert len(stop_hook_feedback(entries)) >= 3
    assert not cleared(entries)
    shown = notices(entries)
    assert any("SAME_REPLY_TURNS" in n for n in shown), shown
    assert not any("goal cleared" in n.lower() for n in shown), shown
    assert "cleared" not in outcomes(sandbox)
    assert "stopped_no_goal" in outcomes(sandbox), outcomes(sandbox)
    assert any(n.endswith("loop stopped; no goal was set.") for n in shown), shown


@pytest.mark.parametrize("goal", [True, False], ids=["goal", "no-goal"])
def test_claude_p_in_text_mode_prints_the_line(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path, goal: bool
) -> None:
    """What a person's script reads from `claude -p` (text) when loop-killer ends the turn:
    the one line that names loop-killer, the rule and what it did. Without a goal it was
    an empty line (exit code 0): the text a mod gives the turn's end is printed nowhere
    in `-p`, a command's output is (the mod's own command prints the line)."""
    if goal:
        mock_api.configure(default=Reply(text=SAME, delay=0.05), evaluator=EvaluatorPolicy())
    else:
        write_blocking_stop_hook(sandbox.project)
        mock_api.configure(default=Reply(text=SAME, delay=0.05))
    result = run_headless(sandbox, GOAL if goal else "Fix the failing tests in test/auth.",
                          version=claude_332, plugin_dir=PLUGIN, output_format="text")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (CLEARED_LINE if goal else NO_GOAL_LINE) + "\n", result.stdout
    assert settled_main_count(mock_api) == 4
    assert cleared(sandbox.read_transcript()) is goal


def test_two_sessions_under_one_watcher_are_stopped_each_on_its_own_threshold(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_mods: Path, watcher
) -> None:
    watch = watcher()
    other_project = sandbox.add_project("proj-b")
    mock_api.configure(default=Reply(text=SAME, delay=0.1), evaluator=EvaluatorPolicy())
    with MockAnthropic([Reply(text=t, delay=0.1) for t in VARIED],
                       evaluator=EvaluatorPolicy()) as other_mock:
        argv_env = {"ANTHROPIC_BASE_URL": other_mock.base_url}
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(2) as pool:
            a = pool.submit(run_headless, sandbox, GOAL, version=claude_mods, plugin_dir=PLUGIN)
            b = pool.submit(run_headless, sandbox, GOAL, version=claude_mods, plugin_dir=PLUGIN,
                            cwd=other_project, env=argv_env)
            (rc_a, out_a, err_a), (rc_b, out_b, err_b) = a.result(), b.result()
        assert rc_a == 0 and rc_b == 0, (err_a, err_b)
        assert out_a["result"] == CLEARED_LINE
        assert out_b["result"].startswith("loop-killer: IDLE_TURNS (6 replies")
        assert out_b["result"].endswith("loop stopped, goal cleared.")
        assert settled_main_count(mock_api) == 4
        assert settled_main_count(other_mock) == 7
    entries_a = sandbox.read_transcript()
    entries_b = sandbox.read_transcript(other_project)
    assert cleared(entries_a) and cleared(entries_b)
    session_a, session_b = entries_a[-1]["sessionId"], entries_b[-1]["sessionId"]
    rules = {d["session_id"]: d["rule"] for d in journal_events(sandbox, "detection")}
    assert rules == {session_a: "SAME_REPLY_TURNS", session_b: "IDLE_TURNS"}
    watch.wait_for(lambda text: session_a[:8] in text and session_b[:8] in text)


def test_a_loop_fires_again_after_a_persons_new_prompt_and_a_fresh_run(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_mods: Path
) -> None:
    write_blocking_stop_hook(sandbox.project)
    mock_api.configure(default=Reply(text=SAME, delay=0.05))
    rc, _, stderr = run_headless(sandbox, "Fix the failing tests in test/auth.",
                                 version=claude_mods, plugin_dir=PLUGIN)
    assert rc == 0, stderr
    assert settled_main_count(mock_api) == 4
    rc, _, stderr = run_headless(sandbox, "Try again, please.", version=claude_mods,
                                 plugin_dir=PLUGIN, extra_args=["--continue"])
    assert rc == 0, stderr
    assert settled_main_count(mock_api) == 8  # a fresh run: 1 + 3 more, not fewer
    detections = journal_events(sandbox, "detection")
    assert [d["rule"] for d in detections] == ["SAME_REPLY_TURNS"] * 2
    assert detections[0]["answer_uuid"] != detections[1]["answer_uuid"]
    assert len({d["session_id"] for d in detections}) == 1


# -- with mods (2.1.332, 2.1.328): TUI ----------------------------------------------------


def _tui_goal_loop(session: TuiSession, mock: MockAnthropic, *, draft: str | None = None) -> str:
    session.wait_ready()
    session.type_line(GOAL)
    if draft is not None:
        mock.wait_for_count("main", 2, timeout=30)
        session.send_keys(draft)
        session.wait_for(draft, timeout=10)
    return session.wait_for("Goal cleared", timeout=60)


def test_tui_with_watcher_stops_on_the_third_answer_and_shows_the_clear(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_mods: Path,
    tui: Callable[..., TuiSession], watcher,
) -> None:
    watch = watcher()
    mock_api.configure(default=Reply(text=SAME, delay=0.3), evaluator=EvaluatorPolicy())
    session = tui(version=claude_mods, plugin_dir=PLUGIN)
    screen = _tui_goal_loop(session, mock_api)
    assert settled_main_count(mock_api) == 4
    screen = session.capture()
    assert "SAME_REPLY_TURNS" in screen
    entries = sandbox.read_transcript()
    assert cleared(entries)
    assert CLEARED_LINE in one_line(session.wait_for("goal cleared.", timeout=10))
    text = watch.wait_for(lambda t: "SAME_REPLY_TURNS" in t and "CLEARED" in t)
    assert entries[-1]["sessionId"][:8] in text
    # In the order things happened: the hook's QUEUED (if it acted first) before CLEARED.
    if "QUEUED" in text:
        assert text.index("QUEUED") < text.index("CLEARED"), text


def test_tui_draft_in_the_prompt_box_survives_the_clear(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_mods: Path,
    tui: Callable[..., TuiSession],
) -> None:
    draft = "half-written idea about retries"
    mock_api.configure(default=Reply(text=SAME, delay=0.8), evaluator=EvaluatorPolicy())
    session = tui(version=claude_mods, plugin_dir=PLUGIN)
    _tui_goal_loop(session, mock_api, draft=draft)
    assert settled_main_count(mock_api) == 4
    assert cleared(sandbox.read_transcript())
    session.wait_for(draft, timeout=5)
    assert mock_api.count("main") == 4  # the draft was never sent


def test_tui_without_watcher_stops_through_the_hooks_own_detection(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_mods: Path,
    tui: Callable[..., TuiSession],
) -> None:
    mock_api.configure(default=Reply(text=SAME, delay=0.3), evaluator=EvaluatorPolicy())
    session = tui(version=claude_mods, plugin_dir=PLUGIN)
    _tui_goal_loop(session, mock_api)
    assert settled_main_count(mock_api) == 4
    # One line, once the result is known, after Claude Code's own "Goal cleared: ...".
    screen = one_line(session.wait_for("goal cleared.", timeout=10))
    assert CLEARED_LINE in screen and "clearing the goal" not in screen
    assert screen.index("Goal cleared:") < screen.index(CLEARED_LINE)
    assert cleared(sandbox.read_transcript())
    detections = journal_events(sandbox, "detection")
    assert [d["source"] for d in detections] == ["hook"]
    assert [d["located_by"] for d in detections] == ["anchor"]  # placed, not guessed


# -- set up as a user does: loop-killer install, no --plugin-dir -----------------------------


def test_set_up_with_loop_killer_install_the_tui_loop_is_cut_and_the_goal_cleared(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_newest_and_oldest: Path,
    tui: Callable[..., TuiSession],
) -> None:
    claude = claude_newest_and_oldest
    done = install_plugin(sandbox, version=claude)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the plugin is installed" in done.stdout, done.stdout
    (ours,) = [p for p in installed_plugins(sandbox, version=claude)
               if p.get("id") == "loop-killer@loop-killer"]
    assert ours["enabled"] is True and ours["scope"] == "user", ours
    copy = Path(ours["installPath"])  # Claude Code's own copy of plugin/, in HOME...
    assert copy.is_relative_to(sandbox.home) and (copy / "hooks" / "launch.py").is_file()
    # ...though from a local marketplace it runs the hooks from the folder itself.
    assert ours.get("readFromFolder", str(PLUGIN)) == str(PLUGIN)
    recorded = (_state_dir(sandbox) / "python").read_text().strip()
    assert os.path.samefile(recorded, sys.executable)  # this package's interpreter
    mock_api.configure(default=Reply(text=SAME, delay=0.3), evaluator=EvaluatorPolicy())
    session = tui(version=claude)
    assert "--plugin-dir" not in session.argv
    _tui_goal_loop(session, mock_api)
    assert settled_main_count(mock_api) == 4
    assert CLEARED_LINE in one_line(session.wait_for("goal cleared.", timeout=10))
    assert cleared(sandbox.read_transcript())
    assert "cleared" in outcomes(sandbox), outcomes(sandbox)


# -- 2.1.250: no mods ------------------------------------------------------------------------


def test_old_version_tui_is_cleared_by_typing_into_its_own_pane(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_250: Path,
    tui: Callable[..., TuiSession],
) -> None:
    mock_api.configure(default=Reply(text=SAME, delay=0.3), evaluator=EvaluatorPolicy())
    session = tui(version=claude_250, plugin_dir=PLUGIN)
    _tui_goal_loop(session, mock_api)
    assert settled_main_count(mock_api) == 4
    entries = sandbox.read_transcript()
    assert cleared(entries)
    last = journal_events(sandbox, "outcome")[-1]
    assert last["outcome"] == "cleared" and last["hands"] == "tmux", last
    assert CLEARED_LINE in one_line(session.wait_for("goal cleared.", timeout=10))


def test_old_version_tui_never_types_into_a_draft_and_says_the_goal_is_paused(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_250: Path,
    tui: Callable[..., TuiSession],
) -> None:
    draft = "do not touch this draft"
    mock_api.configure(default=Reply(text=SAME, delay=0.8), evaluator=EvaluatorPolicy())
    session = tui(version=claude_250, plugin_dir=PLUGIN)
    session.wait_ready()
    session.type_line(GOAL)
    mock_api.wait_for_count("main", 2, timeout=30)
    session.send_keys(draft)
    session.wait_for(draft, timeout=10)
    assert settled_main_count(mock_api, settle=3) == 4
    screen = session.wait_for("/goal clear", timeout=15)
    assert draft in screen
    assert PAUSED_LINE in one_line(screen)
    assert not cleared(sandbox.read_transcript())
    assert mock_api.count("main") == 4
    assert "cleared" not in outcomes(sandbox)


def test_old_version_headless_stops_the_turn_with_an_honest_notice(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_250: Path
) -> None:
    mock_api.configure(default=Reply(text=SAME, delay=0.05), evaluator=EvaluatorPolicy())
    rc, output, stderr = run_headless(sandbox, GOAL, version=claude_250, plugin_dir=PLUGIN)
    assert rc == 0, stderr
    assert output is not None and output.get("terminal_reason") == "stop_hook_prevented"
    assert settled_main_count(mock_api) == 4
    entries = sandbox.read_transcript()
    assert not cleared(entries)
    assert outcomes(sandbox)[-1] == "not_possible", outcomes(sandbox)
    # No stop_hook_summary lines here: reply 3 was placed by the anchor its predecessors
    # left, not by comparing clocks (which fired a reply late on a loaded machine).
    detections = journal_events(sandbox, "detection")
    assert [(d["located_by"], d["count"]) for d in detections] == [("anchor", 3)]
    shown = " ".join(notices(entries)) + json.dumps(output) + stderr
    assert PAUSED_LINE in shown, shown
    assert entry_text(stop_hook_feedback(entries)[0]).startswith("Stop hook feedback:")


def test_tui_a_goal_rerunning_the_same_failing_command_is_cut_and_cleared(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path,
    tui: Callable[..., TuiSession],
) -> None:
    """In the terminal UI the transcript lags the Stop hook (the reply's last line is often
    not written yet): the answer's call and result, written before it, still tell that its
    work brought nothing new (engine.run), and the loop ends on the 3rd similar answer."""
    settings = sandbox.home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash"]}}))

    def script(index: int, body: dict) -> Reply:
        if index % 2 == 0:
            return Reply(text="Running the auth tests.", delay=0.1, tool_calls=[
                ToolCall("Bash", {"command": "echo 'auth tests: 3 passed, 1 failed'; exit 1",
                                  "description": "Run the auth tests"})])
        return Reply(text=SAME, delay=0.3)

    mock_api.configure(script, evaluator=EvaluatorPolicy())
    session = tui(version=claude_332, plugin_dir=PLUGIN,
                  extra_args=["--permission-mode", "acceptEdits"])
    _tui_goal_loop(session, mock_api)
    assert settled_main_count(mock_api) == 8  # the kickoff's answer and 3 more, 2 requests each
    assert cleared(sandbox.read_transcript())
    assert CLEARED_LINE in one_line(session.wait_for("goal cleared.", timeout=10))
    detections = journal_events(sandbox, "detection")
    assert [d["rule"] for d in detections if d["rule"] != "TOOL_REPEAT"] == ["SAME_REPLY_TURNS"]
