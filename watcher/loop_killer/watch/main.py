"""``loop-killer-watch``: the long-running watcher (CLI entry, lock, logging, signals). Exit
status: 0 after a signal, 2 when another watcher holds the state folder, 1 on an error."""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TextIO

from ..helptext import PROJECTS_DEFAULT, STATE_DEFAULT, HelpFormatter
from ..printable import terminal_width, without_controls, wrap
from ..state.config import load_settings
from ..state.files import ensure_private_dir, projects_dir, state_dir
from . import notify
from .respond import OUTCOME_TIMEOUT
from .watcher import POLL_INTERVAL, RECONCILE_INTERVAL, SWEEP_INTERVAL, Watcher

__all__ = ["AlreadyRunning", "acquire_lock", "build_parser", "configure_logging", "main"]

log = logging.getLogger("loop_killer.watch")
events = logging.getLogger("loop_killer.watch.events")

LOCK_NAME = "watcher.lock"


class AlreadyRunning(RuntimeError):
    """Another watcher holds the state directory's lock; the message says who."""


def acquire_lock(state: Path) -> int:
    """Take ``<state>/watcher.lock``, our pid in it: the descriptor to keep open."""
    ensure_private_dir(state)
    path = state / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise AlreadyRunning(
            f"another loop-killer-watch (pid {holder}) is already watching for {state}") from None
    except OSError:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


class PrintableFormatter(logging.Formatter):
    """Log lines without control codes (a traceback keeps its lines); to a terminal
    ``stream``, wrapped under the time to its width, read at every line (a resize)."""

    def __init__(self, fmt: str, datefmt: str, *, stream: TextIO | None = None) -> None:
        super().__init__(fmt, datefmt)
        self.stream = stream

    def format(self, record: logging.LogRecord) -> str:
        text = without_controls(super().format(record))
        width = terminal_width(self.stream)
        if width is None:
            return text
        return "\n".join(piece for line in text.split("\n")
                         for piece in wrap(line, width, indent=_UNDER_THE_TIME))


_UNDER_THE_TIME = len("12:34:56  ")


def configure_logging(*, verbose: bool) -> None:
    """Events on stdout; problems on stderr; the rest only with ``--verbose``."""
    logging.raiseExceptions = False  # a closed pipe must not print tracebacks
    out = logging.StreamHandler(sys.stdout)
    out.setFormatter(PrintableFormatter("%(asctime)s  %(message)s", "%H:%M:%S", stream=sys.stdout))
    err = logging.StreamHandler(sys.stderr)
    err.setFormatter(PrintableFormatter("%(asctime)s  %(levelname)s  %(message)s",
                                        "%H:%M:%S", stream=sys.stderr))
    for name, handler, level in (
            ("loop_killer.watch.events", out, logging.INFO),
            ("loop_killer", err, logging.DEBUG if verbose else logging.WARNING),
            ("watchdog", err, logging.INFO if verbose else logging.WARNING)):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loop-killer-watch", formatter_class=HelpFormatter,
        description="Follow every Claude Code session live and print each loop and what "
                    "was done about it. A re-prompt loop (a Stop hook such as /goal "
                    "re-prompts, the model answers without working): its Stop hook is asked "
                    "to stop the turn, then the goal is cleared. A tool-repeat loop (the "
                    "same tool call gives the same result again and again): the plugin's "
                    "hooks warn the model, then refuse that call until you speak; the "
                    "watcher shows it.",
    )
    parser.add_argument("--root", type=Path, default=None,
                        help=f"folder of project folders to watch (default: {PROJECTS_DEFAULT})")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help=f"loop-killer's state folder (default: {STATE_DEFAULT})")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="say what is being followed, and why")
    parser.add_argument("--poll", action="store_true",
                        help="poll instead of using file-system events")
    parser.add_argument("--reconcile-interval", type=_positive, default=None, metavar="SECONDS",
                        help=f"seconds between two passes over the live transcripts and the "
                             f"project folders, the safety net for a lost file-system event "
                             f"(default {RECONCILE_INTERVAL:g}, or {POLL_INTERVAL:g} when "
                             f"polling; every transcript is stat'ed every "
                             f"{SWEEP_INTERVAL:g} s)")
    parser.add_argument("--outcome-timeout", type=_positive, default=OUTCOME_TIMEOUT,
                        metavar="SECONDS",
                        help=f"seconds after a detection at which the watcher says what "
                             f"became of it: nothing, the loop went on, or (a tool-call "
                             f"warning no refusal followed) warned only "
                             f"(default {OUTCOME_TIMEOUT:g})")
    parser.add_argument("--metrics", metavar="HOST:PORT", default=None,
                        help="serve Prometheus metrics at http://HOST:PORT/metrics (also "
                             "config.toml's [watcher] metrics; needs loop-killer[metrics])")
    parser.add_argument("--notify", action="store_true",
                        help="also show a desktop notification for each loop stopped "
                             "(notify-send or osascript; a storm of them gives a summary)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(verbose=args.verbose)
    root = (args.root or projects_dir()).expanduser().absolute()
    state = (args.state_dir or state_dir()).expanduser().absolute()
    try:
        lock = acquire_lock(state)
    except AlreadyRunning as error:
        log.error("%s", error)
        return 2
    except OSError as error:
        log.error("cannot take the lock in %s: %s", state, error)
        return 1
    settings = load_settings(state)
    for problem in settings.problems:
        log.warning("settings: %s", problem)
    from ..export.metrics import MetricsSource
    from ..export.prometheus import MetricsServer, MetricsUnavailable, serve_metrics

    # One MetricsSource for the Prometheus endpoint and the OTLP export.
    source = MetricsSource(state, home=os.environ.get("HOME"), budget=settings.budget)
    metrics: MetricsServer | None = None
    if args.metrics or settings.metrics:
        try:
            metrics = serve_metrics(args.metrics or settings.metrics, source)
        except MetricsUnavailable as error:
            log.error("%s", error)
            os.close(lock)
            return 2
        events.info("Prometheus metrics at http://%s:%d/metrics", *metrics.address)
    from ..export.telemetry import start_from_environment  # off unless configured as Claude Code's

    telemetry = start_from_environment(lambda: source)
    notifier = notify.Notifier() if args.notify else None
    watcher = Watcher(root=root, state=state, poll=args.poll,
                      reconcile_interval=args.reconcile_interval,
                      outcome_timeout=args.outcome_timeout,
                      notify=notifier.offer if notifier is not None else None)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        watcher.stop()

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)
    try:
        watcher.run()
    except KeyboardInterrupt:  # before the handler was in place, or a second Ctrl-C
        pass
    except Exception:
        log.exception("loop-killer-watch stopped on an unexpected error")
        return 1
    finally:
        os.close(lock)
        # (the notifier last: a summary still gathered is shown before the end)
        for service in (metrics, telemetry, notifier):
            if service is not None:
                service.close()
    events.info("loop-killer-watch stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
