"""Helpers for the watcher tests. The bounded wait (``wait_for``) is the suite's one, from
tests/waits.py."""

from __future__ import annotations

from typing import Any

from waits import wait_for

__all__ = ["wait_for", "without_library"]


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

