"""The backward tail reader: whole lines only, linear, and within its byte and line budgets."""

from __future__ import annotations

import io
import random

import pytest
from loop_killer.engine.transcript import parse_line
from loop_killer.state import tailing
from loop_killer.state.tailing import (
    MAX_RUN_LINES,
    ScanStats,
    iter_lines_backwards,
    scan_run_start,
)


def find_run_start(handle) -> int:
    return scan_run_start(handle).offset


def _lines(data: bytes, **options) -> list[tuple[int, bytes]]:
    return list(iter_lines_backwards(io.BytesIO(data), len(data), **options))


def test_lines_come_last_first_with_their_offsets_and_the_partial_tail_left_out():
    data = b'{"a":1}\n\n{"b":2}\n{"c":'
    assert _lines(data, block=3) == [(9, b'{"b":2}'), (0, b'{"a":1}')]


def test_a_line_longer_than_the_limit_is_never_assembled():
    data = b"x" * (10 * 1024 * 1024) + b"\n" + b'{"end":1}\n'
    got = _lines(data, block=64 * 1024, limit=64 * 1024)
    assert got == [(len(data) - 10, b'{"end":1}')]


def test_the_run_starts_at_the_last_turn_start():
    prompt = b'{"type":"user","uuid":"p","message":{"role":"user","content":"hello"}}\n'
    reprompt = (b'{"type":"user","uuid":"r","isMeta":true,"message":{"role":"user",'
                b'"content":"Stop hook feedback:\\nmore"}}\n')
    data = b'{"type":"user","uuid":"o","message":{"role":"user","content":"old"}}\n'
    data += prompt + reprompt
    assert find_run_start(io.BytesIO(data)) == data.index(prompt)


# -- bounded work, whatever the file holds (hole 5: tiny or blank lines) ------------------


class _Counted(io.BytesIO):
    """A file that counts the reads made from it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.reads = 0
        self.bytes_read = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.reads += 1
        self.bytes_read += len(data)
        return data


@pytest.fixture
def parses(monkeypatch) -> list[bytes]:
    """The lines find_run_start parses, in order."""
    seen: list[bytes] = []

    def counting(line: bytes, *args):
        seen.append(line)
        return parse_line(line, *args)

    monkeypatch.setattr(tailing, "parse_line", counting)
    return seen


REPROMPT = (b'{"type":"user","uuid":"r","isMeta":true,"message":{"role":"user",'
            b'"content":"Stop hook feedback:\\nmore"}}\n')
PROMPT = b'{"type":"user","uuid":"p","message":{"role":"user","content":"hello"}}\n'
BIG = 64 * 1024 * 1024


def test_64_mb_of_newlines_costs_one_block_and_no_parse(parses):
    handle = _Counted(b"\n" * BIG)
    found = scan_run_start(handle)
    assert found.offset == BIG  # nothing to replay: no line there means anything
    assert found.why == "budget" and found.lines == MAX_RUN_LINES
    assert handle.reads == 1 and handle.bytes_read == 256 * 1024
    assert parses == []


def test_newlines_after_a_run_are_stepped_over_in_bulk_up_to_the_line_budget(parses):
    blanks = b"\n" * (MAX_RUN_LINES - 10)
    data = PROMPT + REPROMPT + blanks
    handle = _Counted(data)
    assert find_run_start(handle) == 0  # the prompt is still within the budget
    assert len(parses) == 2  # the two lines, never a blank one
    # The same with more blank lines than the budget: the run is out of reach.
    data = PROMPT + REPROMPT + b"\n" * BIG
    handle = _Counted(data)
    assert find_run_start(handle) == len(data)
    assert handle.reads == 1


def test_newlines_before_a_run_cut_the_scan_at_the_run(parses):
    data = PROMPT + b"\n" * BIG + REPROMPT + REPROMPT
    found = scan_run_start(_Counted(data))
    assert (found.offset, found.why) == (len(data) - 2 * len(REPROMPT), "budget")
    assert len(parses) == 2


def test_tiny_lines_are_parsed_at_most_the_line_budget(parses):
    data = b"x\n" * (BIG // 2)
    handle = _Counted(data)
    found = scan_run_start(handle)
    assert found.why == "budget" and found.lines == MAX_RUN_LINES
    assert len(parses) == MAX_RUN_LINES
    assert found.offset == len(data) - 2 * MAX_RUN_LINES  # all it passed is replayed
    assert handle.bytes_read <= 2 * 256 * 1024


def test_blank_looking_lines_count_against_the_budget_without_being_parsed(parses):
    data = PROMPT + b" \r\n" * (2 * MAX_RUN_LINES)
    found = scan_run_start(io.BytesIO(data))
    assert found.why == "budget" and found.lines == MAX_RUN_LINES
    assert found.offset == len(data)
    assert parses == []


def test_any_reader_is_bounded_by_its_line_budget():
    data = b"x\n" * 100_000
    stats = ScanStats(len(data))
    got = list(iter_lines_backwards(io.BytesIO(data), len(data), max_lines=500, stats=stats))
    assert len(got) == 500 and stats.lines == 500 and not stats.complete
    assert stats.replay_from == len(data) - 1000


def test_a_half_written_line_with_nothing_before_it_is_replayed_from_its_start():
    data = b"\n" * 100 + b'{"type":"user"'  # its newline not written yet
    assert find_run_start(io.BytesIO(data)) == 100
    assert find_run_start(io.BytesIO(b'{"type":')) == 0


def test_a_line_longer_than_the_byte_limit_is_left_out_not_read_whole():
    data = b"x" * (3 * 1024 * 1024)  # no newline at all: the start is out of reach
    stats = ScanStats(len(data))
    assert list(iter_lines_backwards(io.BytesIO(data), len(data), limit=1024 * 1024,
                                     stats=stats)) == []
    assert stats.replay_from == len(data) and stats.read <= 1024 * 1024 + 256 * 1024


@pytest.mark.parametrize("block", [1, 2, 3, 7, 64])
def test_same_lines_as_a_plain_split_however_blank_runs_fall_across_blocks(block):
    rng = random.Random(block)
    for _ in range(300):
        data = bytes(rng.choice(b"\n\n\nab \r") for _ in range(rng.randint(0, 50)))
        end = rng.randint(0, len(data))
        whole = data[: data.rfind(b"\n", 0, end) + 1]
        expected, position = [], 0
        for piece in whole.split(b"\n")[:-1]:
            if piece.strip():
                expected.append((position, piece))
            position += len(piece) + 1
        got = list(iter_lines_backwards(io.BytesIO(data), end, block=block))
        assert got == expected[::-1], (data, end)
