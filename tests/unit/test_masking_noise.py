"""Noise is not progress (issue 29, item 2): the values that change on every run are masked
(engine/masking.py), and a masked value never merges outputs that differ in progress.

Generated outputs: the same output with fresh noise values is the same result; outputs
that differ in a failure count, a file name, an error message, a traceback's line number
or a short git SHA stay different, whatever noise surrounds them. Then every fixture
transcript gives the same tool-repeat counts and re-prompt detections as with the noise
masking switched off (no new warning where there was none).
"""

from __future__ import annotations

import string
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loop_killer.engine import masking
from loop_killer.engine.masking import result_key
from loop_killer.engine.reader import detect_transcript
from loop_killer.engine.tool_repeat import ToolRepeatCounter
from loop_killer.engine.transcript import parse_line
from transcripts import FIXTURES

SHARED = FIXTURES.parents[2] / "shared" / "fixtures"  # /work/shared/fixtures, when there

# -- noise values, as tools print them ------------------------------------------------------

BASE62 = string.ascii_letters + string.digits
HEX = "0123456789abcdef"


def _mixed(alphabet: str, size: int) -> st.SearchStrategy[str]:
    """``size`` characters of ``alphabet`` with a digit and a letter among them (a random
    value of that size lacks one so rarely that the masking may ask for both)."""
    return st.text(alphabet, min_size=size, max_size=size).filter(
        lambda s: any(c.isdigit() for c in s) and any(c.isalpha() for c in s))


uuids = st.uuids().map(str)
request_ids = st.integers(20, 28).flatmap(lambda n: _mixed(BASE62, n)).map(
    lambda s: "req_011CX" + s)
hex_tokens = st.sampled_from([16, 20, 24, 32, 48]).flatmap(lambda n: _mixed(HEX, n))
pids = st.integers(300, 4_194_304)
python_tmp = st.text("abcdefghijklmnopqrstuvwxyz0123456789_", min_size=8, max_size=8).filter(
    lambda s: any(c.isdigit() or c == "_" for c in s)).map(lambda s: "tmp" + s)
mktemp = _mixed(BASE62, 10).filter(lambda s: not s.islower()).map(lambda s: "tmp." + s)

NOISE_SHAPES: list[tuple[str, st.SearchStrategy[object]]] = [
    ("Error: 503 Service Unavailable (request_id: {})", request_ids),
    ('{{"type":"error","error":{{"type":"overloaded_error"}},"request_id":"{}"}}', request_ids),
    ("x-request-id: {}", uuids),
    ("X-Request-Id: {}", hex_tokens),
    ("trace_id={} span_id=00f067aa0ba902b7", hex_tokens),
    ('"traceId": "{}"', hex_tokens),
    ("Cloudflare Ray ID: {}", hex_tokens),
    ("session {} opened", uuids),
    ("nonce {}", hex_tokens),
    ("retrying {} ...", request_ids),
    ("rootdir: /tmp/pytest-of-dev/pytest-{}/test_login0", st.integers(0, 10_000)),
    ("wrote /tmp/{}/report.json", python_tmp),
    ("cd /tmp/{} && make", mktemp),
    ("work dir /tmp/go-build{}/b001", st.integers(10**9, 10**10 - 1)),
    ("/tmp/build-{}/out.log", _mixed("abcdefghijklmnopqrstuvwxyz0123456789", 8)),
    ("server pid {} exited", pids),
    ("pid={}", pids),
    ("PID: {}", pids),
    ("[1] {}", pids),
    ("Killed process {} (node)", pids),
]


@st.composite
def noise_lines(draw: st.DrawFn, count: int | None = None) -> list[tuple[int, object]]:
    """Which noise shapes an output holds (by index) and their values."""
    size = draw(st.integers(1, 6)) if count is None else count
    indexes = draw(st.lists(st.integers(0, len(NOISE_SHAPES) - 1), min_size=size,
                            max_size=size))
    return [(index, draw(NOISE_SHAPES[index][1])) for index in indexes]


def _fresh(draw: st.DrawFn, lines: list[tuple[int, object]]) -> list[tuple[int, object]]:
    """The same shapes with fresh values (the next run)."""
    return [(index, draw(NOISE_SHAPES[index][1])) for index, _ in lines]


def _render(lines: list[tuple[int, object]]) -> list[str]:
    return [NOISE_SHAPES[index][0].format(value) for index, value in lines]


# -- what a person calls progress -------------------------------------------------------------

WORDS = ["login", "auth", "token", "user", "session", "config", "parser", "cache", "api",
         "client", "server", "handler", "model", "view", "utils", "index", "main", "db"]
names = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map("_".join)
file_names = st.tuples(st.sampled_from(["src", "tests", "lib", "app/core"]), names,
                       st.sampled_from([".py", ".ts", ".js", ".go", ""])).map(
                           lambda t: f"{t[0]}/{t[1]}{t[2]}")
messages = st.lists(st.sampled_from(
    ["expected", "got", "undefined", "null", "is", "not", "a", "function", "cannot",
     "read", "property", "of", "connection", "refused", "timeout", "permission", "denied",
     "missing", "invalid", "syntax", "error", "value", "type", "key"]), min_size=1,
    max_size=8).map(" ".join)

# (how an output says it, what differs) -> two outputs that differ in progress
Substance = Callable[[st.DrawFn], tuple[str, str]]


def _two(strategy: st.SearchStrategy[object], template: str) -> Substance:
    def pair(draw: st.DrawFn) -> tuple[str, str]:
        first = draw(strategy)
        second = draw(strategy.filter(lambda other: other != first))
        return template.format(first), template.format(second)
    return pair


SUBSTANCES: dict[str, Substance] = {
    "failure count": _two(st.integers(0, 500), "Tests: {} failed, 12 passed"),
    "failure count (pytest)": _two(st.integers(1, 500), "=== {} failed in tests/ ==="),
    "file name": _two(file_names, "FAIL {}"),
    "file name in a temp folder": _two(names, "ENOENT: no such file /tmp/{}.json"),
    "error message": _two(messages, "Error: {}"),
    "error message with a request id key": _two(messages, "request_id: {}"),
    "line number": _two(st.integers(1, 99_999), 'File "src/app.py", line {}, in main'),
    "short git SHA": _two(st.text(HEX, min_size=7, max_size=12), "{} fix the login test"),
    "full git SHA": _two(st.text(HEX, min_size=40, max_size=40), "commit {}"),
    "bare SHA-1 (git rev-parse HEAD)": _two(st.text(HEX, min_size=40, max_size=40), "{}"),
    "checksum line": _two(st.text(HEX, min_size=32, max_size=32), "{}  dist/app.js"),
    "exit code": _two(st.integers(0, 255), "Exit code {}"),
    "process count": _two(st.integers(0, 999), "failed to process {} files"),
    "port": _two(st.integers(1024, 65535), "listening on port {}"),
}


@settings(max_examples=1500, deadline=None)
@given(st.data())
def test_an_output_with_fresh_noise_is_the_same_result(data: st.DataObject) -> None:
    lines = data.draw(noise_lines())
    body = data.draw(st.lists(messages, max_size=3))
    fresh = _fresh(data.draw, lines)
    first = "\n".join([*body, *_render(lines)])
    second = "\n".join([*body, *_render(fresh)])
    assert result_key(first, is_error=True) == result_key(second, is_error=True), (
        first, second)


@settings(max_examples=1500, deadline=None)
@given(st.data(), st.sampled_from(sorted(SUBSTANCES)))
def test_outputs_differing_in_progress_stay_different_whatever_noise_surrounds_them(
        data: st.DataObject, kind: str) -> None:
    first, second = SUBSTANCES[kind](data.draw)
    before = data.draw(noise_lines(count=data.draw(st.integers(0, 3))))
    after = data.draw(noise_lines(count=data.draw(st.integers(0, 3))))
    # Each run with its own noise values, the same shapes around the substance.
    one = "\n".join([*_render(before), first, *_render(after)])
    two = "\n".join([*_render(_fresh(data.draw, before)), second,
                     *_render(_fresh(data.draw, after))])
    assert result_key(one, is_error=True) != result_key(two, is_error=True), (kind, one, two)


@pytest.mark.parametrize(("first", "second"), [
    # git log --oneline: short SHAs (7 to 12 digits) are the news
    ("a1b2c3d fix login\n9f8e7d6 add tests", "0a1b2c3 fix login\n9f8e7d6 add tests"),
    ("HEAD is now at 1a2b3c4d5e6f fix", "HEAD is now at 6f5e4d3c2b1a fix"),
    ("sha256:" + "ab12" * 16, "sha256:" + "cd34" * 16),  # an image digest
    ("MD5 (a.txt) = " + "0a1b" * 8, "MD5 (a.txt) = " + "2c3d" * 8),
    ('"sha": "' + "1a2b3c4d" * 4 + '"', '"sha": "' + "5e6f7a8b" * 4 + '"'),
    ("request_id: missing", "request_id: malformed"),  # a message, not an id
    ("unexpected token: identifier", "unexpected token: punctuator"),
    ("/tmp/build-output/a.log", "/tmp/build-release/a.log"),  # words: names
    ("/repo/tmpcheckout/a", "/repo/tmpworkspace/a"),
    ("tmp.config", "tmp.settings"),
    ("rapid 3 files", "rapid 4 files"),
    ("process 120 files", "process 121 files"),
    ("deadbeefcafebabe", "cafebabedeadbeef"),  # letters alone: a word
    ("1234567890123456789", "1234567890123456788"),  # digits alone: a number
    ("[1] 42", "[1] 43"),  # R's first value (a pid is 300 or more)
    ("12 failed", "11 failed"),
])
def test_what_looks_like_noise_but_is_news_stays_different(first: str, second: str) -> None:
    assert result_key(first, is_error=False) != result_key(second, is_error=False)


@pytest.mark.parametrize(("first", "second"), [
    ("Error: 503 (request_id: req_011CXa1b2c3d4e5f6a7b8c9d0)",
     "Error: 503 (request_id: req_011CXz9y8x7w6v5u4t3s2r1q0)"),
    ("x-request-id: 5f3c9a1e-1234-4abc-9def-0123456789ab",
     "x-request-id: 0b7d2c44-9e8f-4a1b-8c2d-fedcba987654"),
    ("traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
     "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
    ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcDEF123-_x",
     "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI5ODc2NTQzMjEwIn0.zyxWVU987_-y"),
    ("/tmp/pytest-of-dev/pytest-41/test_a0/x", "/tmp/pytest-of-dev/pytest-42/test_a0/x"),
    ("/tmp/tmpab12cd34/x.py", "/tmp/tmp9_zzk2lq/x.py"),
    ("C:\\Users\\dev\\AppData\\Local\\Temp\\tmpk3j2h1x0\\x",
     "C:\\Users\\dev\\AppData\\Local\\Temp\\tmp0ab1cd2e\\x"),
    ("/var/folders/7x/abc/T/tmp.Ab3dE5fG7h", "/var/folders/7x/abc/T/tmp.Zz9yY8xX7w"),
    ("server (pid 1234) exited", "server (pid 98765) exited"),
    ("[1]+ 31337", "[1]+ 4242"),
])
def test_noise_in_its_usual_shapes_is_masked(first: str, second: str) -> None:
    assert result_key(first, is_error=True) == result_key(second, is_error=True)


# -- the checks without re never skip a pattern that matches ---------------------------------

_NOISE_PIECES = [
    "req_", "011CX", "request", "Request", "REQUEST", "_id", "-id", "Id", " ID", "trace",
    "span", "Ray", "cf-ray", "traceparent", "x-", ": ", "=", '"', "'", "\t", " ", "\n",
    "pid", "PID", "Pid", "process", "Process", " id ", "#", "[1] ", "[12]+ ", "tmp", "TMP",
    "/tmp/", "/T/", "\\Temp\\", "tmp.", "pytest-of-dev/pytest-", "go-build", "-", "_", ".",
    "eyJ", "eyJhbGciOiJIUzI1NiJ9", "abcdef", "ABCDEF", "0123456789", "12345678", "9",
    "5f3c9a1e-1234-4abc-9def-0123456789ab", "deadbeef", "é", "\u00a0", "  ", "sha", "s",
]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_NOISE_PIECES), max_size=20))
def test_noise_is_skipped_only_where_it_cannot_match(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert masking._mask_noise(text, masking._noise_in(text)) == masking._mask_noise(
        text, masking._ALL_NOISE)


# -- every fixture transcript: no count changed, no new warning ------------------------------


def _transcripts() -> list[Path]:
    roots = [FIXTURES, *([SHARED] if SHARED.is_dir() else [])]
    return sorted(path for root in roots for path in root.rglob("*.jsonl")
                  if path.name != "hook_inputs.jsonl")


def _counts_and_detections(paths: list[Path]) -> dict[str, object]:
    found: dict[str, object] = {}
    for path in paths:
        counter = ToolRepeatCounter()
        counts: list[int] = []
        for raw in path.read_bytes().splitlines():
            event = parse_line(raw)
            if event is not None:
                counts += [repeat.count for repeat in counter.feed(event)]
        detections = [(d.rule, [a.uuid for a in d.answers])
                      for d in detect_transcript(path.read_bytes(), path.stem)]
        found[str(path)] = (counts, detections)
    return found


def test_every_fixture_transcript_counts_as_without_the_noise_masking(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The tool-repeat counts (so its warnings) and the re-prompt detections over every
    recorded and real transcript are those of the masking without the noise patterns."""
    paths = _transcripts()
    own = [path for path in paths if FIXTURES in path.parents]  # (a clean clone has these)
    assert len(own) >= 28 and (len(paths) > len(own) or not SHARED.is_dir())
    with_noise = _counts_and_detections(paths)
    monkeypatch.setattr(masking, "_noise_in", lambda text: 0)
    assert _counts_and_detections(paths) == with_noise
    counts = {path: found for path, (found, _) in with_noise.items()}  # type: ignore[misc]
    mine = [count for path in own for count in counts[str(path)]]
    assert len(mine) > 90 and max(mine) >= 3  # (the fixtures hold tool work and a warning)
    assert not SHARED.is_dir() or sum(map(len, counts.values())) > 100
