"""The mod's outcome records: the hook writes ``outcomes/<key>.plan``, the mod ``<key>.json``
(what ``/goal clear`` did); the watcher or the next Stop hook logs each settled plan once."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..state.files import (
    read_json_object,
    read_new_bytes,
    remove_file,
    state_folder,
    write_private_file,
)
from ..state.journal import OutcomeRecord
from . import text_of
from .notice import MOD_RESULTS, OUTCOME_CLEARED, OUTCOME_SENT, Outcome
from .screen import find_proof

__all__ = ["OUTCOMES_DIR", "STALE_OUTCOME", "outcome_paths", "sweep_mod_outcomes",
           "write_mod_plan_record"]

OUTCOMES_DIR = "outcomes"
STALE_OUTCOME = 120.0  # seconds after which a plan never settled is logged as unconfirmed
LEFTOVER_AGE = 3600.0  # seconds after which a file without its plan goes

def outcome_paths(state: str, key: str) -> tuple[str, str]:
    """(the hook's plan record, the mod's outcome file) for a plan key."""
    folder = os.path.join(state, OUTCOMES_DIR)
    return os.path.join(folder, f"{key}.plan"), os.path.join(folder, f"{key}.json")


def write_mod_plan_record(state: str, key: str, record: dict[str, Any]) -> str:
    """Record a plan before the mod takes over; return the path the mod writes its outcome to."""
    import orjson

    plan_path, outcome_path = outcome_paths(state, key)
    state_folder(state, OUTCOMES_DIR, create=True)
    write_private_file(Path(plan_path), orjson.dumps(record) + b"\n")
    return outcome_path


def sweep_mod_outcomes(state: str, append: Callable[[OutcomeRecord], None], *,
                       now: float | None = None) -> int:
    """Log every plan the mod settled (or never did) and remove its files; how many."""
    try:
        folder = state_folder(state, OUTCOMES_DIR)
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    plans = [entry for entry in entries if entry.name.endswith(".plan")]
    now = time.time() if now is None else now
    if len(plans) < len(entries):
        _remove_leftovers(entries, {entry.name[: -len(".plan")] for entry in plans}, now)
    logged = 0
    for entry in plans:
        key = entry.name[: -len(".plan")]
        plan_path, outcome_path = outcome_paths(state, key)
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        plan = read_json_object(plan_path, 64 * 1024)
        if plan is None:
            remove_file(plan_path)
            remove_file(outcome_path)
            continue
        line = _outcome_line(plan, read_json_object(outcome_path, 64 * 1024) or {}, age=age)
        if line is None:
            continue
        taken = f"{plan_path}.{os.getpid()}.taken"
        try:  # the watcher and every Stop hook sweep: one of them logs it
            os.rename(plan_path, taken)
        except OSError:
            continue
        append(line)
        remove_file(taken)
        remove_file(outcome_path)
        logged += 1
    return logged


def _remove_leftovers(entries: list[os.DirEntry[str]], planned: set[str], now: float) -> None:
    """Remove files without their plan once ``LEFTOVER_AGE`` old."""
    for entry in entries:
        name = entry.name
        leftover = name.endswith(".taken") or (
            name.endswith(".json") and name[: -len(".json")] not in planned)
        if not leftover:
            continue
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime > LEFTOVER_AGE:
                os.unlink(entry.path)
        except OSError:
            continue


def _outcome_line(plan: dict[str, Any], reported: dict[str, Any], *, age: float
                  ) -> OutcomeRecord | None:
    status = reported.get("status")
    settled_as = MOD_RESULTS.get(status) if isinstance(status, str) else None
    settled = settled_as is not None
    if settled_as is None and age < STALE_OUTCOME:
        return None  # planned or queued: the mod has not answered yet
    outcome: Outcome = settled_as or OUTCOME_SENT
    output = text_of(reported.get("output")) or text_of(reported.get("error"))
    evidence = "the mod's report" if settled else ""
    transcript, offset = plan.get("transcript_path"), plan.get("offset")
    if outcome != OUTCOME_CLEARED and isinstance(transcript, str) and isinstance(offset, int):
        condition = find_proof(read_new_bytes(transcript, offset))
        if condition is not None:
            outcome, output, evidence = OUTCOME_CLEARED, f"Goal cleared: {condition}", "proof line"
    if not settled and outcome != OUTCOME_CLEARED:
        detail = "the mod never reported what /goal clear did"
    else:
        detail = f"/goal clear: {output[:200] or outcome}"
    return OutcomeRecord(
        session_id=text_of(plan.get("session_id")), answer_uuid=text_of(plan.get("answer_uuid")),
        rule=text_of(plan.get("rule")), outcome=outcome, detail=detail, evidence=evidence,
        hands="mod", project=text_of(plan.get("project")), transcript_path=text_of(transcript),
        plan_id=text_of(plan.get("id")), source="hook")
