"""Desktop notifications from the watcher (``loop-killer-watch --notify``).

People run the watcher in a spare terminal and are often in another window. Every loop
the watcher reports (its terminal lines that start with ``LOOP``: its own detections and
the ones the hooks logged) becomes a desktop notification: ``notify-send`` on Linux,
``osascript`` on macOS; where neither exists, nothing but one log line saying so.

``Throttle`` (pure) keeps a storm of sessions from becoming fifty pop-ups: the first loop
is shown at once, the ones within the next ``WINDOW`` seconds are gathered into one
summary shown when the window ends.
"""

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

__all__ = ["WINDOW", "NotifyHandler", "Throttle", "install", "notifier_command"]

log = logging.getLogger("loop_killer.watch")

WINDOW = 60.0
"""Seconds after a notification during which further loops are gathered into a summary."""

TITLE = "loop-killer"
_WAKE = ""  # put on the queue only to make the worker look at the throttle again
_TIMEOUT = 5.0  # seconds for one notify-send / osascript call


@dataclass(slots=True)
class Throttle:
    """At most one notification per ``window`` seconds; what comes within a window is
    summed up when it ends. Pure: the caller passes the time."""

    window: float = WINDOW
    _quiet_until: float = 0.0
    _gathered: list[str] = field(default_factory=list)

    def offer(self, text: str, now: float) -> list[str]:
        """A loop was reported: what to show now (nothing, when it is gathered)."""
        shown = self.due(now)
        if now < self._quiet_until:
            self._gathered.append(text)
            return shown
        self._quiet_until = now + self.window
        return [*shown, text]

    def due(self, now: float) -> list[str]:
        """The summary of a window that has ended, if anything was gathered in it."""
        if not self._gathered or now < self._quiet_until:
            return []
        count, self._gathered = len(self._gathered), []
        self._quiet_until = now + self.window
        plural = "s" if count != 1 else ""
        summary = (f"{count} more loop{plural} stopped in the last {self.window:.0f} s; "
                   "see the watcher's terminal")
        return [summary]

    @property
    def next_due(self) -> float | None:
        """When ``due`` may have something to show (None: nothing gathered)."""
        return self._quiet_until if self._gathered else None


def notifier_command(text: str, *, platform: str = sys.platform,
                     which: Callable[[str], str | None] = shutil.which) -> list[str] | None:
    """The command that shows ``text`` as a desktop notification here; None when there is
    no way (``text`` is cleaned of control codes and passed as an argument, never
    through a shell)."""
    body = printable(text, 300)
    if platform == "darwin" and which("osascript"):
        quoted = body.replace("\\", "\\\\").replace('"', '\\"')
        return ["osascript", "-e", f'display notification "{quoted}" with title "{TITLE}"']
    if which("notify-send"):
        return ["notify-send", "--app-name", TITLE, TITLE, body]
    return None


class NotifyHandler(logging.Handler):
    """Turns the watcher's ``LOOP`` lines into (throttled) desktop notifications; the
    commands run on a thread of their own so the watcher never waits for them."""

    def __init__(self, *, throttle: Throttle | None = None,
                 command: Callable[[str], Sequence[str] | None] = notifier_command,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(level=logging.INFO)
        self.throttle = throttle or Throttle()
        self.command = command
        self.clock = clock
        self._lock = threading.Lock()
        self._outbox: queue.Queue[str | None] = queue.Queue()
        self._worker = threading.Thread(target=self._run, name="notify", daemon=True)
        self._worker.start()
        self._said_unavailable = False

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if not text.startswith("LOOP"):
            return
        with self._lock:
            shown = self.throttle.offer(" ".join(text.split()), self.clock())
        for item in shown:
            self._outbox.put(item)
        if not shown:
            self._outbox.put(_WAKE)  # gathered: the worker now has a summary to wait for

    def _run(self) -> None:
        while True:
            with self._lock:
                next_due = self.throttle.next_due
            wait = None if next_due is None else max(0.0, next_due - self.clock())
            try:
                text = self._outbox.get(timeout=wait)
            except queue.Empty:
                with self._lock:
                    for shown in self.throttle.due(self.clock()):
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
            subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=_TIMEOUT, check=False)
        except (OSError, subprocess.SubprocessError) as error:
            log.warning("desktop notification failed: %s", error)

    def close(self) -> None:
        self._outbox.put(None)
        super().close()


def install(*, throttle: Throttle | None = None) -> NotifyHandler:
    """Notify for every loop the watcher reports from now on."""
    handler = NotifyHandler(throttle=throttle)
    logging.getLogger("loop_killer.watch.events").addHandler(handler)
    return handler
