"""Lines that cannot be JSON objects stepped over in bulk (issue 21): with
``skip_non_json`` the line buffer gives the lines it gives without, less blank ones and
(most) ones without a ``{``, which it only counts; and the reader counts them as parsing
them would, without ever parsing one."""

from __future__ import annotations

import random

from loop_killer.engine.reader import EventReader, LineBuffer

PIECES = [b"\n", b"\n" * 50, b" \n", b"\r\n", b"\t \x0b\x0c\n", b"  ", b"x\n", b" x\n",
          b"\x00\n", b'{"type":"user"}\n', b'  {"a":1}\n', b"abc", b"\n" * 3000]


def _split(data: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(len(data) + 1), min(len(data), rng.randint(0, 12))))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def _lines(buffer: LineBuffer, chunks: list[bytes]) -> list[tuple[int, bytes]]:
    return [line for chunk in chunks for line in buffer.feed(chunk)]


def test_skipping_blank_lines_gives_every_other_line_where_it_was() -> None:
    rng = random.Random(21)
    for _ in range(300):
        data = b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 40)))
        chunks = _split(data, rng)
        every = _lines(LineBuffer(7, max_line=64), chunks)
        skipping = LineBuffer(7, max_line=64, skip_non_json=True)
        kept = _lines(skipping, chunks)
        assert [x for x in kept if b"{" in x[1]] == [x for x in every if b"{" in x[1]]
        assert all(line.strip() for _, line in kept)
        rest = iter(every)
        assert all(x in rest for x in kept)  # the others, in order and where they were
        given = skipping.blank + skipping.not_json + len(kept)
        assert given == len(every) or skipping.oversized
        assert skipping.line_start == LineBuffer(7).line_start + data.rfind(b"\n") + 1


def test_runs_of_blank_or_tiny_lines_are_not_a_line_at_a_time() -> None:
    """Work done, not time: the lines given (one), all others counted in C."""
    buffer = LineBuffer(skip_non_json=True)
    data = (b"\n" * 1_000_000 + b" \t\r\n" * 1000 + b"x\n" * 100_000 + b'{"a":1}\n'
            + b"\n" + b"no brace\n" * 10 + b" \n" + b'  {"b":2}\n')
    spans = buffer.iter_spans(data)
    assert [(at, chunk[start:end]) for at, chunk, start, end in spans] == [
        (1_204_000, b'{"a":1}'), (len(data) - 10, b'  {"b":2}')]
    assert (buffer.blank, buffer.not_json) == (1_001_002, 100_010)


def test_the_reader_counts_the_lines_it_never_parses() -> None:
    parsed: list[bytes] = []

    def parse(buffer, start, end, stats):  # type: ignore[no-untyped-def]
        parsed.append(buffer[start:end])
        stats.count(None, "bad_json")

    reader = EventReader(parse=parse)
    reader.feed(b"\n" * 10_000 + b"x\n" + b" \n" * 5 + b"{x\n")
    assert parsed == [b"{x"]
    stats = reader.stats
    assert stats.lines == 10_007 and stats.skipped == {"blank": 10_005, "bad_json": 2}
