"""Desktop notifications from the watcher (``--notify``). ``Throttle`` (pure) keeps a busy
session from a pop-up a minute: the first at once, the rest within ``WINDOW`` summed up."""

from __future__ import annotations

import logging
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..printable import printable
from .narrate import Notice

__all__ = ["WINDOW", "Notifier", "Throttle", "notifier_command"]

log = logging.getLogger("loop_killer.watch")

WINDOW = 60.0  # seconds after a session's notification during which the next are gathered

TITLE = "loop-killer"
_WAKE = ""  # put on the queue only to make the worker look at the throttle again
_TIMEOUT = 5.0  # seconds for one notify-send / osascript call
_CLOSE_WAIT = 2 * _TIMEOUT + 1  # the exit waits for a call under way, then the last one


@dataclass(slots=True)
class _Window:
    quiet_until: float
    who: str
    gathered: int = 0


@dataclass(slots=True)
class Throttle:
    """At most one notification per session, kind and ``window``; the rest summed up."""

    window: float = WINDOW
    _windows: dict[tuple[str, bool], _Window] = field(default_factory=dict)

    def offer(self, notice: Notice, now: float) -> list[str]:
        """A notice: what to show now (nothing, when it is gathered)."""
        shown = self.due(now)
        key = (notice.session_id, notice.stop)
        window = self._windows.get(key)
        if window is not None and now < window.quiet_until:
            window.gathered += 1
            window.who = notice.who
            return shown
        self._windows[key] = _Window(now + self.window, notice.who)
        return [*shown, notice.text]

    def due(self, now: float) -> list[str]:
        """The summaries of the windows that have ended with something gathered."""
        shown = []
        for key, window in list(self._windows.items()):
            if now < window.quiet_until:
                continue
            if window.gathered:
                shown.append(self._summary(key[1], window))
                window.gathered, window.quiet_until = 0, now + self.window
            else:
                del self._windows[key]
        return shown

    def flush(self) -> list[str]:
        """Every summary still gathered (the watcher is stopping)."""
        shown = [self._summary(stop, window) for (_, stop), window in self._windows.items()
                 if window.gathered]
        self._windows.clear()
        return shown

    @property
    def next_due(self) -> float | None:
        return min((w.quiet_until for w in self._windows.values() if w.gathered), default=None)

    def _summary(self, stop: bool, window: _Window) -> str:
        count = window.gathered
        what = (f"loop{'s' if count != 1 else ''} stopped" if stop
                else f"warning{'s' if count != 1 else ''}")
        return (f"{window.who}: {count} more {what} in the last {self.window:.0f} s; see the "
                "watcher's terminal")


def notifier_command(text: str, *, platform: str = sys.platform,
                     which: Callable[[str], str | None] = shutil.which) -> list[str] | None:
    """The command that shows ``text`` (cleaned, an argument: no shell) as a desktop
    notification here; None when there is no way."""
    body = printable(text, 300)
    if platform == "darwin" and which("osascript"):
        quoted = body.replace("\\", "\\\\").replace('"', '\\"')
        return ["osascript", "-e", f'display notification "{quoted}" with title "{TITLE}"']
    if which("notify-send"):
        return ["notify-send", "--app-name", TITLE, TITLE, body]
    return None


def run_quietly(argv: Sequence[str]) -> None:
    subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=_TIMEOUT, check=False)


class Notifier:
    """Shows the notices (throttled) on a thread of its own: the watcher never waits."""

    def __init__(self, *, throttle: Throttle | None = None,
                 command: Callable[[str], Sequence[str] | None] = notifier_command,
                 run: Callable[[Sequence[str]], None] = run_quietly,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.throttle = throttle or Throttle()
        self.command = command
        self.run = run
        self.clock = clock
        self._lock = threading.Lock()
        self._outbox: queue.Queue[str | None] = queue.Queue()
        self._worker = threading.Thread(target=self._work, name="notify", daemon=True)
        self._worker.start()
        self._said_unavailable = False

    def offer(self, notice: Notice) -> None:
        """A notice from the watcher's thread: shown now, or gathered for a summary."""
        with self._lock:
            shown = self.throttle.offer(notice, self.clock())
        for item in shown:
            self._outbox.put(item)
        if not shown:
            self._outbox.put(_WAKE)  # gathered: the worker now has a summary to wait for

    def close(self) -> None:
        """Show what is left, summaries too, in one last notification (a slow notifier
        cannot make the exit drop them), waiting at most for a call under way and that."""
        left: list[str] = []
        while True:
            try:
                item = self._outbox.get_nowait()
            except queue.Empty:
                break
            if item:
                left.append(item)
        with self._lock:
            left += self.throttle.flush()
        if left:
            self._outbox.put("\n".join(left))
        self._outbox.put(None)
        self._worker.join(_CLOSE_WAIT)

    def _work(self) -> None:
        while True:
            with self._lock:
                next_due = self.throttle.next_due
            wait = None if next_due is None else max(0.0, next_due - self.clock())
            try:
                text = self._outbox.get(timeout=wait)
            except queue.Empty:
                with self._lock:
                    due = self.throttle.due(self.clock())
                for shown in due:
                    self._show(shown)
                continue
            if text is None:
                return
            if text is not _WAKE:
                self._show(text)

    def _show(self, text: str) -> None:
        argv = self.command(text)
        if argv is None:
            if not self._said_unavailable:
                self._said_unavailable = True
                log.warning("desktop notifications: neither notify-send nor osascript is "
                            "here; loops are shown in this terminal only")
            return
        try:
            self.run(argv)
        except (OSError, subprocess.SubprocessError) as error:
            log.warning("desktop notification failed: %s", error)
