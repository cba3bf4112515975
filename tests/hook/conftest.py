"""Every hook test runs in its own HOME / CLAUDE_CONFIG_DIR, outside any tmux or screen."""

from __future__ import annotations

from pathlib import Path

import pytest

_OUTER = (
    "TMUX", "TMUX_PANE", "STY", "WINDOW", "LOOP_KILLER_STATE_DIR", "CLAUDE_PROJECT_DIR",
    "CLAUDE_CODE_SESSION_ID", "CLAUDE_PID", "CLAUDE_PLUGIN_ROOT", "CLAUDE_PLUGIN_DATA",
)


@pytest.fixture(autouse=True)
def own_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    for name in _OUTER:
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def state(own_home: Path) -> Path:
    """loop-killer's state folder for this test (``$CLAUDE_CONFIG_DIR/loop-killer``)."""
    return own_home / ".claude" / "loop-killer"
