"""Tool outputs made comparable (pure): the masking of the tool-repeat rule.

``result_key`` is what every consumer compares: the output with ANSI codes, ISO dates and
times, Unix times (only where a number reads as one), clock times, durations and memory
addresses masked, and whether it was an error. Process ids, temporary file names, hashes,
UUIDs, port numbers and ``\r`` progress bars are NOT masked (two outputs that differ in
them are different results: at worst a loop is caught later, never a call refused by
mistake). ``canonical`` is the JSON form of a call's input or a structured output.
"""

from __future__ import annotations

from ..light import dumps, hex_digest

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool call does not import typing
if TYPE_CHECKING:
    import re

__all__ = ["MAX_MASKED", "canonical", "result_key"]

# The patterns are kept as text, compiled by ``re`` on first use (and cached there): a
# tool-call hook masks one output, which needs a few of them, and compiling them all
# would cost it 2 ms. Each is tried only where a character it needs is in the text, and
# ``re`` itself (7 ms to import) only where one of them may match (``_may_match``).
_ANSI = r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
# A date with its time of day (a log line's moment); a date alone is compared as it is:
# within one turn it rarely changes by itself, and where it does it is the news (a
# backfill moving on a week a run, a release date).
_ISO_MOMENT = (
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
)
# The patterns below start with a digit and check what comes before it with a lookbehind
# placed after that digit: ``re`` then skips ahead to digits instead of trying every
# position (several times faster on a long output; tests pin them to the plain forms).
_EPOCH = r"1(?<![\w.]1)\d{9}(?:\d{3})?(?:\.\d+)?(?![\w.])"
# A 10- or 13-digit number is a Unix time only where it reads as one: a fraction of 3+
# digits (``time.time()``), or a time word just before it (``"ts": 1700000000``,
# ``created_at=1700000000``). A size (``ls -l``), a count or an id is not a time.
_TIME_WORD = (
    r"(?i:time|stamp|date|epoch|created|updated|modified|expires?|since|until|when|clock"
    r"|_at|\bts|\bat|\bt)[\"']?\s*[:=]?\s*[\"']?\s*$")
_TIME_WORD_REACH = 24
# hh:mm[:ss[.frac]] [AM|PM] (hour 0-23), not part of a longer run such as file.py:12:34.
_CLOCK = (
    r"\d(?<![\w:.]\d)\d?(?<![3-9]\d)(?<!2[4-9])"
    r":[0-5]\d(?::[0-5]\d(?:[.,]\d+)?)?(?:\s?[AaPp][Mm])?(?![\w:])"
)
# A 64-bit memory address (9 to 16 hex digits): not a CRC or register (8 or fewer), an
# Ethereum address (40), a hash or a 256-bit value (64), which are compared as they are.
_ADDRESS = r"0x[0-9a-fA-F]{9,16}(?![0-9a-fA-F])"
_UNIT = r"(?:ns|[µμu]s|ms|seconds?|secs?|s|minutes?|mins?|m(?=\d)|hours?|hrs?|h)(?![^\W\d_])"
_DURATION = rf"\d(?<![\w.]\d)\d*(?:\.\d+)?\s?{_UNIT}(?:\d+(?:\.\d+)?\s?{_UNIT})*"
# What every duration holds: a digit, then (after any more digits, a fraction, one space)
# the first letter of a unit. Cheap to compile; the full pattern only where it is found.
_DURATION_START = r"\d\s?[nµμumsh]"
# What Claude Code appends to a subagent's report (2.1.328 on): the agent's fresh id, to
# message it again, and what its run took. The report itself is compared as it is.
# (2.1.39 wrote a 7-digit id and ``total_tokens``.)
_SUBAGENT_ID = r"(?<=agentId: )[0-9a-f]{6,}(?![0-9a-f])|(?<=to: ')[0-9a-f]{6,}(?=')"
_SUBAGENT_USAGE = r"<usage>(?:[a-z_]+: \d+\n?){1,8}</usage>"




def canonical(value: object) -> str:
    try:
        return dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                     default=str)
    except RecursionError:  # nested deeper than the encoder goes: hostile, still counted
        return canonical_flat(value)


def canonical_flat(value: object) -> str:
    """``_canonical`` without recursion (an explicit stack), for values nested too deep."""
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



# What each pattern needs, looked for without ``re``: an ASCII text reduced to one byte
# per class of character, digits to 0, whitespace (``\s``) to a space and the first
# letters of the duration units to u. A pattern can match only where its reduced form is
# found: an ISO date 0000-00-00, a Unix time's ten digits, a clock's 0:0, an address's 0x,
# a duration's 0u or 0 u (``_DURATION_START``), an escape. (Necessary, not sufficient:
# ``re`` then decides.)
_CLASSES = bytes.maketrans(b"0123456789\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f numsh",
                           b"0" * 10 + b" " * 10 + b"u" * 5)
_NEEDED = (b"0000-00-00", b"0000000000", b"0:0", b"0x", b"0u", b"0 u", b"\x1b")


def _may_match(text: str) -> bool:
    """Whether a masking pattern may match ``text`` (ASCII): False, nothing to mask."""
    shape = text.encode("ascii").translate(_CLASSES)
    return any(needed in shape for needed in _NEEDED)


MAX_MASKED = 1 << 20
"""Characters of one output masked; the rest is compared as it is (a crafted output of
many megabytes costs a bounded time, and at worst two runs count as different)."""


def _mask(text: str) -> str:
    if len(text) > MAX_MASKED:
        return _mask(text[:MAX_MASKED]) + "\x00" + hex_digest(text[MAX_MASKED:], 20)
    subagent = "agentId: " in text
    if text.isascii() and not subagent and not _may_match(text):
        return text
    import re

    if subagent:
        text = re.sub(_SUBAGENT_USAGE, "<usage>", re.sub(_SUBAGENT_ID, "<agent>", text))

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
    """Every string of a JSON value masked (so ANSI codes are gone before JSON escapes them)."""
    try:
        return _masked_nested(value)
    except RecursionError:  # nested deeper than Python recurses: masked as its flat text
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


_TIME_UNITS = ("ms", "millis", "seconds", "secs", "sec", "_s", "us", "micros", "ns")
"""How a key that names a time taken ends: its unit, so that a ``duration`` of a clip or a
``trialDurationDays`` (values, not times taken) is compared as it is."""


def _is_duration(key: object, value: object) -> bool:
    """A number a structured output names as a time taken (``Glob``'s and ``WebFetch``'s
    ``durationMs``, ``WebSearch``'s ``durationSeconds``, a subagent's
    ``totalDurationMs``): different on every run, as a duration in a text is."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not isinstance(
            key, str):
        return False
    lowered = key.lower()
    return ("duration" in lowered or "elapsed" in lowered) and lowered.endswith(_TIME_UNITS)


def result_key(content: object, *, is_error: bool) -> str:
    """A tool's output made comparable: ``error:`` or ``ok:``, then the masked output.

    ``content`` is what the tool gave back: a string, a list of content blocks (text
    blocks count by their text), or any JSON value (a hook's ``tool_response``).
    ANSI codes, timestamps and clock times, durations (``1.2s``, ``45 ms``, a number a
    structured output names as one), memory addresses (``0x7ffd…``) and what Claude Code
    appends to a subagent's report (its id, its usage) are masked, so two runs differing
    only in those are equal.
    """
    if isinstance(content, str):
        text = _mask(content)
    elif isinstance(content, list) and all(
        isinstance(block, dict) and block.get("type") == "text" for block in content
    ):
        text = _mask("\n".join(str(block.get("text", "")) for block in content))
    else:
        text = canonical(_masked(content))
    return ("error:" if is_error else "ok:") + text

