"""The scan's cache: a file unchanged since the last scan is not read again, and nothing
else changes; a file that grew, a new one, other settings or a broken cache are read."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from loop_killer import cli
from loop_killer.scan import cache, files, pool
from loop_killer.scan.cache import CACHE_FILE, REPORT_FILE, SETTLING
from loop_killer.scan.prices import PriceTable
from loop_killer.scan.records import FileResult, Loop, Reply, Tokens, Turn
from loop_killer.scan.summary import Collector
from loop_killer.state.config import load_settings
from loop_killer.state.files import projects_dir, state_dir
from transcripts import FIXTURES, Transcript, Use

SAME = "I am still working on the auth tests; the condition is not met yet."
SESSION = "cccccccc-2222-4333-8444-555555555555"


def _history(root: Path) -> None:
    """Every real fixture history (loops and not), as project folders under ``root``."""
    for history in [*sorted(FIXTURES.glob("claude-code-*/*/transcripts")),
                    FIXTURES / "real-transcripts"]:
        for item in history.iterdir():
            if item.is_dir():
                name = f"{history.parent.parent.name}-{history.parent.name}-{item.name}"
                shutil.copytree(item, root / name)
            elif item.suffix == ".jsonl":
                (root / item.stem).mkdir(parents=True, exist_ok=True)
                shutil.copy(item, root / item.stem / item.name)


def _scan(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert cli.main(["scan", "--json", *args]) == 0
    out, _ = capsys.readouterr()
    document: dict[str, Any] = json.loads(out)
    return document


def _but_cache(document: dict[str, Any]) -> dict[str, Any]:
    scan = dict(document["scan"])
    del scan["from_cache"]
    return {**document, "scan": scan}


def _loop(root: Path, replies: int) -> Path:
    """A main session whose goal loop has ``replies`` same answers."""
    transcript = Transcript(SESSION, cwd="/home/dev/loop")
    transcript.prompt("go")
    transcript.goal()
    transcript.reply("ok", Use(1, 1))
    for i in range(replies):
        transcript.reprompt()
        transcript.reply(SAME, Use(100 + i, 10))
    path = root / "-home-dev-loop" / f"{SESSION}.jsonl"
    transcript.write(path)
    return path


@pytest.fixture
def history(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fixture histories, and a cache that keeps files written up to the scan's start
    (``SETTLING`` is for files written within one tick of the clock: they are the test's
    own here; ``test_a_file_written_just_now_is_not_kept`` puts it back)."""
    monkeypatch.setattr(cache, "SETTLING", 0.0)
    root = projects_dir()
    root.mkdir(parents=True)
    _history(root)
    return root


def test_a_second_scan_reads_no_file_and_says_the_same(
        capsys: pytest.CaptureFixture[str], history: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    first = _scan(capsys)
    listed = first["scan"]["transcripts"]
    assert first["scan"]["from_cache"] == 0 and listed > 20 and first["loops"]
    assert (state_dir() / CACHE_FILE).is_file()
    read: list[str] = []
    real = files.read_transcript
    monkeypatch.setattr(pool, "read_transcript",
                        lambda transcript, **kw: read.append(transcript.path)
                        or real(transcript, **kw))
    second = _scan(capsys, "--jobs", "1")
    assert read == []
    assert second["scan"]["from_cache"] == listed
    assert _but_cache(second) == _but_cache(first)
    uncached = _scan(capsys, "--no-cache", "--jobs", "1")
    assert len(read) == listed and uncached["scan"]["from_cache"] == 0
    assert _but_cache(uncached) == _but_cache(first)


def test_a_file_that_grew_is_read_again_and_its_new_loop_found(
        capsys: pytest.CaptureFixture[str], history: Path) -> None:
    path = _loop(history, 2)  # under every threshold
    before = _scan(capsys)
    assert not [loop for loop in before["loops"] if loop["session_id"] == SESSION]
    _loop(history, 5)  # the same session went on (rewritten longer: it grew)
    after = _scan(capsys)
    assert after["scan"]["from_cache"] == before["scan"]["transcripts"] - 1
    (loop,) = [loop for loop in after["loops"] if loop["session_id"] == SESSION]
    assert (loop["rule"], loop["replies"]) == ("SAME_REPLY_TURNS", 5)
    assert path.stat().st_size > 0
    assert _but_cache(after) == _but_cache(_scan(capsys, "--no-cache"))


def test_a_file_written_within_the_settling_time_is_not_kept(tmp_path: Path) -> None:
    """Same size, same times: only a file written within one tick of the file system's
    clock can look unchanged after a rewrite, so a file whose last write or status change
    is within ``SETTLING`` of the scan is never kept (the stamp, as the listing gives it)."""
    now = time.time_ns()
    result = FileResult(path="/p/a.jsonl", project="p", session_id="a")

    def listed(mtime: int, ctime: int) -> files.Transcript:
        return files.Transcript("/p/a.jsonl", "p", "a", False, 10, 1, 2, mtime, ctime)

    long_ago = now - 60 * 10**9
    just_now = now - int(SETTLING * 1e9) // 2
    for mtime, ctime, kept in [(long_ago, long_ago, True), (just_now, just_now, False),
                               (long_ago, just_now, False)]:  # (touch -r: mtime set back)
        scan_cache = cache.ScanCache(tmp_path / CACHE_FILE, "context")
        scan_cache.split([listed(mtime, ctime)])
        scan_cache.keep(listed(mtime, ctime), result)
        scan_cache.save(root="/p", whole=True)
        again = cache.ScanCache.load(tmp_path, "context")
        assert again.split([listed(mtime, ctime)])[0] == ([result] if kept else [])
        report = cache.Report(tmp_path, "context", "/p", files.Listing([listed(mtime, ctime)]),
                              ())
        assert report.keeps == kept  # (nor the report made of it)


def test_a_rewrite_with_its_old_times_put_back_is_read_again(
        capsys: pytest.CaptureFixture[str], history: Path) -> None:
    """``cp -p`` or ``touch -r`` over a file of the same size: the change time moves."""
    path = _loop(history, 2)
    first = _scan(capsys)
    assert first["scan"]["from_cache"] == 0
    old = path.stat()
    path.write_bytes(path.read_bytes().replace(b"auth", b"AUTH"))  # same size
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (old.st_size, old.st_mtime_ns)
    second = _scan(capsys)
    assert second["scan"]["from_cache"] == first["scan"]["transcripts"] - 1
    assert _but_cache(second) == _but_cache(_scan(capsys, "--no-cache"))


def test_new_and_deleted_files(capsys: pytest.CaptureFixture[str], history: Path) -> None:
    first = _scan(capsys)
    gone = sorted(history.rglob("*.jsonl"))[0]
    gone.unlink()
    _loop(history, 5)
    second = _scan(capsys)
    assert second["scan"]["transcripts"] == first["scan"]["transcripts"]  # -1 +1
    assert second["scan"]["from_cache"] == first["scan"]["transcripts"] - 1
    assert [loop for loop in second["loops"] if loop["session_id"] == SESSION]
    assert _but_cache(second) == _but_cache(_scan(capsys, "--no-cache"))


def test_other_settings_read_every_file_again(capsys: pytest.CaptureFixture[str],
                                              history: Path) -> None:
    _loop(history, 4)
    first = _scan(capsys)
    assert [loop for loop in first["loops"] if loop["session_id"] == SESSION]
    (state_dir() / "config.toml").write_text("[rules]\nsame_reply_turns = 5\n")
    second = _scan(capsys)
    assert second["scan"]["from_cache"] == 0
    assert not [loop for loop in second["loops"] if loop["session_id"] == SESSION]


def test_a_scan_of_one_project_keeps_the_others(capsys: pytest.CaptureFixture[str],
                                                history: Path) -> None:
    whole = _scan(capsys)
    one = sorted(p.name for p in history.iterdir())[0]
    part = _scan(capsys, "--project", one)
    assert part["scan"]["from_cache"] == part["scan"]["transcripts"] > 0
    again = _scan(capsys)
    assert again["scan"]["from_cache"] == whole["scan"]["transcripts"]


@pytest.mark.parametrize("bad", ["garbage", "link", "folder", "other format", "truncated"])
def test_a_broken_or_hostile_cache_is_read_as_none_and_replaced(
        capsys: pytest.CaptureFixture[str], history: Path, tmp_path: Path,
        caplog: pytest.LogCaptureFixture, bad: str) -> None:
    first = _scan(capsys)
    (state_dir() / REPORT_FILE).unlink()  # (the per-file cache is what is read)
    cache = state_dir() / CACHE_FILE
    good = cache.read_bytes()
    cache.unlink()
    if bad == "garbage":
        cache.write_bytes(b"\x00\xff not msgpack at all")
    elif bad == "link":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.write_bytes(good)
        cache.symlink_to(elsewhere)
    elif bad == "folder":
        cache.mkdir()
    elif bad == "other format":  # valid msgpack, another shape
        cache.write_bytes(b"\x81\xa6format\xa1x")
    else:
        cache.write_bytes(good[: len(good) // 2])
    second = _scan(capsys)
    assert second["scan"]["from_cache"] == 0
    assert _but_cache(second) == _but_cache(first)
    if bad != "folder":  # (a folder in its place stays: nothing is removed but files)
        assert "scan cache" in caplog.text
        assert cache.is_file() and not cache.is_symlink()
        (state_dir() / REPORT_FILE).unlink()
        assert _scan(capsys)["scan"]["from_cache"] == first["scan"]["transcripts"]
    if bad == "link":
        assert (tmp_path / "elsewhere").read_bytes() == good  # never written through


def test_no_cache_leaves_the_cache_as_it_was(capsys: pytest.CaptureFixture[str],
                                             history: Path) -> None:
    _scan(capsys)
    cache = state_dir() / CACHE_FILE
    before = cache.read_bytes(), cache.stat().st_mtime_ns
    _loop(history, 5)
    _scan(capsys, "--no-cache")
    assert (cache.read_bytes(), cache.stat().st_mtime_ns) == before


def test_the_table_says_how_many_files_were_unchanged(capsys: pytest.CaptureFixture[str],
                                                      history: Path) -> None:
    assert cli.main(["scan"]) == 0
    first = capsys.readouterr().out
    assert "unchanged since the last scan" not in first
    assert cli.main(["scan"]) == 0
    second = capsys.readouterr().out
    assert "unchanged since the last scan" in second


def _write_cache(result: FileResult, transcript: files.Transcript, context: str) -> None:
    """A cache as a scan writes it, holding ``result`` for ``transcript``."""
    kept = cache.ScanCache(state_dir() / CACHE_FILE, context)
    kept.split([transcript])
    kept.keep(transcript, result)
    kept.save(root=str(projects_dir()), whole=False)


@pytest.mark.parametrize("bad", ["a loop's reply not among the file's", "a negative count",
                                 "a count no reply has", "a turn of a negative reply count",
                                 "a turn of a negative re-prompt count"])
def test_a_cache_holding_a_result_no_scan_makes_is_not_used(
        capsys: pytest.CaptureFixture[str], history: Path, caplog: pytest.LogCaptureFixture,
        bad: str) -> None:
    """A cache is a state file: one of ours, well formed, may still say what no scan
    could (edited, or written by a broken version). Summing it must not crash the scan."""
    first = _scan(capsys)
    listing = files.find_transcripts(history)
    transcript = listing.transcripts[0]
    good = cache.ScanCache.load(state_dir(), cache.scan_context(load_settings(state_dir())))
    (result,), _, _ = good.split([transcript])
    reply = Reply(b"k" * 16, "claude-opus-4-6", Tokens(1, 1))
    if bad == "a negative count":
        reply = Reply(b"k" * 16, "claude-opus-4-6", Tokens(-10**18, 1))
    elif bad == "a count no reply has":
        reply = Reply(b"k" * 16, "claude-opus-4-6", Tokens(2**63 + 5, 1))
    loop = Loop("reprompt", "SAME_REPLY_TURNS", 3, "", "", (reply,), ())
    odd = dataclasses.replace(
        result, replies=result.replies if bad.startswith("a loop") else (reply,),
        loops=(loop,))
    if "turn" in bad:
        odd = dataclasses.replace(result, turns=(
            Turn("", "", 3, -1) if "reply" in bad else Turn("", "", -1, 0),))
    _write_cache(odd, transcript, good.context)
    (state_dir() / REPORT_FILE).unlink()  # (the per-file cache is what is read)
    second = _scan(capsys)
    assert second["scan"]["from_cache"] == 0 and "not one a scan makes" in caplog.text
    assert _but_cache(second) == _but_cache(first)


def test_files_of_another_root_are_forgotten(capsys: pytest.CaptureFixture[str],
                                             history: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(history, other)
    assert _scan(capsys, "--root", str(other))["scan"]["from_cache"] == 0
    whole = _scan(capsys)  # (this root's, read)
    (state_dir() / REPORT_FILE).unlink()
    assert _scan(capsys)["scan"]["from_cache"] == whole["scan"]["transcripts"]
    # The other root's were dropped when this one's were saved: the cache holds one root.
    assert _scan(capsys, "--root", str(other))["scan"]["from_cache"] == 0


def test_a_linked_state_folder_is_neither_read_nor_written_through(
        capsys: pytest.CaptureFixture[str], history: Path, tmp_path: Path) -> None:
    first = _scan(capsys)
    state = state_dir()
    elsewhere = tmp_path / "elsewhere"
    state.rename(elsewhere)
    state.symlink_to(elsewhere)
    kept = (elsewhere / CACHE_FILE).read_bytes()
    second = _scan(capsys)
    assert second["scan"]["from_cache"] == 0
    assert _but_cache(second) == _but_cache(first)
    assert (elsewhere / CACHE_FILE).read_bytes() == kept


def test_a_sessions_project_does_not_depend_on_the_order_files_come_in() -> None:
    """A session copied into another project folder: the project is the file that began
    first's, whether the cache hands its result over first or a worker last."""
    a = FileResult(path="/r/p-a/s.jsonl", project="p-a", session_id="s",
                   first_at="2026-11-01T00:00:00Z", last_at="2026-11-01T01:00:00Z")
    b = dataclasses.replace(a, path="/r/p-b/s.jsonl", project="p-b",
                            first_at="2026-11-02T00:00:00Z")
    agent = dataclasses.replace(a, path="/r/p-c/s/subagents/agent-1.jsonl", project="p-c",
                                subagent=True, first_at="2026-10-01T00:00:00Z")
    projects = set()
    for order in itertools.permutations([a, b, agent]):
        collector = Collector(PriceTable())
        for result in order:
            collector.add(result)
        (session,) = collector.summary().sessions
        projects.add(session.project)
    assert projects == {"p-a"}


def test_a_killed_scans_temporary_file_is_cleared_later(capsys: pytest.CaptureFixture[str],
                                                        history: Path) -> None:
    _scan(capsys)
    state = state_dir()
    left = state / f".{CACHE_FILE}.123.456.tmp"  # (write_private_file's name for it)
    fresh = state / f".{CACHE_FILE}.789.456.tmp"  # another scan's, writing now
    for path in (left, fresh):
        path.write_bytes(b"half a cache")
    an_hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(left, ns=(an_hour_ago, an_hour_ago))
    _loop(history, 2)  # (something to save)
    _scan(capsys)
    assert not left.exists() and fresh.exists()


def test_a_repeat_of_an_unchanged_history_reads_the_last_report_alone(
        capsys: pytest.CaptureFixture[str], history: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    first = _scan(capsys)
    assert (state_dir() / REPORT_FILE).is_file()

    def unread(*args: object, **kwargs: object) -> None:
        raise AssertionError("read")

    monkeypatch.setattr(cache.ScanCache, "load", unread)  # (neither the files' cache...)
    monkeypatch.setattr(pool, "read_transcript", unread)  # (...nor a transcript)
    second = _scan(capsys, "--jobs", "1")
    assert second["scan"]["from_cache"] == first["scan"]["transcripts"]
    assert _but_cache(second) == _but_cache(first)
    assert cli.main(["scan"]) == 0  # (the table too)
    assert "Read" in capsys.readouterr()[0]


def test_the_last_report_is_not_read_for_other_options_settings_or_files(
        capsys: pytest.CaptureFixture[str], history: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    _scan(capsys)
    listed = _scan(capsys)["scan"]["transcripts"]
    since = _scan(capsys, "--since", "2026-01-01")  # (its own report, replacing the last)
    assert since["scan"]["from_cache"] == listed
    assert _but_cache(since) == _but_cache(_scan(capsys, "--since", "2026-01-01",
                                                 "--no-cache"))
    monkeypatch.setenv("LOOP_KILLER_BUDGET_USD", "0.01")  # (the budget's rows change)
    budget = _scan(capsys)
    assert budget["scan"]["budget_limits"]["usd"] == 0.01 and budget["budget"]
    assert _but_cache(budget) == _but_cache(_scan(capsys, "--no-cache"))
    monkeypatch.delenv("LOOP_KILLER_BUDGET_USD")
    _loop(history, 5)  # (a file more)
    grown = _scan(capsys)
    assert grown["scan"]["from_cache"] == listed
    assert [loop for loop in grown["loops"] if loop["session_id"] == SESSION]


@pytest.mark.parametrize("bad", ["garbage", "another key", "link", "truncated"])
def test_a_broken_or_hostile_report_is_not_read(
        capsys: pytest.CaptureFixture[str], history: Path, tmp_path: Path,
        caplog: pytest.LogCaptureFixture, bad: str) -> None:
    first = _scan(capsys)
    report = state_dir() / REPORT_FILE
    good = report.read_bytes()
    report.unlink()
    if bad == "garbage":
        report.write_bytes(b"\x00\xff not msgpack at all")
    elif bad == "another key":  # (well formed: a summary kept for other files)
        kept = cache._DECODE_REPORT(good)
        assert kept.summary.loops
        report.write_bytes(cache._ENCODE_REPORT(cache._Kept(
            "another", dataclasses.replace(kept.summary, loops=()))))
    elif bad == "link":
        (tmp_path / "elsewhere").write_bytes(good)
        report.symlink_to(tmp_path / "elsewhere")
    else:
        report.write_bytes(good[: len(good) // 2])
    second = _scan(capsys)
    assert _but_cache(second) == _but_cache(first)
    if bad != "another key":
        assert "scan report" in caplog.text
    assert report.is_file() and not report.is_symlink()  # (replaced)


def test_a_file_not_read_this_time_keeps_no_report(
        capsys: pytest.CaptureFixture[str], history: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A read that failed (EIO, a dead worker) is read again next time, not frozen into the
    report: the files' cache keeps no skipped result, and no report is kept."""
    whole = _scan(capsys, "--no-cache")
    real = files.read_transcript
    first = files.find_transcripts(history).transcripts[0].path

    def failing(transcript: files.Transcript, **kw: Any) -> FileResult:
        if transcript.path == first:
            return FileResult(transcript.path, transcript.project, transcript.session_id,
                              transcript.subagent, skipped=files.SKIP_UNREADABLE)
        return real(transcript, **kw)

    monkeypatch.setattr(pool, "read_transcript", failing)
    partial = _scan(capsys, "--jobs", "1")
    assert partial["scan"]["skipped"] == {"unreadable": 1}
    assert not (state_dir() / REPORT_FILE).exists()
    monkeypatch.setattr(pool, "read_transcript", real)
    again = _scan(capsys)
    assert again["scan"]["from_cache"] == whole["scan"]["transcripts"] - 1
    assert _but_cache(again) == _but_cache(whole)
    assert (state_dir() / REPORT_FILE).is_file()


@pytest.mark.parametrize("bad", ["infinite", "not a number", "past 64 bits", "control codes",
                                 "another layout"])
def test_a_report_saying_what_no_scan_sums_is_not_read(
        capsys: pytest.CaptureFixture[str], history: Path, caplog: pytest.LogCaptureFixture,
        bad: str) -> None:
    """Kept under the right key (a state file of ours, edited), a report that no scan could
    have made is logged and not used; one of another version under another key is just
    not used."""
    first = _scan(capsys)
    report = state_dir() / REPORT_FILE
    document = msgspec.msgpack.decode(report.read_bytes())
    summary = document["summary"]
    assert summary["loops"] and summary["sessions"]
    if bad == "infinite":
        summary["loops"][0]["cost_usd"] = float("inf")
    elif bad == "not a number":
        summary["sessions"][0]["cost_usd"] = float("nan")
    elif bad == "past 64 bits":
        summary["tokens"]["input"] = 2**64 - 1
    elif bad == "control codes":
        summary["skipped"] = {"\x1b]0;pwned\x07\u202e\x9b": 1}
    else:
        document["key"] = "another"
        del summary["loops"]
    report.write_bytes(msgspec.msgpack.encode(document))
    second = _scan(capsys)
    assert _but_cache(second) == _but_cache(first)
    assert ("scan report" in caplog.text) == (bad != "another layout")
    assert cli.main(["scan"]) == 0 and "\x1b" not in capsys.readouterr()[0]


def test_a_project_folder_named_in_no_encoding_is_scanned_and_scanned_again(
        capsys: pytest.CaptureFixture[str], history: Path, caplog: pytest.LogCaptureFixture
        ) -> None:
    """A folder name not in UTF-8 cannot be kept in the cache or the report: both are left
    unwritten, said in a line, and every scan still reports."""
    folder = history / os.fsdecode(b"-home-dev-caf\xe9")
    path = _loop(history, 5)
    shutil.move(path.parent, folder)
    first = _scan(capsys)
    assert [loop for loop in first["loops"] if loop["session_id"] == SESSION]
    assert "not written" in caplog.text
    assert _but_cache(_scan(capsys)) == _but_cache(first)


def test_a_moment_past_the_calendar_is_shown_as_written() -> None:
    from loop_killer.scan.report import _when

    assert _when("9999-12-31T23:59:59-14:00") == "9999-12-31T23:5…"
    assert _when("2026-05-01T14:00:00Z", short=True).startswith("05-0")
