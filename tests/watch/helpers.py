"""Bounded waits for the watcher tests (poll with a timeout; never a fixed long sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 5.0, what: str = "condition",
             *, every: float = 0.005) -> T:
    """Poll ``predicate`` (every ``every`` seconds) until it returns something truthy;
    fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {what}")
        time.sleep(every)


def without_library(monkeypatch: Any, prefix: str) -> None:
    """Make every import of a module named ``prefix...`` fail, as where the library (an
    optional extra) is not installed."""
    import builtins

    real_import = builtins.__import__

    def refuse(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith(prefix):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)


def stays(predicate: Callable[[], Any], duration: float, what: str = "condition") -> None:
    """Assert ``predicate`` stays false for ``duration`` seconds."""
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        assert not predicate(), f"unexpectedly: {what}"
        time.sleep(0.01)
