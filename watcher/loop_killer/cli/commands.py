"""``loop-killer status`` (exit 1 with no watcher alive), ``clear SESSION`` (a request for its
next Stop; exit 1 unless one session matches) and ``config`` (the settings and their sources)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson

from ..engine.budget import live_words
from ..engine.rules import RULE_MANUAL, RULE_REFUSED_RETRIES, rule_phrase
from ..engine.tool_repeat import RULE_TOOL_REPEAT
from ..helptext import PROJECTS_DEFAULT, STATE_DEFAULT
from ..printable import output_width, printable, wrap
from ..state import journal, report
from ..state.files import is_plain_id, list_transcripts, projects_dir, session_id_of, state_dir
from ..state.inbox import ClearRequest, InvalidRequest, peek_request, write_request
from ..state.refused import hook_refusals, refused_now
from ..state.status import SessionStatus, falling_behind, read_session_status, watcher_alive
from ..watch.narrate import FINAL_OUTCOMES, VERDICTS

__all__ = ["add_arguments_clear", "add_arguments_config", "add_arguments_status", "clear",
           "config", "state_options", "status"]


def state_options(parser: argparse.ArgumentParser, *, root: bool = False) -> None:
    """``--state-dir``, and ``--root`` when asked for."""
    parser.add_argument("--state-dir", type=Path, default=None,
                        help=f"loop-killer's state folder (default: {STATE_DEFAULT})")
    if root:
        parser.add_argument("--root", type=Path, default=None,
                            help=f"folder of project folders (default: {PROJECTS_DEFAULT})")


def add_arguments_status(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON object, for scripts")
    state_options(parser)


def add_arguments_clear(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION",
                        help="the session id, or a prefix of it that names one session")
    parser.add_argument("--project", metavar="TEXT", default=None,
                        help="only project folders whose name or path contains TEXT (to "
                             "choose between sessions of one id in several projects)")
    parser.add_argument("--root", type=Path, default=None,
                        help=f"folder of project folders (default: {PROJECTS_DEFAULT})")
    state_options(parser)


def _dirs(args: argparse.Namespace) -> tuple[Path, Path]:
    root = getattr(args, "root", None) or projects_dir()
    state = getattr(args, "state_dir", None) or state_dir()
    return Path(root).expanduser(), Path(state).expanduser()


def _say(line: str, width: int | None, indent: int = 2) -> None:
    """Print ``line`` cleaned of control codes, wrapped to a terminal's ``width``."""
    lead = line[: len(line) - len(line.lstrip(" "))]  # an indent of its own is kept
    for piece in wrap(lead + printable(line), width, indent):
        print(piece)


def _print_json(data: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


def _ids_in(folder: Path) -> list[str]:
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [name[:-5] for name in names if name.endswith(".json") and is_plain_id(name[:-5])]


RECENT_SHOWN = 5  # loops (and tool-repeat warnings) ``status`` lists, newest first
_RECENT_BYTES = 512 * 1024  # of the detection log's tail: far more than 5 loops


def collect(state: Path, *, now: float | None = None) -> dict[str, Any]:
    """What ``status`` shows, as plain data."""
    now = time.time() if now is None else now
    beat = watcher_alive(state, now=now)
    logged = list(journal.read_recent(state, max_bytes=_RECENT_BYTES))
    refusals = hook_refusals(logged)
    session_ids = set(_ids_in(state / "status")) | set(_ids_in(state / "requests"))
    sessions: list[dict[str, Any]] = []
    for session_id in sorted(session_ids):
        found: SessionStatus | None = read_session_status(state, session_id)
        request = peek_request(state, session_id)
        if found is not None and not os.path.exists(found.transcript_path):
            found = None  # a transcript gone since
        budget = found.extra.get("budget") if found is not None else None
        if not isinstance(budget, dict) or not budget.get("goal"):
            budget = None  # the turn's figures against its budget only for a goal that is set
        if request is None and (found is None or not (found.run_length or found.tool_repeats
                                                      or budget)):
            continue
        refused = refused_now(state, session_id, refusals.get(session_id, []))
        stale = request.is_stale(now) if request is not None else None
        shown = None if request is None else {
            "rule": request.rule, "source": request.source, "count": request.count,
            "answer_uuid": request.answer_uuid, "created_at": request.created_at}
        sessions.append({
            "session_id": session_id,
            "project": found.project if found else (
                Path(request.transcript_path).parent.name if request else ""),
            "transcript_path": found.transcript_path if found else (
                request.transcript_path if request else ""),
            "run_length": found.run_length if found else 0,
            "chain_length": found.chain_length if found else 0,
            "awaiting": found.awaiting if found else None,
            "last_activity": found.last_activity if found else None,
            "last_answer_uuid": found.last_answer_uuid if found else "",
            "status_updated_at": found.updated_at if found else None,
            "tool_repeats": found.tool_repeats if found else [],
            "refused": None if refused is None else asdict(refused),
            "pending_request": None if stale else shown,
            "stale_request": {**shown, "stale": stale} if shown and stale else None,
            "budget": budget,
        })
    sessions.sort(key=lambda s: -(s["last_activity"] or 0))
    return {
        "watcher": None if beat is None else {
            "alive": True, "pid": beat.pid, "started_at": beat.started_at,
            "beat_at": beat.beat_at, "root": beat.root, "sessions": beat.sessions,
            "polling": beat.polling, "lag": beat.lag, "waiting": beat.waiting,
            "falling_behind": falling_behind(beat),
        },
        "state_dir": str(state),
        "sessions": sessions,
        "recent": recent_loops(logged, limit=RECENT_SHOWN),
    }


def recent_loops(logged: list[journal.Record], *, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` loops in the log, newest first, each with what became of it."""
    loops: list[dict[str, Any]] = []
    latest: dict[str, dict[str, Any]] = {}
    loop: dict[str, Any] | None
    for record in logged:
        session_id, rule, at = record.session_id, record.rule, record.at or None
        if isinstance(record, journal.ToolRecord) and not record.refused:
            phrase = (f"same result {record.count} times" if rule == RULE_TOOL_REPEAT
                      else rule_phrase(rule, record.count))
            # Only a tool-call hook warns the model: the watcher's record means none ran.
            loop = {"session_id": session_id, "project": record.project, "rule": rule,
                    "at": at, "what": f"{record.call}: {phrase}",
                    "outcome": "warned" if record.source == "hook" else "seen"}
            loops.append(loop)
            latest[session_id] = loop
        elif isinstance(record, journal.LoopRecord):
            loop = {"session_id": session_id, "project": record.project, "rule": rule,
                    "at": at, "what": rule_phrase(rule, record.count), "outcome": None}
            loops.append(loop)
            latest[session_id] = loop
        elif isinstance(record, journal.OutcomeRecord) and record.outcome:
            kind = record.outcome
            loop = latest.get(session_id)
            if loop is None or (rule == RULE_REFUSED_RETRIES and loop["rule"] != rule):
                loop = {"session_id": session_id, "project": record.project, "rule": rule, "at": at,
                        "what": "a refused call tried again", "outcome": None}
                loops.append(loop)
                latest[session_id] = loop
            if loop["outcome"] in ("warned", "seen") and kind in ("warned", "none"):
                continue  # the watcher's word that nothing refused after: no news here
            if loop["outcome"] not in FINAL_OUTCOMES or kind in FINAL_OUTCOMES:
                loop["outcome"] = kind
    return loops[::-1][:limit]


def _say_budgets(sessions: list[dict[str, Any]], now: float, home: str | None,
                 width: int | None) -> None:
    budgets = [s for s in sessions if s["budget"]]
    if budgets:
        _say("live goals against their budget (the turn's spend, re-prompts, time):", width)
        for s in budgets:
            _say(f"  {report.session_label(s['project'], s['session_id'], home)}: "
                 f"{live_words(s['budget'], now)}", width, indent=4)


def _streaks(streaks: list[dict[str, Any]], refused: dict[str, Any] | None = None) -> str:
    """``Bash: npm test x3 (+1), refused 2 times``: the top call, others repeating, refusals."""
    shown = [s for s in streaks if isinstance(s, dict) and isinstance(s.get("count"), int)]
    if not shown:
        return "-"
    top = max(shown, key=lambda s: int(s["count"]))
    more = f" (+{len(shown) - 1})" if len(shown) > 1 else ""
    text = f"{report.snippet(str(top.get('call', '?')), 40)} x{top['count']}{more}"
    if refused is not None:
        attempts = int(refused["attempts"])
        text += f", refused{f' {attempts} times' if attempts > 1 else ''}"
    return text


def _run(length: int, chain: int) -> tuple[str, str]:
    """RUN and SIMILAR: ``-`` when the session is in no re-prompt run (a tool loop)."""
    return ("-", "-") if not length else (str(length), str(chain))


def status(args: argparse.Namespace) -> int:
    _, state = _dirs(args)
    if state.exists() and not os.access(state, os.R_OK | os.X_OK):
        # Said once, rather than "not running" and "no session" read from nothing.
        print(f"loop-killer status: cannot read the state folder {printable(str(state))} "
              "(permission denied): run it as the user who runs Claude Code",
              file=sys.stderr)
        return 2
    now = time.time()
    data = collect(state, now=now)
    if getattr(args, "json", False):
        _print_json(data)
        return 0 if data["watcher"] else 1
    home = os.environ.get("HOME")
    width = output_width(sys.stdout)
    beat = data["watcher"]
    if beat:
        how = "polling" if beat["polling"] else "watching"
        _say(f"watcher: running (pid {beat['pid']}, {how} {beat['root']}, "
             f"{beat['sessions']} sessions, started {report.ago(now - beat['started_at'])})",
             width)
        if beat["falling_behind"]:
            _say(f"  {beat['falling_behind']}", width, indent=4)
    else:
        _say("watcher: not running (start it with: loop-killer-watch)", width)
    if not data["sessions"]:
        _say("no session is in a re-prompt run or repeating a tool call", width)
    else:
        if not beat:
            _say("(figures below are from when a watcher last ran)", width)
        rows = []
        for s in data["sessions"]:
            request = s["pending_request"] or s["stale_request"]
            rows.append([
                report.project_label(s["project"], home),
                report.short_id(s["session_id"]),
                *_run(s["run_length"], s["chain_length"]),
                report.ago(now - s["last_activity"]) if s["last_activity"] else "?",
                f"{'pending' if s['pending_request'] else 'stale'} ({request['rule']}, "
                f"{report.ago(now - request['created_at'])})" if request else "-",
                _streaks(s["tool_repeats"], s["refused"]),
            ])
        for line in report.table(
                ["PROJECT", "SESSION", "RUN", "SIMILAR", "LAST ACTIVITY", "CLEAR REQUEST",
                 "TOOL REPEATS"], rows, width):
            print(line)
    _say_budgets(data["sessions"], now, home, width)
    if data["recent"]:
        _say("recent loops (newest first):", width)
        for loop in data["recent"]:
            _say(f"  {_recent_line(loop, now, home)}", width, indent=4)
    return 0 if beat else 1


def _recent_line(loop: dict[str, Any], now: float, home: str | None) -> str:
    """One loop: ``2 min ago  billing a26ba613  SAME_REPLY_TURNS (…): loop stopped``."""
    when = report.ago(now - loop["at"]) if loop["at"] is not None else "?"
    outcome = loop["outcome"]
    said = ("the model was warned" if outcome == "warned" else
            "seen by the watcher alone: no hook warned the model" if outcome == "seen" else
            VERDICTS.get(outcome, outcome) if outcome else "outcome not known yet")
    return (f"{when}  {report.session_label(str(loop['project']), loop['session_id'], home)}"
            f"  {loop['rule'] or '?'} ({loop['what']}): {said}")


def find_sessions(root: Path, state: Path, prefix: str, *, project: str | None = None
                  ) -> dict[str, list[str]]:
    """Session ids (exactly ``prefix``, else starting with it) -> their transcripts (one
    per project), in project folders whose name or path contains ``project`` (any case)."""
    wanted = project.casefold() if project else None

    def chosen(path: str) -> bool:
        folder = os.path.dirname(path)
        return wanted is None or wanted in os.path.basename(folder).casefold() \
            or wanted in folder.casefold()

    known: dict[str, list[str]] = {}
    for path, _entry in list_transcripts(str(root)):
        session_id = session_id_of(path)
        if session_id is not None and session_id.startswith(prefix) and chosen(path):
            known.setdefault(session_id, []).append(path)
    for session_id in _ids_in(state / "status"):
        if session_id.startswith(prefix) and session_id not in known:
            found = read_session_status(state, session_id)
            if (found is not None and os.path.exists(found.transcript_path)
                    and chosen(found.transcript_path)):
                known[session_id] = [found.transcript_path]
    for paths in known.values():
        paths.sort()
    if prefix in known:
        return {prefix: known[prefix]}
    return known


def clear(args: argparse.Namespace) -> int:
    root, state = _dirs(args)
    wanted = args.session.strip()
    project = getattr(args, "project", None)
    if not is_plain_id(wanted):
        print(f"loop-killer clear: {wanted!r} is not a session id", file=sys.stderr)
        return 2
    matches = find_sessions(root, state, wanted, project=project)
    if not matches:
        within = f" in a project matching {project!r}" if project else ""
        print(f"loop-killer clear: no session {wanted!r} under {root}{within}", file=sys.stderr)
        return 1
    if len(matches) > 1:
        print(f"loop-killer clear: {wanted!r} names {len(matches)} sessions; give more of "
              "the id:", file=sys.stderr)
        for session_id, paths in sorted(matches.items()):
            for path in paths:
                print(f"  {session_id}  {Path(path).parent.name}", file=sys.stderr)
        return 1
    (session_id, transcripts), = matches.items()
    if len(transcripts) > 1:
        print(f"loop-killer clear: session {session_id} is in {len(transcripts)} projects; "
              "choose one with --project TEXT:", file=sys.stderr)
        for path in transcripts:
            print(f"  {Path(path).parent.name}  ({path})", file=sys.stderr)
        return 1
    transcript = transcripts[0]
    found = read_session_status(state, session_id)
    if found is not None and found.transcript_path != transcript:
        found = None  # the status of the other project's session of that id
    run_length = found.run_length if found else 0
    request = ClearRequest(
        session_id=session_id, rule=RULE_MANUAL, count=run_length, run_length=run_length,
        answer_uuid="", answer_digest="", transcript_path=transcript, created_at=time.time(),
        source="manual")
    replaced = peek_request(state, session_id)
    try:
        write_request(state, request)
    except (OSError, InvalidRequest) as error:
        print(f"loop-killer clear: cannot write the request: {error}", file=sys.stderr)
        return 1
    project_name = Path(transcript).parent.name
    journal.append(state, journal.LoopRecord(
        session_id=session_id, rule=RULE_MANUAL, count=run_length, run_length=run_length,
        project=project_name, transcript_path=transcript, source="manual"))
    label = report.project_label(project_name, os.environ.get("HOME"))
    note = f" (it replaces a pending {replaced.rule} request)" if replaced else ""
    print(f"clear request written for {label} {session_id}{note}: its next Stop hook will "
          "end the turn and clear the goal")
    return 0


def add_arguments_config(parser: argparse.ArgumentParser) -> None:
    state_options(parser)
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


def config(args: argparse.Namespace) -> int:
    """Exit 1 when the file (or the environment) has a problem, which is said."""
    from ..state.config import config_path, load_settings

    _, state = _dirs(args)
    settings = load_settings(state)
    values = settings.shown()
    if getattr(args, "json", False):
        document = {"file": str(config_path(state)), "settings": values,
                    "sources": dict(settings.sources), "problems": list(settings.problems)}
        _print_json(document)
        return 1 if settings.problems else 0
    width = output_width(sys.stdout)
    _say(f"config file: {config_path(state)}", width)
    rows = [[name, ", ".join(map(str, value)) if isinstance(value, list) else str(value),
             settings.sources.get(name, "default")] for name, value in values.items()]
    for line in report.table(["SETTING", "VALUE", "FROM"], rows, width):
        print(line)
    for problem in settings.problems:
        _say(f"problem: {report.snippet(problem, 300)}", width)
    return 1 if settings.problems else 0

