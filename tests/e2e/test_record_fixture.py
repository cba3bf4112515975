"""The fixture recorder reads transcripts the way the recorded meta.json files say.

No binary needed: ``observe`` must reproduce the ``observed`` block of every recorded
scenario (2.1.328's, made before the recorder existed, and 2.1.332's, made with it), and
the stored files must carry no scratch path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .record_fixture import FIXTURE_ROOT, FIXTURES, SCENARIOS, observe

METAS = sorted(FIXTURES.glob("claude-code-*/*/meta.json"))


@pytest.mark.parametrize("meta_path", METAS, ids=lambda p: f"{p.parts[-3]}/{p.parts[-2]}")
def test_observe_reproduces_every_recorded_meta_json(meta_path: Path) -> None:
    meta = json.loads(meta_path.read_text())
    for name, observed in meta["observed"].items():
        assert observe(meta_path.parent / name) == observed, name


def test_the_newest_recordings_are_the_scripted_scenarios_under_home_dev() -> None:
    newest = FIXTURES / "claude-code-2.1.332"
    assert sorted(p.parent.name for p in newest.glob("*/meta.json")) == sorted(SCENARIOS)
    for path in newest.rglob("*.jsonl"):
        text = path.read_text()
        assert "/tmp/" not in text and "lkrec" not in text, path
        assert f"{FIXTURE_ROOT}/{path.parts[-4]}/proj" in text, path
        assert path.parent.name == f"-home-dev-{path.parts[-4]}-proj"
