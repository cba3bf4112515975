"""The backward tail reader: whole lines only, linear, and within its byte limit."""

from __future__ import annotations

import io

from loop_killer.tailing import find_run_start, iter_lines_backwards


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
