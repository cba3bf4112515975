"""Light stand-ins for costly standard modules, for the hooks (each runs on every tool call):
``loads``/``dumps``, ``digest``/``hex_digest`` (BLAKE2 without OpenSSL), ``Value`` (a record)."""

from __future__ import annotations

from _blake2 import blake2b

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool call does not import typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any, TypeVar

    V = TypeVar("V", bound="Value")

__all__ = ["Value", "digest", "dumps", "hex_digest", "loads"]

_json: ModuleType | None
try:  # (imported here, once: an import during the interpreter's shutdown fails)
    import _json
except ImportError:  # another interpreter: json does it all
    _json = None


_WHITESPACE = " \t\n\r"  # what json skips around a document


class _ScanSettings:
    """The settings ``json.JSONDecoder()`` hands the C scanner (the launcher has a copy)."""

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
    """``json.loads(data)``: ValueError for bad JSON, RecursionError for JSON too deep."""
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
    """``json.dumps(value, ...)`` with these options (no indent), raising as it does."""
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
    """Whether this interpreter's C encoder answers as ``json`` does."""
    probe = {"b": [1, 2.5, None, True, "é\n"], "a": {"c": -0.0}}
    expected = '{"a":{"c":-0.0},"b":[1,2.5,null,true,"\\u00e9\\n"]}'
    try:
        return _c_dumps(probe, True, True, (",", ":"), None) == expected
    except Exception:  # noqa: BLE001 - no _json, or another signature: json it is
        return False


def digest(data: bytes, size: int = 16) -> bytes:
    """A ``size``-byte digest of ``data``."""
    return blake2b(data, digest_size=size).digest()


def hex_digest(text: str, chars: int) -> str:
    """A digest of ``text`` as ``chars`` hex digits (at most 128)."""
    return blake2b(text.encode("utf-8", "surrogatepass"),
                   digest_size=(chars + 1) // 2).hexdigest()[:chars]


class Value:
    """Equal by type and fields; read-only once made."""

    __slots__: tuple[str, ...] = ()

    def _set(self, **fields: Any) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only: use replace()")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Value)
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._fields()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({shown})"

    def replace(self: V, **changes: Any) -> V:
        """A copy with ``changes`` made (an unknown name raises TypeError)."""
        unknown = changes.keys() - set(self.__slots__)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        return _made(type(self), tuple(changes.get(name, getattr(self, name))
                                       for name in self.__slots__))

    def __reduce__(self) -> tuple[Any, ...]:  # pickled (scan workers) and copied alike
        return _made, (type(self), self._fields())


def _made(kind: type[V], values: tuple[Any, ...]) -> V:
    made = object.__new__(kind)
    for name, value in zip(kind.__slots__, values, strict=True):
        object.__setattr__(made, name, value)
    return made

