"""``--help`` as a person reads it: ``loop-killer`` or ``--state-dir`` never broken at a hyphen."""

from __future__ import annotations

import argparse
import textwrap

__all__ = ["PROJECTS_DEFAULT", "STATE_DEFAULT", "HelpFormatter"]

PROJECTS_DEFAULT = "~/.claude/projects, or $CLAUDE_CONFIG_DIR/projects"

STATE_DEFAULT = ("~/.claude/loop-killer, or $CLAUDE_CONFIG_DIR/loop-killer; "
                 "$LOOP_KILLER_STATE_DIR overrides both")


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help, wrapped at spaces only (a word longer than a line is still cut)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent,
                             subsequent_indent=indent, break_on_hyphens=False)
