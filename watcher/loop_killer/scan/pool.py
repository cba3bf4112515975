"""Reading many transcripts on every core.

Files are read whole by one worker each (a file is one session's story: its loops cannot
be cut at an arbitrary byte), biggest first so that the long ones start early; small
files travel in batches so that thousands of them cost few round trips. A small history
is read in this process: starting workers would cost more than it saves.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

from ..config import Settings
from .files import SKIP_FAILED, Transcript, read_transcript
from .records import FileResult

__all__ = ["BATCH_BYTES", "IN_PROCESS_BYTES", "batches", "scan_transcripts"]

BATCH_BYTES = 8 << 20
"""Small files are grouped into tasks of about this many bytes."""
_BATCH_FILES = 256
IN_PROCESS_BYTES = 16 << 20
"""Histories smaller than this are read without workers."""

logger = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
"""Called with (bytes done, bytes in all) as files are finished."""


def batches(transcripts: Sequence[Transcript], *, batch_bytes: int = BATCH_BYTES
            ) -> list[list[Transcript]]:
    """The files in tasks: biggest first, one big file a task, small ones together."""
    tasks: list[list[Transcript]] = []
    current: list[Transcript] = []
    current_bytes = 0
    for transcript in sorted(transcripts, key=lambda t: (-t.size, t.path)):
        if transcript.size >= batch_bytes:
            tasks.append([transcript])
            continue
        if current and (current_bytes + transcript.size > batch_bytes
                        or len(current) >= _BATCH_FILES):
            tasks.append(current)
            current, current_bytes = [], 0
        current.append(transcript)
        current_bytes += transcript.size
    if current:
        tasks.append(current)
    return tasks


def _read_batch(task: list[Transcript], prefilter: bool, settings: Settings | None,
                two_tier: bool = True) -> list[FileResult]:
    return [read_transcript(transcript, prefilter=prefilter, settings=settings,
                            two_tier=two_tier)
            for transcript in task]


def scan_transcripts(transcripts: Sequence[Transcript], *, jobs: int | None = None,
                     prefilter: bool = True, progress: Progress | None = None,
                     settings: Settings | None = None, two_tier: bool = True
                     ) -> Iterator[FileResult]:
    """Every file's result, in the order they finish.

    ``jobs``: worker processes (default: every core); 1 reads in this process.
    ``prefilter``: skip lines that cannot matter without parsing them.
    ``progress``: told how far along the scan is.
    ``settings``: the thresholds and ignored tools (the documented defaults when None).
    ``two_tier``: the engine reads only the files that could hold a loop
    (``read_transcript``); off, it reads every file (the same results, slower).
    """
    total = sum(t.size for t in transcripts)
    jobs = jobs or os.cpu_count() or 1
    tasks = batches(transcripts)
    done = 0
    if jobs <= 1 or len(tasks) <= 1 or total < IN_PROCESS_BYTES:
        for task in tasks:
            for result in _read_batch(task, prefilter, settings, two_tier):
                done += result.bytes_read
                if progress is not None:
                    progress(done, total)
                yield result
        return
    # fork where it is safe (Linux): the workers start at once, with the modules loaded.
    context = multiprocessing.get_context("fork") if sys.platform == "linux" else None
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=context) as pool:
        task_of: dict[Future[list[FileResult]], list[Transcript]] = {
            pool.submit(_read_batch, task, prefilter, settings, two_tier): task
            for task in tasks
        }
        pending = set(task_of)
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    for result in _results(future, task_of[future]):
                        done += result.bytes_read
                        if progress is not None:
                            progress(done, total)
                        yield result
        finally:
            for future in pending:
                future.cancel()


def _results(future: Future[list[FileResult]], task: list[Transcript]) -> list[FileResult]:
    """A task's results; a worker that died (killed, out of memory) costs its files only."""
    try:
        return future.result()
    except Exception:
        logger.exception("a scan worker failed; %d files not read", len(task))
        return [FileResult(path=t.path, project=t.project, session_id=t.session_id,
                           subagent=t.subagent, skipped=SKIP_FAILED) for t in task]
