"""Tool outputs made comparable (pure): ``result_key`` masks what changes on every run and is
not progress (issue 29), in shapes that cannot hold progress: never a call refused by mistake."""

from __future__ import annotations

from ..light import dumps, hex_digest

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool call does not import typing
if TYPE_CHECKING:
    import re

__all__ = ["MAX_MASKED", "canonical", "result_key"]

# Patterns kept as text: ``re`` (7 ms to import) is loaded only where one may match.
_ANSI = r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
# A date with its time of day; a date alone is compared (where it changes, it is news).
_ISO_MOMENT = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
# (a lookbehind after the first digit lets ``re`` skip ahead to digits: several times faster)
_EPOCH = r"1(?<![\w.]1)\d{9}(?:\d{3})?(?:\.\d+)?(?![\w.])"
# A 10- or 13-digit number is a Unix time only with a 3+ digit fraction or a time word before.
_TIME_WORD = (
    r"(?i:time|stamp|date|epoch|created|updated|modified|expires?|since|until|when|clock"
    r"|_at|\bts|\bat|\bt)[\"']?\s*[:=]?\s*[\"']?\s*$")
_TIME_WORD_REACH = 24
# hh:mm[:ss[.frac]] [AM|PM] (hour 0-23), not part of a longer run such as file.py:12:34.
_CLOCK = (r"\d(?<![\w:.]\d)\d?(?<![3-9]\d)(?<!2[4-9])"
          r":[0-5]\d(?::[0-5]\d(?:[.,]\d+)?)?(?:\s?[AaPp][Mm])?(?![\w:])")
_ADDRESS = r"0x[0-9a-fA-F]{9,16}(?![0-9a-fA-F])"  # not a CRC (8 digits), nor a hash (40, 64)
_UNIT = r"(?:ns|[µμu]s|ms|seconds?|secs?|s|minutes?|mins?|m(?=\d)|hours?|hrs?|h)(?![^\W\d_])"
_DURATION = rf"\d(?<![\w.]\d)\d*(?:\.\d+)?\s?{_UNIT}(?:\d+(?:\.\d+)?\s?{_UNIT})*"
_DURATION_START = r"\d\s?[nµμumsh]"  # what every duration holds (cheap to compile)
# The fresh id and usage Claude Code appends to a subagent's report (2.1.39, 2.1.328 on).
_SUBAGENT_ID = r"(?<=agentId: )[0-9a-f]{6,}(?![0-9a-f])|(?<=to: ')[0-9a-f]{6,}(?=')"
_SUBAGENT_USAGE = r"<usage>(?:[a-z_]+: \d+\n?){1,8}</usage>"

# Values that change on every run, each masked alone; ASCII only for ``_noise_in``'s checks.
_UUID = (r"(?a)(?<![0-9A-Za-z])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}"
         r"-[0-9a-fA-F]{12}(?![0-9A-Za-z])")
# The value a key names as a request's or trace's id: 4+ id characters holding a digit.
_KEYED_ID = (r"(?a)((?<![A-Za-z])(?i:(?:request|req|trace|span|correlation|ray)[-_ ]?id"
             r"|cf-ray|traceparent)[\"']?[ \t]*[:=][ \t]*[\"']?)"
             r"(?=[\w.:/+=-]*[0-9])[\w.:/+=-]{4,}")
# An API's request id by its prefix (Anthropic's ``req_011CX…``, OpenAI's ``req_<hex>``).
_PREFIXED_ID = r"(?a)(req_)(?<![A-Za-z0-9]req_)(?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{12,}(?![A-Za-z0-9])"
_JWT = r"(?a)eyJ(?<![\w-]eyJ)[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]+"  # a JSON Web Token: fresh at login
# 16+ hex digits of one case; ``_hex_or_not`` keeps what names a content.
_HEX_RUN = r"(?a)(?<!\w)(?:[0-9a-f]{16,}|[0-9A-F]{16,})(?!\w)"
_HEX_KEPT = (40, 64, 128)  # SHA-1, SHA-256, SHA-512: another one is another content
_HASH_WORDS = ("sha", "md5", "hash", "digest", "checksum", "commit", "etag", "integrity",
               "rev", "blob", "tree", "object")
_HASH_REACH = 48
_PYTEST_TMP = r"(?a)(pytest-of-[^/\\\s]+[/\\]+pytest-)[0-9]+"  # pytest-of-USER/pytest-N
# Python's ``tempfile`` names: ``tmp`` and 8 of ``[a-z0-9_]``, one a digit or _.
_PY_TMP = r"(?a)tmp(?<=[/\\]tmp)(?=[a-z0-9_]{0,7}[0-9_])[a-z0-9_]{8}(?![A-Za-z0-9_])"
# mktemp's ``tmp.XXXXXXXXXX`` (a digit or a capital among them: not ``tmp.config``).
_MKTEMP = r"(?a)tmp\.(?<![\w.-]tmp\.)(?=[a-z]*[0-9A-Z])[A-Za-z0-9]{6,}(?![A-Za-z0-9])"
# A name made in a temporary folder: 8+ letters and digits mixed, alone or after a prefix.
_TMP_NAME = (r"(?a)((?:/tmp|/var/tmp|/T|\\Temp)[/\\](?:[\w.-]*?[._-])?)"
             r"(?=[A-Za-z]*[0-9])(?=[0-9]*[A-Za-z])[A-Za-z0-9]{8,}(?![A-Za-z0-9])")
_PID = r"(?a)([Pp](?<![A-Za-z][Pp])[Ii][Dd][ \t]*[:=#]?[ \t]*)[0-9]+(?![0-9.])"
# ``process 1234`` (user pids start at 300), not ``process 120 files``.
_PROCESS = (r"(?a)([Pp](?<![A-Za-z][Pp])(?i:rocess)[ \t]+(?:(?i:id)[ \t]*[:=]?[ \t]*)?)"
            r"[0-9]{3,}(?![0-9.])(?![ \t]+[A-Za-z]+s\b)")
_JOB = r"(?am)^(\[[0-9]{1,3}\][+-]?[ \t]+)[0-9]{3,7}(?=[ \t]*$)"  # a job line: [1] 12345

_UUIDS, _IDS, _JWTS, _HEXES, _TEMPS, _PYTESTS, _MKTEMPS, _PIDS, _JOBS = (
    1 << bit for bit in range(9))
_ALL_NOISE = (1 << 9) - 1
_HEX_CLASS = bytes(ord("x") if chr(byte) in "0123456789abcdefABCDEF" else
                   byte if byte == ord("-") else ord(".") for byte in range(256))
_ID_SPELLINGS = (b"requestid", b"reqid", b"traceid", b"spanid", b"correlationid", b"rayid",
                 b"cfray", b"traceparent")
_SCANNED = 64  # occurrences of a word looked at by ``_word_before_digit``


def _noise_in(text: str) -> int:
    """Which kinds of noise may be in ``text`` (flags), told without ``re``."""
    raw = text.encode("utf-8", "surrogatepass")
    found = 0
    hexes = raw.translate(_HEX_CLASS)
    if b"-xxxx-xxxx-xxxx-" in hexes:
        found |= _UUIDS
    if b"xxxxxxxxxxxxxxxx" in hexes:
        found |= _HEXES
    low = raw.lower()
    if b"eyj" in low:
        found |= _JWTS
    if b"req_" in low or (
            (b"id" in low or b"ray" in low or b"traceparent" in low)
            and any(spelling in low.translate(None, b"-_ \t\"'") for spelling in _ID_SPELLINGS)):
        found |= _IDS
    found |= _temps_in(low)
    if _word_before_digit(low, b"pid") or _word_before_digit(low, b"process"):
        found |= _PIDS
    if b"]" in raw:
        shape = raw.translate(_CLASSES)  # a job line's ``] 0``, or more spaces, or ``]+ ``
        if any(start in shape for start in (b"] 0", b"]  ", b"]+ ", b"]- ")):
            found |= _JOBS
    return found


def _temps_in(low: bytes) -> int:
    """``_noise_in``'s flags of the temporary paths, from the text lowered."""
    found = _PYTESTS if b"pytest-of-" in low else 0
    if b"tmp" in low:  # (one search for most outputs, which have none)
        if b"tmp." in low:
            found |= _MKTEMPS
        if b"/tmp" in low or b"\\tmp" in low:
            found |= _TEMPS
    if b"/t/" in low or b"\\temp\\" in low:
        found |= _TEMPS
    return found


def _word_before_digit(low: bytes, word: bytes) -> bool:
    """Whether ``word`` is in ``low`` not after a letter, with a digit after it."""
    start = low.find(word)
    for _ in range(_SCANNED):
        if start < 0:
            return False
        after = start + len(word)
        if start == 0 or not low[start - 1:start].isalpha():
            rest = low[after:after + 16].lstrip(b" \t:=#")
            rest = rest[2:].lstrip(b" \t:=#") if rest.startswith(b"id") else rest
            if rest[:1].isdigit():
                return True
        start = low.find(word, after)
    return start >= 0


def _mask_noise(text: str, found: int) -> str:
    """``text`` with the noise of the kinds ``found`` masked (``_noise_in``'s flags)."""
    import re

    if found & _IDS:
        text = re.sub(_KEYED_ID, r"\1<id>", text)
        text = re.sub(_PREFIXED_ID, r"\1<id>", text)
    if found & _JWTS:
        text = re.sub(_JWT, "<jwt>", text)
    if found & _UUIDS:
        text = re.sub(_UUID, "<uuid>", text)
    if found & _PYTESTS:
        text = re.sub(_PYTEST_TMP, r"\1<n>", text)
    if found & _TEMPS:
        text = re.sub(_PY_TMP, "tmp<tmp>", text)
    if found & _MKTEMPS:
        text = re.sub(_MKTEMP, "tmp.<tmp>", text)
    if found & _TEMPS:
        text = re.sub(_TMP_NAME, r"\1<tmp>", text)
    if found & _HEXES:
        text = re.sub(_HEX_RUN, _hex_or_not, text)
    if found & _PIDS:
        text = re.sub(_PID, r"\1<pid>", text)
        text = re.sub(_PROCESS, r"\1<pid>", text)
    if found & _JOBS:
        text = re.sub(_JOB, r"\1<pid>", text)
    return text


def _hex_or_not(match: re.Match[str]) -> str:
    """``<hex>`` for a hex run that reads as random (not a digest, nor after a hash word)."""
    value = match.group()
    if len(value) in _HEX_KEPT or value.isdigit() or not any(c.isdigit() for c in value):
        return value
    end = match.end()
    if match.string[end:end + 2] in ("  ", " *"):
        return value
    start = match.start()
    line = match.string[max(0, start - _HASH_REACH):start].rsplit("\n", 1)[-1].lower()
    if any(word in line for word in _HASH_WORDS):
        return value
    return "<hex>"


def canonical(value: object) -> str:
    try:
        return dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    except RecursionError:  # (nested deeper than the encoder goes)
        return canonical_flat(value)


def canonical_flat(value: object) -> str:
    """``canonical`` without recursion, for values nested too deep."""
    out: list[str] = []
    stack: list[object] = [value]
    close = object()  # marks where a container's closing bracket goes
    brackets: list[str] = []
    while stack:
        item = stack.pop()
        if item is close:
            out.append(brackets.pop())
        elif isinstance(item, tuple) and len(item) == 2 and item[0] is close:
            out.append(str(item[1]))  # a separator or a key, already written out
        elif isinstance(item, dict):
            out.append("{")
            brackets.append("}")
            stack.append(close)
            for index, key in enumerate(sorted(item, key=str, reverse=True)):
                stack.append(item[key])
                prefix = "" if index == len(item) - 1 else ","
                stack.append((close, prefix + dumps(str(key), ensure_ascii=False) + ":"))
        elif isinstance(item, list):
            out.append("[")
            brackets.append("]")
            stack.append(close)
            for index, element in enumerate(reversed(item)):
                stack.append(element)
                if index != len(item) - 1:
                    stack.append((close, ","))
        else:
            out.append(dumps(item, ensure_ascii=False, default=str))
    return "".join(out)


# What each pattern needs, in the text reduced to classes (digits 0, spaces, duration units u).
_CLASSES = bytes.maketrans(b"0123456789\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f numsh",
                           b"0" * 10 + b" " * 10 + b"u" * 5)
_NEEDED = (b"0000-00-00", b"0000000000", b"0:0", b"0x", b"0u", b"0 u", b"\x1b")


def _may_match(text: str) -> bool:
    """Whether a masking pattern may match ``text`` (ASCII): False, nothing to mask."""
    shape = text.encode("ascii").translate(_CLASSES)
    return any(needed in shape for needed in _NEEDED)


MAX_MASKED = 1 << 20  # characters of one output masked; the rest compared by its digest


def _mask(text: str) -> str:
    if len(text) > MAX_MASKED:
        return _mask(text[:MAX_MASKED]) + "\x00" + hex_digest(text[MAX_MASKED:], 20)
    subagent = "agentId: " in text
    plain = text.isascii()
    noise = _noise_in(text)
    if plain and not subagent and not noise and not _may_match(text):
        return text
    import re

    if subagent:
        text = re.sub(_SUBAGENT_USAGE, "<usage>", re.sub(_SUBAGENT_ID, "<agent>", text))
    if noise:
        text = _mask_noise(text, noise)

    if "\x1b" in text:
        text = re.sub(_ANSI, "", text)
    if "-" in text:
        text = re.sub(_ISO_MOMENT, "<time>", text)
    text = re.sub(_EPOCH, _epoch_or_not, text)
    if ":" in text:
        text = re.sub(_CLOCK, "<time>", text)
    if "0x" in text:
        text = re.sub(_ADDRESS, "0x…", text)
    if not re.search(_DURATION_START, text):
        return text
    return re.sub(_DURATION, "<duration>", text)


def _epoch_or_not(match: re.Match[str]) -> str:
    """``<time>`` for a number that reads as a Unix time (see ``_TIME_WORD``), else itself."""
    number = match.group()
    fraction = number.find(".")
    if fraction >= 0 and len(number) - fraction > 3:
        return "<time>"
    start = match.start()
    before = match.string[max(0, start - _TIME_WORD_REACH):start]
    import re

    return "<time>" if re.search(_TIME_WORD, before) else number


def _masked(value: object) -> object:
    """Every string of a JSON value masked (before JSON escapes ANSI codes)."""
    try:
        return _masked_nested(value)
    except RecursionError:  # (nested deeper than Python recurses: its flat text)
        return _mask(canonical_flat(value))


def _masked_nested(value: object) -> object:
    if isinstance(value, str):
        return _mask(value)
    if isinstance(value, list):
        return [_masked_nested(item) for item in value]
    if isinstance(value, dict):
        return {key: "<duration>" if _is_duration(key, item) else _masked_nested(item)
                for key, item in value.items()}
    return value


# A key naming a time taken ends with its unit (a clip's ``duration`` is a value).
_TIME_UNITS = ("ms", "millis", "seconds", "secs", "sec", "_s", "us", "micros", "ns")


def _is_duration(key: object, value: object) -> bool:
    """A number a structured output names as a time taken (``durationMs``)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not isinstance(key, str):
        return False
    lowered = key.lower()
    return ("duration" in lowered or "elapsed" in lowered) and lowered.endswith(_TIME_UNITS)


def result_key(content: object, *, is_error: bool) -> str:
    """A tool's output made comparable: ``error:`` or ``ok:``, then the masked output."""
    if isinstance(content, str):
        text = _mask(content)
    elif isinstance(content, list) and all(
        isinstance(block, dict) and block.get("type") == "text" for block in content):
        text = _mask("\n".join(str(block.get("text", "")) for block in content))
    else:
        text = canonical(_masked(content))
    return ("error:" if is_error else "ok:") + text

