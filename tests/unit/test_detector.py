"""Events -> answers -> the trailing run -> detections (SAME_REPLY_TURNS, IDLE_TURNS)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from loop_killer.engine.answers import Answer, AnswerAssembler
from loop_killer.engine.judge import Detection
from loop_killer.engine.reader import TranscriptReader, detect_transcript
from loop_killer.engine.rules import (
    IDLE_TURNS,
    RULE_IDLE,
    RULE_SAME,
    SAME_REPLY_TURNS,
    text_digest,
    words,
)
from loop_killer.engine.run import RunDetector
from loop_killer.engine.transcript import parse_line
from transcripts import BASH, CONDITION, KICKOFF, NOT_MET, SESSION, Transcript, found, line

SAME = "I am still working on getting the auth tests to pass."
DISTINCT = [
    "Reading login.test.js reveals a missing helper import.",
    "Next, inspect how sessions expire inside middleware code.",
    "Token refresh logic looks broken around clock skew.",
    "Patched password hashing; bcrypt rounds were misconfigured earlier.",
    "Database fixtures need seeding before each spec runs.",
    "Mocking OAuth callbacks now, since network calls fail offline.",
    "Rate limiter resets between cases after adding teardown hooks.",
    "CSRF headers get verified properly once cookies carry SameSite.",
    "Session cookies rotate correctly after the login handler change.",
    "Email verification links expire after twenty four hours.",
    "Audit logging captures failed attempts with client addresses.",
    "Two factor codes validate against a drifting window.",
    "Refresh tokens revoke themselves once reused anywhere.",
]


def _detect(t: Transcript, **kwargs) -> list[Detection]:
    return detect_transcript(t.data(), t.session_id, **kwargs)


def _summary(detections: list[Detection]) -> list[tuple[str, tuple[str, ...]]]:
    return [(d.rule, tuple(a.uuid for a in d.answers)) for d in detections]


def _goal(t: Transcript) -> None:
    """``/goal`` and the answer to its kickoff (which is not a re-prompt)."""
    t.goal()
    t.reply("Acknowledged; starting on the auth tests.")


def _feed_all(detector: RunDetector, t: Transcript) -> list[Detection]:
    detections = []
    for raw in t.lines:
        event = parse_line(raw)
        if event is not None:
            detections += detector.feed(event)
    return detections + detector.flush()  # the reader has caught up with the file


# -- answers ------------------------------------------------------------------------------


def _answers(t: Transcript) -> list[Answer]:
    assembler = AnswerAssembler()
    answers = []
    for raw in t.lines:
        event = parse_line(raw)
        if event is not None:
            answers += assembler.feed(event)
    return answers + assembler.flush()  # the reader has caught up with the file


def test_reply_lines_are_grouped_by_message_id_and_tool_use_joins_the_answer():
    t = Transcript()
    prompt = t.reprompt()
    t.reply("Running the auth tests.", tools=[BASH])  # a text line, then a tool_use line
    t.tool_result(t.last_tool_use_id, "auth tests: 3 passed, 1 failed")
    last = t.reply("One auth test still fails; I will keep working on it.")
    (answer,) = _answers(t)
    assert answer.prompt == "reprompt" and answer.prompt_uuid == prompt
    assert answer.used_tool
    assert answer.uuid == last
    # Its words are its last reply's, as the Stop hook gets them (last_assistant_message).
    assert answer.text == "One auth test still fails; I will keep working on it."


def test_thinking_is_left_out_of_the_text():
    t = Transcript()
    t.reprompt()
    last = t.reply("Still working on the auth tests.",
                   thinking="Pass 1: the evaluator still says no. I will report status again.")
    (answer,) = _answers(t)
    assert answer.text == "Still working on the auth tests."
    assert answer.uuid == last and not answer.used_tool
    assert answer.digest == text_digest("Still working on the auth tests.")


def test_answer_with_a_final_stop_reason_completes_once_the_reader_has_caught_up():
    t = Transcript()
    t.reprompt()
    t.reply("Still working.", thinking="hmm")  # thinking line (end_turn), then text line
    assembler = AnswerAssembler()
    completed_at = []
    for i, raw in enumerate(t.lines):
        assembler.feed(parse_line(raw))
        if assembler.flush():  # what a reader does at the end of each batch it reads
            completed_at.append(i)
    assert completed_at == [len(t.lines) - 1]  # not at the thinking line


def test_every_text_block_of_a_reply_counts_though_each_line_says_end_turn():
    # 2.1.x writes the final stop_reason on every line of a reply; the lines of one
    # reply arrive together, so a reply closed at its first line would lose the rest.
    t = Transcript()
    t.reprompt()
    t.assistant_line([{"type": "text", "text": "Same opening sentence."}], "msg_two", "end_turn")
    t.assistant_line([{"type": "text", "text": "A different second block."}], "msg_two",
                     "end_turn")
    (answer,) = _answers(t)
    assert answer.text == "Same opening sentence.\nA different second block."


def test_with_null_stop_reasons_the_answer_completes_at_the_next_user_or_system_line():
    t = Transcript(stop_reasons=False)
    t.reprompt()
    t.reply("Still working.", thinking="hmm")
    t.goal_status(met=False, reason="not yet")  # an attachment does not complete it
    assembler = AnswerAssembler()
    for raw in t.lines:
        assert assembler.feed(parse_line(raw)) == []
    assert assembler.answer_started
    (answer,) = assembler.feed(parse_line(line(type="system", subtype="stop_hook_summary",
                                               uuid="s", timestamp="t")))
    assert answer.text == "Still working."
    # ... or at the next user line.
    t.reply("Still working.")
    assembler = AnswerAssembler()
    for raw in t.lines:
        assembler.feed(parse_line(raw))
    t.reprompt()
    assert [a.text for a in assembler.feed(parse_line(t.lines[-3]))] == ["Still working."]


def test_null_stop_reason_reply_over_several_text_lines_is_one_answer():
    t = Transcript(stop_reasons=False)
    t.reprompt()
    t.assistant_line([{"type": "text", "text": "\n\n"}], "msg_split", None)
    t.assistant_line([{"type": "thinking", "thinking": "plan"}], "msg_split", None)
    t.assistant_line([{"type": "text", "text": "Still working."}], "msg_split", None)
    t.system("stop_hook_summary")
    (answer,) = _answers(t)
    assert words(answer.text) == {"still", "working"}


def test_interrupted_answer_is_dropped_and_finish_completes_a_pending_one():
    t = Transcript()
    t.reprompt()
    t.reply("There is one test file in test/auth, ", stop_reason=None)
    t.interrupt()
    assert _answers(t) == []
    t.reprompt()
    t.reply("Done.", stop_reason=None)
    assembler = AnswerAssembler()
    assert [a for raw in t.lines for a in assembler.feed(parse_line(raw))] == []
    assert [a.text for a in assembler.finish()] == ["Done."]
    assert assembler.finish() == []


# -- SAME_REPLY_TURNS ---------------------------------------------------------------------


def test_three_similar_answers_to_reprompts_fire_same_reply_turns():
    t = Transcript()
    _goal(t)
    uuids = t.loop([SAME] * 3)
    (detection,) = _detect(t)
    assert detection.rule == RULE_SAME
    assert [a.uuid for a in detection.answers] == uuids


def test_two_similar_answers_do_not_fire():
    t = Transcript()
    _goal(t)
    t.loop([SAME] * 2)
    assert _detect(t) == []


def test_two_similar_and_one_different_do_not_fire():
    t = Transcript()
    _goal(t)
    t.loop([SAME, SAME, DISTINCT[0]])
    assert _detect(t) == []
    t.loop([SAME, SAME])  # the chain restarts at the different answer
    assert _detect(t) == []
    last = t.loop([SAME])
    assert _summary(_detect(t))[0][1][-1] == last[0]


def test_different_then_two_similar_do_not_fire_but_a_third_does():
    t = Transcript()
    _goal(t)
    t.loop([DISTINCT[0], SAME, SAME])
    assert _detect(t) == []
    t.loop([SAME])
    assert [d.rule for d in _detect(t)] == [RULE_SAME]


def test_a_chain_needs_only_consecutive_pairs_to_be_similar():
    a = "alpha bravo charlie delta echo"
    b = "alpha bravo charlie delta xray"  # a~b: 4/6
    c = "alpha bravo charlie xray yankee"  # b~c: 4/6, but a vs c: 3/7
    assert Fraction(len(words(a) & words(c)), len(words(a) | words(c))) < Fraction(3, 5)
    t = Transcript()
    _goal(t)
    uuids = t.loop([a, b, c])
    (detection,) = _detect(t)
    assert detection.rule == RULE_SAME
    assert [x.uuid for x in detection.answers] == uuids
    assert detection.similarities == pytest.approx((4 / 6, 4 / 6))


def test_same_fires_again_after_another_three_and_never_reuses_answers():
    t = Transcript()
    _goal(t)
    uuids = t.loop([SAME] * 8)
    detections = _detect(t)
    assert _summary(detections) == [(RULE_SAME, tuple(uuids[0:3])), (RULE_SAME, tuple(uuids[3:6]))]
    involved = [a.uuid for d in detections for a in d.answers]
    assert len(involved) == len(set(involved))


def test_three_empty_answers_fire_as_identical_texts():
    t = Transcript()
    _goal(t)
    t.loop(["", "", ""])
    # A reply with no text is complete only at the next prompt: Claude Code may ask again.
    assert _detect(t) == []
    t.reprompt()
    assert [d.rule for d in _detect(t)] == [RULE_SAME]


def test_a_reply_after_the_nudge_is_the_same_answer():
    """An empty reply, Claude Code's nudge, then words: one answer, with the words."""
    t = Transcript()
    _goal(t)
    for _ in range(3):
        t.reprompt()
        t.reply("")
        t.nudge()
        t.reply(SAME)
    (detection,) = _detect(t)
    assert [a.text for a in detection.answers] == [SAME] * 3 and detection.run_length == 3


def test_re_prompts_answered_by_nothing_are_empty_answers_and_fire_on_the_third():
    """A reply without content is not written (measured on 2.1.250 to 2.1.332): a
    re-prompt after the last one's Stop (its summary), with no answer between, answered
    with nothing. Claude Code's nudge after the first such reply is nobody's prompt."""
    t = Transcript()
    _goal(t)
    first = t.reprompt()
    t.nudge()
    prompts = [first, t.reprompt(), t.reprompt()]
    t.reprompt()
    (detection,) = _detect(t)
    assert detection.rule == RULE_SAME
    assert [(a.text, a.prompt_uuid) for a in detection.answers] == [("", p) for p in prompts]


def test_the_nudge_after_an_empty_reply_does_not_end_the_run():
    t = Transcript()
    _goal(t)
    t.reprompt()
    t.reply("")
    t.nudge()
    t.reply("")
    t.loop(["", ""])
    t.reprompt()
    assert [d.rule for d in _detect(t)] == [RULE_SAME]


def test_an_empty_answer_completes_at_its_stop_not_at_the_person_s_next_prompt():
    """The turn's last empty answer completes at its Stop's summary (the nudge comes
    before it): a detection then belongs to the turn it is about. At a person's prompt it
    would come after the turn ended, and a watcher's request would stop the next turn
    (found by a review of this change)."""
    t = Transcript()
    _goal(t)
    t.loop(["", ""])
    t.reprompt()
    t.reply("")
    t.summary(prevented=False)  # the goal was met: the turn ends
    before = len(t.data())
    t.prompt("Thanks. Now update the changelog.")
    steps = TranscriptReader(SESSION).feed(t.data())
    fired = [step for step in steps if step.detections]
    assert len(fired) == 1 and fired[0].end <= before
    assert fired[0].detections[0].rule == RULE_SAME


def test_without_summaries_an_empty_answer_is_dropped_at_the_person_s_prompt():
    """2.1.250 headless writes no summaries: the person's prompt ends the turn, and an
    answer held for want of text is not counted after it."""
    t = Transcript()
    _goal(t)
    for _ in range(3):
        t.user(f"Stop hook feedback:\n[{CONDITION}]: {NOT_MET}", isMeta=True)
        t.reply("")
    t.prompt("Thanks. Now update the changelog.")
    assert _detect(t) == []


def test_no_answer_after_a_stop_that_ended_the_turn():
    t = Transcript()
    _goal(t)
    t.user(f"Stop hook feedback:\n[{CONDITION}]: {NOT_MET}", isMeta=True)
    t.summary(prevented=True)
    t.reprompt()
    assert [a.prompt for a in _answers(t)] == ["turn"]  # the kickoff's answer alone


def test_two_re_prompts_of_one_stop_await_one_answer():
    """Two hooks that block one Stop (/goal and a command hook) write two re-prompts
    before its summary (measured on 2.1.332): no empty answer between them."""
    t = Transcript()
    _goal(t)
    uuids = []
    for _ in range(3):
        t.reprompts_of_one_stop(f"[{CONDITION}]: {NOT_MET}", "Keep going: the build is red.")
        uuids.append(t.reply(SAME))
    (detection,) = _detect(t)
    assert detection.rule == RULE_SAME and detection.run_length == 3
    assert [a.uuid for a in detection.answers] == uuids


def test_wordless_answers_that_differ_are_not_similar():
    t = Transcript()
    _goal(t)
    t.loop(["ok", "ok", "no"])
    assert _detect(t) == []


def test_an_empty_answer_between_wordy_ones_breaks_the_chain():
    t = Transcript()
    _goal(t)
    t.loop([SAME, "", SAME, SAME])
    assert _detect(t) == []


def test_similarity_is_measured_on_words_of_any_script():
    t = Transcript()
    _goal(t)
    t.loop(["日本語テキスト кошка ＡＢＣ", "ａｂｃ КОШКА 日本語テキスト!",
            "кошка ＡＢＣ 日本語テキスト"])
    assert [d.rule for d in _detect(t)] == [RULE_SAME]


@pytest.mark.parametrize("replies", [
    ["我仍然在修复认证测试，测试还没有通过。", "我仍然在修复认证测试，测试还没有通过！",
     "我仍然在修复认证测试，第3个测试还没有通过。"],
    ["認証テストをまだ修正しています。", "認証テストをまだ修正しています!",
     "認証テストを、まだ修正しています。"],
    ["ฉันยังคงแก้ไขการทดสอบการยืนยันตัวตนอยู่ การทดสอบยังไม่ผ่าน",
     "ฉันยังคงแก้ไขการทดสอบการยืนยันตัวตนอยู่ การทดสอบยังไม่ผ่านเลย",
     "ฉันยังคงแก้ไขการทดสอบการยืนยันตัวตนอยู่ การทดสอบยังไม่ผ่าน!"],
])
def test_replies_in_unspaced_scripts_that_differ_by_a_character_are_similar(
        replies: list[str]) -> None:
    """Written without spaces, a whole clause was one word: near-identical replies shared
    none, and the loop ran to IDLE_TURNS, twice as long (found by an adversarial pass)."""
    t = Transcript()
    _goal(t)
    t.loop(replies)
    assert [d.rule for d in _detect(t)] == [RULE_SAME]
    different = Transcript()
    _goal(different)
    different.loop([replies[0], "我已经修复了登录模块并提交了代码。", replies[0]])
    assert _detect(different) == []


# -- IDLE_TURNS ---------------------------------------------------------------------------


def test_five_idle_answers_do_not_fire_the_sixth_does():
    t = Transcript()
    _goal(t)
    t.loop(DISTINCT[:5])
    assert _detect(t) == []
    uuids = t.loop(DISTINCT[5:6])
    (detection,) = _detect(t)
    assert detection.rule == RULE_IDLE
    assert detection.count == IDLE_TURNS == 6
    assert detection.answer_uuid == uuids[0]
    assert [a.text for a in detection.answers] == DISTINCT[:6]
    assert detection.similarities == (0.0,) * 5


def test_idle_fires_again_after_another_six():
    t = Transcript()
    _goal(t)
    uuids = t.loop(DISTINCT[:13])
    assert _summary(_detect(t)) == [(RULE_IDLE, tuple(uuids[0:6])),
                                    (RULE_IDLE, tuple(uuids[6:12]))]


def test_same_is_checked_before_idle():
    t = Transcript()
    _goal(t)
    uuids = t.loop(DISTINCT[:3] + [SAME] * 3)
    (detection,) = _detect(t)
    assert (detection.rule, detection.run_length) == (RULE_SAME, 6)
    assert [a.uuid for a in detection.answers] == uuids[3:]


def test_idle_counts_answers_whatever_they_say_once_same_has_reset_the_run():
    t = Transcript()
    _goal(t)
    t.loop([SAME] * 3 + DISTINCT[:5])
    assert [d.rule for d in _detect(t)] == [RULE_SAME]
    t.loop(DISTINCT[5:6])
    assert [d.rule for d in _detect(t)] == [RULE_SAME, RULE_IDLE]


# -- detection contents -------------------------------------------------------------------


def test_detection_carries_session_answers_texts_scores_and_timestamps():
    t = Transcript(session_id="b4119b1c-7ad2-403b-a747-e084284a2887")
    _goal(t)
    prompts, uuids = [], []
    texts = [SAME, SAME.upper(), SAME + " Again."]
    for text in texts:
        prompts.append(t.reprompt())
        uuids.append(t.reply(text))
    (detection,) = _detect(t)
    assert detection.session_id == "b4119b1c-7ad2-403b-a747-e084284a2887"
    assert detection.rule == RULE_SAME and detection.count == 3 and detection.run_length == 3
    assert [a.uuid for a in detection.answers] == uuids
    assert [a.prompt_uuid for a in detection.answers] == prompts
    assert [a.text for a in detection.answers] == texts
    assert detection.answers[0].similarity_to_previous is None
    assert detection.similarities == pytest.approx((1.0, 7 / 8))
    stamps = {orjson_line["uuid"]: orjson_line["timestamp"] for orjson_line in _entries(t)}
    assert [a.timestamp for a in detection.answers] == [stamps[u] for u in uuids]
    assert detection.first_timestamp == stamps[uuids[0]]
    assert detection.last_timestamp == stamps[uuids[-1]]
    assert detection.answer_uuid == uuids[-1]
    assert detection.answers[0].words == words(SAME)

    summary = detection.to_dict(max_text=10)
    assert summary == {
        "session_id": "b4119b1c-7ad2-403b-a747-e084284a2887",
        "rule": RULE_SAME,
        "count": 3,
        "run_length": 3,
        "answer_uuid": uuids[-1],
        "first_timestamp": stamps[uuids[0]],
        "last_timestamp": stamps[uuids[-1]],
        "similarities": [1.0, 0.875],
        "answers": [{"uuid": u, "timestamp": stamps[u], "text": x[:10]}
                    for u, x in zip(uuids, texts, strict=True)],
    }


def _entries(t: Transcript) -> list[dict]:
    import orjson

    return [orjson.loads(raw) for raw in t.lines]


# -- what ends a run ----------------------------------------------------------------------


def test_an_answer_that_used_a_tool_ends_the_run():
    t = Transcript()
    _goal(t)
    t.loop([SAME] * 2)
    t.reprompt()
    t.tool_round("Running the auth tests.", "3 passed, 1 failed", SAME)
    t.loop([SAME] * 2)
    assert _detect(t) == []
    uuids = t.loop([SAME])
    (detection,) = _detect(t)
    assert detection.run_length == 3 and detection.answer_uuid == uuids[0]


STILL_FAILS = "One auth test still fails; I will keep working on it."


def _tool_rounds(t: Transcript, outputs: list[str], closing: str = STILL_FAILS) -> list[str]:
    """One answer to a re-prompt per output: a call, that output, the closing words."""
    uuids = []
    for output in outputs:
        t.reprompt()
        uuids.append(t.tool_round("Running the auth tests.", output, closing))
    return uuids


def test_tool_rounds_whose_results_are_new_never_fire():
    # A migration that advances, tests that fail differently: every answer is work.
    t = Transcript()
    _goal(t)
    _tool_rounds(t, [f"{n + 3} passed, {8 - n} failed" for n in range(8)])
    assert _detect(t) == []


def test_tool_rounds_that_only_repeat_a_result_are_no_work():
    # The loop people report most: a /goal whose model re-runs the same failing command
    # in every answer and says the same thing each time.
    t = Transcript()
    _goal(t)
    uuids = _tool_rounds(t, ["3 passed, 1 failed"] * 8)
    detections = _detect(t)
    # The first answer's result is new (work); answers 2, 3, 4 repeat it: the 3rd similar
    # answer with no new result fires, then the run starts afresh (answers 5, 6, 7).
    assert _summary(detections) == [(RULE_SAME, tuple(uuids[1:4])),
                                    (RULE_SAME, tuple(uuids[4:7]))]


def test_a_result_seen_in_the_answer_to_the_goal_s_kickoff_is_not_new():
    t = Transcript()
    t.goal()  # (the /goal command is the person's prompt: the turn starts here)
    t.tool_round("Running the auth tests.", "3 passed, 1 failed", "Acknowledged; on it.")
    uuids = _tool_rounds(t, ["3 passed, 1 failed"] * 3)
    assert _summary(_detect(t)) == [(RULE_SAME, tuple(uuids))]


def test_results_that_alternate_are_new_only_the_first_time():
    t = Transcript()
    _goal(t)
    uuids = _tool_rounds(t, ["FAIL", "PASS", "FAIL", "PASS", "FAIL"],
                         "The flaky test still flips; running it again.")
    assert _summary(_detect(t)) == [(RULE_SAME, tuple(uuids[2:5]))]


def test_a_person_s_prompt_makes_every_result_new_again():
    t = Transcript()
    _goal(t)
    for _ in range(2):
        t.reprompt()
        t.tool_round("Running the auth tests.", "3 passed, 1 failed", SAME)
    t.prompt("Keep going.")
    t.reply("On it.")
    t.reprompt()
    t.tool_round("Running the auth tests.", "3 passed, 1 failed", SAME)  # new in this turn
    t.loop([SAME] * 2)
    assert _detect(t) == []


def test_a_refused_call_is_no_work():
    t = Transcript()
    _goal(t)
    uuids = []
    for _ in range(3):
        t.reprompt()
        t.reply("Running the auth tests.", tools=[BASH])
        t.tool_result(t.last_tool_use_id, "PreToolUse:Bash hook error: loop-killer: refused "
                      "to run this call again: Bash: npm test gave the same result 4 times",
                      is_error=True)
        uuids.append(t.reply(SAME))
    assert _summary(_detect(t)) == [(RULE_SAME, tuple(uuids))]


def test_a_call_whose_result_is_not_written_is_work():
    t = Transcript()
    _goal(t)
    for _ in range(4):
        t.reprompt()
        t.reply("Running the auth tests.", tools=[BASH])
        t.reply(SAME)
    assert _detect(t) == []


def test_a_reply_whose_tool_use_line_comes_after_its_text_line_used_a_tool():
    t = Transcript()
    _goal(t)
    t.loop([SAME] * 2)
    t.reprompt()
    t.reply(SAME, tools=[BASH])  # same text, but the reply goes on with a tool call
    t.tool_result(t.last_tool_use_id)
    t.reply("")
    t.loop([SAME] * 2)
    assert _detect(t) == []


def test_a_persons_prompt_ends_the_run():
    t = Transcript()
    _goal(t)
    t.loop([SAME] * 2)
    t.prompt("keep going please")
    t.reply(SAME)
    t.loop([SAME] * 2)
    assert _detect(t) == []


def test_a_persons_prompt_ends_the_run_even_when_its_answer_is_interrupted():
    t = Transcript()
    _goal(t)
    t.loop([SAME] * 2)
    t.prompt("keep going please")
    t.reply("There is", stop_reason=None)
    t.interrupt()
    t.loop([SAME])
    assert _detect(t) == []


@pytest.mark.parametrize("what", ["slash command", "local command output", "meta notice"])
def test_any_other_user_message_ends_the_run(what):
    t = Transcript()
    _goal(t)
    t.loop([SAME] * 2)
    if what == "slash command":
        t.slash_command("model", "opus")
    elif what == "local command output":
        t.user("<local-command-stdout>Set model to opus</local-command-stdout>")
    else:
        t.user("<local-command-caveat>Caveat: generated by the user</local-command-caveat>",
               isMeta=True)
    t.loop([SAME] * 2)
    assert _detect(t) == []


def test_compaction_ends_the_run():
    t = Transcript()
    _goal(t)
    t.loop([SAME] * 2)
    t.compact()
    t.loop([SAME] * 2)
    assert _detect(t) == []
    t.loop([SAME])
    assert [d.run_length for d in _detect(t)] == [3]


def test_the_goal_kickoff_answer_does_not_count():
    t = Transcript()
    t.goal()
    t.reply(SAME)  # answers the kickoff: not part of the run
    t.loop([SAME] * 2)
    assert _detect(t) == []
    t.loop([SAME])
    assert len(_detect(t)) == 1


@pytest.mark.parametrize(
    "reprompt",
    [
        {"blocks": True},
        {"condition": None},  # a command hook: hook_blocking_error attachment
        {"text": "stop hook feedback:\nlowercase"},
        {"text": "[Stop hook] blocked: keep working"},
        {"text": "Hook re-prompted: keep working"},
        {"text": "  \n\tStop hook feedback: leading whitespace"},
        {"text": "HOOK RE-PROMPTED", "blocks": True},
    ],
    ids=["text-blocks", "command-hook", "lowercase", "bracket", "hook-re-prompted",
         "leading-space", "upper-blocks"],
)
def test_every_reprompt_form_drives_the_run(reprompt):
    t = Transcript()
    t.prompt()
    t.reply(SAME)
    uuids = t.loop([SAME] * 3, **reprompt)
    assert _summary(_detect(t)) == [(RULE_SAME, tuple(uuids))]


# -- what is ignored ----------------------------------------------------------------------


@pytest.mark.parametrize("for_tool_use", [False, True], ids=["mid-stream", "for-tool-use"])
def test_an_interrupted_answer_neither_counts_nor_ends_the_run(for_tool_use):
    t = Transcript()
    _goal(t)
    uuids = t.loop([SAME] * 2)
    t.reprompt()
    if for_tool_use:
        t.reply("Let me run the tests.", tools=[BASH])
        t.tool_result(t.last_tool_use_id, "The user doesn't want to proceed.", is_error=True)
    else:
        t.reply("There is one test file in test/auth, ", stop_reason=None)
    t.interrupt(for_tool_use=for_tool_use)
    assert _detect(t) == []
    uuids += t.loop([SAME])
    (detection,) = _detect(t)
    assert [a.uuid for a in detection.answers] == uuids


@pytest.mark.parametrize("flagged", [True, False], ids=["isApiErrorMessage", "text-only"])
def test_an_api_error_neither_counts_nor_ends_the_run(flagged):
    t = Transcript()
    _goal(t)
    uuids = t.loop([SAME] * 2)
    t.reprompt()
    t.api_error(flagged=flagged)
    assert _detect(t) == []
    uuids += t.loop([SAME])
    assert _summary(_detect(t)) == [(RULE_SAME, tuple(uuids))]


def test_a_loop_of_the_models_own_api_error_answers_fires():
    """A model that answers each re-prompt by quoting the same failing call ("API Error:
    500 ...") is looping: its replies are answers, not Claude Code's synthetic error."""
    t = Transcript()
    _goal(t)
    quoted = "API Error: 500 from the staging endpoint again. I cannot continue."
    uuids = t.loop([quoted] * 3)
    assert _summary(_detect(t)) == [(RULE_SAME, tuple(uuids))]


def test_a_person_asking_about_stop_hooks_again_and_again_is_no_loop():
    t = Transcript()
    for question in ("Stop hook timeout: what is the default?",
                     "Stop hook timeout: can I raise it?",
                     "Stop hook timeout: where is it set?", "Stop hook: any other limits?"):
        t.prompt(question)
        t.reply("Stop hooks time out after 60 seconds by default; set timeout to change it.")
    assert _detect(t) == []


def test_five_idle_answers_around_interruptions_and_errors_still_count_to_six():
    t = Transcript()
    _goal(t)
    uuids = []
    for text in DISTINCT[:6]:
        uuids += t.loop([text])
        t.reprompt()
        t.api_error()
        t.reprompt()
        t.reply("partial", stop_reason=None)
        t.interrupt()
    assert _summary(_detect(t)) == [(RULE_IDLE, tuple(uuids))]


def test_bookkeeping_and_garbage_lines_change_nothing():
    clean, noisy = Transcript(), Transcript()
    for t in (clean, noisy):
        _goal(t)
    for text in [SAME] * 4 + DISTINCT[:6]:
        for t in (clean, noisy):
            t.reprompt()
        noisy.noise()
        for raw in (b"", b"{truncated", b"[1,2]", b"42", line(type="user"), b"\xff\xfe"):
            noisy.raw(raw)
        for t in (clean, noisy):
            t.reply(text)
        noisy.attachment("hook_blocking_error", blockingError="x")
    def texts(t: Transcript) -> list[tuple[str, list[str], int]]:
        return [(d.rule, [a.text for a in d.answers], d.run_length) for d in _detect(t)]

    assert texts(clean) == texts(noisy) == [
        (RULE_SAME, [SAME] * 3, 3), (RULE_IDLE, [SAME] + DISTINCT[:5], 6)]
    reader = TranscriptReader(detector=RunDetector(SESSION))
    found(reader.feed(noisy.data()))
    assert reader.stats.broken == 5 * 10
    assert reader.stats.skipped["blank"] == 10


def test_sidechain_lines_inside_the_main_transcript_are_skipped():
    clean, mixed = Transcript(), Transcript()
    side = Transcript(sidechain=True, uuid_prefix="55555555")
    for t in (clean, mixed):
        _goal(t)
    for text in [SAME] * 7:
        for t in (clean, mixed):
            t.reprompt()
        # A subagent loops on its own inside the main file (old inline layout).
        side.prompt("Survey the auth tests")
        side.reply(DISTINCT[0], tools=[BASH])
        side.reprompt()
        side.reply(DISTINCT[1])
        side.interrupt()
        mixed.lines.extend(side.lines)
        side.lines.clear()
        for t in (clean, mixed):
            t.reply(text)
    assert _summary(_detect(clean)) == _summary(_detect(mixed))
    assert len(_detect(mixed)) == 2


def test_a_subagent_transcript_never_fires():
    t = Transcript(sidechain=True)
    _goal(t)
    t.loop([SAME] * 9)
    reader = TranscriptReader(detector=RunDetector(SESSION))
    assert found(reader.feed(t.data())) == []
    assert reader.detector.finish() == []
    assert reader.stats.events == 0
    assert reader.stats.skipped["sidechain"] > 0
    assert reader.detector.answers_seen == 0


def test_goal_status_is_tracked_without_touching_the_run():
    t = Transcript()
    _goal(t)
    t.loop([SAME] * 2)
    t.goal_status(met=True, sentinel=True)  # /goal clear
    detector = RunDetector(SESSION)
    _feed_all(detector, t)
    assert detector.goal is not None and detector.goal.cleared
    assert detector.run_length == 2


# -- stop_reason null everywhere ----------------------------------------------------------


def _mixed_scenario(t: Transcript) -> None:
    _goal(t)
    t.loop([SAME] * 4)
    t.reprompt()
    t.tool_round("Running the tests.", "3 passed", SAME)
    t.loop(DISTINCT[:7])
    t.prompt("what now?")
    t.reply(SAME)
    t.loop([SAME] * 2)
    t.reprompt()
    t.reply("partial", thinking="x", stop_reason=None)
    t.interrupt()
    t.loop([SAME])
    t.compact()
    t.loop([SAME] * 3)
    t.loop([DISTINCT[0], SAME, SAME])
    t.reprompt()
    t.reply(SAME)  # with null stop_reasons, completed only by the next prompt
    t.prompt("thanks, that will do")
    t.reply("ok")
    t.system("turn_duration", durationMs=5)


def test_null_stop_reasons_give_the_same_detections():
    with_reasons, without = Transcript(), Transcript(stop_reasons=False)
    _mixed_scenario(with_reasons)
    _mixed_scenario(without)
    assert b'"stop_reason":"end_turn"' not in without.data()
    expected = _summary(_detect(with_reasons))
    assert [rule for rule, _ in expected] == [RULE_SAME, RULE_IDLE] + [RULE_SAME] * 3
    assert _summary(_detect(without)) == expected


def test_an_answer_completed_by_a_persons_prompt_still_counts_in_its_run():
    # With null stop_reasons and no system line in between, the third answer completes
    # only when the person's prompt arrives: it is checked in the run it belongs to, and
    # the prompt then ends that run.
    t = Transcript(stop_reasons=False)
    t.prompt()
    t.reply(SAME)
    for _ in range(3):
        t.user("Stop hook feedback:\nkeep going", isMeta=True)
        t.reply(SAME)
    uuids = [u for u in (orjson_entry["uuid"] for orjson_entry in _entries(t)
                         if orjson_entry["type"] == "assistant")][1:]
    t.prompt("stop, please")
    detector = RunDetector(SESSION)
    detections = _feed_all(detector, t)
    assert _summary(detections) == [(RULE_SAME, tuple(uuids))]
    assert detector.run_length == 0 and not detector.would_fire_with_one_more()


def test_finish_counts_the_last_answer_of_a_file():
    t = Transcript(stop_reasons=False)
    _goal(t)
    uuids = t.loop([SAME] * 3)
    assert _detect(t) == []  # the last answer is not known to be complete
    assert _summary(_detect(t, finish=True)) == [(RULE_SAME, tuple(uuids))]


# -- catch-up, already_fired, would_fire_with_one_more ------------------------------------


def test_catch_up_mode_checks_nothing_and_fires_on_the_next_answer_after_go_live():
    t = Transcript()
    _goal(t)
    t.loop([SAME] * 8)
    detector = RunDetector(SESSION, live=False)
    assert _feed_all(detector, t) == []
    assert (detector.run_length, detector.chain_length) == (8, 8)
    assert detector.would_fire_with_one_more()
    detector.go_live()
    assert detector.live
    t.lines.clear()
    uuids = t.loop([SAME])
    (detection,) = _feed_all(detector, t)
    assert detection.rule == RULE_SAME
    assert detection.answer_uuid == uuids[0]
    assert detection.count == SAME_REPLY_TURNS and detection.run_length == 9
    assert detector.run_length == 0


def test_catch_up_past_idle_fires_idle_on_the_next_answer():
    t = Transcript()
    _goal(t)
    t.loop(DISTINCT[:7])
    detector = RunDetector(SESSION, live=False)
    assert _feed_all(detector, t) == []
    detector.go_live()
    t.lines.clear()
    uuids = t.loop(DISTINCT[7:8])
    (detection,) = _feed_all(detector, t)
    assert (detection.rule, detection.count, detection.run_length) == (RULE_IDLE, 6, 8)
    assert detection.answer_uuid == uuids[0]
    assert [a.text for a in detection.answers] == DISTINCT[2:8]


def test_catch_up_run_ended_by_a_tool_answer_does_not_fire():
    t = Transcript()
    _goal(t)
    t.loop([SAME] * 8)
    detector = RunDetector(SESSION, live=False)
    _feed_all(detector, t)
    detector.go_live()
    t.lines.clear()
    t.reprompt()
    t.tool_round("Running the tests.", "1 failed", SAME)
    assert _feed_all(detector, t) == []
    assert detector.run_length == 0


def test_catch_up_below_a_threshold_fires_at_the_usual_answer():
    t = Transcript()
    _goal(t)
    t.loop([SAME])
    detector = RunDetector(SESSION, live=False)
    _feed_all(detector, t)
    detector.go_live()
    t.lines.clear()
    uuids = t.loop([SAME] * 2)
    (detection,) = _feed_all(detector, t)
    assert detection.answer_uuid == uuids[-1] and detection.run_length == 3


def test_already_fired_answers_restart_the_count_after_them():
    t = Transcript()
    _goal(t)
    uuids = t.loop([SAME] * 6)
    detector = RunDetector(SESSION, already_fired={uuids[1]})
    detections = _feed_all(detector, t)
    # Counting restarts after the 2nd answer: 3rd..5th fire, the 6th starts a new run.
    assert _summary(detections) == [(RULE_SAME, tuple(uuids[2:5]))]
    assert detector.run_length == 1


def test_replaying_a_transcript_with_its_fired_answers_fires_nothing_twice():
    t = Transcript()
    _goal(t)
    t.loop([SAME] * 8)
    first = _detect(t)
    assert len(first) == 2
    detector = RunDetector(SESSION, already_fired=[d.answer_uuid for d in first])
    assert _feed_all(detector, t) == []
    assert detector.run_length == 2 and detector.would_fire_with_one_more()
    # In catch-up mode too.
    detector = RunDetector(SESSION, live=False, already_fired=[d.answer_uuid for d in first])
    _feed_all(detector, t)
    detector.go_live()
    t.lines.clear()
    uuids = t.loop([SAME])
    assert [d.answer_uuid for d in _feed_all(detector, t)] == uuids


def test_would_fire_with_one_more():
    detector = RunDetector(SESSION)
    assert not detector.would_fire_with_one_more()
    t = Transcript()
    _goal(t)
    t.loop([SAME])
    _feed_all(detector, t)
    assert not detector.would_fire_with_one_more()
    t.lines.clear()
    t.loop([SAME])
    _feed_all(detector, t)
    assert detector.would_fire_with_one_more()  # a 3rd similar answer would fire
    t.lines.clear()
    t.prompt()
    _feed_all(detector, t)
    assert not detector.would_fire_with_one_more()  # the person took over
    t.lines.clear()
    t.reply("Sure.")
    t.loop(DISTINCT[:4])
    _feed_all(detector, t)
    assert not detector.would_fire_with_one_more()  # 4 different answers: 2 short of 6
    t.lines.clear()
    t.loop(DISTINCT[4:5])
    _feed_all(detector, t)
    assert detector.would_fire_with_one_more()  # a 6th answer would fire IDLE
    assert detector.awaiting is None and not detector.answer_started


def test_awaiting_says_which_prompt_is_pending():
    detector = RunDetector(SESSION)
    t = Transcript()
    t.reprompt()
    _feed_all(detector, t)
    assert detector.awaiting == "reprompt" and not detector.answer_started
    t.lines.clear()
    t.reply("partial", stop_reason=None)
    _feed_all(detector, t)
    assert detector.answer_started
    assert detector.last_answer is None


def test_memory_is_bounded_by_the_run_not_the_transcript():
    detector = RunDetector(SESSION, live=False)
    t = Transcript()
    _goal(t)
    _feed_all(detector, t)
    for i in range(1000):
        t.lines.clear()
        t.loop([f"distinct answer number {i} word{i}x"])
        _feed_all(detector, t)
        assert len(detector.run) <= IDLE_TURNS
    assert detector.run_length == 1000 and detector.answers_seen == 1001
    assert detector.last_answer.text == "distinct answer number 999 word999x"


# -- incremental and whole-file reading ---------------------------------------------------


def test_one_event_at_a_time_equals_the_whole_file():
    t = Transcript()
    _mixed_scenario(t)
    assert _summary(_feed_all(RunDetector(SESSION), t)) == _summary(_detect(t))


def test_detect_transcript_takes_chunks_and_a_last_line_without_newline():
    t = Transcript()
    _goal(t)
    uuids = t.loop([SAME] * 3)
    data = t.data().rstrip(b"\n")
    assert _summary(detect_transcript(data, SESSION)) == [(RULE_SAME, tuple(uuids))]
    chunks = [data[i:i + 7] for i in range(0, len(data), 7)]
    (detection,) = detect_transcript(iter(chunks), SESSION)
    assert detection.session_id == SESSION and detection.answer_uuid == uuids[-1]


def test_session_reader_holds_back_a_partial_line():
    t = Transcript()
    _goal(t)
    uuids = t.loop([SAME] * 3)
    data = t.data()
    reader = TranscriptReader(detector=RunDetector(SESSION))
    assert found(reader.feed(data[:-10])) == []
    assert reader.pending_bytes == len(t.lines[-1]) - 9
    (detection,) = found(reader.feed(data[-10:]))
    assert detection.answer_uuid == uuids[-1]
    assert reader.pending_bytes == 0
    assert reader.stats.lines == len(t.lines)
    reader.feed(b'{"type":"user","message":')
    reader.events.reset()
    assert reader.pending_bytes == 0 and reader.stats.lines == len(t.lines)


# -- property: generated transcripts against a reference model ----------------------------

VOCAB = [
    SAME,
    SAME.replace(".", "!"),
    "Still working on getting the auth tests to pass now.",
    DISTINCT[0],
    DISTINCT[1],
    "",
    "ok",
    "日本語テキスト кошка ＡＢＣ",
]
REPROMPT_FORMS = [
    {},
    {"blocks": True},
    {"condition": None},
    {"text": "[Stop hook] blocked: keep working"},
    {"text": "  hook re-prompted: keep working"},
]
GARBAGE = [b"", b"   ", b'{"type":"user","message":{"content":"Stop hook fe', b"[1]", b"42",
           line(type="user"), b'{"type":"progress","data":"\xff"}', b"\xff\xfe"]

step = st.one_of(
    st.tuples(st.just("reprompt"), st.integers(0, len(VOCAB) - 1),
              st.integers(0, len(REPROMPT_FORMS) - 1), st.booleans()),
    st.tuples(st.just("reprompt"), st.just(0), st.just(0), st.just(False)),
    st.tuples(st.just("reprompt_tool"), st.integers(0, len(VOCAB) - 1), st.integers(0, 2)),
    st.tuples(st.just("prompt"), st.integers(0, len(VOCAB) - 1)),
    st.tuples(st.just("kickoff")),
    st.tuples(st.just("interrupt"), st.booleans()),
    st.tuples(st.just("api_error"), st.booleans()),
    st.tuples(st.just("noise")),
    st.tuples(st.just("garbage"), st.integers(0, len(GARBAGE) - 1)),
    st.tuples(st.just("sidechain"), st.integers(0, len(VOCAB) - 1)),
    st.tuples(st.just("compact")),
    st.tuples(st.just("goal_clear")),
)


def _build(  # noqa: C901 - the reference model reads best as one table of step kinds
        steps, stop_reasons: bool) -> tuple[Transcript, list[tuple[str, tuple[str, ...]]]]:
    """Write the steps as a transcript and compute, independently, what must fire."""
    t = Transcript(stop_reasons=stop_reasons)
    side = Transcript(sidechain=True, uuid_prefix="55555555")
    run: list[tuple[str, str]] = []
    expected = []
    seen: set[str] = set()  # tool outputs seen in the person's turn

    def add_to_run(uuid: str, text: str) -> None:
        nonlocal run
        run.append((uuid, text))
        chain = 1
        while chain < len(run) and is_similar(run[-chain - 1][1], run[-chain][1]):
            chain += 1
        if chain >= 3:
            expected.append((RULE_SAME, tuple(u for u, _ in run[-3:])))
            run = []
        elif len(run) >= 6:
            expected.append((RULE_IDLE, tuple(u for u, _ in run[-6:])))
            run = []

    def is_similar(a: str, b: str) -> bool:
        wa, wb = words(a), words(b)
        if not wa and not wb:
            return a == b
        return Fraction(len(wa & wb), len(wa | wb)) >= Fraction(3, 5)

    # An answer with no text is held until it is complete: at the next re-prompt, or the
    # turn's end; a person's prompt (or a kickoff, a compaction) drops it (engine.answers).
    held: tuple[str, str] | None = None

    def settle() -> None:
        nonlocal held
        if held is not None:
            add_to_run(*held)
        held = None

    for n, (kind, *args) in enumerate(steps):
        if kind in ("reprompt", "reprompt_tool", "interrupt", "api_error"):
            settle()  # (each begins with a re-prompt)
        elif kind in ("prompt", "kickoff", "compact"):
            held = None
        if kind == "reprompt":
            text, form, thinking = VOCAB[args[0]], REPROMPT_FORMS[args[1]], args[2]
            t.reprompt(**form)
            uuid = t.reply(text, thinking=f"pass {n} zebra{n} quokka{n}" if thinking else None)
            if text:
                add_to_run(uuid, text)
            else:
                held = (uuid, text)
        elif kind == "reprompt_tool":
            # Work only when its result is new in the person's turn (engine.run).
            output = f"{args[1]} failed"
            t.reprompt()
            # Its words: its last reply with any text (what last_assistant_message holds).
            text = VOCAB[args[0]] or "Running the tests."
            uuid = t.tool_round("Running the tests.", output, VOCAB[args[0]])
            if output in seen:
                add_to_run(uuid, text)
            else:
                run = []
            seen.add(output)
        elif kind == "prompt":
            seen.clear()
            t.prompt(f"please continue {n}")
            t.reply(VOCAB[args[0]])
            run = []
        elif kind == "kickoff":
            t.user(KICKOFF.format(condition="x"), isMeta=True)
            t.reply("Acknowledged.")
            run = []
        elif kind == "compact":
            t.compact()
            run = []
        elif kind == "interrupt":
            t.reprompt()
            if args[0]:
                t.reply("Let me run it.", tools=[BASH])
                t.tool_result(t.last_tool_use_id, "rejected", is_error=True)
            else:
                t.reply("There is one", stop_reason=None)
            t.interrupt(for_tool_use=args[0])
        elif kind == "api_error":
            t.reprompt()
            t.api_error(flagged=args[0])
        elif kind == "noise":
            t.noise()
        elif kind == "garbage":
            t.raw(GARBAGE[args[0]])
        elif kind == "sidechain":
            side.reprompt()
            side.reply(VOCAB[args[0]])
            t.lines.extend(side.lines)
            side.lines.clear()
        elif kind == "goal_clear":
            t.goal_status(met=True, sentinel=True)
    t.system("turn_duration", durationMs=1)  # completes a last answer with null stop_reason
    settle()
    return t, expected


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(step, max_size=40),
    stop_reasons=st.booleans(),
    cut_points=st.lists(st.integers(0, 2**32), max_size=12),
)
@example(  # the 3rd similar answer completes only when the person's prompt arrives
    steps=[("reprompt", 0, 0, False)] * 3 + [("prompt", 0)], stop_reasons=False, cut_points=[]
)
@example(  # three answers with no text: the 3rd completes at the turn's end
    steps=[("reprompt", 5, 0, False)] * 3, stop_reasons=False, cut_points=[]
)
@example(  # ... and a person's prompt right after it drops it (its turn is over)
    steps=[("reprompt", 5, 0, False)] * 3 + [("prompt", 0)], stop_reasons=False,
    cut_points=[]
)
@example(  # the 6th different answer completes only when the kickoff arrives
    steps=[("reprompt", i % 5, 0, False) for i in (3, 4, 5, 6, 7, 3)] + [("kickoff",)],
    stop_reasons=False, cut_points=[17, 400],
)
def test_generated_transcripts_match_the_reference_model_however_chunked(
    steps, stop_reasons, cut_points
):
    t, expected = _build(steps, stop_reasons)
    raw = t.data()
    assert _summary(detect_transcript(raw, SESSION)) == expected
    cuts = sorted(point % (len(raw) + 1) for point in cut_points)
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    assert _summary(detect_transcript(chunks, SESSION)) == expected
