"""The pre-filter never changes a result: a line it skips is one the engine ignores."""

from __future__ import annotations

import orjson
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from loop_killer.engine.prefilter import (
    COST,
    COST_STATE,
    KEEP,
    SKIP,
    may_matter,
    one_result,
    skim_line,
    skim_span,
    skipped_reason,
    sort_line,
)
from loop_killer.engine.transcript import (
    ParseStats,
    ToolResults,
    TurnStart,
    UnreadResult,
    parse_line,
)
from transcripts import FIXTURES, Transcript, Use, scan_bytes


def fixture_lines() -> list[bytes]:
    return [line for path in sorted(FIXTURES.rglob("*.jsonl"))
            for line in path.read_bytes().splitlines()]


def test_every_fixture_line_it_skips_is_ignored_by_the_engine() -> None:
    lines = fixture_lines()
    skipped = [line for line in lines if not may_matter(line)]
    assert len(skipped) > 50  # it does skip: attachments, api records, progress...
    for line in skipped:
        assert parse_line(line) is None, line[:200]
        assert parse_line(line, subagent=True) is None, line[:200]


def test_the_same_lines_pretty_printed_are_still_kept() -> None:
    for line in fixture_lines():
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if parse_line(line) is not None:
            spaced = orjson.dumps(entry, option=orjson.OPT_INDENT_2).replace(b"\n", b" ")
            assert may_matter(spaced)


_TYPES = st.sampled_from(["user", "assistant", "system", "attachment", "progress",
                          "cost-state", "summary", "file-history-snapshot", "api-request"])
_SPACE = st.sampled_from(["", " ", "\t", "  "])


@settings(max_examples=300, deadline=None)
@given(kind=_TYPES, before=_SPACE, after=_SPACE, attachment=st.sampled_from(
    ["goal_status", "skill_listing", "hook_blocking_error"]), content=st.text(max_size=30),
    sidechain=st.booleans())
def test_hand_written_lines_never_lose_an_event(kind: str, before: str, after: str,
                                                attachment: str, content: str,
                                                sidechain: bool) -> None:
    fields = [f'"type"{before}:{after}"{kind}"', f'"isSidechain":{str(sidechain).lower()}',
              '"uuid":"u1"', '"timestamp":"2026-03-01T09:00:00.000Z"',
              f'"message":{{"role":"user","content":{orjson.dumps(content).decode()}}}',
              f'"attachment":{{"type":"{attachment}","met":false}}', '"subtype":"x"']
    line = ("{" + ",".join(fields) + "}").encode()
    if not may_matter(line):
        assert parse_line(line) is None
        assert parse_line(line, subagent=True) is None


@settings(max_examples=300, deadline=None)
@given(kinds=st.lists(_TYPES, min_size=0, max_size=3), space=_SPACE,
       goal=st.booleans())
def test_one_pass_sorts_a_line_as_the_separate_checks_would(kinds: list[str], space: str,
                                                             goal: bool) -> None:
    # A line with several "type" keys in any order (nested objects), cost-state among them.
    fields = [f'"k{n}":{{"type"{space}:{space}"{kind}"}}' for n, kind in enumerate(kinds)]
    if goal:
        fields.append('"attachment":{"type":"goal_status"}')
    line = ("{" + ",".join(fields) + "}").encode()
    kind = sort_line(line)
    conversation = any(k in ("user", "assistant", "system") for k in kinds)
    attachment = "attachment" in kinds
    assert (kind >= KEEP) == (conversation or (attachment and goal))
    if kind < KEEP:
        # a cost-state line is never lost: every one the old byte test found is read
        assert (kind == COST) >= (COST_STATE in line)
        assert kind in (SKIP, COST)
        assert parse_line(line) is None


def test_filtered_and_unfiltered_scans_agree_on_every_fixture() -> None:
    for path in sorted(FIXTURES.rglob("*.jsonl")):
        subagent = path.name.startswith("agent-")
        data = path.read_bytes()
        fast = scan_bytes(data, subagent=subagent, prefilter=True)
        slow = scan_bytes(data, subagent=subagent, prefilter=False)
        assert fast.loops == slow.loops, path
        assert fast.usage == slow.usage, path
        assert fast.cost_state == slow.cost_state, path
        assert fast.broken == slow.broken, path
        assert fast.parsed <= slow.parsed


def test_a_failed_first_edit_changes_no_file_for_the_filtered_scan_either() -> None:
    """Each failing test run is followed by an Edit that fails (its first result, left
    unread by the filter): an audit found the scan taking it for a file change, which
    starts every count afresh, and missing the tool-repeat loop the watcher finds."""
    session = Transcript()
    session.prompt("fix the auth test")
    for attempt in range(4):
        session.run("npm test", "FAIL test/auth.test.js: expected 200 got 500", is_error=True)
        session.reply(None, tools=[("Edit", {"file_path": "/p/auth.js",
                                             "old_string": f"status({500 + attempt})",
                                             "new_string": "status(200)"})])
        session.tool_result(session.last_tool_use_id, "<tool_use_error>String to replace "
                            "not found in file.</tool_use_error>", is_error=True)
    session.reply("Still failing.")
    fast = scan_bytes(session.data(), prefilter=True)
    slow = scan_bytes(session.data(), prefilter=False)
    assert [(loop.rule, loop.replies) for loop in fast.loops] == [("TOOL_REPEAT", 4)]
    assert fast.loops == slow.loops


def test_filtered_and_unfiltered_scans_agree_on_a_planted_history() -> None:
    session = Transcript()
    session.prompt("go")
    session.goal()
    for i in range(8):
        session.reprompt()
        session.noise()
        session.reply("Still working on it, nothing changed.", Use(i + 1, 2))
    session.prompt("tests")
    for _ in range(4):
        session.noise()
        session.run("npm test", "1 failing", Use(3, 3))
    data = session.data()
    fast = scan_bytes(data, prefilter=True)
    slow = scan_bytes(data, prefilter=False)
    assert fast.loops == slow.loops and len(fast.loops) == 2
    assert fast.usage == slow.usage
    assert fast.parsed < slow.parsed


def test_subagent_lines_are_read_as_their_own_conversation() -> None:
    line = b'{"parentUuid":null,"isSidechain":true,"type":"user","message":{"role":"user",' \
           b'"content":"say \\"isSidechain\\":true"},"uuid":"u","timestamp":"t"}'
    assert parse_line(line) is None
    event = parse_line(line, subagent=True)
    assert isinstance(event, TurnStart) and event.text == 'say "isSidechain":true'


_BLOCK = '{"tool_use_id":"toolu_01A","type":"tool_result","content":%s%s}'


@settings(max_examples=400, deadline=None)
@given(flag=st.sampled_from(["", '"isSidechain":false,', '"isSidechain":true,',
                             '"isSidechain" : true,', '"k":{"isSidechain":true},']),
       late_flag=st.sampled_from(["", ',"isSidechain":true', ',"isSidechain":false']),
       content=st.one_of(st.text(max_size=20), st.just('tool_use_id":"toolu_01B"')),
       error=st.sampled_from(["", ',"is_error":false', ',"is_error":true']),
       more=st.sampled_from(["", ',{"tool_use_id":"toolu_01B","type":"tool_result"}',
                             ',{"type":"tool_result","tool_use_id" : "toolu_01B"}',
                             ',{"type":"text","text":"x"}']),
       extra=st.sampled_from(["", ',"toolUseResult":{"tool_use_id":"toolu_01C"}',
                              ',"toolUseResult":"x"']))
def test_a_result_told_unparsed_is_the_one_the_parser_reads(
        flag: str, late_flag: str, content: str, error: str, more: str, extra: str) -> None:
    # (no key twice in one object: every JSON writer's rule, and the one assumption)
    assume(not (flag.startswith('"isSidechain"') and late_flag))
    block = _BLOCK % (orjson.dumps(content).decode(), error)
    line = ('{"parentUuid":null,' + flag + '"cwd":"/p","type":"user","message":{"role":"user",'
            '"content":[' + block + more + ']},"uuid":"u","timestamp":"t"' + extra
            + late_flag + "}").encode()
    told = one_result(line)
    if told is None:
        return
    tool_use_id, sidechain = told
    main, side = parse_line(line), parse_line(line, subagent=True)
    assert (main is None) == sidechain
    assert isinstance(side, ToolResults)
    assert [r.tool_use_id for r in side.results] == [tool_use_id]
    content_read, is_error = UnreadResult(line, tool_use_id).read()
    assert (content_read, is_error) == (side.results[0].content, side.results[0].is_error)


def test_most_fixture_results_are_told_unparsed() -> None:
    results = told = 0
    for line in fixture_lines():
        if isinstance(parse_line(line, subagent=True), ToolResults):
            results += 1
            told += one_result(line) is not None
    assert results > 100 and told > 0.8 * results


def test_skimming_gives_every_fixture_line_the_event_parsing_gives() -> None:
    lines = fixture_lines()
    stats = ParseStats()
    assert [skim_line(line, stats) for line in lines] == [parse_line(line) for line in lines]
    assert stats.skipped["other_type"] > 50  # most of these were never parsed
    assert skim_line(b"not json at all", stats) is None and stats.broken == 1


# Lines an adversarial review built against the byte tests: keys that end in an escaped
# quote and "type" (or "isSidechain"), a second result without an id, a nested flag.
_HOSTILE = [
    rb'{"a\"type":"progress","type":"user","message":{"role":"user","content":"hello"}}',
    rb'{"x\"type":"attachment","type":"assistant","message":{"content":"hi"}}',
    (rb'{"a\"type":"user","message":{"role":"user","content":[{"tool_use_id":"T1",'
    rb'"type":"tool_result","content":"x"}]}}'),
    (rb'{"a\"isSidechain":true,"type":"user","message":{"role":"user","content":['
    rb'{"tool_use_id":"T1","type":"tool_result","content":"x"}]}}'),
    (rb'{"a\"isSidechain":false,"isSidechain":true,"type":"user","message":{"role":"user",'
    rb'"content":[{"tool_use_id":"T1","type":"tool_result","content":"x"}]}}'),
    (rb'{"type":"user","message":{"role":"user","content":[{"tool_use_id":"T1",'
    rb'"type":"tool_result","content":"a"},{"type":"tool_result","content":"b"}]}}'),
    (rb'{"isSidechain":true,"type":"user","message":{"role":"user","content":['
    rb'{"tool_use_id":"T1","type":"tool_result","content":[{"isSidechain":true}]}]}}'),
    (rb'{"parentUuid":null,"isSidechain":true,"type":"user","message":{"role":"user",'
    rb'"content":[{"tool_use_id":"T1","type":"tool_result","content":[{"isSidechain":true}]}'
    rb']},"uuid":"u","timestamp":"t"}'),
]


def check_contracts(line: bytes) -> None:
    """What every byte test promises of one line."""
    main, side = parse_line(line), parse_line(line, subagent=True)
    if sort_line(line) < KEEP:
        assert main is None and side is None, line
    assert skim_line(line) == main, line
    # Read in place, between other lines, every test says the same.
    buffer = b'{"type":"user"}\n' + line + b'\n{"isSidechain":true,"tool_use_id":"x"'
    start, end = 16, 16 + len(line)
    assert sort_line(buffer, start, end) == sort_line(line), line
    assert one_result(buffer, start, end) == one_result(line), line
    assert skipped_reason(buffer, start, end) == skipped_reason(line), line
    assert skim_span(buffer, start, end) == main, line
    told = one_result(line)
    if told is not None:
        tool_use_id, sidechain = told
        assert (main is None) == sidechain, line
        assert isinstance(side, ToolResults), line
        # (a result block without an id answers no call: the API refuses one)
        assert [r.tool_use_id for r in side.results if r.tool_use_id] == [tool_use_id], line
        assert UnreadResult(line, tool_use_id).read() == (side.results[0].content,
                                                          side.results[0].is_error), line


def test_hostile_lines_keep_every_promise() -> None:
    for line in _HOSTILE:
        orjson.loads(line)  # (valid JSON, no key twice: within the assumptions)
        check_contracts(line)


def test_every_fixture_line_keeps_every_promise() -> None:
    for line in fixture_lines():
        check_contracts(line)
