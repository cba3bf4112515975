"""A program run on a pseudo-terminal of a given size, as a person's terminal runs it."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Sequence


class OnTerminal:
    """``argv`` running with its stdin, stdout and stderr on a ``columns`` x ``rows``
    pseudo-terminal; ``read_until`` collects what it printed."""

    def __init__(self, argv: Sequence[str], *, columns: int = 80, rows: int = 50) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        self.proc = subprocess.Popen(list(argv), stdin=slave, stdout=slave, stderr=slave,
                                     env=env, start_new_session=True, close_fds=True)
        os.close(slave)
        self.output = b""

    def read_until(self, done: Callable[[str], bool], timeout: float = 20.0) -> str:
        """What it printed, once ``done`` says so of it or it ended (AssertionError after
        ``timeout``). Line ends are the terminal's ``\\r\\n``, given back as ``\\n``."""
        deadline = time.monotonic() + timeout
        while not done(self.text()):
            left = deadline - time.monotonic()
            assert left > 0, f"timed out; printed so far:\n{self.text()}"
            ready, _, _ = select.select([self.master], [], [], min(left, 0.5))
            if not ready:
                continue
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: every end of the terminal's other side is closed
                break
            if not chunk:
                break
            self.output += chunk
        return self.text()

    def text(self) -> str:
        return self.output.decode("utf-8", "replace").replace("\r\n", "\n")

    def finish(self, timeout: float = 20.0) -> str:
        """Everything it printed, once it has ended."""
        text = self.read_until(lambda _: False, timeout)  # to the end: EIO once it closed
        self.proc.wait(timeout)
        os.close(self.master)
        return text

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def piped_on_a_terminal(argv: Sequence[str], *, columns: int = 191, timeout: float = 60.0
                        ) -> str:
    """What ``argv`` writes to its stdout, a pipe, run as ``argv | cat`` runs in a person's
    ``columns``-wide terminal: stdin and stderr on that terminal (its progress bars go
    there, and are read away so that it never waits on a full terminal)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    read_end, write_end = os.pipe()
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(list(argv), stdin=slave, stdout=write_end, stderr=slave, env=env,
                            start_new_session=True, close_fds=True)
    os.close(slave)
    os.close(write_end)
    out = b""
    open_ends = {master, read_end}
    deadline = time.monotonic() + timeout
    try:
        while open_ends:
            left = deadline - time.monotonic()
            assert left > 0, f"timed out; piped so far:\n{out.decode(errors='replace')}"
            ready, _, _ = select.select(list(open_ends), [], [], min(left, 0.5))
            for fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: the terminal's other side is closed
                    chunk = b""
                if not chunk:
                    open_ends.discard(fd)
                elif fd == read_end:
                    out += chunk
        proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(master)
        os.close(read_end)
    return out.decode()
