"""Reading many transcripts on every core: biggest first, small files in batches; this process
reads too (N jobs: N - 1 workers), and alone for a small history."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

import msgspec

from ..state.config import Settings
from . import lean  # noqa: F401 - (the readers loaded before the workers fork: not again in each)
from .files import SKIP_FAILED, Transcript, read_transcript
from .records import FileResult

if TYPE_CHECKING:  # (the pool's modules load only when it starts: not for one file read again)
    from concurrent.futures import Future

__all__ = ["BATCH_BYTES", "IN_PROCESS_BYTES", "batches", "scan_transcripts"]

BATCH_BYTES = 8 << 20  # small files are grouped into tasks of about this many bytes
_BATCH_FILES = 256
_SHARE_LEFT, _LEAST_BYTES = 8, 1 << 20  # (and of the bytes left: no reader ends with a big one)
IN_PROCESS_BYTES = 16 << 20  # histories smaller are read without workers

logger = logging.getLogger(__name__)

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)
Task = list[tuple[Transcript, bytes | None]]  # (files read together, each with its tail)


def batches(transcripts: Sequence[Transcript], *, batch_bytes: int = BATCH_BYTES
            ) -> list[list[Transcript]]:
    """The files in tasks: biggest first, one big file a task, small ones together."""
    tasks: list[list[Transcript]] = []
    current: list[Transcript] = []
    current_bytes, left = 0, sum(transcript.size for transcript in transcripts)
    for transcript in sorted(transcripts, key=lambda t: (-t.size, t.path)):
        most = min(batch_bytes, max(left // _SHARE_LEFT, _LEAST_BYTES))
        left -= transcript.size
        if transcript.size >= batch_bytes:
            tasks.append([transcript])
            continue
        if current and (current_bytes + transcript.size > most
                        or len(current) >= _BATCH_FILES):
            tasks.append(current)
            current, current_bytes = [], 0
        current.append(transcript)
        current_bytes += transcript.size
    if current:
        tasks.append(current)
    return tasks


def _read_batch(task: Task, settings: Settings | None, two_tier: bool) -> list[FileResult]:
    return [read_transcript(transcript, settings=settings, two_tier=two_tier, tail=tail)
            for transcript, tail in task]


# A worker's results come back packed by msgspec: pickle builds each dataclass's state in Python.
_PACK, _UNPACK = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(list[FileResult])


def _read_packed(task: Task, read: Callable[[Task], list[FileResult]]
                 ) -> bytes | list[FileResult]:
    results = read(task)
    try:
        return _PACK.encode(results)
    except Exception:  # noqa: BLE001 - (a value msgpack cannot carry, a name not UTF-8: pickled)
        return results


def scan_transcripts(transcripts: Sequence[Transcript], *, jobs: int | None = None,
                     progress: Progress | None = None, settings: Settings | None = None,
                     two_tier: bool = True, tails: Mapping[str, bytes] | None = None
                     ) -> Iterator[FileResult]:
    """Every file's result as they finish; ``jobs``: readers, this process among them;
    ``tails``: the files whose first pass is kept, with the one kept before (or b"")."""
    total = sum(t.size for t in transcripts)
    jobs = jobs or os.cpu_count() or 1
    tails = tails or {}  # (a task carries its own files' only: it is pickled for a worker)
    tasks = [[(transcript, tails.get(transcript.path)) for transcript in task]
             for task in batches(transcripts)]
    read = partial(_read_batch, settings=settings, two_tier=two_tier)
    new = sum(t.size for t in transcripts if not tails.get(t.path))  # (going on: a few bytes)
    alone = jobs <= 1 or len(tasks) <= 1 or new < IN_PROCESS_BYTES
    finished: Iterable[list[FileResult]] = map(read, tasks) if alone else _shared(
        tasks, jobs - 1, read)
    done = 0
    for results in finished:
        for result in results:
            done += result.bytes_read
            if progress is not None:
                progress(done, total)
            yield result


_AHEAD = 2  # tasks handed to each worker ahead: it never waits for this process


def _shared(tasks: list[Task], workers: int, read: Callable[[Task], list[FileResult]]
            ) -> Iterator[list[FileResult]]:
    """Every task's results, read by ``workers`` processes and this one as each is free."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    # fork where it is safe (Linux): the workers start at once, with the modules loaded.
    context = multiprocessing.get_context("fork") if sys.platform == "linux" else None
    todo = iter(tasks)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        task_of: dict[Future[bytes | list[FileResult]], Task] = {}
        left: list[Task] = []  # (the pool broke: this process reads the rest)

        def hand_out() -> None:  # (keep every worker's queue full)
            while not left and len(task_of) < workers * _AHEAD and (
                    task := next(todo, None)) is not None:
                try:
                    task_of[pool.submit(_read_packed, task, read)] = task
                except BrokenProcessPool:  # (a worker died: its own task's files are lost)
                    logger.warning("a scan worker died; this process reads the files left")
                    left.append(task)

        try:
            hand_out()
            while task_of:
                finished = [future for future in task_of if future.done()]
                for future in finished:
                    yield _results(future, task_of.pop(future))
                hand_out()
                mine = next(todo, None)
                if mine is not None:
                    yield read(mine)
                elif not finished:
                    wait(task_of, return_when=FIRST_COMPLETED)
            yield from map(read, [*left, *todo])
        finally:
            for future in task_of:
                future.cancel()


def _results(future: Future[bytes | list[FileResult]], task: Task) -> list[FileResult]:
    """A task's results; a worker that died (killed, out of memory) costs its files only."""
    try:
        found = future.result()
        return _UNPACK.decode(found) if isinstance(found, bytes) else found
    except Exception:
        logger.exception("a scan worker failed; %d files not read", len(task))
        return [FileResult(path=t.path, project=t.project, session_id=t.session_id,
                           subagent=t.subagent, skipped=SKIP_FAILED) for t, _ in task]
