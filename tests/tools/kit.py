"""Helpers for the tool-hook tests: hook inputs shaped as Claude Code 2.1.250 / 2.1.332
send them, and running the plugin's launcher the way Claude Code does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "plugin" / "hooks" / "launch.py"
SESSION = "6c97902f-4e8d-4175-9885-d5f864efd612"
FAIL = "Exit code 1\nFAIL test/auth/login.test.js\n  ✕ login fails (12 ms)\nTests: 1 failed"


def common(event: str, session: str = SESSION, **extra: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": f"/home/dev/.claude/projects/-home-dev-proj/{session}.jsonl",
        "cwd": "/home/dev/proj",
        "prompt_id": "be581f75-bc61-4a29-8ac3-3f04c48d8bb7",
        "permission_mode": "default",
        "hook_event_name": event,
        **extra,
    }


def before(command: str = "npm test", *, tool: str = "Bash", tool_input: Any = None,
           **extra: Any) -> dict[str, Any]:
    """A PreToolUse input."""
    return common("PreToolUse", tool_name=tool,
                  tool_input={"command": command} if tool_input is None else tool_input,
                  tool_use_id="toolu_pre", **extra)


def failed(command: str = "npm test", error: str = FAIL, *, tool: str = "Bash",
           tool_input: Any = None, **extra: Any) -> dict[str, Any]:
    """A PostToolUseFailure input (a Bash command that exited non-zero)."""
    return common("PostToolUseFailure", tool_name=tool,
                  tool_input={"command": command} if tool_input is None else tool_input,
                  tool_use_id="toolu_post", error=error, is_interrupt=False, duration_ms=22,
                  **extra)


def succeeded(command: str = "ls", stdout: str = "a\nb", *, tool: str = "Bash",
              tool_input: Any = None, tool_response: Any = None, **extra: Any
              ) -> dict[str, Any]:
    """A PostToolUse input (Bash's tool_response is an object)."""
    response = {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False,
                "noOutputExpected": False} if tool_response is None else tool_response
    return common("PostToolUse", tool_name=tool,
                  tool_input={"command": command} if tool_input is None else tool_input,
                  tool_response=response, tool_use_id="toolu_post", duration_ms=10, **extra)


def prompt(session: str = SESSION) -> dict[str, Any]:
    return common("UserPromptSubmit", session, prompt="try again")


def launch(data: Any, *, env: dict[str, str] | None = None, raw: bytes | None = None,
           timeout: float = 30) -> dict[str, Any] | None:
    """Run the plugin's launcher as Claude Code does: JSON on stdin, one JSON (or nothing)
    on stdout, exit 0, nothing on stderr."""
    done = subprocess.run(
        [sys.executable, str(LAUNCHER)],
        input=raw if raw is not None else json.dumps(data).encode(),
        capture_output=True, env={**os.environ, **(env or {})}, timeout=timeout, check=False,
    )
    assert done.returncode == 0
    assert done.stderr == b""
    text = done.stdout.decode().strip()
    return json.loads(text) if text else None


def start(data: Any, *, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """The launcher started, its input written and closed (for hooks running at once)."""
    proc = subprocess.Popen([sys.executable, str(LAUNCHER)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})})
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(data).encode())
    proc.stdin.close()
    return proc


def journal(state: Path) -> list[dict[str, Any]]:
    path = state / "detections.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
