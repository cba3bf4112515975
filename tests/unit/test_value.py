"""``Value``: what the tool-call hooks' records kept of a frozen dataclass."""

from __future__ import annotations

import copy
import pickle

import pytest
from loop_killer.engine.rules import DEFAULT_THRESHOLDS, Thresholds
from loop_killer.engine.tool_repeat import ToolRepeat
from loop_killer.state.config import Settings


def test_equal_by_type_and_fields_and_hashed_alike() -> None:
    assert Thresholds() == DEFAULT_THRESHOLDS and Thresholds(4) != DEFAULT_THRESHOLDS
    assert hash(ToolRepeat("k", "Bash", "t1", 3)) == hash(ToolRepeat("k", "Bash", "t1", 3))
    assert ToolRepeat("k", "Bash", "t1", 3) != ("k", "Bash", "t1", 3, "", 0)


def test_read_only_and_replaced_by_name() -> None:
    repeat = ToolRepeat("k", "Bash", "t1", 3)
    with pytest.raises(AttributeError):
        repeat.count = 4
    assert repeat.replace(count=4) == ToolRepeat("k", "Bash", "t1", 4)
    assert repeat.count == 3
    with pytest.raises(TypeError):
        repeat.replace(counts=4)
    assert DEFAULT_THRESHOLDS.replace(off=frozenset({"IDLE_TURNS"})).off == {"IDLE_TURNS"}


def test_pickled_and_copied_as_they_were() -> None:
    """Settings go to the scan's worker processes."""
    settings = Settings(tool_repeat_warn=4, sources={"tool_repeat_warn": "config.toml"})
    for made in (pickle.loads(pickle.dumps(settings)), copy.deepcopy(settings)):
        assert made == settings and made.sources == {"tool_repeat_warn": "config.toml"}
    assert repr(Thresholds()) == (
        "Thresholds(same_reply_turns=3, idle_turns=6, similar=0.6, off=frozenset(), "
        "wait_minutes=30.0)")
