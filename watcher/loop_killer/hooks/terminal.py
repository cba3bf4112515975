"""The hands without the mod: type ``/goal clear`` into the session's tmux or screen pane
when the prompt box is empty, press Enter once it holds exactly that, and await the proof."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..state.files import NotAFile, file_size, read_new_bytes, read_small_file, remove_file
from .notice import (
    OUTCOME_CLEARED,
    OUTCOME_NO_GOAL,
    OUTCOME_NOT_POSSIBLE,
    OUTCOME_SENT,
    Hands,
    Outcome,
)
from .screen import COMMAND, find_proof, hardcopy_text, read_prompt_input, said_of_goal

__all__ = ["CONFIRM_TIMEOUT", "Runner", "TypingResult", "command_runner", "poll", "type_goal_clear"]

CONFIRM_TIMEOUT = 1.5  # longest wait (s) for the proof that the typed /goal clear ran

ECHO_TIMEOUT = 0.5  # longest wait (s) for the typed text to show before pressing Enter

_TOOL_TIMEOUT = 2.0  # one tmux / screen call
_POLL = 0.02
_SCREEN_EVERY = 5  # look at the screen on every 5th poll (the transcript on each)


@dataclass(frozen=True, slots=True)
class TypingResult:
    """What typing ``/goal clear`` achieved."""

    outcome: Outcome
    why: str = ""  # in words, for the notice and the log
    evidence: str = ""  # what proved it: "proof line", "screen"


Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]
T = TypeVar("T")


def poll(
    check: Callable[[], T | None],
    *,
    timeout: float,
    interval: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T | None:
    """Call ``check`` until it returns something, or ``timeout`` passes (at least once)."""
    deadline = clock() + max(0.0, timeout)
    while True:
        result = check()
        if result is not None:
            return result
        remaining = deadline - clock()
        if remaining <= 0:
            return None
        sleep(min(interval, remaining))


def command_runner(env: Mapping[str, str], *, timeout: float = 0.0) -> Runner:
    """Run a command with this environment, no stdin, output captured, timed."""
    full = dict(env)

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True, check=False, env=full,
                              timeout=timeout or _TOOL_TIMEOUT, stdin=subprocess.DEVNULL,
                              errors="replace")

    return run


class _Tmux:
    """A tmux pane: read its screen, type into it."""

    name = "tmux"

    def __init__(self, pane: str, run: Runner) -> None:
        self.pane = pane
        self.run = run

    def _tmux(self, *args: str) -> str:
        done = self.run(["tmux", *args])
        if done.returncode != 0:
            raise RuntimeError((done.stderr or "").strip() or f"tmux exited {done.returncode}")
        return done.stdout

    def state_problem(self) -> str | None:
        state = self._tmux("display-message", "-p", "-t", self.pane,
                           "#{pane_in_mode} #{pane_dead}").split()
        if state[:1] == ["1"]:
            return "the tmux pane is in copy mode"
        if state[1:2] == ["1"]:
            return "the tmux pane is dead"
        return None

    def screen(self) -> str | None:
        return self._tmux("capture-pane", "-p", "-e", "-t", self.pane)

    def type_text(self, text: str) -> None:
        self._tmux("send-keys", "-t", self.pane, "-l", text)

    def press_enter(self) -> None:
        self._tmux("send-keys", "-t", self.pane, "Enter")

    def erase(self, count: int, after: int) -> None:
        """Delete ``count`` characters ending ``after`` characters before the input's end."""
        keys = ["Left"] * after + ["BSpace"] * count + ["Right"] * after
        self._tmux("send-keys", "-t", self.pane, *keys)


class _Screen:
    """A GNU screen window, as ``_Tmux``."""

    name = "screen"

    def __init__(self, session: str, window: str, run: Runner) -> None:
        self.session = session
        self.window = window
        self.run = run

    def _screen(self, *args: str) -> None:
        done = self.run(["screen", "-S", self.session, "-p", self.window, "-X", *args])
        if done.returncode != 0:
            problem = (done.stderr or done.stdout or "").strip()
            raise RuntimeError(problem or f"screen exited {done.returncode}")

    def state_problem(self) -> str | None:
        return None

    def screen(self) -> str | None:
        folder = tempfile.mkdtemp(prefix="loop-killer-")
        path = os.path.join(folder, "hardcopy")
        try:
            self._screen("hardcopy", path)
            # screen writes the file from its own process, a moment later.
            data = poll(lambda: _read_small(path), timeout=0.5, interval=_POLL)
            return None if data is None else hardcopy_text(data)
        finally:
            remove_file(path)
            with contextlib.suppress(OSError):
                os.rmdir(folder)

    def type_text(self, text: str) -> None:
        self._screen("stuff", text)

    def press_enter(self) -> None:
        self._screen("stuff", "\r")

    def erase(self, count: int, after: int) -> None:
        self._screen("stuff", "\x1b[D" * after + "\x7f" * count + "\x1b[C" * after)


_Pane = _Tmux | _Screen


def _read_small(path: str) -> bytes | None:
    """A hardcopy once screen has written it (never through a link, never blocking)."""
    try:
        data = read_small_file(path, 1024 * 1024)
    except (FileNotFoundError, NotAFile):
        return None
    return data or None


def type_goal_clear(hands: Hands, *, env: Mapping[str, str], transcript_path: str) -> TypingResult:
    """Type ``/goal clear`` into this session's own pane if safe; await the proof."""
    run = command_runner(env)
    terminal: _Pane
    if hands == "tmux" and env.get("TMUX_PANE"):
        terminal = _Tmux(env["TMUX_PANE"], run)
    elif hands == "screen" and env.get("STY") and env.get("WINDOW"):
        terminal = _Screen(env["STY"], env["WINDOW"], run)
    else:
        return TypingResult(OUTCOME_NOT_POSSIBLE, "not inside tmux or screen")
    try:
        return _type_and_confirm(terminal, transcript_path, CONFIRM_TIMEOUT)
    except FileNotFoundError:
        return TypingResult(OUTCOME_NOT_POSSIBLE, f"{terminal.name} is not installed here")
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        text = str(error).splitlines()[0] if str(error) else type(error).__name__
        return TypingResult(OUTCOME_NOT_POSSIBLE, f"{terminal.name} failed: {text[:120]}")


def _type_and_confirm(terminal: _Pane, transcript_path: str, timeout: float) -> TypingResult:
    problem = terminal.state_problem()
    if problem:
        return TypingResult(OUTCOME_NOT_POSSIBLE, problem)
    before = terminal.screen()
    typed = read_prompt_input(before) if before is not None else None
    if typed is None:
        where = "screen" if terminal.name == "screen" else "the pane"
        return TypingResult(OUTCOME_NOT_POSSIBLE,
                            f"could not find Claude Code's empty prompt box in {where}")
    if typed:
        return TypingResult(OUTCOME_NOT_POSSIBLE, "you have text in the prompt; not typing into it")
    assert before is not None
    said_before = said_of_goal(before)
    start = file_size(transcript_path)
    terminal.type_text(COMMAND)
    last: list[str | None] = [None]
    shown = poll(lambda: _shows(terminal, COMMAND, last), timeout=ECHO_TIMEOUT, interval=_POLL)
    if shown is not True:
        # Not exactly our command in the box (the person started typing, or it never
        # showed): Enter is not pressed, and what we typed is taken back out.
        seen = shown if isinstance(shown, str) else last[0]
        if _take_back(terminal, seen):
            why = ("you started typing in the prompt; Enter was not pressed and "
                   f"{COMMAND} was taken back out of it" if seen else
                   f"{COMMAND} did not show in the prompt; Enter was not pressed and it "
                   "was taken back out")
            return TypingResult(OUTCOME_NOT_POSSIBLE, why)
        return TypingResult(OUTCOME_SENT, f"the prompt shows {(seen or '')[:40]!r} after "
                                          f"typing {COMMAND}; Enter was not pressed: "
                                          "check your prompt")
    terminal.press_enter()
    return _confirm(terminal, transcript_path, start, said_before, timeout)


def _shows(terminal: _Pane, text: str, last: list[str | None]) -> bool | str | None:
    """True when the box holds exactly ``text``; its text once it holds more; else None."""
    screen = terminal.screen()
    current = read_prompt_input(screen) if screen is not None else None
    last[0] = current
    if current == text:
        return True
    if current and text in current.replace("\n", ""):
        return current
    return None


def _take_back(terminal: _Pane, seen: str | None) -> bool:
    """Take the ``COMMAND`` we typed back out of the box; False when that is unsafe."""
    if not seen or COMMAND.startswith(seen):
        terminal.erase(len(COMMAND), 0)
        return True
    flat = seen.replace("\n", "")  # the lines of a wrapped box, joined
    at = flat.rfind(COMMAND)
    if at < 0:
        return False  # mixed in some other way: leave the person's text alone
    terminal.erase(len(COMMAND), len(flat) - at - len(COMMAND))
    return True


def _confirm(terminal: _Pane, transcript_path: str, start: int | None,
             said_before: tuple[int, int], timeout: float) -> TypingResult:
    tick = 0

    def check() -> TypingResult | None:
        nonlocal tick
        tick += 1
        if start is not None:
            condition = find_proof(read_new_bytes(transcript_path, start))
            if condition is not None:
                return TypingResult(OUTCOME_CLEARED, f"Goal cleared: {condition}", "proof line")
        if tick % _SCREEN_EVERY == 0:
            screen = terminal.screen()
            if screen is not None:
                cleared, no_goal = said_of_goal(screen)
                if cleared > said_before[0]:
                    return TypingResult(OUTCOME_CLEARED, "Goal cleared (on screen)", "screen")
                if no_goal > said_before[1]:  # (an older answer may still be on screen)
                    return TypingResult(OUTCOME_NO_GOAL, "/goal clear found no goal", "screen")
        return None

    result = poll(check, timeout=timeout, interval=_POLL)
    if result is not None:
        return result
    return TypingResult(OUTCOME_SENT, f"no proof within {timeout:g} s")
