"""The scan's cache: a file unchanged since the last scan is not read again, and nothing
else changes; a file that grew, a new one, other settings or a broken cache are read."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from loop_killer import cli
from loop_killer.scan import files, pool
from loop_killer.scan.cache import CACHE_FILE, SETTLING
from loop_killer.state.paths import projects_dir, state_dir
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


def _settle(root: Path) -> None:
    """Make every file look written a minute ago (the cache keeps no file written within
    ``SETTLING`` seconds of a scan)."""
    past = time.time_ns() - 60 * 10**9
    for path in root.rglob("*.jsonl"):
        os.utime(path, ns=(past, past))


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
def history() -> Path:
    root = projects_dir()
    root.mkdir(parents=True)
    _history(root)
    _settle(root)
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
    _settle(history)
    before = _scan(capsys)
    assert not [loop for loop in before["loops"] if loop["session_id"] == SESSION]
    _loop(history, 5)  # the same session went on (rewritten longer: it grew)
    after = _scan(capsys)
    assert after["scan"]["from_cache"] == before["scan"]["transcripts"] - 1
    (loop,) = [loop for loop in after["loops"] if loop["session_id"] == SESSION]
    assert (loop["rule"], loop["replies"]) == ("SAME_REPLY_TURNS", 5)
    assert path.stat().st_size > 0
    assert _but_cache(after) == _but_cache(_scan(capsys, "--no-cache"))


def test_a_file_written_just_now_is_not_kept(capsys: pytest.CaptureFixture[str],
                                             history: Path) -> None:
    """Same size, same modification time: only a file written within one tick of the
    file system's clock can look like that, and such files are never kept."""
    path = _loop(history, 2)
    stamp = path.stat().st_mtime_ns
    assert stamp > time.time_ns() - SETTLING * 1e9
    first = _scan(capsys)
    assert first["scan"]["from_cache"] == 0
    path.write_bytes(path.read_bytes().replace(b"auth", b"AUTH"))  # same size
    os.utime(path, ns=(stamp, stamp))
    second = _scan(capsys)
    assert second["scan"]["from_cache"] == first["scan"]["transcripts"] - 1
    assert b"AUTH" in path.read_bytes()


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
    _settle(history)
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
