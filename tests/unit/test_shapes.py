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
from loop_killer.engine.edits import (
    EDIT_OSCILLATION_WARN,
    EditHistory,
    after_edit,
    content_digest,
    states_of_result,
)
from loop_killer.engine.reader import detect_transcript
from loop_killer.engine.rules import RULE_EDIT_OSCILLATION, RULE_IDLE
from loop_killer.engine.tool_repeat import (
    TOOL_REPEAT_BLOCK,
    TOOL_REPEAT_WARN,
    ToolRepeat,
    ToolRepeatCounter,
)
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


# -- oscillating edits: whole-file states (issue 30) -------------------------------------------


def edit(path: str, old: str, new: str) -> dict[str, str]:
    return {"file_path": path, "old_string": old, "new_string": new}


class Files:
    """Files as the tool-call hooks see them: each edit's states before and after (from
    the whole file), its refusal judged from the file on disk."""

    def __init__(self, counter: ToolRepeatCounter | None = None, **contents: str) -> None:
        self.counter = counter or ToolRepeatCounter()
        self.contents: dict[str, str] = {f"{name}.py" if "." not in name else name: text
                                         for name, text in contents.items()}

    def call(self, name: str, tool_input: dict[str, object]) -> ToolRepeat | None:
        """The edit made (its count and shape), or None when it was refused."""
        path = str(tool_input["file_path"])
        before = self.contents.get(path)
        if self.counter.refusal(name, tool_input, file_state=content_digest(before)):
            return None
        after = after_edit(name, tool_input, before)
        assert after is not None, (name, tool_input, before)
        self.contents[path] = after
        return self.counter.record(name, tool_input, "updated", False,
                                   move=(content_digest(before), content_digest(after)))

    def run(self, calls: list[tuple[str, dict[str, object]]]) -> tuple[list[int], bool]:
        """The shape counts of each call (warnings), and whether any was refused."""
        counts = []
        for name, tool_input in calls:
            made = self.call(name, tool_input)
            if made is None:
                return counts, True
            counts.append(made.shape_count)
        return counts, False


def test_edit_revert_edit_is_an_oscillation_told_once() -> None:
    files = Files(x="a = 1\n")
    counts, refused = files.run([("Edit", edit("x.py", "a = 1", "a = 2")),
                                 ("Edit", edit("x.py", "a = 2", "a = 1")),
                                 ("Edit", edit("x.py", "a = 1", "a = 2")),
                                 ("Edit", edit("x.py", "a = 2", "a = 1"))])
    assert counts == [0, 0, EDIT_OSCILLATION_WARN, 0] and not refused


def test_the_fifth_edit_of_a_back_and_forth_is_refused_until_the_person_speaks() -> None:
    """Edit, test, revert, test changes the files every round, so no call's count grows:
    warned at edit 3, edit 4 let through, edit 5 refused before it is made (the exact
    change already made, from exactly that state); the launcher's marker is up from the
    warning."""
    files = Files(x="a = 1\n")
    forth, back = edit("x.py", "a = 1", "a = 2"), edit("x.py", "a = 2", "a = 1")
    made = [files.call("Edit", forth if n % 2 == 0 else back) for n in range(5)]
    assert [m is not None for m in made] == [True, True, True, True, False]
    assert files.counter.refusable()
    refusal = files.counter.refusal("Edit", forth,
                                    file_state=content_digest(files.contents["x.py"]))
    assert refusal is not None and refusal.shape == RULE_EDIT_OSCILLATION
    assert refusal.shape_count == 4 and refusal.call == f"{RULE_EDIT_OSCILLATION} x.py"
    files.counter.reset()  # the person spoke
    assert files.call("Edit", forth) is not None


def test_edit_forth_and_write_back_is_going_back_and_forth() -> None:
    """Found by issue 30: an Edit undone by a Write of the original content, then the same
    failing test, never ended (16 test runs on 2.1.332). States do not care which tool."""
    original = "import os\n"
    files = Files(m=original)
    calls: list[tuple[str, dict[str, object]]] = [
        ("Edit", edit("m.py", "import os", "import sys")),
        ("Write", {"file_path": "m.py", "content": original})] * 3
    counts, refused = files.run(calls)
    assert counts[:3] == [0, 0, EDIT_OSCILLATION_WARN] and refused


def test_a_cycle_of_versions_and_a_multi_edit_undone_and_redone_go_back_and_forth() -> None:
    cycle = Files(c="v = 'a'\n")
    steps = [("Edit", edit("c.py", f"v = '{old}'", f"v = '{new}'"))
             for old, new in [("a", "b"), ("b", "c"), ("c", "a")] * 3]
    # Each move made again is told once for its two versions; the first made a third
    # time is refused.
    assert cycle.run(steps) == ([0, 0, 0] + [EDIT_OSCILLATION_WARN] * 3, True)
    multi = Files(m="x = 1\ny = 1\n")
    both = {"file_path": "m.py", "edits": [edit("", "x = 1", "x = 2"), edit("", "y = 1", "y = 2")]}
    undo = {"file_path": "m.py", "edits": [edit("", "x = 2", "x = 1"), edit("", "y = 2", "y = 1")]}
    counts, refused = multi.run([("MultiEdit", both), ("MultiEdit", undo)] * 3)
    assert counts[2] == EDIT_OSCILLATION_WARN and refused


def test_a_back_and_forth_settled_earlier_does_not_count_towards_another() -> None:
    """Found by a review: depth counted per file, so after line A went back and forth
    (warned, settled), line B's first edit, revert, edit was refused at once."""
    files = Files(f="a = 1\nb = 1\n")
    settle = _each("f.py", [("a = 1", "a = 2"), ("a = 2", "a = 1"), ("a = 1", "a = 2")])
    counts, refused = files.run(settle)
    assert counts == [0, 0, EDIT_OSCILLATION_WARN] and not refused
    counts, refused = files.run(_each("f.py", [("b = 1", "b = 2"), ("b = 2", "b = 1"),
                                               ("b = 1", "b = 2"), ("b = 2", "b = 1")]))
    assert counts == [0, 0, EDIT_OSCILLATION_WARN, 0] and not refused  # warned, not refused


def test_a_notebook_cell_flipped_between_two_sources_goes_back_and_forth() -> None:
    """A NotebookEdit hands no whole file: its states come from the file on disk after
    it (the move from the state the file's last move left it in)."""
    counter = ToolRepeatCounter()
    flip = [{"notebook_path": "n.ipynb", "cell_id": "c1", "new_source": source}
            for source in ("x = 1", "x = 2")]
    shapes = [counter.record("NotebookEdit", flip[n % 2], "updated", False,
                             move=("", f"state-{n % 2}")).shape_count for n in range(5)]
    assert shapes == [0, 0, 0, EDIT_OSCILLATION_WARN, 0]  # (the first has nothing before)
    refusal = counter.refusal("NotebookEdit", flip[1], file_state="state-0")
    assert refusal is not None and refusal.shape == RULE_EDIT_OSCILLATION


def test_going_back_and_forth_is_refused_whatever_is_new_elsewhere() -> None:
    """A loop that also writes a new line to its notes each round still ends."""
    files = Files(x="a = 1\n", **{"notes.md": ""})
    refused_at = None
    for n in range(8):
        files.call("Write", {"file_path": "notes.md",
                             "content": f"{files.contents['notes.md']}round {n}\n"})
        change = edit("x.py", "a = 1", "a = 2") if n % 2 == 0 else edit("x.py", "a = 2", "a = 1")
        if files.call("Edit", change) is None:
            refused_at = n
            break
    assert refused_at == 4


def _functions(count: int) -> str:
    return "".join(f"def f{n}(x):\n    return x\n\n" for n in range(count))


def _each(path: str, pairs: list[tuple[str, str]]) -> list[tuple[str, dict[str, object]]]:
    return [("Edit", edit(path, old, new)) for old, new in pairs]


@pytest.mark.parametrize(("start", "calls"), [
    ({"a.py": _functions(4)},
     _each("a.py", [(f"def f{n}(x):\n", f"def f{n}(x):\n    print('f{n}', x)\n") for n in range(4)]
           + [(f"    print('f{n}', x)\n", "") for n in range(4)])),
    ({"api.py": "fetch_data(1)\nfetch_data(2)\nfetch_data(3)\n"},
     _each("api.py", [("fetch_data(1)", "load_data(1)"), ("fetch_data(2)", "load_data(2)"),
                      ("fetch_data(3)", "load_data(3)"), ("load_data(1)", "fetch_data(1)"),
                      ("load_data(2)", "fetch_data(2)"), ("load_data(3)", "fetch_data(3)")])),
    ({"flags.yaml": "a:\n  enabled: false\nb:\n  enabled: true\nc:\n  enabled: false\n"},
     _each("flags.yaml", [("a:\n  enabled: false", "a:\n  enabled: true"),
                          ("b:\n  enabled: true", "b:\n  enabled: false"),
                          ("c:\n  enabled: false", "c:\n  enabled: true")])),
    ({"h.js": "".join(f"function {h}() {{\n  return db.{h}();\n}}\n" for h in "abcde")},
     [call for h in "abcde" for call in _each("h.js", [
         (f"  return db.{h}();", f"  log('{h}');\n  return db.{h}();"),
         (f"  log('{h}');\n", "")])]),
    ({"p.py": "x = 1\n\n\ny = 2\n"},
     _each("p.py", [("x = 1\n", "x = 1\n\n"), ("y = 2\n", "\ny = 2\n"),
                    ("x = 1\n\n", "x = 1\n")])),
    ({"m.py": "def a():\n    pass\n\ndef b():\n    pass\n\ndef c():\n    pass\n"},
     _each("m.py", [("def a():\n    pass\n\n", ""),
                    ("def c():\n    pass\n", "def c():\n    pass\n\ndef a():\n    pass\n"),
                    ("def b():\n    pass\n\n", ""),
                    ("def a():\n    pass\n", "def a():\n    pass\n\ndef b():\n    pass\n")])),
], ids=["debug prints added then removed", "renamed and back in many places",
        "flags set in turn", "a log line tried in five handlers", "blank lines",
        "functions moved around"])
def test_changes_that_never_repeat_a_move_are_no_oscillation(
        start: dict[str, str], calls: list[tuple[str, dict[str, object]]]) -> None:
    """The false alarms five reviews of the fragment rule found: every state of the file
    is new, so no move repeats, by construction."""
    files = Files()
    files.contents.update(start)
    assert files.run(calls) == ([0] * len(calls), False)


def test_ideas_tried_and_undone_one_after_another_are_no_oscillation() -> None:
    files = Files(x="retries = 1\n")
    calls = [change for n in range(2, 8) for change in
             _each("x.py", [("retries = 1", f"retries = {n}"), (f"retries = {n}", "retries = 1")])]
    assert files.run(calls) == ([0] * len(calls), False)


def test_the_model_is_warned_once_a_file_and_its_refusals_are_one_call() -> None:
    files = Files(f="v = 'a'\n")
    steps = _each("f.py", [("'a'", "'b'"), ("'b'", "'a'")]) * 3
    counts = [r.shape_count if (r := files.call(name, ti)) else -1 for name, ti in steps[:4]]
    assert counts == [0, 0, EDIT_OSCILLATION_WARN, 0]
    state = content_digest(files.contents["f.py"])
    first = files.counter.refusal("Edit", edit("f.py", "'a'", "'b'"), cwd="/r",
                                  file_state=state)
    second = files.counter.refusal("Edit", edit("f.py", "'a'", "'b'"), cwd="/r/sub",
                                   file_state=state)
    assert first is not None and second is not None and first.call == second.call
    assert [files.counter.note_refusal(first), files.counter.note_refusal(second)] == [1, 2]
    another = files.counter.refusal("Edit", edit("f.py", "'a'", "'c'"), file_state=state)
    assert another is None  # not a change made before: never refused


def test_failed_edits_and_a_persons_prompt_count_nothing() -> None:
    counter = ToolRepeatCounter()
    for n in range(6):
        repeat = counter.record("Edit", edit("f.py", "a", "b"), "String not found", True,
                                move=(f"s{n % 2}", f"s{(n + 1) % 2}"))
        assert repeat.shape == ""


def test_the_oscillation_is_kept_across_hook_processes_and_can_be_off() -> None:
    files = Files(f="a\n")
    files.run(_each("f.py", [("a", "b"), ("b", "a")]))
    again = Files(ToolRepeatCounter.from_state(files.counter.to_state()), f="a\n")
    assert again.call("Edit", edit("f.py", "a", "b")).shape  # type: ignore[union-attr]
    off = Files(ToolRepeatCounter.from_state(files.counter.to_state(), oscillation=0), f="a\n")
    assert off.call("Edit", edit("f.py", "a", "b")).shape == ""  # type: ignore[union-attr]
    assert EditHistory.from_state({"v": 1, "files": [["f.py", [["x"]]]]}).deepest() == 0


def test_the_oscillation_is_seen_in_a_transcript_as_the_hooks_see_it() -> None:
    """The transcript's ``toolUseResult`` carries the whole file before the edit."""
    t = Transcript()
    t.prompt("Fix the flaky import.")
    content = "import a\n"
    for old, new in (("import a", "import b"), ("import b", "import a"),
                     ("import a", "import b")):
        t.reply("Editing.", tools=[("Edit", {"file_path": "m.py", "old_string": old,
                                             "new_string": new})])
        call_id = parse_line(t.lines[-1]).tool_calls[0].tool_use_id  # type: ignore[union-attr]
        t.user([{"tool_use_id": call_id, "type": "tool_result",
                 "content": "The file m.py has been updated successfully."}],
               toolUseResult={"filePath": "m.py", "oldString": old, "newString": new,
                              "originalFile": content, "replaceAll": False})
        content = content.replace(old, new)
    counter = ToolRepeatCounter()
    shapes = [r.shape for raw in t.lines if (event := parse_line(raw)) is not None
              for r in counter.feed(event)]
    assert shapes == ["", "", RULE_EDIT_OSCILLATION]
    assert states_of_result({"originalFile": None, "content": "x", "type": "create"}) == (
        "absent", content_digest("x"))


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
