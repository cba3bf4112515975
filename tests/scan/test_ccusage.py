"""Tokens and cost per session equal to ccusage's (20.0.24, its native binary, ``session
--json --offline``) on every fixture history, where ccusage is installed: in
``$CCUSAGE_DIR`` or ``~/.cache/loop-killer/ccusage`` (``npm install ccusage@20.0.24``
there; ``.ci/run`` does). Skipped without it, never under CI=true."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from loop_killer.scan.files import find_transcripts
from loop_killer.scan.pool import scan_transcripts
from loop_killer.scan.prices import PriceTable
from loop_killer.scan.summary import Collector
from must_run import unavailable
from transcripts import FIXTURES

from .test_dedupe import _as_projects, _histories

VERSION = "20.0.24"
_HOME_AT_START = Path.home()  # (every test gets a temporary HOME)


def _ccusage() -> Path:
    """ccusage's native binary, or the test is skipped (failed under CI=true)."""
    machine = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine())
    package = f"ccusage-{'darwin' if sys.platform == 'darwin' else 'linux'}-{machine}"
    folders = [os.environ.get("CCUSAGE_DIR", ""),
               str(_HOME_AT_START / ".cache" / "loop-killer" / "ccusage")]
    for folder in filter(None, folders):
        binary = Path(folder) / "node_modules" / "@ccusage" / package / "bin" / "ccusage"
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    how = (f"npm install ccusage@{VERSION} in $CCUSAGE_DIR or ~/.cache/loop-killer/ccusage, "
           "and chmod +x its node_modules/@ccusage/*/bin/ccusage (.ci/run does)")
    unavailable(f"ccusage is not installed: {how}")


def _by_ccusage(binary: Path, config: Path) -> dict[str, dict[str, Any]]:
    """ccusage's sessions: tokens, cost, and whether it priced every model. A flat
    subagent file (``agent-<id>.jsonl``) is a session of its own to ccusage: folded into
    the session its lines name, as the scan counts it."""
    done = subprocess.run([str(binary), "session", "--json", "--offline"], check=True,
                          capture_output=True, timeout=120,
                          env={"PATH": os.environ.get("PATH", ""), "HOME": str(config),
                               "CLAUDE_CONFIG_DIR": str(config), "NO_COLOR": "1"})
    sessions: dict[str, dict[str, Any]] = defaultdict(lambda: {
        "input": 0, "output": 0, "cache_read": 0, "cache_creation": 0, "cost": 0.0,
        "priced": True})
    for row in orjson.loads(done.stdout)["session"]:
        row_session = _session_of(config / "projects", row["period"])
        counts = sessions[row_session]
        for name, field in (("input", "inputTokens"), ("output", "outputTokens"),
                            ("cache_read", "cacheReadTokens"),
                            ("cache_creation", "cacheCreationTokens")):
            counts[name] += row[field]
        counts["cost"] += row["totalCost"]
        counts["priced"] &= not any(model.get("missingPricing")
                                    for model in row["modelBreakdowns"])
    return dict(sessions)


def _session_of(root: Path, period: str) -> str:
    if not period.startswith("agent-"):
        return period
    (path,) = root.rglob(f"{period}.jsonl")
    found = re.search(rb'"sessionId":"([^"]+)"', path.read_bytes())
    assert found is not None
    return found.group(1).decode()


@pytest.mark.parametrize("history", _histories(),
                         ids=lambda p: str(p.relative_to(FIXTURES).parent))
def test_tokens_and_cost_per_session_equal_ccusages(history: Path, tmp_path: Path) -> None:
    binary = _ccusage()
    root = _as_projects(history, tmp_path / "projects")
    collector = Collector(PriceTable())
    for result in scan_transcripts(find_transcripts(root).transcripts, jobs=1):
        collector.add(result)
    ours = {row.session_id: row for row in collector.summary().sessions if row.tokens.total}
    theirs = _by_ccusage(binary, tmp_path)
    assert {session: {name: counts[name] for name in
                      ("input", "output", "cache_read", "cache_creation")}
            for session, counts in theirs.items()} == {
        session: {name: count for name, count in row.tokens.to_dict().items()
                  if name != "total"} for session, row in ours.items()}
    for session, counts in theirs.items():
        if counts["priced"]:  # (ccusage's offline prices lack the newest models)
            assert ours[session].cost_usd == pytest.approx(counts["cost"], rel=1e-9,
                                                           abs=1e-12), session
