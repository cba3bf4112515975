"""Waiting is not looping: calls that wait are timed, not counted; refused is not stuck
while the turn advances; a question nobody answered is an ordinary call (issue 29)."""

from __future__ import annotations

import pytest
from loop_killer.engine.calls import person_answered
from loop_killer.engine.run import RunDetector, TurnWork
from loop_killer.engine.tool_repeat import TOOL_REPEAT_BLOCK, ToolRepeatCounter
from loop_killer.engine.transcript import AssistantPart, ToolCall, ToolResult, ToolResults
from loop_killer.engine.transcript import parse_timestamp as iso_seconds
from loop_killer.engine.waiting import WAIT_MINUTES, waited_words, waits
from loop_killer.state.config import parse_settings


def bash(command: str) -> dict[str, object]:
    return {"command": command}


@pytest.mark.parametrize("command", [
    "sleep 60 && echo 'Poll time'",
    "sleep 1 && ./ci-status.sh",
    "sleep 20; cat build.log",
    "gh run watch 1234 --exit-status",
    "gh pr checks 42 --watch",
    "kubectl rollout status deploy/web --timeout=60s",
    "kubectl -n prod wait --for=condition=ready pod -l app=web",
    "until curl -sf localhost:8080/health; do sleep 2; done",
    "FOO=1 timeout 300 sleep 30",
    "aws cloudformation wait stack-create-complete --stack-name web",
    "tail -f server.log",
    "tail -5 /tmp/claude-1000/-home-marco-projects-spotter/tasks/bae407b.output",
    "npx wait-on http://localhost:3000",
    "timeout 60 bash -c 'until curl -sf localhost; do sleep 1; done'",
    "helm upgrade web ./chart --wait",
    "./wait-for-it.sh db:5432",
])
def test_commands_that_wait_for_the_world(command: str) -> None:
    assert waits("Bash", bash(command))


@pytest.mark.parametrize("command", [
    "npm test", "pytest -k sleep", "grep -rn wait src/", "echo sleep", "git log --oneline",
    "kubectl get pods", "gh pr view 42", "tail -3 build.log", "cat watch.py",
    "python manage.py runserver", "", "npm run build & npm run lint & wait",
])
def test_commands_that_do_not_wait(command: str) -> None:
    assert not waits("Bash", bash(command))


def test_claude_codes_own_task_tools_and_background_output_wait() -> None:
    for name in ("TaskOutput", "BashOutput", "TaskList", "TaskGet", "Monitor",
                 "ScheduleWakeup"):
        assert waits(name, {})
    assert waits("Read", {"file_path": "/tmp/claude-0/-proj/s1/tasks/b7c2.output"})
    assert not waits("Read", {"file_path": "/home/dev/proj/PLAN.md"})
    assert not waits("Grep", {"pattern": "sleep"})


def test_iso_seconds_reads_transcript_timestamps() -> None:
    assert iso_seconds("2026-12-02T07:08:00.000Z") == 1796195280.0
    assert iso_seconds("2026-12-02T07:08:30Z") == 1796195310.0
    assert iso_seconds("") is None and iso_seconds("yesterday") is None
    assert iso_seconds("2026-12-02T07:08:00") == 1796195280.0  # no zone: UTC


def test_waited_words() -> None:
    assert [waited_words(s) for s in (0.4, 25, 119, 1860, 7500, 7200)] == [
        "0 s", "25 s", "119 s", "31 min", "2 h 5 min", "2 h"]


POLL = bash("sleep 60 && gh pr checks 42")
PENDING = "build  pending  0  https://github.com/o/r/actions/runs/1"


def poll(counter: ToolRepeatCounter, at: float, result: str = PENDING) -> int:
    return counter.record("Bash", POLL, result, False, now=at).count


def test_a_waiting_call_is_not_counted_until_its_bound_then_refused() -> None:
    counter = ToolRepeatCounter(wait=30 * 60)
    counts = [poll(counter, 1000.0 + 60 * minute) for minute in range(30)]
    assert counts == [1] * 30  # 29 minutes of the same result: still waiting
    assert counter.refusal("Bash", POLL, now=1000.0 + 29.5 * 60) is None
    crossed = counter.record("Bash", POLL, PENDING, False, now=1000.0 + 30 * 60)
    assert crossed.count == TOOL_REPEAT_BLOCK and crossed.waited == 30 * 60
    refusal = counter.refusal("Bash", POLL, now=1000.0 + 31 * 60)
    assert refusal is not None and refusal.waited == 31 * 60


def test_a_changed_result_starts_the_wait_afresh() -> None:
    counter = ToolRepeatCounter(wait=600)
    assert [poll(counter, t) for t in (0.0, 300.0, 590.0)] == [1, 1, 1]
    assert poll(counter, 599.0, "build  queued") == 1  # news: the clock starts again
    assert [poll(counter, t, "build  queued") for t in (900.0, 1198.0)] == [1, 1]
    assert poll(counter, 1199.0, "build  queued") == TOOL_REPEAT_BLOCK


def test_a_waiting_call_without_a_clock_is_never_counted() -> None:
    counter = ToolRepeatCounter(wait=1)
    assert [counter.record("Bash", POLL, PENDING, False).count for _ in range(20)] == [1] * 20


def test_a_gap_between_calls_is_not_waiting() -> None:
    """Two identical searches alternating every 15-20 s (a real report: 141 repeats in
    50 minutes) are a loop: warned at the 3rd, refused from the 5th."""
    counter = ToolRepeatCounter()
    grep_a, grep_b = {"pattern": "TODO", "path": "src"}, {"pattern": "FIXME", "path": "src"}
    counts = []
    for round_ in range(4):
        at = 1000.0 + 35 * round_
        counts.append(counter.record("Grep", grep_a, "src/a.py:3: TODO", False, now=at).count)
        counter.record("Grep", grep_b, "No matches found", False, now=at + 17)
    assert counts == [1, 2, 3, 4]
    assert counter.refusal("Grep", grep_a) is not None


def test_the_counts_with_their_times_survive_the_state_file() -> None:
    counter = ToolRepeatCounter(wait=600)
    poll(counter, 100.0)
    kept = ToolRepeatCounter.from_state(counter.to_state(), wait=600)
    assert poll(kept, 650.0) == 1 and poll(kept, 700.0) == TOOL_REPEAT_BLOCK
    older = {**counter.to_state(), "calls": [row[:4] for row in counter.to_state()["calls"]]}
    assert poll(ToolRepeatCounter.from_state(older, wait=600), 10_000.0) == 1  # no time: waits
    hostile = {**counter.to_state(), "calls": [[*row[:4], "soon"] for row in
                                               counter.to_state()["calls"]]}
    assert poll(ToolRepeatCounter.from_state(hostile, wait=600), 10_000.0) == 1


def test_the_bound_is_a_setting() -> None:
    settings = parse_settings(b"[rules]\nwait_minutes = 45\n", {})
    assert settings.thresholds.wait_minutes == 45 and settings.tool_counter().wait == 2700
    from_env = parse_settings(None, {"LOOP_KILLER_WAIT_MINUTES": "0.5"})
    assert from_env.tool_counter().wait == 30 and not from_env.problems
    assert parse_settings(None, {}).thresholds.wait_minutes == WAIT_MINUTES
    bad = parse_settings(b"[rules]\nwait_minutes = -1\n", {})
    assert bad.thresholds.wait_minutes == WAIT_MINUTES and bad.problems


# -- refused is not stuck while the turn advances ----------------------------------------------


def refuse(counter: ToolRepeatCounter, name: str, tool_input: object) -> int:
    refusal = counter.refusal(name, tool_input)
    assert refusal is not None
    return counter.note_refusal(refusal)


def test_refusals_end_the_turn_only_when_nothing_new_came_between_them() -> None:
    counter = ToolRepeatCounter()
    plan = {"file_path": "/proj/PLAN.md"}
    for _ in range(4):
        counter.record("Read", plan, "1. migrate every table", False)
    refused = []
    for table in range(6):
        refused.append(refuse(counter, "Read", plan))
        counter.record("Bash", bash(f"./migrate.sh table_{table}"), f"migrated table_{table}",
                       False)
    assert refused == [1] * 6  # the goal advances: never three in a row
    assert [refuse(counter, "Read", plan) for _ in range(3)] == [1, 2, 3]  # now it is stuck


def test_a_repeated_result_between_refusals_is_nothing_new() -> None:
    counter = ToolRepeatCounter()
    for _ in range(4):
        counter.record("Bash", bash("npm test"), "FAIL", True)
    counts = []
    for _ in range(3):
        counts.append(refuse(counter, "Bash", bash("npm test")))
        counter.record("Bash", bash("git status"), "nothing to commit", False)
    assert counts == [1, 1, 2]  # the first git status was new; the same again is not


# -- a question nobody answered ----------------------------------------------------------------


STREAM_CLOSED = "Tool permission request failed: Error: Stream closed"


def test_a_question_that_failed_with_nobody_to_answer_is_counted() -> None:
    counter = ToolRepeatCounter()
    plan = {"plan": "1. Fix the parser"}
    counts = [counter.record("ExitPlanMode", plan, STREAM_CLOSED, True).count for _ in range(5)]
    assert counts == [1, 2, 3, 4, 5]
    assert counter.refusal("ExitPlanMode", plan) is not None


def test_a_question_the_person_answered_or_turned_down_resets() -> None:
    for content, is_error in (("User has approved your plan.", False),
                              ("The user doesn't want to proceed with this tool use. The tool "
                               "use was rejected.", True)):
        counter = ToolRepeatCounter()
        for _ in range(4):
            counter.record("Bash", bash("npm test"), "FAIL", True)
        counter.record("ExitPlanMode", {"plan": "p"}, content, is_error)
        assert counter.refusal("Bash", bash("npm test")) is None
    assert person_answered([{"type": "text", "text": "User rejected tool use"}], is_error=True)
    assert not person_answered(STREAM_CLOSED, is_error=True)


# -- the re-prompt rules agree -------------------------------------------------------------


def _answer_with_poll(work: TurnWork, index: int, at: str, result: str) -> bool | None:
    call = ToolCall(f"toolu_{index}", "Bash", POLL)
    work.feed(AssistantPart(f"msg_{index}", f"a{index}", at, "", True, True, (call,)))
    work.feed(ToolResults(f"r{index}", at, (ToolResult(f"toolu_{index}", result, False),)))
    return work.close(judge=True)


def test_an_answer_that_waited_is_work_until_the_bound() -> None:
    work = TurnWork(wait=120)
    times = ["2026-12-02T07:00:00Z", "2026-12-02T07:01:00Z", "2026-12-02T07:01:59Z",
             "2026-12-02T07:02:30Z", "2026-12-02T07:03:00Z"]
    verdicts = [_answer_with_poll(work, i, at, PENDING) for i, at in enumerate(times)]
    # The result that reached the bound is the last of the waiting; after it, idle.
    assert verdicts == [True, True, True, True, False]


def test_the_detector_takes_its_bound_from_the_thresholds() -> None:
    thresholds = parse_settings(None, {"LOOP_KILLER_WAIT_MINUTES": "2"}).thresholds
    assert RunDetector("s", thresholds=thresholds).work._wait == 120


# -- found by a review ---------------------------------------------------------------------


def test_a_check_right_after_a_call_that_sleeps_waits_too() -> None:
    """``sleep 60`` as a call of its own, then ``gh pr checks 42``: polling CI."""
    counter = ToolRepeatCounter(wait=600)
    counts = []
    for minute in range(8):
        counter.record("Bash", bash("sleep 60"), "", False, now=60.0 * minute)
        counts.append(counter.record("Bash", bash("gh pr checks 42"), PENDING, False,
                                     now=60.0 * minute + 1).count)
    assert counts == [1] * 8 and counter.refusal("Bash", bash("gh pr checks 42")) is None
    work = TurnWork(wait=600)
    verdicts = []
    for minute in range(3):
        at = f"2026-12-02T07:0{minute}:00Z"
        calls = (ToolCall(f"s{minute}", "Bash", bash("sleep 60")),
                 ToolCall(f"c{minute}", "Bash", bash("gh pr checks 42")))
        work.feed(AssistantPart(f"m{minute}", f"a{minute}", at, "", True, True, calls))
        work.feed(ToolResults(f"r{minute}", at, (ToolResult(f"s{minute}", "", False),
                                                 ToolResult(f"c{minute}", PENDING, False))))
        verdicts.append(work.close(judge=True))
    assert verdicts == [True, True, True]  # the re-prompt rules agree: it waited


def test_a_failure_after_another_calls_progress_is_a_new_check() -> None:
    """Installing one package after another into an ignored .venv: the tree git sees is
    the same, but the install's new result is progress, so pytest's next, different
    failure is a new check (found by a review)."""
    from loop_killer.engine.calls import call_key
    from loop_killer.engine.tool_repeat import result_digest

    counter = ToolRepeatCounter()

    def failure(error: str) -> int:
        call, result = call_key("Bash", bash("pytest")), result_digest(error, is_error=True)
        tree = "git:same" if counter.would_repeat(call, "Bash", result, failed=True) else None
        return counter.record_call(call, "Bash", error, True, result=result, tree=tree).count

    counts = []
    for module in ("requests", "yaml", "numpy", "attrs", "rich"):
        counts.append(failure(f"ModuleNotFoundError: No module named '{module}'"))
        counter.record("Bash", bash(f"pip install {module}"), f"Installed {module}", False)
    assert counts == [1] * 5


def test_a_crlf_or_bom_file_has_the_state_claude_code_hands(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from loop_killer.engine.edits import content_digest, states_of_result
    from loop_killer.hooks.worktree import file_state

    crlf = tmp_path / "w.txt"
    crlf.write_bytes(b"\xef\xbb\xbfline one\r\nline two\r\n")
    assert file_state(str(crlf)) == content_digest("line one\nline two\n")
    utf16 = tmp_path / "u.txt"
    utf16.write_bytes("hello\r\n".encode("utf-16"))
    assert file_state(str(utf16)) == content_digest("hello\n")
    assert file_state(str(tmp_path / "none.txt")) == "absent"
    # A Write over a file too big to hand whole: its state before is not known.
    assert states_of_result({"type": "update", "originalFile": None, "content": "x"}) is None
