"""JSON for the hooks, without importing ``json``: the same C code, called directly.

``import json`` imports ``re`` (and ``enum``, ``functools``, ``collections``): about 10 ms
of a tool-call hook that otherwise runs in 3, on every tool call. ``json.loads`` and
``json.dumps`` themselves are CPython's C scanner and encoder (``_json``); ``loads`` and
``dumps`` here call them the way ``json`` does, and fall back to ``json`` itself for
anything out of the ordinary: bad JSON (so the error is json's own), an interpreter
without ``_json``, or one whose encoder does not answer a probe the way ``json`` does.
The results are the same as ``json``'s (tests compare them).
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool call does not import typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any

_json: ModuleType | None
try:  # (imported here, once: an import during the interpreter's shutdown fails)
    import _json
except ImportError:  # another interpreter: json does it all
    _json = None

__all__ = ["dumps", "loads"]

_WHITESPACE = " \t\n\r"  # what json skips around a document


class _ScanSettings:
    """The settings ``json.JSONDecoder()`` hands the C scanner (it reads them off any
    object). The plugin's launcher keeps its own copy of this class: it parses the hook
    input before it knows whether this package can be imported at all."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    def __init__(self) -> None:
        self.parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"),
                               "NaN": float("nan")}.__getitem__


_scan: Callable[[str, int], tuple[Any, int]] | None = None


def loads(data: bytes | str) -> Any:
    """``json.loads(data)``. Raises ValueError for bad JSON, RecursionError for JSON
    nested deeper than Python recurses."""
    global _scan
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        if _scan is None:
            _scan = _json.make_scanner(_ScanSettings())  # type: ignore[union-attr]
        start = len(text) - len(text.lstrip(_WHITESPACE))
        value, end = _scan(text, start)
        if not text[end:].strip(_WHITESPACE):
            return value
    except RecursionError:
        raise
    except Exception:  # noqa: BLE001, S110 - anything odd: json decides, and says why
        pass
    import json

    return json.loads(data)


def _not_serializable(value: object) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


_encoder_ok: bool | None = None


def dumps(value: object, *, ensure_ascii: bool = True, sort_keys: bool = False,
          separators: tuple[str, str] = (", ", ": "),
          default: Callable[[Any], Any] | None = None) -> str:
    """``json.dumps(value, ...)`` with these options (and no indent). Raises TypeError
    for a value JSON cannot hold, RecursionError for one nested too deeply."""
    global _encoder_ok
    if _encoder_ok is None:
        _encoder_ok = _encoder_works()
    if not _encoder_ok:
        import json

        return json.dumps(value, ensure_ascii=ensure_ascii, sort_keys=sort_keys,
                          separators=separators, default=default)
    return _c_dumps(value, ensure_ascii, sort_keys, separators, default)


def _c_dumps(value: object, ensure_ascii: bool, sort_keys: bool,
             separators: tuple[str, str], default: Callable[[Any], Any] | None) -> str:
    """What ``json.JSONEncoder.encode`` does on its C path."""
    assert _json is not None
    string = _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring
    if isinstance(value, str):
        quoted: str = string(value)
        return quoted
    item_separator, key_separator = separators
    encode = _json.make_encoder(
        {}, _not_serializable if default is None else default, string, None, key_separator,
        item_separator, sort_keys, False, True)
    return "".join(encode(value, 0))


def _encoder_works() -> bool:
    """Whether this interpreter's C encoder takes the arguments ``json`` gives it in the
    versions this was written for, and answers as ``json`` does."""
    probe = {"b": [1, 2.5, None, True, "é\n"], "a": {"c": -0.0}}
    expected = '{"a":{"c":-0.0},"b":[1,2.5,null,true,"\\u00e9\\n"]}'
    try:
        return _c_dumps(probe, True, True, (",", ":"), None) == expected
    except Exception:  # noqa: BLE001 - no _json, or another signature: json it is
        return False
