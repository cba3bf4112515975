"""Every word the person sees, for every outcome, and the hook's output JSON around it."""

from __future__ import annotations

import json

import pytest
from loop_killer.hooks import notice
from loop_killer.hooks.notice import Firing

SAME = Firing("SAME_REPLY_TURNS", 3, 3, "hook")
IDLE = Firing("IDLE_TURNS", 6, 6, "watcher")
MANUAL = Firing("MANUAL", 2, 2, "manual")


def test_the_stop_reason_starts_with_the_marker_and_names_the_rule() -> None:
    assert notice.stop_reason(SAME) == (
        "loop-killer: SAME_REPLY_TURNS: 3 similar replies to re-prompts; turn stopped")
    assert notice.stop_reason(IDLE) == (
        "loop-killer: IDLE_TURNS: 6 replies to re-prompts without new work; turn stopped")
    assert notice.stop_reason(MANUAL).startswith("loop-killer: MANUAL: ")


HEAD = "loop-killer: IDLE_TURNS (6 replies to re-prompts without new work): loop stopped"


@pytest.mark.parametrize("outcome, why, expected", [
    ("cleared", "Goal cleared: tests pass", HEAD + ", goal cleared."),
    ("stopped_no_goal", "", HEAD + "; no goal was set."),
    ("clear_failed", "Unknown command: /goal",
     HEAD + ", but /goal clear failed (Unknown command: /goal): the goal is only paused, "
            "type /goal clear."),
    ("clear_failed", "", HEAD + ", but /goal clear failed: the goal is only paused, type "
                                "/goal clear."),
    ("sent_unconfirmed", "no proof within 1.5 s",
     HEAD + "; the result of /goal clear is unknown (no proof within 1.5 s): if the goal is "
            "still set, type /goal clear."),
    ("not_possible", "you have text in the prompt; not typing into it",
     HEAD + ", goal only paused: type /goal clear to clear it (you have text in the prompt; "
            "not typing into it)."),
    ("not_possible", "", HEAD + ", goal only paused: type /goal clear to clear it."),
    ("clear_queued", "", HEAD + "; /goal clear queued."),
])
def test_each_outcome_has_its_one_line_notice(outcome: str, why: str, expected: str) -> None:
    text = notice.notice(IDLE, outcome, why=why)
    assert text == expected
    assert "\n" not in text


def test_the_notice_names_the_rule_then_the_result_of_goal_clear() -> None:
    assert notice.notice(SAME, notice.OUTCOME_CLEARED) == (
        "loop-killer: SAME_REPLY_TURNS (3 similar replies to re-prompts): loop stopped, goal "
        "cleared.")
    assert notice.notice(MANUAL, notice.OUTCOME_CLEARED) == (
        "loop-killer: MANUAL (asked by hand with loop-killer clear): stopped this turn as "
        "asked, goal cleared.")
    assert notice.notice(SAME, notice.OUTCOME_SENT, wait=3) == (
        "loop-killer: SAME_REPLY_TURNS (3 similar replies to re-prompts): loop stopped; the result "
        "of /goal clear is unknown after 3 s: if the goal is still set, type /goal clear.")
    assert notice.notice(SAME, notice.OUTCOME_CLEARED, prefix=False).startswith(
        "SAME_REPLY_TURNS (")


def test_without_a_goal_the_notice_claims_nothing_was_cleared() -> None:
    text = notice.notice(SAME, notice.OUTCOME_NO_GOAL)
    assert "cleared" not in text and "paused" not in text and "/goal clear" not in text


@pytest.mark.parametrize("outcome, expected", [
    ("cleared", "loop-killer: loop stopped (SAME_REPLY_TURNS), goal cleared"),
    ("stopped_no_goal", "loop-killer: loop stopped (SAME_REPLY_TURNS), no goal set"),
    ("clear_failed", "loop-killer: loop stopped (SAME_REPLY_TURNS): type /goal clear"),
    ("sent_unconfirmed", "loop-killer: loop stopped (SAME_REPLY_TURNS): type /goal clear"),
    ("not_possible", "loop-killer: loop stopped (SAME_REPLY_TURNS): type /goal clear"),
    ("clear_queued", "loop-killer: loop stopped (SAME_REPLY_TURNS), clearing the goal"),
])
def test_the_toast_follows_the_same_outcome(outcome: str, expected: str) -> None:
    assert notice.toast(SAME, outcome) == expected


def test_the_output_without_the_mod_carries_the_notice_and_a_desktop_notification() -> None:
    output = notice.hook_output(SAME, notice.OUTCOME_CLEARED)
    assert output == {
        "continue": False,
        "stopReason": ("loop-killer: SAME_REPLY_TURNS: 3 similar replies to re-prompts; turn "
                       "stopped"),
        "systemMessage": "loop-killer: SAME_REPLY_TURNS (3 similar replies to re-prompts): loop "
                         "stopped, goal cleared.",
        "terminalSequence": "\x1b]9;loop-killer: loop stopped (SAME_REPLY_TURNS), goal "
                            "cleared\x07",
    }
    assert "decision" not in output


RULE = "SAME_REPLY_TURNS (3 similar replies to re-prompts): loop stopped"


def test_the_output_with_the_mod_hands_it_a_plan_and_every_text() -> None:
    plan = notice.mod_plan(SAME, plan_id="s.1", session_id="s", clear_goal=True,
                           outcome_path="/state/outcomes/s.1.json")
    output = notice.hook_output(SAME, notice.OUTCOME_QUEUED, plan=plan)
    assert set(output) == {"continue", "stopReason", "hookSpecificOutput"}
    assert output["continue"] is False
    context = output["hookSpecificOutput"]["additionalContext"]
    assert context.startswith(notice.MARK)
    sent = json.loads(context[len(notice.MARK):])
    assert sent == plan
    assert sent["v"] == 1 and sent["clear_goal"] is True
    assert sent["stop_reason"] == output["stopReason"]
    # Nothing is promised at the end of the turn: the one line waits for the result.
    assert sent["notice"] == "" and sent["toast"] == ""
    assert sent["match"] == {"cleared": ["Goal cleared", '"met":true,"sentinel":true'],
                             "no_goal": ["No goal set"]}
    assert sent["wait_ms"] == 3000 and sent["output_max"] == 160
    assert sent["outcome"] == {
        "cleared": RULE + ", goal cleared.",
        "no_goal": RULE + "; no goal was set.",
        "failed": RULE + ", but /goal clear failed ({output}): the goal is only paused, type "
                         "/goal clear.",
        "unknown": RULE + "; the result of /goal clear is unknown after 3 s ({output}): if the "
                          "goal is still set, type /goal clear.",
    }
    assert sent["outcome_bare"] == {
        "cleared": RULE + ", goal cleared.",
        "no_goal": RULE + "; no goal was set.",
        "failed": RULE + ", but /goal clear failed: the goal is only paused, type /goal clear.",
        "unknown": RULE + "; the result of /goal clear is unknown after 3 s: if the goal is "
                          "still set, type /goal clear.",
    }
    assert sent["outcome_toast"] == {
        "cleared": "loop stopped (SAME_REPLY_TURNS), goal cleared",
        "no_goal": "loop stopped (SAME_REPLY_TURNS), no goal set",
        "failed": "loop stopped (SAME_REPLY_TURNS): type /goal clear",
        "unknown": "loop stopped (SAME_REPLY_TURNS): type /goal clear",
    }
    assert sent["outcome_path"] == "/state/outcomes/s.1.json"
    # Claude Code shows "loop-killer:" before a mod's lines: the texts do not repeat it.
    texts = [*sent["outcome"].values(), *sent["outcome_bare"].values(),
             *sent["outcome_toast"].values()]
    assert not any(text.startswith("loop-killer") or "\n" in text for text in texts)


def test_the_mod_plan_without_a_goal_says_so_at_the_end_of_the_turn() -> None:
    plan = notice.mod_plan(SAME, plan_id="p", session_id="s", clear_goal=False, outcome_path="")
    assert plan["clear_goal"] is False
    assert plan["notice"] == RULE + "; no goal was set."
    assert plan["toast"] == "loop stopped (SAME_REPLY_TURNS), no goal set"


def test_control_characters_never_reach_the_terminal() -> None:
    sequence = notice.osc9("evil\x07\x1b]0;title\x1b\\ text")
    assert sequence.count("\x07") == 1 and sequence.endswith("\x07")
    assert sequence.count("\x1b") == 1 and sequence.startswith("\x1b]9;")
    weird = Firing("SAME\x1b[31m_RULE", 3)
    assert "\x1b" not in notice.stop_reason(weird)
    for outcome in notice.OUTCOMES:
        text = notice.notice(weird, outcome, why="evil\x1b[2J\x07\nmore")
        assert "\x1b" not in text and "\x07" not in text and "\n" not in text


def test_the_hook_and_the_notice_speak_the_same_mod_protocol() -> None:

    assert notice.MOD_PROTOCOL == 1
