"""The loop shapes other agents catch (issue 16): which loop-killer builds, and the tests
that decided it, on the transcript shapes Claude Code writes.

* cycles (A, B, A, B with the same results): no rule of their own; the per-call count
  already sees each call repeat, whatever runs in between;
* oscillating edits (edit, revert, edit): EDIT_OSCILLATION, a warning; the 4th return is
  refused, and refusals end the turn as a refused call's do;
* the same failure from varied calls (goose): not built, for the false alarm below;
* thinking that repeats while the visible text varies: not built; IDLE_TURNS ends it.
"""

from __future__ import annotations

import pytest
from loop_killer.engine.edits import EDIT_OSCILLATION_WARN, EditHistory
from loop_killer.engine.reader import detect_transcript
from loop_killer.engine.rules import RULE_EDIT_OSCILLATION, RULE_IDLE
from loop_killer.engine.tool_repeat import TOOL_REPEAT_BLOCK, TOOL_REPEAT_WARN, ToolRepeatCounter
from loop_killer.engine.transcript import parse_line
from transcripts import Transcript


def bash(command: str) -> dict[str, str]:
    return {"command": command}


# -- cycles ----------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [2, 3, 4, 5])
def test_a_cycle_of_calls_is_warned_at_its_third_round_and_refused_at_its_fifth(
        length: int) -> None:
    """Gemini CLI acts after 5 identical calls in a row, so it never sees A, B, A, B; the
    per-call count does, for a cycle of any length: warned in round 3, the 5th round's
    first call refused."""
    counter = ToolRepeatCounter()
    calls = [bash(f"step {n}") for n in range(length)]
    first_warning = first_refusal = None
    for round_ in range(1, 6):
        for index, call in enumerate(calls):
            if counter.refusal("Bash", call) is not None:
                first_refusal = first_refusal or (round_, index)
                continue
            repeat = counter.record("Bash", call, f"output of {index}", False)
            if repeat.count == TOOL_REPEAT_WARN and first_warning is None:
                first_warning = (round_, index)
    assert first_warning == (TOOL_REPEAT_WARN, 0)
    assert first_refusal == (TOOL_REPEAT_BLOCK + 1, 0)


def test_a_cycle_whose_results_change_is_never_a_loop() -> None:
    counter = ToolRepeatCounter()
    counts = [counter.record("Bash", bash(call), f"{call} at step {n}", False).count
              for n in range(6) for call in ("make", "make test")]
    assert set(counts) == {1}


# -- oscillating edits -----------------------------------------------------------------------


def edit(path: str, old: str, new: str) -> dict[str, str]:
    return {"file_path": path, "old_string": old, "new_string": new}


def test_edit_revert_edit_is_an_oscillation_told_once() -> None:
    counter = ToolRepeatCounter()
    moves = [("a", "b"), ("b", "a"), ("a", "b"), ("b", "a"), ("a", "b")]
    shapes = [counter.record("Edit", edit("src/x.py", old, new), "updated", False)
              for old, new in moves]
    assert [(r.shape, r.shape_count) for r in shapes] == [
        ("", 0), ("", 0), (RULE_EDIT_OSCILLATION, EDIT_OSCILLATION_WARN), ("", 0), ("", 0)]


def test_the_fourth_return_of_a_file_is_refused_until_the_person_speaks() -> None:
    """An edit, test, revert, test loop changes the files every round, so no call's count
    grows: warned at the 2nd return, one more let through, the 4th refused before it is
    made (with the launcher's marker up from the warning: a MultiEdit may go back twice)."""
    counter = ToolRepeatCounter()
    forth, back = edit("src/x.py", "a", "b"), edit("src/x.py", "b", "a")
    refusable = []
    for change in (forth, back, forth, back):
        assert counter.refusal("Edit", change) is None
        counter.record("Edit", change, "updated", False)
        counter.record("Bash", bash("pytest"), f"1 failed ({change['new_string']})", True)
        refusable.append(counter.refusable())
    assert refusable == [False, False, True, True]
    refused = counter.refusal("Edit", forth, "toolu_5")
    assert refused is not None
    assert (refused.shape, refused.shape_count, refused.tool_use_id) == (
        RULE_EDIT_OSCILLATION, 4, "toolu_5")
    # A change that goes somewhere new, or another file, is made.
    assert counter.refusal("Edit", edit("src/x.py", "a", "c")) is None
    assert counter.refusal("Edit", edit("src/y.py", "b", "a")) is None
    # Kept across the hooks' processes; the person's prompt lifts it; off with the rule.
    assert ToolRepeatCounter.from_state(counter.to_state()).refusal("Edit", forth) is not None
    assert ToolRepeatCounter.from_state(counter.to_state(), oscillation=0).refusal(
        "Edit", forth) is None
    counter.reset()
    assert counter.refusal("Edit", forth) is None and not counter.refusable()


def _returns(changes: list[tuple[str, dict[str, object]]]) -> tuple[list[int], bool]:
    """The warning each change gives, and whether the next return would be refused.
    (Each result differs, as Claude Code's do: it quotes the file around the change.)"""
    counter = ToolRepeatCounter()
    shapes = [counter.record(name, tool_input, f"updated ({n})", False).shape_count
              for n, (name, tool_input) in enumerate(changes)]
    return shapes, counter.refusable()


def test_ideas_tried_and_undone_one_after_another_are_no_oscillation() -> None:
    """Found by a review: a file's returns only grew, so a fourth idea undone was refused
    (and the second undo told the model it was going back and forth). A version the file
    never had starts its returns afresh."""
    ideas = [("Edit", edit("f.py", old, new)) for idea in "XYZW"
             for old, new in (("A", idea), (idea, "A"))]
    assert _returns(ideas) == ([0] * 8, False)


def test_going_back_and_forth_is_refused_whatever_is_new_elsewhere() -> None:
    """Found by a second review: any new change reset every file's returns, so a model
    that also wrote a new line to its notes each round went back and forth for ever."""
    counter = ToolRepeatCounter()
    moves = [edit("src/x.py", "a", "b"), edit("src/x.py", "b", "a")]
    made = 0
    while counter.refusal("Edit", moves[made % 2]) is None:
        counter.record("Edit", moves[made % 2], "updated", False)
        counter.record("Write", {"file_path": "notes.md", "content": f"round {made}"},
                       "written", False)
        made += 1
        assert made < 20, "never refused"
    assert made == 4  # the first edit, three returns: the 4th return is refused


@pytest.mark.parametrize("changes", [
    [edit("f.py", f"def {name}():", f"\ndef {name}():") for name in "abcdefgh"],
    [edit("f.py", "import os", "import os\nimport re"),
     *(edit("f.py", f"dead_{n} = None\n", "") for n in range(6))],
    [edit("f.py", "def a():\n    pass", "def a():\n    return 1"),
     *(edit("f.py", f"def {n}():\n    return {n}", f"def {n}():\n    pass") for n in "bcdef")],
    [edit("f.js", "  }\n}", "  });\n}"),
     *(edit("f.js", f"  call{n}();\n  }});", f"  call{n}();\n  }}") for n in range(4))],
], ids=["blank lines added", "dead lines deleted", "stubs", "closing braces"])
def test_edits_that_meet_only_in_blank_or_trivial_text_are_no_returns(
        changes: list[dict[str, str]]) -> None:
    """Found by a second review: read without their shared lines, an inserted line's old
    text and a deleted line's new text are both nothing, and ``pass`` or ``}`` come back
    to a file all the time: edits that met only there were warned, refused and ended a
    turn."""
    assert _returns([("Edit", change) for change in changes]) == ([0] * len(changes), False)


def _debug_prints(anchor: bool) -> list[dict[str, str]]:
    adds = [edit("a.py", f"def f{n}(x):\n", f"def f{n}(x):\n    print('f{n}', x)\n")
            for n in range(4)]
    removes = [edit("a.py", f"def f{n}(x):\n    print('f{n}', x)\n", f"def f{n}(x):\n")
               if anchor else edit("a.py", f"    print('f{n}', x)\n", "") for n in range(4)]
    return adds + removes


@pytest.mark.parametrize("changes", [
    _debug_prints(anchor=True),
    _debug_prints(anchor=False),
    [edit("api.py", f"{old}_data(", f"{new}_data(") for old, new in
     [("fetch", "load")] * 5 + [("load", "fetch")] * 5],
    [edit("flags.yaml", f"{name}:\n  enabled: {old}", f"{name}:\n  enabled: {new}")
     for name, (old, new) in zip("abcde", [("false", "true"), ("true", "false")] * 3,
                                 strict=False)],
    [edit("theme.css", f".{part} {{\n  color: {old};", f".{part} {{\n  color: {new};")
     for part, (old, new) in zip(["nav", "body", "card", "footer"],
                                 [("#ffffff", "#000000"), ("#000000", "#ffffff")] * 2,
                                 strict=True)],
    [edit("f.js", f"{'  ' * depth}call{depth}();\n{'  ' * depth}}}",
          f"{'  ' * depth}call{depth}();\n{'  ' * depth}}});") for depth in range(1, 4)]
    + [edit("f.js", f"{'  ' * depth}done{depth}();\n{'  ' * depth}}});",
            f"{'  ' * depth}done{depth}();\n{'  ' * depth}}}") for depth in range(1, 4)],
], ids=["debug prints removed", "debug prints removed by their line", "rename and back",
        "flags set in turn", "colours swapped", "closing braces at other depths"])
def test_a_change_undone_in_many_places_or_made_the_other_way_elsewhere_is_no_loop(
        changes: list[dict[str, str]]) -> None:
    """Found by a third review: a file's returns were counted per edit, so undoing one
    change made in four places was a loop (refused at the fourth, which could end the
    turn), as were opposite edits in different places (flags, colours). A return's depth
    is 1 + that of the change it undoes, and an edit is placed by its nearest lines."""
    assert _returns([("Edit", change) for change in changes]) == ([0] * len(changes), False)


_BLOCK = 'def parse(text):\n    """Seconds in "1h30m"."""\n    return sum(parts(text))\n'
_PRINT = '    print("DEBUG total:", total)'
_LOG = "  console.log('result', JSON.stringify(result));"


@pytest.mark.parametrize("changes", [
    [change for anchor in ("    total = sum(items)", "    total -= discount(total)",
                           "    total = round(total, 2)")
     for change in (edit("p.py", anchor, f"{anchor}\n{_PRINT}"), edit("p.py", f"{_PRINT}\n", ""))],
    [change for anchor in ("def load(path):", "class Settings:", "def main():")
     for change in (edit("u.py", "\n\n" + _BLOCK, ""),
                    edit("u.py", anchor, f"{_BLOCK}\n\n{anchor}"))],
    [edit("store.go", f"\tif err != nil {{\n\t\t{old}\n\t}}\n\treturn s.{name}()",
          f"\tif err != nil {{\n\t\t{new}\n\t}}\n\treturn s.{name}()")
     for name, (old, new) in zip(["get", "put", "delete", "list", "close"],
                                 [("return nil", "return err"), ("return err", "return nil")] * 2
                                 + [("return nil", "return err")], strict=True)],
    [change for handler in ("users", "orders", "invoices", "items", "carts")
     for change in (
         edit("h.js", f"  const result = await db.{handler}.find(query);\n  return result;",
              f"  const result = await db.{handler}.find(query);\n{_LOG}\n  return result;"),
         edit("h.js", f"{_LOG}\n  return result;", "  return result;"))],
], ids=["a debug print moved along", "a function moved three times",
        "opposite fixes beside the same boilerplate",
        "a log line tried in five handlers, removed quoting the line below"])
def test_a_line_tried_in_one_place_after_another_is_no_loop(
        changes: list[dict[str, str]]) -> None:
    """Found by a fourth review: a line removed by quoting only itself has no place, so it
    matched every place: a debug print walked down a function, or a function moved twice,
    was warned and refused. A removal takes the place of what it undoes, and a text removed
    from no known place is not put back by adding it elsewhere. Places are told by up to
    three shared lines a side, so ``if err != nil {`` beside both is not one place."""
    assert _returns([("Edit", change) for change in changes]) == ([0] * len(changes), False)


@pytest.mark.parametrize("case", ["put back in its place", "after a first try elsewhere",
                                  "a statement wrapped in an if and unwrapped"])
def test_a_line_put_back_in_its_place_again_and_again_is_going_back(case: str) -> None:
    """The fifth review: a removal that quotes no line took the oldest place it matched,
    so after one try elsewhere a real loop was never seen; and a line the edit re-indents
    is placed by its text, so wrapping in an ``if`` and unwrapping meet."""
    anchor = "    total = sum(items)"
    counter = ToolRepeatCounter()
    moves = [edit("p.py", anchor, f"{anchor}\n{_PRINT}"), edit("p.py", f"{_PRINT}\n", "")]
    if case == "after a first try elsewhere":
        first = "    items = load()"
        counter.record("Edit", edit("p.py", first, f"{first}\n{_PRINT}"), "updated (a)", False)
        counter.record("Edit", edit("p.py", f"{first}\n{_PRINT}", first), "updated (b)", False)
    elif case == "a statement wrapped in an if and unwrapped":
        plain = "    cache.clear()\n    rebuild(index)\n    log.info('done')"
        wrapped = ("    cache.clear()\n    if not dry_run:\n        rebuild(index)\n"
                   "    log.info('done')")
        moves = [edit("p.py", plain, wrapped), edit("p.py", wrapped, plain)]
    made = 0
    while counter.refusal("Edit", moves[made % 2]) is None:
        counter.record("Edit", moves[made % 2], f"updated ({made})", False)
        made += 1
        assert made < 20, "never refused"
    assert made == 4


def test_a_multi_edit_is_judged_alike_before_and_after_it_runs() -> None:
    """Found by the fourth review: the refusal judged a MultiEdit's edits each against the
    file before it, the record one after another, so one let through was recorded deeper
    than judged."""
    counter = ToolRepeatCounter()
    counter.record("Edit", edit("m.py", "alpha = 1", "alpha = 2"), "updated (0)", False)
    both = {"file_path": "m.py", "edits": [edit("", "alpha = 2", "alpha = 1"),
                                           edit("", "alpha = 1", "alpha = 2")]}
    history = EditHistory.from_state(counter.to_state()["edits"])
    judged = history.would_return("MultiEdit", both)
    history.note("MultiEdit", both)
    assert judged == history.deepest() == 2


@pytest.mark.parametrize("case", ["one more line quoted back", "edits forth, multi-edit back"])
def test_a_revert_written_otherwise_is_still_going_back(case: str) -> None:
    if case == "one more line quoted back":
        forth = [("Edit", edit("f.py", "def f(n):\n    x = 1", "def f(n):\n    x = 2"))]
        back = [("Edit", edit("f.py", "def f(n):\n    x = 2\n    return x * n",
                              "def f(n):\n    x = 1\n    return x * n"))]
    else:
        forth = [("Edit", edit("f.py", "alpha = 1", "alpha = 2")),
                 ("Edit", edit("f.py", "omega = 1", "omega = 2"))]
        back = [("MultiEdit", {"file_path": "f.py", "edits": [
            edit("", "alpha = 2", "alpha = 1"), edit("", "omega = 2", "omega = 1")]})]
    counter = ToolRepeatCounter()
    for name, change in forth + back + forth + back:
        assert counter.refusal(name, change) is None
        counter.record(name, change, "updated", False)
    assert counter.refusal(*forth[0]) is not None


def test_the_model_is_warned_once_a_file_and_its_refusals_are_one_call() -> None:
    """Found by a second review: a file whose returns started afresh warned again every
    time they reached the warning (66 warnings in one loop); and a refused edit retried
    from another folder, or as the other move, counted as another call towards the stop."""
    counter = ToolRepeatCounter()
    moves = [("a", "b"), ("b", "a"), ("a", "b"), ("b", "c"), ("c", "b"), ("b", "c"), ("c", "b")]
    warned = [counter.record("Edit", edit("/r/f.py", old, new), "updated", False).shape_count
              for old, new in moves]
    assert warned == [0, 0, EDIT_OSCILLATION_WARN, 0, 0, 0, 0]  # (b, c is a new version)
    first = counter.refusal("Edit", edit("/r/f.py", "b", "c"), cwd="/r")
    second = counter.refusal("Write", {"file_path": "/r/f.py", "content": "c"}, cwd="/r/sub")
    assert second is None  # (no content was written: nothing to go back to)
    second = counter.refusal("Edit", edit("/r/f.py", "b", "c"), cwd="/r/sub")
    assert first is not None and second is not None and first.call == second.call
    assert [counter.note_refusal(first), counter.note_refusal(second)] == [1, 2]


def test_a_file_written_with_the_same_content_again_did_not_change() -> None:
    same = {"file_path": "gen.py", "content": "GENERATED"}
    changes = []
    for n in range(5):
        changes += [("Write", same), ("Edit", edit("src.py", f"v{n}", f"v{n + 1}"))]
    assert _returns(changes) == ([0] * 10, False)


@pytest.mark.parametrize("case", ["three versions", "revert with context",
                                  "small revert with context", "other spacing",
                                  "multi-edit undone in the same order"])
def test_the_shapes_of_going_back_a_review_found_are_refused_too(case: str) -> None:
    """Found by a review: these went back and forth for ever, no warning, no refusal."""
    if case == "three versions":
        cycle = [edit("f.py", "timeout = 30", "timeout = 60"),
                 edit("f.py", "timeout = 60", "timeout = 90"),
                 edit("f.py", "timeout = 90", "timeout = 30")]
    elif case == "revert with context":
        cycle = [edit("f.py", "timeout = 30", "timeout = 60"),
                 edit("f.py", "def f():\n    timeout = 60\n", "def f():\n    timeout = 30\n")]
    elif case == "small revert with context":
        cycle = [edit("f.py", "x = 1", "x = 2"),
                 edit("f.py", "def f():\n    x = 2\n", "def f():\n    x = 1\n")]
    elif case == "other spacing":
        cycle = [edit("f.py", "x = 1", "x = 2"), edit("f.py", "x = 2  ", "  x = 1")]
    else:
        pairs = [edit("", "a", "b"), edit("", "c", "d")]
        cycle = [{"file_path": "m.py", "edits": pairs},
                 {"file_path": "m.py", "edits": [edit("", "b", "a"), edit("", "d", "c")]}]
    name = "MultiEdit" if "multi" in case else "Edit"
    counter = ToolRepeatCounter()
    made = 0
    while counter.refusal(name, cycle[made % len(cycle)]) is None:
        counter.record(name, cycle[made % len(cycle)], "updated", False)
        made += 1
        assert made < 20, "never refused"
    # The changes that lead away from the first version, then three returns (warned at
    # the 2nd): the 4th is refused. Each step of a cycle of three undoes the one made
    # two steps before it, so its depth grows every other step.
    assert made == (8 if case == "three versions" else len(cycle) + EDIT_OSCILLATION_WARN)


def test_rewriting_a_file_back_and_forth_is_an_oscillation() -> None:
    counter = ToolRepeatCounter()
    contents = ["v1", "v2", "v1", "v2"]
    shapes = [counter.record("Write", {"file_path": "a.txt", "content": c}, "written", False).shape
              for c in contents]
    assert shapes == ["", "", "", RULE_EDIT_OSCILLATION]


def test_a_multi_edit_undone_and_redone_is_an_oscillation() -> None:
    history = EditHistory()
    forth = {"file_path": "m.py", "edits": [edit("", "a", "b"), edit("", "c", "d")]}
    back = {"file_path": "m.py", "edits": [edit("", "d", "c"), edit("", "b", "a")]}
    assert [history.note("MultiEdit", e, warn_at=2) for e in (forth, back, forth)] == [0, 0, 2]
    assert history.deepest() == 2


def test_edits_that_move_on_are_never_an_oscillation() -> None:
    counter = ToolRepeatCounter()
    steps = [("v1", "v2"), ("v2", "v3"), ("v3", "v4"), ("v4", "v5"), ("v5", "v6")]
    assert {counter.record("Edit", edit("f.py", o, n), "updated", False).shape
            for o, n in steps} == {""}
    # the same change in two files, back and forth in neither, is not one either
    for path in ("one.py", "two.py"):
        counter.record("Edit", edit(path, "x", "y"), "updated", False)
    assert counter.record("Edit", edit("one.py", "y", "x"), "updated", False).shape == ""


def test_failed_edits_and_a_person_s_prompt_count_nothing() -> None:
    counter = ToolRepeatCounter()
    counter.record("Edit", edit("f.py", "a", "b"), "updated", False)
    counter.record("Edit", edit("f.py", "b", "a"), "String not found", True)  # failed
    assert counter.record("Edit", edit("f.py", "a", "b"), "updated", False).shape == ""
    counter.reset()
    counter.record("Edit", edit("f.py", "b", "a"), "updated", False)
    assert counter.record("Edit", edit("f.py", "a", "b"), "updated", False).shape == ""


def test_the_oscillation_is_kept_across_hook_processes_and_can_be_off() -> None:
    counter = ToolRepeatCounter()
    counter.record("Edit", edit("f.py", "a", "b"), "updated", False)
    counter.record("Edit", edit("f.py", "b", "a"), "updated", False)
    again = ToolRepeatCounter.from_state(counter.to_state())
    assert again.record("Edit", edit("f.py", "a", "b"), "updated", False).shape
    off = ToolRepeatCounter.from_state(counter.to_state(), oscillation=0)
    assert off.record("Edit", edit("f.py", "a", "b"), "updated", False).shape == ""


def test_the_oscillation_is_seen_in_a_transcript_as_the_hooks_see_it() -> None:
    t = Transcript()
    t.prompt("Fix the flaky import.")
    for old, new in (("import a", "import b"), ("import b", "import a"),
                     ("import a", "import b")):
        t.reply("Editing.", tools=[("Edit", {"file_path": "m.py", "old_string": old,
                                             "new_string": new})])
        call_id = parse_line(t.lines[-1]).tool_calls[0].tool_use_id
        t.tool_result(call_id, "The file m.py has been updated successfully.")
    counter = ToolRepeatCounter()
    shapes = [r.shape for raw in t.lines if (event := parse_line(raw)) is not None
              for r in counter.feed(event)]
    assert shapes == ["", "", RULE_EDIT_OSCILLATION]


# -- the same failure from varied calls (goose): not built ------------------------------------


def _same_failure_would_warn(results: list[tuple[str, str, bool]], threshold: int = 3) -> bool:
    """goose's rule: the same tool fails with the same error text ``threshold`` times in a
    row, whatever the arguments."""
    streak, last = 0, None
    for tool, output, failed in results:
        key = (tool, output) if failed else None
        streak = streak + 1 if key is not None and key == last else (1 if key else 0)
        last = key
        if streak >= threshold:
            return True
    return False


def test_the_same_failure_from_varied_calls_would_warn_on_an_ordinary_search() -> None:
    """Why SAME_FAILURE is not built: a search across places that each find nothing is
    the commonest sequence of identical failures in real sessions (grep and test exit 1
    with nothing printed; Claude Code writes "Exit code 1" alone), and it is no loop.
    The loop the rule aims at (pip install foo==1.0, ==1.1, foo) prints the version it
    tried, so its errors differ; a run of answers to re-prompts that only repeat results
    is ended by the re-prompt rules (engine.run), and a repeated call by TOOL_REPEAT."""
    search = [("Bash", "Exit code 1", True)] * 3  # grep -rn TODO src/a, src/b, src/c
    assert _same_failure_would_warn(search)
    pip = [("Bash", f"ERROR: No matching distribution found for foo=={v}", True)
           for v in ("1.0", "1.1", "1.2")]
    assert not _same_failure_would_warn(pip)


# -- thinking that repeats: not built -------------------------------------------------------


def test_a_run_whose_thinking_repeats_while_the_text_varies_ends_by_idle_turns() -> None:
    """Why a thinking rule is not built: such a run does no work, so IDLE_TURNS ends it at
    its 6th answer; and Claude Code writes thinking for few models (an empty block with
    a signature otherwise: tests/fixtures/claude-code-2.1.328/thinking-omitted)."""
    t = Transcript()
    t.goal()
    t.reply("Acknowledged.")
    texts = ["Reading the tests.", "Checking the fixtures.", "Looking at the mocks.",
             "Inspecting the config.", "Reviewing the imports.", "Tracing the session."]
    for text in texts:
        t.reprompt()
        t.reply(text, thinking="I should run the auth tests again and see if they pass.")
    (detection,) = detect_transcript(t.data(), t.session_id)
    assert detection.rule == RULE_IDLE and detection.count == 6
