"""A stand-in for Claude Code's TUI prompt, to run in a tmux or screen pane in tests.

It draws what the real 2.1.328 TUI draws at the bottom of the screen (a rule, the input
line ``❯`` + no-break space + the text being typed, a rule, a status line), reads keys in
raw mode, and on Enter "runs" the line: for ``/goal clear`` it appends the ``goal_status``
met:true sentinel line to the transcript (as Claude Code does) and shows
``Goal cleared: <condition>``. Every submitted line is logged to ``--log``.

    python fake_prompt.py --transcript T --log L --condition C [--draft TEXT] [--no-proof]
                          [--screen-only] [--interject TEXT --interject-at before|after]
                          [--earlier-no-goal] [--clear-after SECONDS]

Left and right arrows move the cursor, backspace deletes before it. ``--interject`` plays a
person who types TEXT just before (or just after) a ``/goal clear`` arrives from tmux.
``--earlier-no-goal`` starts with an earlier ``/goal clear`` and its ``No goal set`` on
screen; ``--clear-after`` takes that long to answer ``/goal clear`` (as a busy TUI may).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import termios
import time
import tty
import uuid

RULE = "\u2500" * 70


def draw(history: list[str], buffer: str, placeholder: str) -> None:
    out = ["\x1b[2J\x1b[H"]
    out.extend(line + "\r\n" for line in history[-12:])
    out.append("\r\n")
    out.append(f"\x1b[38;5;244m{RULE}\x1b[39m\r\n")
    if buffer:
        out.append(f"\u276f\u00a0{buffer}\x1b[7m \x1b[0m\r\n")
    elif placeholder:
        out.append(f"\u276f\u00a0\x1b[2m{placeholder}\x1b[22m\r\n")
    else:
        out.append("\u276f\u00a0\x1b[7m \x1b[0m\r\n")
    out.append(f"\x1b[38;5;244m{RULE}\x1b[39m\r\n")
    out.append("  \u23f5\u23f5 auto mode on (shift+tab to cycle)")
    sys.stdout.write("".join(out))
    sys.stdout.flush()


def proof_line(session: str, condition: str) -> bytes:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    return json.dumps({
        "parentUuid": None, "isSidechain": False,
        "attachment": {"type": "goal_status", "met": True, "sentinel": True,
                       "condition": condition},
        "type": "attachment", "uuid": str(uuid.uuid4()), "timestamp": stamp,
        "sessionId": session,
    }, separators=(",", ":")).encode() + b"\n"


def main() -> int:  # noqa: C901 - a stand-in for the whole TUI prompt loop, kept in one place
    parser = argparse.ArgumentParser()
    parser.add_argument("--transcript", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--condition", required=True)  # the goal /goal clear clears
    parser.add_argument("--draft", default="")
    parser.add_argument("--placeholder", default="")
    parser.add_argument("--no-proof", action="store_true")
    parser.add_argument("--screen-only", action="store_true")
    parser.add_argument("--interject", default="")
    parser.add_argument("--interject-at", choices=("before", "after"), default="before")
    parser.add_argument("--earlier-no-goal", action="store_true")
    parser.add_argument("--clear-after", type=float, default=0.0)
    args = parser.parse_args()
    history = ["\u276f /goal clear", "  \u23bf  No goal set"] if args.earlier_no_goal else []
    history += ["\u25cf I am still working on getting the auth tests to pass.",
                "\u25ef Goal not yet met\u2026 continuing"]
    buffer = args.draft
    cursor = len(buffer)
    interject = args.interject
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        draw(history, buffer, args.placeholder)
        while True:
            data = os.read(fd, 1024).decode("utf-8", "replace")
            if not data:
                return 0
            if interject and "/goal clear" in data:
                if args.interject_at == "before":
                    data = data.replace("/goal clear", interject + "/goal clear", 1)
                else:
                    data = data.replace("/goal clear", "/goal clear" + interject, 1)
                interject = ""
            index = 0
            while index < len(data):
                char = data[index]
                index += 1
                if char == "\x1b" and data[index: index + 2] in ("[D", "[C"):
                    step = -1 if data[index + 1] == "D" else 1
                    cursor = min(len(buffer), max(0, cursor + step))
                    index += 2
                    continue
                if char in "\r\n":
                    with open(args.log, "a", encoding="utf-8") as log:
                        log.write(buffer + "\n")
                    if buffer.strip() == "/goal clear" and not args.no_proof:
                        history.append("\u276f /goal clear")
                        buffer = ""
                        draw(history, buffer, args.placeholder)
                        time.sleep(args.clear_after)  # (Claude Code answering)
                        history.pop()
                        if not args.screen_only:
                            with open(args.transcript, "ab") as handle:
                                handle.write(proof_line(os.path.basename(
                                    args.transcript).removesuffix(".jsonl"), args.condition))
                        history.append("\u276f /goal clear")
                        history.append(f"  \u23bf  Goal cleared: {args.condition}")
                    elif buffer:
                        history.append(f"\u276f {buffer}")
                    buffer = ""
                    cursor = 0
                elif char in ("\x7f", "\x08"):
                    if cursor > 0:
                        buffer = buffer[: cursor - 1] + buffer[cursor:]
                        cursor -= 1
                elif char == "\x03":
                    return 0
                elif char.isprintable():
                    buffer = buffer[:cursor] + char + buffer[cursor:]
                    cursor += 1
            draw(history, buffer, args.placeholder)
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


if __name__ == "__main__":
    sys.exit(main())
