"""scripts/install-claude-code and the e2e tests agree on where Claude Code is, whatever
HOME says, and a test that cannot find it says where it looked and how to fix that."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .harness import claude_cache_dir, missing_claude_reason, missing_tool_reason

ROOT = Path(__file__).resolve().parents[2]
VERSION = "9.8.7"


def _fake_npm(folder: Path) -> Path:
    """An ``npm`` that "installs" a Claude Code for every platform into --prefix."""
    folder.mkdir(parents=True)
    npm = folder / "npm"
    npm.write_text('#!/bin/sh\n'
                   'while [ "$1" != --prefix ]; do shift; done; prefix=$2\n'
                   'for p in linux-x64 linux-arm64 linux-x64-musl linux-arm64-musl '
                   'darwin-x64 darwin-arm64; do\n'
                   '  d="$prefix/node_modules/@anthropic-ai/claude-code-$p"; mkdir -p "$d"\n'
                   '  printf "#!/bin/sh\\necho 9.8.7\\n" >"$d/claude"; chmod 755 "$d/claude"\n'
                   'done\n')
    npm.chmod(0o755)
    return npm


def _claude_binary_seen_by_the_tests(env: dict[str, str]) -> str:
    """What the e2e harness finds, imported the way pytest imports it: in a process whose
    HOME is the one the install script saw."""
    code = f"from e2e.harness import claude_binary; print(claude_binary({VERSION!r}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "tests", env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


@pytest.mark.parametrize("override", [False, True])
def test_the_tests_find_what_the_install_script_installed(
    tmp_path: Path, override: bool
) -> None:
    home = tmp_path / "not-the-accounts-home"
    home.mkdir()
    npm = _fake_npm(tmp_path / "bin")
    env = {**os.environ, "HOME": str(home), "PATH": f"{npm.parent}{os.pathsep}/usr/bin:/bin"}
    env.pop("LOOP_KILLER_CLAUDE_CACHE", None)
    if override:
        env["LOOP_KILLER_CLAUDE_CACHE"] = str(tmp_path / "elsewhere")
    done = subprocess.run(["bash", str(ROOT / "scripts" / "install-claude-code"), VERSION],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "elsewhere" if override else home / ".cache/loop-killer/claude-code"
    assert f"installed at {folder / VERSION}" in done.stdout
    found = _claude_binary_seen_by_the_tests(env)
    assert found.startswith(str(folder / VERSION) + os.sep), found


def test_a_missing_binary_names_the_folder_searched_and_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LOOP_KILLER_CLAUDE_CACHE", str(tmp_path / "cache"))
    assert claude_cache_dir() == tmp_path / "cache"
    reason = missing_claude_reason(VERSION)
    assert f"not found in {tmp_path / 'cache' / VERSION}" in reason
    assert f"scripts/install-claude-code {VERSION}" in reason
    assert "LOOP_KILLER_CLAUDE_9_8_7" in reason
    monkeypatch.setenv("LOOP_KILLER_CLAUDE_9_8_7", str(tmp_path / "nothing"))
    assert f"LOOP_KILLER_CLAUDE_9_8_7 is {tmp_path / 'nothing'}" in missing_claude_reason(
        VERSION)


@pytest.mark.parametrize("tool", ["tmux", "screen"])
def test_a_missing_multiplexer_says_how_to_get_it(tool: str) -> None:
    assert missing_tool_reason(tool) == f"{tool} is not installed (apt install {tool})"
