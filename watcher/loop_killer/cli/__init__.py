"""``loop-killer``: the command line, each subcommand imported only when used (stays quick)."""

from __future__ import annotations

import argparse
import importlib
import sys

from ..helptext import HelpFormatter

# subcommand -> (module, function, one-line help); options: ``add_arguments_<function>``.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "status": ("loop_killer.cli.commands", "status", "show the watcher and every live run"),
    "clear": ("loop_killer.cli.commands", "clear", "ask a session's Stop hook to end its loop"),
    "config": ("loop_killer.cli.commands", "config",
               "show the settings in force and where each came from"),
    "install": ("loop_killer.cli.setup", "install", "register the plugin with the claude CLI"),
    "doctor": ("loop_killer.cli.setup", "doctor", "check that everything is in place"),
    "hook": ("loop_killer.hooks.entry", "cli_main", "run the hook for the event on stdin"),
    "scan": ("loop_killer.scan.command", "scan", "every past loop in the history, and its cost"),
    "top": ("loop_killer.top.app", "top", "every session active lately, live, one row each"),
}
INTERNAL = frozenset({"hook"})  # run by the plugin, not by a person: not in ``--help``


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loop-killer", formatter_class=HelpFormatter,
        description="Stop the loops Claude Code sessions get stuck in. A re-prompt loop (a "
                    "Stop hook such as /goal re-prompts, the model answers without working): "
                    "the turn is stopped and the goal cleared. A tool-repeat loop (the same "
                    "tool call gives the same result again and again): the model is warned, "
                    "then the call is refused until you speak.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, function, help_text) in COMMANDS.items():
        if name in INTERNAL:  # (without a help text, argparse does not list it)
            sub = subparsers.add_parser(name, description=help_text, formatter_class=HelpFormatter)
        else:
            sub = subparsers.add_parser(name, help=help_text, description=help_text,
                                        formatter_class=HelpFormatter)
        sub.set_defaults(_target=(module_name, function))
        if sys.argv[1:2] == [name]:  # (only its own options: `scan --help` loads no other command)
            module = importlib.import_module(module_name)
            add_arguments = getattr(module, f"add_arguments_{function}", None)
            if add_arguments is not None:
                add_arguments(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:])
    if not getattr(args, "_target", None):
        parser.print_help()
        return 2
    module_name, function = args._target
    handler = getattr(importlib.import_module(module_name), function)
    return int(handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
