"""``printable``'s shortcut (plain ASCII, no run of spaces: returned as it is) gives what
the patterns give, for any text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from loop_killer import printable as module
from loop_killer.printable import printable

_ASCII_AND_SPACES = st.text(st.sampled_from("ab \t\n\x1b\x7f[]0;é\u2028"), max_size=12)


def _by_the_patterns(text: str) -> str:
    return module._SPACES.sub(" ", module._CONTROL.sub(" ", text)).strip()


@given(st.one_of(st.text(max_size=40), _ASCII_AND_SPACES))
def test_the_shortcut_gives_what_the_patterns_give(text: str) -> None:
    assert printable(text) == _by_the_patterns(text)


def test_the_cases_at_the_shortcuts_edges() -> None:
    for text, expected in [("plain text", "plain text"), ("two  spaces", "two spaces"),
                           (" lead", "lead"), ("trail ", "trail"), ("tab\there", "tab here"),
                           ("\x1b]0;PWNED\x07title", "]0;PWNED title"), ("", ""),
                           ("naïve", "naïve")]:
        assert printable(text) == expected == _by_the_patterns(text)


def test_wrap_measures_columns_as_a_terminal_shows_them() -> None:
    from loop_killer.printable import display_width, wrap

    line = "認証テスト " * 12  # each character two columns wide
    pieces = wrap(line, 40, indent=4)
    assert len(pieces) > 1 and all(display_width(piece) <= 40 for piece in pieces)
    assert "".join(pieces).replace(" ", "") == line.replace(" ", "")
    assert all(display_width(piece) <= 20 for piece in wrap("漢" * 30, 20, indent=2))
