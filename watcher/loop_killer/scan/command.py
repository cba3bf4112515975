"""``loop-killer scan``, the thin shell: finds the transcripts (``files``), reads those changed
since the last scan (``cache``) on every core (``pool``), sums (``summary``) and prints
(``report``). Exit status 0, or 2 for options that cannot be used."""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..helptext import PROJECTS_DEFAULT

if TYPE_CHECKING:
    from ..state.config import Settings
    from .files import Listing
    from .summary import Collector

__all__ = ["add_arguments_scan", "parse_since", "scan"]


def parse_since(text: str) -> float:
    """``--since``: a date (local midnight) or an ISO 8601 moment, in seconds since the epoch."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a date (2026-05-01) or a moment (2026-05-01T14:00)"
        ) from None
    return moment.timestamp()  # a naive moment is read as local time


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number, 0 or more")
    return value


def add_arguments_scan(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", type=parse_since, metavar="DATE",
                        help="only loops that went on at or after DATE (YYYY-MM-DD or ISO 8601)")
    parser.add_argument("--until", type=parse_since, metavar="DATE",
                        help="only loops that began at or before DATE (a date alone: its midnight)")
    parser.add_argument("--top", type=_count, metavar="N", help="the N biggest loops "
                        "(default: 20 in the table, all in --json; 0: all)")
    parser.add_argument("--order", choices=("cost", "time"), default="cost",
                        help="loops by cost, biggest first (default), or by time, oldest first")
    parser.add_argument("--project", metavar="TEXT",
                        help="only project folders whose name or path contains TEXT")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document (loops, totals, sessions, scan)")
    parser.add_argument("--prices", type=Path, metavar="FILE",
                        help="JSON or TOML file: model prefix -> USD per million tokens "
                             "(input, output, cache_read, cache_creation), or LiteLLM's "
                             "model_prices_and_context_window.json; over the defaults")
    parser.add_argument("--root", type=Path,
                        help=f"folder of project folders (default: {PROJECTS_DEFAULT})")
    parser.add_argument("--jobs", type=int, metavar="N", help="processes reading, this one "
                        "among them (default: one per core; 1: this one alone)")
    parser.add_argument("--no-cache", dest="cache", action="store_false",
                        help="read every file, not only those changed since the last scan "
                             "(and leave the cache as it is)")
    parser.epilog = ("Sessions in projects switched off ([projects] off in config.toml) are "
                     "left out, as the watcher and the hooks leave them alone; the last line "
                     "counts their files as skipped.")


def scan(args: argparse.Namespace) -> int:
    """Run ``loop-killer scan`` with parsed ``args``."""
    # (no collection while summing, a million objects without a cycle: a third of a cached scan)
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _scan(args)
    except KeyboardInterrupt:  # (the cache is written whole or not at all)
        print("loop-killer scan: interrupted", file=sys.stderr)
        return 130
    finally:
        if collecting:
            gc.enable()


def _bad_arguments(args: argparse.Namespace, root: Path) -> str:
    """Why the arguments cannot be what was meant ("" when they can)."""
    since, until = args.since, getattr(args, "until", None)
    if since is not None and until is not None and since > until:
        return "--since is after --until: no loop could be in between"
    if getattr(args, "root", None) and not root.is_dir():
        return f"--root {root}: no such folder"
    return ""


def _scan(args: argparse.Namespace) -> int:
    from ..printable import output_width, printable
    from ..state.config import load_settings
    from ..state.files import projects_dir, state_dir
    from .files import find_transcripts
    from .prices import PriceError, PriceTable, read_price_file
    from .report import TOP, human_report, json_bytes
    from .summary import Collector, ordered

    try:
        prices = read_price_file(args.prices) if args.prices else PriceTable()
    except PriceError as error:  # the file's path and keys, as given: shown cleaned
        print(f"loop-killer scan: {printable(str(error), 300)}", file=sys.stderr)
        return 2
    root = Path(args.root).expanduser() if getattr(args, "root", None) else projects_dir()
    problem = _bad_arguments(args, root)
    if problem:
        print(f"loop-killer scan: {printable(problem, 300)}", file=sys.stderr)
        return 2
    started = time.monotonic()
    settings = load_settings(state_dir())
    for problem in settings.problems:
        print(f"loop-killer scan: settings: {printable(problem, 300)}", file=sys.stderr)
    listing = find_transcripts(root, project=args.project, since=args.since)
    until = getattr(args, "until", None)
    context = report = found = None
    if getattr(args, "cache", True):
        from .cache import Report, scan_context

        context = scan_context(settings)
        if not args.prices:  # (a price file's prices are not in the key)
            report = Report(state_dir(), context, str(root), listing, (
                args.project, args.since, until, settings.budget,
                sorted(settings.projects_off)))
            found = report.load()
    if found is None:
        collector = Collector(prices, since=args.since, until=until, budget=settings.budget)
        from_cache = _read(args, listing, collector, context, settings, root)
        found = collector.summary(listing)
        if report is not None:
            report.save(found)
    else:
        from_cache = len(listing.transcripts)
    summary = replace(ordered(found, getattr(args, "order", "cost")), from_cache=from_cache,
                      limits=settings.budget)
    top = getattr(args, "top", None)
    if args.json:
        sys.stdout.buffer.write(json_bytes(summary, root=str(root), top=top))
        sys.stdout.flush()
        return 0
    width = output_width(sys.stdout) or 0  # (a pipe too: 80 columns, or $COLUMNS)
    sys.stdout.write(human_report(summary, width=width, home=os.environ.get("HOME"),
                                  root=str(root), seconds=time.monotonic() - started,
                                  top=TOP if top is None else top))
    return 0


def _read(args: argparse.Namespace, listing: Listing, collector: Collector,
          context: str | None, settings: Settings, root: Path) -> int:
    """Hand every file's result to ``collector``, the cache's if unchanged: how many were."""
    from ..state.files import state_dir
    from .cache import ScanCache
    from .files import switched_off

    cache, tails = None, None
    to_read = listing.transcripts
    if context is not None:
        from .tail import worth_a_tail

        cache = ScanCache.load(state_dir(), context)
        kept, to_read, tails = cache.split(listing.transcripts, worth_a_tail(
            (transcript.path, transcript.mtime_ns) for transcript in listing.transcripts))
        for result in kept:
            collector.add(switched_off(result, settings))
    if to_read:  # (else the readers are never loaded)
        from .pool import scan_transcripts
        from .report import Progress

        listed = {transcript.path: transcript for transcript in to_read}
        progress = None
        if sys.stderr.isatty():
            from shutil import get_terminal_size

            progress = Progress(sys.stderr, width=get_terminal_size().columns)
        gc.freeze()  # (on only while reading, for the engine's cycles, never walking what is here)
        gc.enable()  # (the workers start with it)
        try:
            for result in scan_transcripts(to_read, jobs=args.jobs, progress=progress,
                                           settings=settings, tails=tails):
                collector.add(switched_off(result, settings))
                if cache is not None:
                    cache.keep(listed[result.path], result)
        finally:
            gc.disable()
            gc.unfreeze()
            if progress is not None:
                progress.close()
    if cache is not None:
        cache.save(root=str(root), whole=not args.project and args.since is None)
    return len(listing.transcripts) - len(to_read)
