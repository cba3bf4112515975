"""Fixtures for the end-to-end tests against the real Claude Code binary.

A missing binary or tmux skips the test locally (with the command that fixes it), but FAILS it
under CI=true: in CI the e2e tests must really run, never silently skip.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from must_run import unavailable

from .harness import (
    Sandbox,
    TuiSession,
    claude_binary,
    missing_claude_reason,
    missing_tool_reason,
)
from .mock_api import MockAnthropic


def require_claude(version: str) -> Path:
    path = claude_binary(version)
    if path is None:
        unavailable(missing_claude_reason(version))
        raise AssertionError("unreachable")  # pytest.skip/fail raise
    return path


@pytest.fixture
def claude_328() -> Path:
    """The 2.1.328 binary (loads plugin mods)."""
    return require_claude("2.1.328")


@pytest.fixture
def claude_332() -> Path:
    """The 2.1.332 binary (the newest pinned release)."""
    return require_claude("2.1.332")


_STATE_FILES = ("hook-debug.log", "detections.jsonl", "hook-errors.log")
"""What the hooks wrote (the Sandbox runs them with LOOP_KILLER_DEBUG=1): shown with a
failed test, so a failure seen once in CI says why a reply did or did not fire."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    sandbox = getattr(item, "funcargs", {}).get("sandbox")
    if report.when != "call" or not report.failed or not isinstance(sandbox, Sandbox):
        return
    state = sandbox.home / ".claude" / "loop-killer"
    for name in _STATE_FILES:
        path = state / name
        if path.is_file():
            report.sections.append((f"loop-killer {name}",
                                    path.read_text(errors="replace")[-20_000:]))


MOD_VERSIONS = ("2.1.332", "2.1.328")
"""The pinned releases that load plugin mods: the product scenarios run on each."""


@pytest.fixture(params=MOD_VERSIONS)
def claude_mods(request: pytest.FixtureRequest) -> Path:
    """Each test that takes it runs on the newest pinned release and on 2.1.328."""
    return require_claude(str(request.param))


@pytest.fixture(params=("2.1.332", "2.1.250"))
def claude_newest_and_oldest(request: pytest.FixtureRequest) -> Path:
    """The newest pinned release (mods) and the oldest (no mods: typing into the pane)."""
    return require_claude(str(request.param))


@pytest.fixture
def claude_250() -> Path:
    """The 2.1.250 binary (before mods existed)."""
    return require_claude("2.1.250")


@pytest.fixture
def tmux() -> str:
    path = shutil.which("tmux")
    if path is None:
        unavailable(missing_tool_reason("tmux"))
        raise AssertionError("unreachable")
    return path


@pytest.fixture
def mock_api(tmp_path: Path) -> Iterator[MockAnthropic]:
    """A started mock API (default script: every main reply "OK.", evaluator never met).
    Re-script it with mock_api.configure(...). Requests are also logged to
    tmp_path/mock_requests.jsonl for post-mortems."""
    with MockAnthropic(log_path=tmp_path / "mock_requests.jsonl") as mock:
        yield mock


@pytest.fixture
def sandbox(tmp_path: Path, mock_api: MockAnthropic) -> Sandbox:
    """Own HOME, own git project with test/auth/login.test.js, wired to `mock_api`."""
    return Sandbox.create(tmp_path / "sb", mock_api)


@pytest.fixture
def tui(tmux: str, sandbox: Sandbox) -> Iterator[Callable[..., TuiSession]]:
    """Factory: tui(version=claude_328, **TuiSession kwargs) -> a started TuiSession in the
    sandbox. Every session it made is killed at teardown, pass or fail."""
    sessions: list[TuiSession] = []

    def start(**kwargs: Any) -> TuiSession:
        session = TuiSession(sandbox, **kwargs)
        sessions.append(session)  # registered before start: a failed start is cleaned too
        return session.start()

    try:
        yield start
    finally:
        for session in sessions:
            session.close()
