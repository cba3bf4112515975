"""Every word the person sees, for every outcome, and the hook's output JSON around it."""

from __future__ import annotations

import json

import pytest
from loop_killer.hook import notice
from loop_killer.hook.notice import Firing

SAME = Firing("SAME_REPLY_TURNS", 3, 3, "hook")
IDLE = Firing("IDLE_TURNS", 6, 6, "watcher")
MANUAL = Firing("MANUAL", 2, 2, "manual")


def test_the_stop_reason_starts_with_the_marker_and_names_the_rule() -> None:
    assert notice.stop_reason(SAME) == (
        "loop-killer: SAME_REPLY_TURNS: 3 similar replies in a row; turn stopped")
    assert notice.stop_reason(IDLE) == (
        "loop-killer: IDLE_TURNS: 6 replies to re-prompts without any tool use; turn stopped")
    assert notice.stop_reason(MANUAL).startswith("loop-killer: MANUAL: ")


WHAT = ("loop-killer: stopped a Stop-hook loop (IDLE_TURNS: 6 replies to re-prompts without "
        "any tool use)")


@pytest.mark.parametrize("outcome, why, expected", [
    ("cleared", "", WHAT + " and cleared the goal (/goal clear confirmed)."),
    ("sent_unconfirmed", "no proof within 1.5 s",
     WHAT + "; /goal clear was typed but not confirmed: if the goal is still set, type "
            "/goal clear."),
    ("not_possible", "you have text in the prompt; not typing into it",
     WHAT + "; the goal is only paused: type /goal clear to clear it (you have text in the "
            "prompt; not typing into it)."),
    ("stopped_no_goal", "", WHAT + "."),
    ("clear_queued", "", WHAT + "; clearing the goal with /goal clear."),
])
def test_each_outcome_has_its_one_line_notice(outcome: str, why: str, expected: str) -> None:
    text = notice.notice(IDLE, outcome, why=why)
    assert text == expected
    assert "\n" not in text


def test_without_a_goal_the_notice_claims_nothing_about_a_goal() -> None:
    text = notice.notice(SAME, notice.OUTCOME_NO_GOAL)
    assert "goal" not in text.lower().replace("stop-hook", "")


def test_the_output_without_the_mod_carries_the_notice_and_a_desktop_notification() -> None:
    output = notice.hook_output(SAME, notice.OUTCOME_CLEARED)
    assert output == {
        "continue": False,
        "stopReason": "loop-killer: SAME_REPLY_TURNS: 3 similar replies in a row; turn stopped",
        "systemMessage": "loop-killer: stopped a Stop-hook loop (SAME_REPLY_TURNS: 3 similar "
                         "replies in a row) and cleared the goal (/goal clear confirmed).",
        "terminalSequence": "\x1b]9;loop-killer: loop stopped (SAME_REPLY_TURNS), goal "
                            "cleared\x07",
    }
    assert "decision" not in output


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
    assert sent["notice"] == ("stopped a Stop-hook loop (SAME_REPLY_TURNS: 3 similar replies in "
                              "a row); clearing the goal with /goal clear.")
    assert sent["toast"] == "loop stopped (SAME_REPLY_TURNS), clearing the goal"
    assert sent["match"] == {"cleared": ["Goal cleared", '"met":true,"sentinel":true'],
                             "no_goal": ["No goal set"]}
    assert set(sent["outcome"]) == {"cleared", "no_goal", "failed", "unknown"}
    assert sent["outcome"]["cleared"] == "{output}"
    assert sent["outcome_path"] == "/state/outcomes/s.1.json"
    # The mod's texts do not repeat the plugin name (the TUI shows "loop-killer:" before them).
    assert not any(text.startswith("loop-killer") for text in
                   [sent["notice"], sent["toast"], *sent["outcome"].values()])


def test_the_mod_plan_without_a_goal_does_not_ask_for_goal_clear() -> None:
    plan = notice.mod_plan(SAME, plan_id="p", session_id="s", clear_goal=False, outcome_path="")
    assert plan["clear_goal"] is False
    assert plan["notice"] == (
        "stopped a Stop-hook loop (SAME_REPLY_TURNS: 3 similar replies in a row).")


def test_control_characters_never_reach_the_terminal() -> None:
    sequence = notice.osc9("evil\x07\x1b]0;title\x1b\\ text")
    assert sequence.count("\x07") == 1 and sequence.endswith("\x07")
    assert sequence.count("\x1b") == 1 and sequence.startswith("\x1b]9;")
    weird = Firing("SAME\x1b[31m_RULE", 3)
    assert "\x1b" not in notice.stop_reason(weird)


def test_a_failure_message_blocks_nothing() -> None:
    output = notice.failure_message("cannot read the transcript")
    assert output == {"systemMessage": "loop-killer: cannot read the transcript (nothing was "
                                       "blocked)"}


def test_the_hook_and_the_notice_speak_the_same_mod_protocol() -> None:

    assert notice.MOD_PROTOCOL == 1
