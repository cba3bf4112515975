"""``light`` gives what ``json`` gives, without importing it: every value, every
option the package uses, and the same errors for bad input."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loop_killer import light

_SCALARS = (st.none() | st.booleans() | st.integers() | st.text()
            | st.floats(allow_nan=False))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=5),
    max_leaves=30)
_OPTIONS = [
    {},
    {"ensure_ascii": True},
    {"separators": (",", ":")},
    {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False, "default": str},
]


@settings(max_examples=600, deadline=None)
@given(_VALUES, st.sampled_from(_OPTIONS))
def test_dumps_writes_what_json_writes(value: object, options: dict) -> None:
    assert light.dumps(value, **options) == json.dumps(value, **options)


@settings(max_examples=600, deadline=None)
@given(_VALUES, st.sampled_from(["", " ", "\n\t ", "\r\n"]))
def test_loads_reads_what_json_reads(value: object, space: str) -> None:
    text = space + json.dumps(value) + space
    assert light.loads(text) == json.loads(text)
    assert light.loads(text.encode()) == json.loads(text.encode())


def test_the_constants_json_accepts() -> None:
    read = light.loads(b'[NaN, Infinity, -Infinity, 1e400, 12345678901234567890]')
    assert math.isnan(read[0]) and read[1:4] == [math.inf, -math.inf, math.inf]
    assert read[4] == 12345678901234567890
    assert light.dumps([math.inf, -math.inf]) == "[Infinity, -Infinity]"


@pytest.mark.parametrize("data", [
    "\ufeff{}".encode(),  # a byte order mark: json reads it from bytes, refuses it in text
    '{"a": 1}'.encode("utf-16"),
    '{"a": 1}'.encode("utf-32-le"),
    b'"\xed\xa0\x80"',  # a lone surrogate, which json lets through from bytes
    "\ufeff{}",
])
def test_odd_encodings_are_read_as_json_reads_them(data: bytes | str) -> None:
    try:
        expected: object = json.loads(data)
    except ValueError as error:
        with pytest.raises(type(error)):
            light.loads(data)
    else:
        assert light.loads(data) == expected


@pytest.mark.parametrize("data", [b"", b"  ", b"{", b'{"a": 1} x', b"[1,]", b"\xff",
                                  b"nul", b'{"a" 1}', b"01"])
def test_bad_json_raises_json_own_error(data: bytes) -> None:
    with pytest.raises(ValueError) as caught:
        light.loads(data)
    with pytest.raises(ValueError) as expected:
        json.loads(data)
    assert type(caught.value) is type(expected.value)
    assert str(caught.value) == str(expected.value)


def test_too_deep_raises_recursion_error_as_json_does() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(RecursionError):
        json.loads(deep)
    with pytest.raises(RecursionError):
        light.loads(deep)


def test_what_json_cannot_write_raises_as_json_does() -> None:
    circular: list[object] = []
    circular.append(circular)
    for value in (circular, {"a": object()}, {(1, 2): 3}):
        with pytest.raises((TypeError, ValueError)) as expected:
            json.dumps(value)
        with pytest.raises(type(expected.value)) as caught:
            light.dumps(value)
        assert str(caught.value) == str(expected.value)
    assert light.dumps({"a": object}, default=str) == json.dumps({"a": object}, default=str)

    class Falsy:  # a default that is falsy is a default all the same
        def __bool__(self) -> bool:
            return False

        def __call__(self, value: object) -> str:
            return "x"

    assert light.dumps([{1}], default=Falsy()) == json.dumps([{1}], default=Falsy())


def test_an_encoder_that_answers_otherwise_leaves_it_to_json(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """Another interpreter's C encoder (other arguments, other answers): json is used."""
    import _json

    def other_encoder(*args: object) -> object:
        raise TypeError("make_encoder() takes other arguments")

    monkeypatch.setattr(light, "_encoder_ok", None)
    monkeypatch.setattr(_json, "make_encoder", other_encoder)
    assert light.dumps({"b": 1, "a": [2]}, sort_keys=True) == '{"a": [2], "b": 1}'
    assert light._encoder_ok is False
