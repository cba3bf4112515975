"""Who runs /goal clear: the mod when it is active, else typing into the session's own tmux
(or screen) pane, and only when that is safe; a real tmux server on a private socket runs a
fake Claude-like prompt in these tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e.harness import missing_tool_reason
from loop_killer.hooks.screen import find_proof, hardcopy_text, read_prompt_input
from loop_killer.hooks.stop_hook import run
from must_run import unavailable
from transcripts import CONDITION
from waits import wait_for

from .kit import fixture_transcript, journal, lines_of, raw, replay, stop_input

FAKE = Path(__file__).with_name("fake_prompt.py")
SESSION = "a26ba613-efc5-4fa5-919a-77fca5250a20"


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        unavailable(missing_tool_reason(tool))
    return path


class Pane:
    """A fake Claude prompt in a pane of a private tmux server."""

    def __init__(self, root: Path, transcript: Path, *fake_args: str) -> None:
        self.socket = f"lk-hook-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.log = root / "submitted.log"
        self.log.touch()
        self.transcript = transcript
        command = [sys.executable, str(FAKE), "--transcript", str(transcript), "--log",
                   str(self.log), "--condition", CONDITION, *fake_args]
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "120", "-y", "30",
                  "--", *command)
        self.pane = self.tmux("display-message", "-p", "-t", "t", "#{pane_id}").strip()
        self.socket_path = self.tmux("display-message", "-p", "-t", "t",
                                     "#{socket_path}").strip()
        server_pid = self.tmux("display-message", "-p", "-t", "t", "#{pid}").strip()
        self.env = {"TMUX": f"{self.socket_path},{server_pid},0", "TMUX_PANE": self.pane}
        self.wait_for("\u276f")

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, timeout=10, check=False)
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.pane)

    def wait_for(self, text: str, timeout: float = 5.0) -> str:
        screen = ""

        def shown() -> bool:
            nonlocal screen
            screen = self.screen()
            return text in screen

        wait_for(shown, timeout, lambda: f"{text!r} on screen:\n{screen}", every=0.02)
        return screen

    def submitted(self) -> list[str]:
        return self.log.read_text().splitlines()

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=10, check=False)
        Path(self.socket_path).unlink(missing_ok=True)


@pytest.fixture
def tmux_pane(tmp_path: Path) -> Iterator:
    _need("tmux")
    panes: list[Pane] = []

    def start(transcript: Path, *fake_args: str) -> Pane:
        pane = Pane(tmp_path, transcript, *fake_args)
        panes.append(pane)
        return pane

    yield start
    for pane in panes:
        pane.close()


def _env(state: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(state.parent.parent), "CLAUDE_CONFIG_DIR": str(state.parent),
            "PATH": os.environ["PATH"], **extra}


def _cut(tmp_path: Path, state: Path, scenario: str = "goal-same") -> Path:
    """The scenario's transcript as the hook for its 3rd answer to a re-prompt finds it,
    the turn's hooks before it run."""
    path = tmp_path / "proj" / f"{SESSION}.jsonl"
    replay(lines_of(fixture_transcript(scenario)), path, env=_env(state), before=3)
    return path


def test_inside_tmux_the_hook_types_goal_clear_and_confirms_it(
    tmp_path: Path, state: Path, tmux_pane
) -> None:
    transcript = _cut(tmp_path, state)
    pane = tmux_pane(transcript)
    output = run(raw(stop_input(transcript)), env=_env(state, **pane.env))
    assert pane.submitted() == ["/goal clear"]
    assert find_proof(transcript.read_bytes()) == "all tests in test/auth pass"
    assert output is not None and output["continue"] is False
    assert output["systemMessage"] == (
        "loop-killer: SAME_REPLY_TURNS (3 similar replies to re-prompts): loop stopped, goal "
        "cleared.")
    assert output["terminalSequence"] == (
        "\x1b]9;loop-killer: loop stopped (SAME_REPLY_TURNS), goal cleared\x07")
    outcome = next(r for r in journal(state) if r["event"] == "outcome")
    assert (outcome["outcome"], outcome["hands"], outcome["evidence"]) == (
        "cleared", "tmux", "proof line")


def test_a_draft_in_the_prompt_box_is_never_typed_into(
    tmp_path: Path, state: Path, tmux_pane
) -> None:
    transcript = _cut(tmp_path, state)
    pane = tmux_pane(transcript, "--draft", "please also check the lin")
    before = pane.screen()
    output = run(raw(stop_input(transcript)), env=_env(state, **pane.env))
    assert output is not None and output["continue"] is False  # the loop is still stopped
    assert "goal only paused: type /goal clear to clear it" in output["systemMessage"]
    assert "you have text in the prompt" in output["systemMessage"]
    assert pane.submitted() == []
    assert pane.screen() == before
    assert find_proof(transcript.read_bytes()) is None
    outcome = next(r for r in journal(state) if r["event"] == "outcome")
    assert (outcome["outcome"], outcome["hands"]) == ("not_possible", "tmux")


@pytest.mark.parametrize("at", ["before", "after"])
def test_typing_that_races_ours_gets_our_command_taken_back_out(
    tmp_path: Path, state: Path, tmux_pane, at: str
) -> None:
    """The person starts typing between the hook's look at the box and its keys: Enter is
    not pressed, and exactly the /goal clear it typed leaves their prompt again."""
    transcript = _cut(tmp_path, state)
    pane = tmux_pane(transcript, "--interject", "my own words", "--interject-at", at)
    output = run(raw(stop_input(transcript)), env=_env(state, **pane.env))
    screen = pane.wait_for("\u276f\u00a0my own words")
    assert "/goal clear" not in screen.split("\u276f\u00a0my own words")[1].split("\n")[0]
    assert pane.submitted() == []
    assert find_proof(transcript.read_bytes()) is None
    assert output is not None and output["continue"] is False
    assert "goal only paused: type /goal clear to clear it" in output["systemMessage"]
    assert "taken back out" in output["systemMessage"]
    outcome = next(r for r in journal(state) if r["event"] == "outcome")
    assert (outcome["outcome"], outcome["hands"]) == ("not_possible", "tmux")
    pane.tmux("send-keys", "-t", pane.pane, "Enter")  # the person sends their prompt
    wait_for(pane.submitted, what="the prompt submitted", every=0.02)
    assert pane.submitted() == ["my own words"]


def test_dim_placeholder_text_is_not_a_draft(tmp_path: Path, state: Path, tmux_pane) -> None:
    transcript = _cut(tmp_path, state)
    pane = tmux_pane(transcript, "--placeholder", 'Try "fix lint errors"')
    output = run(raw(stop_input(transcript)), env=_env(state, **pane.env))
    assert pane.submitted() == ["/goal clear"]
    assert output is not None and output["systemMessage"].endswith(": loop stopped, goal cleared.")


def test_with_the_mod_active_nothing_is_typed(tmp_path: Path, state: Path, tmux_pane) -> None:
    transcript = _cut(tmp_path, state)
    pane = tmux_pane(transcript)
    output = run(raw(stop_input(transcript, mod=True)), env=_env(state, **pane.env))
    # A marker typed after the hook returned: anything the hook had typed is logged first.
    pane.tmux("send-keys", "-t", pane.pane, "-l", "marker")
    pane.tmux("send-keys", "-t", pane.pane, "Enter")
    wait_for(lambda: "marker" in pane.submitted(), what="the marker submitted", every=0.02)
    assert pane.submitted() == ["marker"]
    assert output is not None and output["continue"] is False
    assert "systemMessage" not in output and "terminalSequence" not in output
    context = output["hookSpecificOutput"]["additionalContext"]
    assert output["hookSpecificOutput"]["hookEventName"] == "Stop"
    assert context.startswith("loop-killer: {")
    outcome = next(r for r in journal(state) if r["event"] == "outcome")
    assert (outcome["outcome"], outcome["hands"]) == ("clear_queued", "mod")


def test_without_a_goal_nothing_is_typed(tmp_path: Path, state: Path, tmux_pane) -> None:
    transcript = _cut(tmp_path, state, "command-hook-loop")
    pane = tmux_pane(transcript)
    output = run(raw(stop_input(transcript, message="I looked at the auth tests again and they "
                                "still fail; I will keep working.")),
                 env=_env(state, **pane.env))
    assert pane.submitted() == []
    assert output is not None and output["systemMessage"] == (
        "loop-killer: SAME_REPLY_TURNS (3 similar replies to re-prompts): loop stopped; no goal "
        "was set.")
    outcome = next(r for r in journal(state) if r["event"] == "outcome")
    assert (outcome["outcome"], outcome["hands"]) == ("stopped_no_goal", "none")


def test_no_proof_means_sent_but_not_confirmed(tmp_path: Path, state: Path, tmux_pane) -> None:
    transcript = _cut(tmp_path, state)
    pane = tmux_pane(transcript, "--no-proof")
    started = time.monotonic()
    output = run(raw(stop_input(transcript)), env=_env(state, **pane.env))
    took = time.monotonic() - started
    assert pane.submitted() == ["/goal clear"]
    assert 1.4 <= took < 1.5 + 8  # the bounded wait for the proof (generous: a loaded CI)
    assert output is not None
    assert output["systemMessage"] == (
        "loop-killer: SAME_REPLY_TURNS (3 similar replies to re-prompts): loop stopped; the result "
        "of /goal clear is unknown (no proof within 1.5 s): if the goal is still set, type "
        "/goal clear.")


def test_the_commands_own_result_on_screen_confirms_too(
    tmp_path: Path, state: Path, tmux_pane
) -> None:
    transcript = _cut(tmp_path, state)
    pane = tmux_pane(transcript, "--screen-only")
    output = run(raw(stop_input(transcript)), env=_env(state, **pane.env))
    assert pane.submitted() == ["/goal clear"]
    assert output is not None and output["systemMessage"].endswith(": loop stopped, goal cleared.")
    outcome = next(r for r in journal(state) if r["event"] == "outcome")
    assert outcome["evidence"] == "screen"


def test_an_earlier_no_goal_set_on_screen_is_not_this_commands_answer(
    tmp_path: Path, state: Path, tmux_pane
) -> None:
    """An earlier ``/goal clear`` that found no goal is still on screen while ours is being
    answered: only a new "No goal set" is ours (an audit found the old one taken for it,
    the person told "no goal was set" of a goal cleared a moment later)."""
    transcript = _cut(tmp_path, state)
    pane = tmux_pane(transcript, "--screen-only", "--earlier-no-goal", "--clear-after", "0.4")
    pane.wait_for("No goal set")
    output = run(raw(stop_input(transcript)), env=_env(state, **pane.env))
    assert pane.submitted() == ["/goal clear"]
    assert output is not None and output["systemMessage"].endswith(": loop stopped, goal cleared.")


def test_a_pane_in_copy_mode_is_not_typed_into(tmp_path: Path, state: Path, tmux_pane) -> None:
    transcript = _cut(tmp_path, state)
    pane = tmux_pane(transcript)
    pane.tmux("copy-mode", "-t", pane.pane)
    output = run(raw(stop_input(transcript)), env=_env(state, **pane.env))
    assert pane.submitted() == []
    assert output is not None and "copy mode" in output["systemMessage"]


def test_a_missing_tmux_blocks_nothing_more_than_the_loop(tmp_path: Path, state: Path) -> None:
    transcript = _cut(tmp_path, state)
    env = _env(state, TMUX="/nonexistent,1,0", TMUX_PANE="%0")
    env["PATH"] = str(tmp_path / "empty-bin")
    output = run(raw(stop_input(transcript)), env=env)
    assert output is not None and output["continue"] is False
    assert "tmux is not installed here" in output["systemMessage"]


def test_outside_any_multiplexer_the_notice_says_what_to_do(tmp_path: Path, state: Path) -> None:
    transcript = _cut(tmp_path, state)
    output = run(raw(stop_input(transcript)), env=_env(state))
    assert output is not None and output["systemMessage"] == (
        "loop-killer: SAME_REPLY_TURNS (3 similar replies to re-prompts): loop stopped, goal only "
        "paused: type /goal clear to clear it (no loop-killer mod in this Claude Code, and not "
        "in tmux or screen).")


# -- GNU screen ------------------------------------------------------------------------------


@pytest.fixture
def screen_window(tmp_path: Path) -> Iterator:
    _need("screen")
    names: list[str] = []
    folder = tmp_path / "screen-sockets"
    folder.mkdir(mode=0o700)
    env = {**os.environ, "SCREENDIR": str(folder), "TERM": "xterm-256color",
           "LANG": "C.UTF-8"}

    def start(transcript: Path, *fake_args: str) -> tuple[dict[str, str], Path]:
        name = f"lk{uuid.uuid4().hex[:8]}"
        log = tmp_path / "submitted.log"
        log.touch()
        subprocess.run(["screen", "-U", "-dmS", name, "-c", "/dev/null", sys.executable, str(FAKE),
                        "--transcript", str(transcript), "--log", str(log),
                        "--condition", CONDITION, *fake_args],
                       env=env, check=True, timeout=10)
        names.append(name)
        sty = wait_for(lambda: next((p.name for p in folder.iterdir()
                                     if p.name.endswith("." + name)), ""),
                       what="screen to start", every=0.05)
        # Ready once the fake's prompt is drawn: its status line is on screen.
        copy = tmp_path / f"{name}.screen"

        def drawn() -> bool:
            subprocess.run(["screen", "-S", name, "-X", "hardcopy", str(copy)], env=env,
                           capture_output=True, timeout=10, check=False)
            return "auto mode on" in (copy.read_text(errors="replace") if copy.exists() else "")

        wait_for(drawn, 10, "the fake prompt drawn", every=0.05)
        return {"STY": sty, "WINDOW": "0", "SCREENDIR": str(folder)}, log

    yield start
    for name in names:
        subprocess.run(["screen", "-S", name, "-X", "quit"], env=env, capture_output=True,
                       timeout=10, check=False)


def test_inside_screen_the_hook_types_after_reading_the_hardcopy(
    tmp_path: Path, state: Path, screen_window
) -> None:
    transcript = _cut(tmp_path, state)
    env, log = screen_window(transcript)
    output = run(raw(stop_input(transcript)), env=_env(state, **env))
    assert log.read_text().splitlines() == ["/goal clear"]
    assert output is not None and output["systemMessage"].endswith(": loop stopped, goal cleared.")


def test_inside_screen_a_draft_is_left_alone(tmp_path: Path, state: Path, screen_window) -> None:
    transcript = _cut(tmp_path, state)
    env, log = screen_window(transcript, "--draft", "half a thought")
    output = run(raw(stop_input(transcript)), env=_env(state, **env))
    assert log.read_text() == ""
    assert output is not None and "you have text in the prompt" in output["systemMessage"]


def test_inside_screen_typing_that_races_ours_gets_it_taken_back(
    tmp_path: Path, state: Path, screen_window
) -> None:
    transcript = _cut(tmp_path, state)
    env, log = screen_window(transcript, "--interject", "mine", "--interject-at", "after")
    output = run(raw(stop_input(transcript)), env=_env(state, **env))
    assert log.read_text() == ""
    assert output is not None and "taken back out" in output["systemMessage"]
    subprocess.run(["screen", "-S", env["STY"], "-p", "0", "-X", "stuff", "\r"], timeout=10,
                   env={**os.environ, "SCREENDIR": env["SCREENDIR"]}, check=True)
    wait_for(log.read_text, what="the prompt submitted", every=0.02)
    assert log.read_text().splitlines() == ["mine"]


# -- reading the prompt box (pure) -----------------------------------------------------------


SCREENS = Path(__file__).with_name("screens")


@pytest.mark.parametrize("name, expected", [
    ("screen-0-start.txt", ""),
    ("screen-1-typed.txt", "/goal all tests in test/auth pass"),
    ("screen-2-after-3-replies.txt", ""),
    ("screen-3-just-after-clear.txt", ""),
    ("screen-4-final.txt", ""),
    ("screen-5-after-exit.txt", None),
    ("real-2.1.250-empty.ansi", ""),
    ("real-2.1.250-draft.ansi", "please also fix the lin"),
    ("real-2.1.250-multiline.ansi", "please also fix the lin\nand the second line"),
    ("real-2.1.328-empty.ansi", ""),
    ("real-2.1.328-draft.ansi", "please also fix the lin"),
    ("real-2.1.328-multiline.ansi", "please also fix the lin\nand the second line"),
])
def test_the_prompt_box_of_real_claude_code_screens_is_read(name: str, expected) -> None:
    screen = (SCREENS / name).read_text(encoding="utf-8")
    assert read_prompt_input(screen) == expected


def test_a_screen_4_hardcopy_keeps_only_low_bytes_and_is_still_read() -> None:
    rule = b"\x00" * 70
    empty = b"history\n\n" + rule + b"\no\xa0\n" + rule + b"\n  \xf5\xf5 auto mode on\n"
    assert read_prompt_input(hardcopy_text(empty)) == ""
    draft = b"\n" + rule + b"\no\xa0half a thought\n" + rule + b"\n"
    assert read_prompt_input(hardcopy_text(draft)) == "half a thought"
    cjk = b"\n" + rule + b"\no\xa0\x2d\n" + rule + b"\n"  # U+4E2D keeps its low byte 0x2D
    assert read_prompt_input(hardcopy_text(cjk)) == "-"


def test_the_prompt_box_reading_handles_colours_multiline_and_old_borders() -> None:
    rule = "\x1b[38;5;244m" + "\u2500" * 60 + "\x1b[39m"
    empty = (f"history\n\u276f earlier prompt\n{rule}\n\x1b[39m\u276f\u00a0\x1b[7m\n"
             f"\x1b[0m{rule}\n  status")
    assert read_prompt_input(empty) == ""
    draft = f"{rule}\n\u276f\u00a0hello draft\n  second line\n{rule}\n"
    assert read_prompt_input(draft) == "hello draft\n  second line".replace("  ", "")
    dim = f"{rule}\n\u276f\u00a0\x1b[2mTry \"something\"\x1b[22m\n{rule}\n"
    assert read_prompt_input(dim) == ""
    ghost = f"{rule}\n\u276f\u00a0/go\x1b[2mal\x1b[0m\n{rule}\n"
    assert read_prompt_input(ghost) == "/go"
    line = "\u2500" * 40
    boxed = f"\u256d{line}\u256e\n\u2502 > \u00a0 \u2502\n\u2570{line}\u256f"
    assert read_prompt_input(boxed) == ""
    assert read_prompt_input("no box here\n$ ") is None
    assert read_prompt_input(f"{rule}\n\u276f\u00a0runs off the screen") is None
