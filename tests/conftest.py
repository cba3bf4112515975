"""Suite-wide safety net: no test ever sees the real ~/.claude or the real terminal.

Every test runs with its own temporary HOME and CLAUDE_CONFIG_DIR, and without the
multiplexer variables of whoever runs the suite (so no hook under test types into the
developer's own tmux pane).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

_OUTER_VARIABLES = (
    "TMUX", "TMUX_PANE", "STY", "WINDOW", "LOOP_KILLER_STATE_DIR",
    "CLAUDE_PROJECT_DIR", "CLAUDE_CODE_SESSION_ID", "CLAUDE_PID",
    "CLAUDE_PLUGIN_ROOT", "CLAUDE_PLUGIN_DATA",
)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    for name in _OUTER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):  # no watcher under test exports to the runner's collector
        if name.startswith("OTEL_") or name == "CLAUDE_CODE_ENABLE_TELEMETRY":
            monkeypatch.delenv(name)
    return home


@pytest.fixture(autouse=True)
def restored_loggers() -> Iterator[None]:
    """What a test's call of a command's main() does to logging (its handlers, levels, no
    propagation: right for a process) is undone after it, so later tests' caplog still
    hears the package's loggers."""
    names = ("loop_killer", "loop_killer.watch", "loop_killer.watch.events", "watchdog")
    saved = {name: (list(logger.handlers), logger.level, logger.propagate)
             for name in names for logger in [logging.getLogger(name)]}
    yield
    for name, (handlers, level, propagate) in saved.items():
        logger = logging.getLogger(name)
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate
