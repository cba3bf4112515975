"""The hands without the mod: type ``/goal clear`` into the session's own terminal pane.

Used only where the mod is not active for this Stop (Claude Code before 2.1.287, or mods
disabled) and the transcript shows a goal that is set. Inside tmux (``TMUX_PANE``) the
hook reads the pane first (``capture-pane``) and types only when Claude Code's prompt box
is on screen and empty: never into a prompt the person is writing. GNU screen is read
with ``hardcopy`` the same way; when its screen cannot be read, nothing is typed. Enter is
pressed only once the box holds exactly ``/goal clear``; if the person started typing in
the meantime, what was typed is taken back out of their prompt (cursor to just after it,
one backspace per character). After Enter, the hook waits briefly for the proof: the
``goal_status`` met:true sentinel line appended to the transcript (only bytes written
after typing are read), or ``Goal cleared:`` appearing on screen.

Also here: the mod's outcome files (the mod's hands report back through them), turned into
detection-log lines.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .notice import OUTCOME_CLEARED, OUTCOME_NO_GOAL, OUTCOME_NOT_POSSIBLE, OUTCOME_SENT
from .wait import file_size, poll, read_new_bytes

__all__ = [
    "COMMAND",
    "CONFIRM_TIMEOUT",
    "TypingResult",
    "find_proof",
    "hardcopy_text",
    "outcome_paths",
    "read_prompt_input",
    "sweep_mod_outcomes",
    "type_goal_clear",
    "write_mod_plan_record",
]

log = logging.getLogger(__name__)

COMMAND = "/goal clear"
CONFIRM_TIMEOUT = 1.5
"""Longest wait (seconds) for the proof that the typed ``/goal clear`` ran."""

ECHO_TIMEOUT = 0.5
"""Longest wait for the typed text to show in the prompt box before pressing Enter."""

_TOOL_TIMEOUT = 2.0  # one tmux / screen call
_POLL = 0.02
_SCREEN_EVERY = 5  # look at the screen on every 5th poll (the transcript on each)

_SGR = re.compile(r"\x1b\[([0-9;:]*)m")
_ESCAPE = re.compile(r"\x1b(?:\[[0-9;:?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_RULE_CHARS = "─━═-╭╮╰╯┌┐└┘"
_PROMPT_CHARS = ("❯", ">", "›")
_BORDERS = "│┃|"
_BLANKS = " \u00a0\t"


@dataclass(frozen=True, slots=True)
class TypingResult:
    """What typing ``/goal clear`` achieved."""

    outcome: str  # cleared | sent_unconfirmed | not_possible | stopped_no_goal
    why: str = ""  # in words, for the notice and the log
    evidence: str = ""  # what proved it: "proof line", "screen"


# -- reading the screen (pure) -------------------------------------------------------------


def read_prompt_input(screen: str) -> str | None:
    """The text in Claude Code's prompt box on ``screen``; "" when empty, None when no box.

    The box is a horizontal rule, a line starting with the prompt sign (``❯`` or ``>``),
    perhaps more lines of the same input, and another rule (older builds draw side borders
    too). ``screen`` may hold SGR colour codes (``capture-pane -e``): dim text is a
    placeholder or a suggestion, not the person's input, and is left out.
    """
    lines = [_visible(line) for line in screen.splitlines()]
    for index in range(len(lines) - 1, 0, -1):
        line = _unbordered(lines[index])
        if not line.startswith(_PROMPT_CHARS) or not _is_rule(lines[index - 1]):
            continue
        bottom = next((j for j in range(index + 1, len(lines)) if _is_rule(lines[j])), None)
        if bottom is None:
            return None  # the box runs off the screen: unreadable
        first = line[1:]
        rest = [_unbordered(lines[j]) for j in range(index + 1, bottom)]
        return "\n".join([first, *rest]).strip(_BLANKS + "\n")
    return None


def _visible(line: str) -> str:
    """The line without escape codes and without the text drawn dim."""
    out: list[str] = []
    dim = False
    position = 0
    for match in _SGR.finditer(line):
        if not dim:
            out.append(line[position : match.start()])
        for code in (match.group(1) or "0").replace(":", ";").split(";"):
            if code in ("", "0", "22"):
                dim = False
            elif code == "2":
                dim = True
        position = match.end()
    if not dim:
        out.append(line[position:])
    return _ESCAPE.sub("", "".join(out)).rstrip(_BLANKS)


def _unbordered(line: str) -> str:
    text = line.strip(_BLANKS)
    if text[:1] in _BORDERS:
        text = text[1:]
    if text[-1:] in _BORDERS:
        text = text[:-1]
    return text.strip(_BLANKS)


def _is_rule(line: str) -> bool:
    text = line.strip(_BLANKS)
    return len(text) >= 10 and sum(ch in _RULE_CHARS for ch in text) >= 0.8 * len(text)


def hardcopy_text(data: bytes) -> str:
    """The text of a GNU screen ``hardcopy`` file.

    screen 4 writes only the low byte of each character cell: ``─`` (U+2500) comes out as
    NUL, ``❯`` (U+276F) as ``o`` and the no-break space after it as byte 0xA0. Such a file is
    mapped back for the box's rules and prompt sign; any text typed in the box keeps
    visible bytes (ASCII as is, other characters as some byte), so a draft still reads as
    not empty.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    lines = []
    for line in data.decode("latin-1").split("\n"):
        bare = line.strip(" ")
        if len(bare) >= 10 and set(bare) == {"\x00"}:
            line = line.replace("\x00", "\u2500")
        elif line.startswith("o\xa0"):
            line = "\u276f" + line[1:]
        lines.append(line.replace("\x00", " "))
    return "\n".join(lines)


def find_proof(data: bytes) -> str | None:
    """The condition of a ``goal_status`` met:true sentinel line in ``data`` (whole lines
    only), or None: the proof that ``/goal clear`` ran."""
    if b"goal_status" not in data:
        return None
    from ..engine import GoalStatus, parse_line

    for line in data.split(b"\n")[:-1]:
        if b"goal_status" not in line:
            continue
        event = parse_line(line)
        if isinstance(event, GoalStatus) and event.cleared:
            return event.condition
    return None


def _count_cleared(screen: str) -> int:
    return screen.count("Goal cleared")


# -- typing (I/O) --------------------------------------------------------------------------


Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def command_runner(env: Mapping[str, str], *, timeout: float = 0.0) -> Runner:
    """Run a command (tmux, screen, claude) with this environment (``TMUX`` names the
    server), no stdin, output captured, within ``timeout`` seconds (default: a tool's)."""
    full = dict(env)

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True, check=False, env=full,
                              timeout=timeout or _TOOL_TIMEOUT, stdin=subprocess.DEVNULL,
                              errors="replace")

    return run


class _Terminal:
    """One terminal multiplexer's pane: read its screen, type into it."""

    name = ""

    def state_problem(self) -> str | None:  # pragma: no cover - overridden
        return None

    def screen(self) -> str | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def type_text(self, text: str) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def press_enter(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def erase(self, count: int, after: int) -> None:  # pragma: no cover - overridden
        """Delete ``count`` characters that end ``after`` characters before the end of the
        input (cursor left ``after`` times, ``count`` backspaces, cursor back)."""
        raise NotImplementedError


class _Tmux(_Terminal):
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
        keys = ["Left"] * after + ["BSpace"] * count + ["Right"] * after
        self._tmux("send-keys", "-t", self.pane, *keys)


class _Screen(_Terminal):
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

    def screen(self) -> str | None:
        folder = tempfile.mkdtemp(prefix="loop-killer-")
        path = os.path.join(folder, "hardcopy")
        try:
            self._screen("hardcopy", path)
            # screen writes the file from its own process, a moment later.
            data = poll(lambda: _read_small(path), timeout=0.5, interval=_POLL)
            return None if data is None else hardcopy_text(data)
        finally:
            _remove_quietly(path)
            try:
                os.rmdir(folder)
            except OSError:
                pass

    def type_text(self, text: str) -> None:
        self._screen("stuff", text)

    def press_enter(self) -> None:
        self._screen("stuff", "\r")

    def erase(self, count: int, after: int) -> None:
        self._screen("stuff", "\x1b[D" * after + "\x7f" * count + "\x1b[C" * after)


def _read_small(path: str) -> bytes | None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        return None
    with open(path, "rb") as handle:
        return handle.read(1024 * 1024)


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def type_goal_clear(
    hands: str,
    *,
    env: Mapping[str, str],
    transcript_path: str,
    confirm_timeout: float = CONFIRM_TIMEOUT,
    run: Runner | None = None,
) -> TypingResult:
    """Type ``/goal clear`` and Enter into this session's own pane, if that is safe, and
    wait (at most ``confirm_timeout``) for the proof that it ran."""
    run = run or command_runner(env)
    terminal: _Terminal
    if hands == "tmux" and env.get("TMUX_PANE"):
        terminal = _Tmux(env["TMUX_PANE"], run)
    elif hands == "screen" and env.get("STY") and env.get("WINDOW"):
        terminal = _Screen(env["STY"], env["WINDOW"], run)
    else:
        return TypingResult(OUTCOME_NOT_POSSIBLE, "not inside tmux or screen")
    try:
        return _type_and_confirm(terminal, transcript_path, confirm_timeout)
    except FileNotFoundError:
        return TypingResult(OUTCOME_NOT_POSSIBLE, f"{terminal.name} is not installed here")
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        text = str(error).splitlines()[0] if str(error) else type(error).__name__
        return TypingResult(OUTCOME_NOT_POSSIBLE, f"{terminal.name} failed: {text[:120]}")


def _type_and_confirm(terminal: _Terminal, transcript_path: str, timeout: float) -> TypingResult:
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
    cleared_before = _count_cleared(_visible_screen(before))
    start = file_size(transcript_path)
    terminal.type_text(COMMAND)
    last: list[str | None] = [None]
    shown = poll(lambda: _shows(terminal, COMMAND, last), timeout=ECHO_TIMEOUT,
                 interval=_POLL)
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
    return _confirm(terminal, transcript_path, start, cleared_before, timeout)


def _shows(terminal: _Terminal, text: str, last: list[str | None]) -> bool | str | None:
    """True when the box holds exactly ``text``; the box's text once it holds ``text``
    among other text (the person typed too); None until then (``last``: what it held)."""
    screen = terminal.screen()
    current = read_prompt_input(screen) if screen is not None else None
    last[0] = current
    if current == text:
        return True
    if current and text in current.replace("\n", ""):
        return current
    return None


def _take_back(terminal: _Terminal, seen: str | None) -> bool:
    """Remove exactly the ``COMMAND`` we typed from the prompt box; False when that cannot
    be done safely (then nothing is touched).

    While the box shows nothing, or only the beginning of our command, our keys are the
    last ones in the pane's input: backspaces remove them. Once the box shows our command
    among the person's text, the cursor is moved to just after it first, then back.
    """
    if not seen or COMMAND.startswith(seen):
        terminal.erase(len(COMMAND), 0)
        return True
    flat = seen.replace("\n", "")  # the lines of a wrapped box, joined
    at = flat.rfind(COMMAND)
    if at < 0:
        return False  # mixed in some other way: leave the person's text alone
    terminal.erase(len(COMMAND), len(flat) - at - len(COMMAND))
    return True


def _confirm(terminal: _Terminal, transcript_path: str, start: int | None, cleared_before: int,
             timeout: float) -> TypingResult:
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
                visible = _visible_screen(screen)
                if _count_cleared(visible) > cleared_before:
                    return TypingResult(OUTCOME_CLEARED, "Goal cleared (on screen)", "screen")
                if "No goal set" in visible:
                    return TypingResult(OUTCOME_NO_GOAL, "/goal clear found no goal", "screen")
        return None

    result = poll(check, timeout=timeout, interval=_POLL)
    if result is not None:
        return result
    return TypingResult(OUTCOME_SENT, f"no proof within {timeout:g} s")


def _visible_screen(screen: str) -> str:
    return "\n".join(_visible(line) for line in screen.splitlines())


# -- the mod's outcome files -----------------------------------------------------------------
#
# For each plan handed to the mod, the hook writes ``<state>/outcomes/<key>.plan`` (what it
# knows: session, answer, rule, transcript and its size at the stop) and names
# ``<state>/outcomes/<key>.json`` as the plan's ``outcome_path``, which the mod (over)writes
# with ``{"status": "queued" | "cleared" | "no_goal" | "failed" | "unknown", "output", ...}``.
# The next hook run (any session) logs each settled plan once and removes both files.

OUTCOMES_DIR = "outcomes"
STALE_OUTCOME = 120.0
"""Seconds after which a plan the mod never settled is logged as unconfirmed."""

_MOD_STATUS = {
    "cleared": OUTCOME_CLEARED,
    "no_goal": OUTCOME_NO_GOAL,
    "failed": "clear_failed",
    "unknown": OUTCOME_SENT,
}


def outcome_paths(state: str, key: str) -> tuple[str, str]:
    """(the hook's plan record, the mod's outcome file) for a plan key."""
    folder = os.path.join(state, OUTCOMES_DIR)
    return os.path.join(folder, f"{key}.plan"), os.path.join(folder, f"{key}.json")


def write_mod_plan_record(state: str, key: str, record: dict[str, Any]) -> str:
    """Record a plan before the mod takes over; return the path the mod writes its outcome to."""
    from pathlib import Path

    import orjson

    from ..state.files import write_private_file
    from ..state.paths import ensure_private_dir

    plan_path, outcome_path = outcome_paths(state, key)
    ensure_private_dir(Path(plan_path).parent)
    write_private_file(Path(plan_path), orjson.dumps(record) + b"\n")
    return outcome_path


def sweep_mod_outcomes(
    state: str,
    append: Callable[[dict[str, Any]], None],
    *,
    now: float | None = None,
) -> int:
    """Log every plan the mod has settled (or never settled, after ``STALE_OUTCOME``) as one
    detection-log line, and remove its files; return how many were logged. Quiet and cheap
    when there are none."""
    folder = os.path.join(state, OUTCOMES_DIR)
    try:
        plans = [entry for entry in os.scandir(folder) if entry.name.endswith(".plan")]
    except OSError:
        return 0
    if not plans:
        return 0
    now = time.time() if now is None else now
    logged = 0
    for entry in plans:
        key = entry.name[: -len(".plan")]
        plan_path, outcome_path = outcome_paths(state, key)
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        plan = _read_record(plan_path)
        if plan is None:
            _remove_quietly(plan_path)
            _remove_quietly(outcome_path)
            continue
        line = _outcome_line(plan, _read_record(outcome_path) or {}, age=age)
        if line is None:
            continue
        append(line)
        _remove_quietly(plan_path)
        _remove_quietly(outcome_path)
        logged += 1
    return logged


def _read_record(path: str) -> dict[str, Any] | None:
    """A small JSON object file (never following a link nor blocking on a FIFO), else None."""
    from ..state.files import read_json_object

    return read_json_object(path, 64 * 1024)


def _outcome_line(plan: dict[str, Any], reported: dict[str, Any], *, age: float
                  ) -> dict[str, Any] | None:
    status = reported.get("status")
    settled = isinstance(status, str) and status in _MOD_STATUS
    if not settled and age < STALE_OUTCOME:
        return None  # planned or queued: the mod has not answered yet
    outcome = _MOD_STATUS[status] if settled else OUTCOME_SENT
    output = _str(reported.get("output")) or _str(reported.get("error"))
    evidence = "the mod's report" if settled else ""
    transcript, offset = plan.get("transcript_path"), plan.get("offset")
    if outcome != OUTCOME_CLEARED and isinstance(transcript, str) and isinstance(offset, int):
        condition = find_proof(read_new_bytes(transcript, offset))
        if condition is not None:
            outcome, output, evidence = OUTCOME_CLEARED, f"Goal cleared: {condition}", "proof line"
    if not settled and outcome != OUTCOME_CLEARED:
        detail = "the mod never reported what /goal clear did"
    else:
        detail = f"/goal clear: {output[:200] or outcome}"
    return {
        "event": "outcome",
        "session_id": _str(plan.get("session_id")),
        "answer_uuid": _str(plan.get("answer_uuid")),
        "rule": _str(plan.get("rule")),
        "outcome": outcome,
        "detail": detail,
        "evidence": evidence,
        "hands": "mod",
        "project": _str(plan.get("project")),
        "transcript_path": _str(transcript),
        "plan_id": _str(plan.get("id")),
        "source": "hook",
    }


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""
