"""The product's rules: what a re-prompt is, what a word is, when two answers are similar."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from loop_killer.engine import rules
from loop_killer.engine.rules import (
    IDLE_TURNS,
    SAME_REPLY_TURNS,
    SIMILAR,
    is_reprompt,
    similar,
    similarity,
    text_digest,
    words,
)


def test_thresholds_are_the_specified_ones():
    assert SAME_REPLY_TURNS == 3
    assert IDLE_TURNS == 6
    assert SIMILAR == 0.6
    assert rules.RULE_SAME == "SAME_REPLY_TURNS"
    assert rules.RULE_IDLE == "IDLE_TURNS"


# -- re-prompts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Stop hook feedback:\n[all tests in test/auth pass]: The condition is not met yet.",
        "Stop hook feedback:\nKeep working: the tests are not passing yet.",
        "stop hook feedback: lowercase",
        "STOP HOOK FEEDBACK: shouting",
        "  \n\t Stop hook feedback: after leading whitespace",
        "\u00a0\u2003Stop hook feedback: after unicode spaces",
        "Stop hook blocked the turn: older wording",
        "Stop hook",
        "[Stop hook] older wording in brackets",
        "[stop hook: lowercase in brackets",
        "   [Stop hook with leading whitespace",
        "Hook re-prompted: keep going",
        "hook re-prompted",
        "\n\nHOOK RE-PROMPTED the model",
    ],
)
def test_reprompt_prefixes_in_any_case_after_leading_whitespace(text):
    assert is_reprompt(text)


@pytest.mark.parametrize(
    "text",
    [
        # The /goal kickoff mentions a Stop hook but does not begin with one.
        'A session-scoped Stop hook is now active with condition: "all tests pass".',
        "",
        "   ",
        "Stop",
        "Stop hoo",
        "Stophook feedback:",
        "Please stop hook feedback",
        "[[Stop hook] two brackets",
        "([Stop hook]",
        "[Hook re-prompted] only 'Stop hook' may follow a bracket",
        "Hook re-prompt",
        "Hook reprompted",
        "[Request interrupted by user]",
        "<command-name>/goal</command-name>",
        "Fix the failing tests in test/auth.",
    ],
)
def test_other_texts_are_not_reprompts(text):
    assert not is_reprompt(text)


def test_reprompt_check_reads_only_the_start_of_a_huge_text():
    # A multi-megabyte prompt is classified without trouble (and quickly).
    assert is_reprompt("Stop hook feedback:" + "x" * 5_000_000)
    assert not is_reprompt("x" * 5_000_000 + "Stop hook feedback:")
    assert is_reprompt(" " * 1_000_000 + "Stop hook feedback:")


# -- words --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", {"hello", "world"}),
        ("HELLO hello HeLLo", {"hello"}),
        ("ab cd ef", set()),  # two letters are not a word
        ("_ __ ___ ____", set()),  # underscores are neither letters nor digits
        ("ab_cd", set()),  # ... nor do they join runs
        ("foo_bar", {"foo", "bar"}),
        ("a1b 12 123 4567", {"a1b", "123", "4567"}),
        ("!!! ... ??? --- ***", set()),
        ("can't won't", {"can", "won"}),
        ("test/auth/login.test.js", {"test", "auth", "login"}),
        ("\uff21\uff22\uff23", {"\uff41\uff42\uff43"}),  # fullwidth ＡＢＣ -> ａｂｃ
        ("\uff21\uff22", set()),  # fullwidth, but only two letters
        # Han and kana, written without spaces: each pair of neighbouring characters
        ("日本語テキスト", {"日本", "本語", "語テ", "テキ", "キス", "スト"}),
        ("日本", {"日本"}),
        ("кошка КОШКА", {"кошка"}),
        ("кот", {"кот"}),
        ("да", set()),
        ("العربية", {"العربية"}),
        ("\u0661\u0662\u0663", {"\u0661\u0662\u0663"}),  # Arabic-Indic digits 123
        ("Ünïcödé straße", {"ünïcödé", "straße"}),
        ("mixedкириллица", {"mixedкириллица"}),
        ("", set()),
    ],
)
def test_words_are_lowercase_runs_of_three_letters_or_digits_in_any_script(text, expected):
    assert words(text) == frozenset(expected)


def test_words_of_a_long_text_is_a_set():
    text = "still working on the tests " * 100_000
    assert words(text) == {"still", "working", "the", "tests"}


# -- similarity ---------------------------------------------------------------------------


def _texts(shared: int, only_a: int, only_b: int) -> tuple[str, str]:
    common = [f"common{i}" for i in range(shared)]
    a = common + [f"alpha{i}" for i in range(only_a)]
    b = common + [f"beta{i}" for i in range(only_b)]
    return " ".join(a), " ".join(b)


def _similar(a: str, b: str) -> bool:
    return similar(a, words(a), b, words(b))


def test_identical_and_disjoint_texts():
    text = "I am still working on getting the auth tests to pass."
    assert similarity(words(text), words(text)) == 1.0
    assert _similar(text, text)
    other = "Reading login.test.js reveals a missing helper import."
    assert similarity(words(text), words(other)) == 0.0
    assert not _similar(text, other)


def test_exactly_three_shared_of_five_distinct_words_is_similar():
    a, b = _texts(shared=3, only_a=1, only_b=1)
    assert len(words(a) | words(b)) == 5
    assert similarity(words(a), words(b)) == pytest.approx(0.6)
    assert _similar(a, b)


def test_just_under_the_threshold_is_not_similar():
    a, b = _texts(shared=2, only_a=1, only_b=1)  # 2/4 = 0.5
    assert not _similar(a, b)
    a, b = _texts(shared=5, only_a=2, only_b=2)  # 5/9 = 0.556
    assert not _similar(a, b)
    a, b = _texts(shared=5, only_a=2, only_b=1)  # 5/8 = 0.625
    assert _similar(a, b)


@pytest.mark.parametrize("k", [1, 2, 3, 7, 10, 33, 100])
def test_exactly_sixty_percent_counts_whatever_the_float_rounding(k):
    # 3k shared of 5k distinct words is exactly 0.6; one fewer shared word is below it.
    a, b = _texts(shared=3 * k, only_a=k, only_b=k)
    assert _similar(a, b)
    a, b = _texts(shared=3 * k - 1, only_a=k, only_b=k + 1)
    assert not _similar(a, b)


def test_similarity_ignores_case_punctuation_and_short_tokens():
    a = "I am STILL working on the auth tests!"
    b = "i am still working, on the auth tests..."
    assert _similar(a, b)
    assert similarity(words(a), words(b)) == 1.0


def test_two_answers_without_words_are_similar_only_when_identical():
    assert _similar("", "")
    assert _similar("ok", "ok")
    assert _similar("!!", "!!")
    assert not _similar("ok", "no")
    assert not _similar("!!", "??")
    assert not _similar("", " ")  # identical means identical, whitespace included


def test_an_empty_answer_and_a_wordy_one_are_not_similar():
    assert not _similar("", "still working on the tests")
    assert not _similar("still working on the tests", "")
    assert not _similar("ok", "still working")


@given(
    a=st.lists(st.sampled_from([f"w{i:02d}" for i in range(12)]), max_size=12),
    b=st.lists(st.sampled_from([f"w{i:02d}" for i in range(12)]), max_size=12),
)
def test_similar_is_exact_word_set_jaccard_at_sixty_percent(a, b):
    text_a, text_b = " ".join(a), " ".join(b)
    set_a, set_b = set(a), set(b)
    if not set_a and not set_b:
        expected = text_a == text_b
    else:
        expected = Fraction(len(set_a & set_b), len(set_a | set_b)) >= Fraction(3, 5)
    assert _similar(text_a, text_b) is expected
    assert _similar(text_b, text_a) is expected


# -- digest -------------------------------------------------------------------------------


def test_text_digest_ignores_whitespace_layout_only():
    digest = text_digest("Still working on\nthe auth tests.")
    assert len(digest) == 16 and int(digest, 16) >= 0
    assert text_digest("  Still working  on the\tauth tests.\n") == digest
    assert text_digest("Still working on the auth tests!") != digest
    assert text_digest("still working on the auth tests.") != digest


def test_text_digest_never_fails_on_odd_text():
    assert text_digest("") == text_digest("   \n")
    assert len(text_digest("\ud83d lone surrogate")) == 16
    assert len(text_digest("日本語 " * 100_000)) == 16


def test_rule_phrase_words_each_rule_for_the_hook_and_the_watcher_alike():
    from loop_killer.engine.rules import rule_phrase

    assert rule_phrase("SAME_REPLY_TURNS", 3) == "3 similar replies to re-prompts"
    assert rule_phrase("IDLE_TURNS", 6) == "6 replies to re-prompts without new work"
    assert "loop-killer clear" in rule_phrase("MANUAL", 0)


def test_combining_vowel_signs_stay_inside_their_words():
    from loop_killer.engine.rules import words

    # Devanagari and Thai write vowels as combining marks: they must not cut words, nor
    # (Thai being written without spaces, counted by pairs of letters) letters.
    assert words("मैंने परीक्षण फिर चलाए") == {"मैंने", "परीक्षण", "फिर", "चलाए"}
    assert words("ยังล้ม") == {"ยัง", "งล้", "ล้ม"}  # ยั, ง, ล้, ม: three pairs
    assert words("é́tude ab") == {"é́tude"}


def _mark_ranges_from_unicodedata() -> list[tuple[int, int]]:
    import unicodedata

    ranges: list[tuple[int, int]] = []
    start = None
    for code in range(0x110000):
        is_mark = unicodedata.category(chr(code)) in ("Mn", "Mc")
        if is_mark and start is None:
            start = code
        elif not is_mark and start is not None:
            ranges.append((start, code - 1))
            start = None
    return ranges


def test_the_precomputed_mark_table_matches_unicodedata():
    import unicodedata

    from loop_killer.engine.marks import MARK_RANGES, UNICODE_VERSION

    fresh = _mark_ranges_from_unicodedata()
    if unicodedata.unidata_version == UNICODE_VERSION:
        assert list(MARK_RANGES) == fresh, f"regenerate engine/marks.py: {fresh!r}"
    else:  # another Python's Unicode: marks are only ever added, never taken away
        table = {c for low, high in MARK_RANGES for c in range(low, high + 1)}
        now = {c for low, high in fresh for c in range(low, high + 1)}
        assert len(table - now) <= len(table) // 100


def test_words_keep_marks_of_scripts_beyond_the_bmp():
    # U+11000.. Brahmi: letters with vowel signs (Mc/Mn) above U+FFFF.
    brahmi = "\U00011013\U00011038\U00011013\U0001103a\U00011013"
    assert words(brahmi) == {brahmi}
