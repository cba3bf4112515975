"""``scripts/bench --quick`` runs to completion (so the benchmark cannot rot).

No timing is asserted here: the figures depend on the machine. The full run is
``scripts/bench`` (see its docstring).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench"


def test_bench_quick_runs_to_completion(tmp_path):
    assert os.access(BENCH, os.X_OK)
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--tmpdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for section in ("latency:", "catch-up at start-up", "ingest throughput", "idle CPU"):
        assert section in out
    assert out.count("ratio") >= 4
    assert list(tmp_path.iterdir()) == []  # everything generated was removed
