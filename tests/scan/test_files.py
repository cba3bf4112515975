"""Finding and reading transcripts: bad input is skipped and counted, never fatal, never
blocking; a transcript is never written."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from loop_killer.scan import files
from loop_killer.scan.files import (
    SKIP_LINK,
    SKIP_NOT_REGULAR,
    SKIP_UNREADABLE,
    Transcript,
    find_transcripts,
    read_transcript,
)
from loop_killer.scan.pool import scan_transcripts
from loop_killer.state.files import projects_dir
from transcripts import FIXTURES, Use, scan_bytes
from transcripts import Transcript as Session  # (scan.files has a Transcript)

MAIN = "11111111-2222-4333-8444-555555555555"


def looping_session(session_id: str = MAIN) -> Session:
    session = Session(session_id)
    session.prompt("go")
    session.goal()
    for i in range(4):
        session.reprompt()
        session.reply("Still working on it; the condition is not met yet.", Use(10 + i, 1))
    return session


def tool_loop_agent(session_id: str = MAIN) -> Session:
    agent = Session(session_id, sidechain=True)
    agent.user("look into it")
    for _ in range(3):
        agent.run("cat missing.txt", "No such file", Use(2, 2), is_error=True)
    return agent


@pytest.fixture
def root() -> Path:
    root = projects_dir()
    root.mkdir(parents=True)
    return root


def test_finds_main_and_subagent_transcripts_in_every_layout(root: Path) -> None:
    project = root / "-home-dev-proj"
    looping_session().write(project / f"{MAIN}.jsonl")
    tool_loop_agent().write(project / MAIN / "subagents" / "agent-a1.jsonl")
    tool_loop_agent().write(project / "agent-b2.jsonl")
    (project / MAIN / "tool-results").mkdir()
    (project / MAIN / "tool-results" / "x.txt").write_text("not a transcript")

    listing = find_transcripts(root)

    found = {(Path(t.path).name, t.session_id, t.subagent) for t in listing.transcripts}
    assert found == {(f"{MAIN}.jsonl", MAIN, False), ("agent-a1.jsonl", MAIN, True),
                     ("agent-b2.jsonl", "", True)}
    results = [read_transcript(t) for t in listing.transcripts]
    assert {r.session_id for r in results} == {MAIN}  # flat agent: read from its lines
    kinds = sorted((r.subagent, loop.kind) for r in results for loop in r.loops)
    assert kinds == [(False, "reprompt"), (True, "tool"), (True, "tool")]


def test_links_fifos_and_odd_files_are_skipped_and_counted(root: Path) -> None:
    project = root / "-home-dev-proj"
    looping_session().write(project / f"{MAIN}.jsonl")
    elsewhere = root.parent / "elsewhere"
    looping_session("33333333-2222-4333-8444-555555555555").write(elsewhere / "s.jsonl")
    os.symlink(elsewhere / "s.jsonl", project / "33333333-2222-4333-8444-555555555555.jsonl")
    os.symlink(elsewhere, root / "-home-dev-linked")  # a project folder that is a link
    os.mkfifo(project / "44444444-2222-4333-8444-555555555555.jsonl")
    (project / "55555555-2222-4333-8444-555555555555.jsonl").mkdir()  # a folder named .jsonl
    (project / MAIN / "subagents").mkdir(parents=True)
    os.mkfifo(project / MAIN / "subagents" / "agent-fifo.jsonl")
    os.symlink(elsewhere, project / "66666666-2222-4333-8444-555555555555")  # session folder

    listing = find_transcripts(root)

    assert [Path(t.path).name for t in listing.transcripts] == [f"{MAIN}.jsonl"]
    # The linked session folder is counted too (an audit found it skipped unsaid).
    assert listing.skipped == {SKIP_LINK: 3, SKIP_NOT_REGULAR: 3}


def test_a_fifo_that_takes_a_files_place_never_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / "s.jsonl"
    os.mkfifo(fifo)
    transcript = Transcript(str(fifo), "p", "s", False, 0)
    outcome: list[str] = []
    worker = threading.Thread(target=lambda: outcome.append(read_transcript(transcript).skipped),
                              daemon=True)
    worker.start()
    worker.join(timeout=30)  # a bound for a failure only: a blocked open never returns
    assert outcome == [SKIP_NOT_REGULAR]


def test_a_file_replaced_by_a_link_after_listing_is_not_read(root: Path) -> None:
    project = root / "p"
    path = looping_session().write(project / f"{MAIN}.jsonl")
    (transcript,) = find_transcripts(root).transcripts
    other = looping_session().write(root.parent / "other.jsonl")
    path.unlink()
    os.symlink(other, path)
    assert read_transcript(transcript).skipped == SKIP_LINK


def test_vanished_and_unreadable_files_are_counted(root: Path) -> None:
    project = root / "p"
    path = looping_session().write(project / f"{MAIN}.jsonl")
    (transcript,) = find_transcripts(root).transcripts
    path.unlink()
    assert read_transcript(transcript).skipped == SKIP_UNREADABLE
    if os.geteuid() != 0:  # root reads anything
        path = looping_session().write(project / f"{MAIN}.jsonl")
        path.chmod(0)
        (transcript,) = find_transcripts(root).transcripts
        assert read_transcript(transcript).skipped == SKIP_UNREADABLE


def test_garbage_lines_are_counted_never_fatal(root: Path) -> None:
    session = looping_session()
    for garbage in (b"{not json", b"\xff\xfe\x00binary", b"[1,2,3]", b'"just a string"',
                    b'{"type":"user","message":"not an object"}', b"", b"   ",
                    b'{"type":"assistant","message":{"content":42}}'):
        session.raw(garbage)
    data = session.data() + b'{"type":"user","message":{"content":"no newline at the end'
    path = root / "p" / f"{MAIN}.jsonl"
    path.parent.mkdir()
    path.write_bytes(data)

    (result,) = [read_transcript(t) for t in find_transcripts(root).transcripts]

    assert result.skipped == ""
    assert result.broken == 6  # the blank two are not broken
    assert result.lines == data.count(b"\n") + 1  # lines stepped over unparsed too
    assert len(result.loops) == 1


def test_a_missing_projects_folder_is_an_empty_history(tmp_path: Path) -> None:
    listing = find_transcripts(tmp_path / "nothing-here")
    assert listing.transcripts == [] and not listing.skipped


def test_project_filter_matches_name_or_path_in_any_case(root: Path) -> None:
    looping_session().write(root / "-home-dev-Billing" / f"{MAIN}.jsonl")
    looping_session().write(root / "-home-dev-auth" / f"{MAIN}.jsonl")
    assert [t.project for t in find_transcripts(root, project="billing").transcripts] == [
        "-home-dev-Billing"]
    assert len(find_transcripts(root, project=str(root)).transcripts) == 2
    assert find_transcripts(root, project="nomatch").transcripts == []


def test_since_leaves_out_files_written_long_before(root: Path) -> None:
    old = looping_session().write(root / "p" / f"{MAIN}.jsonl")
    os.utime(old, (1_000_000_000, 1_000_000_000))
    looping_session("77777777-2222-4333-8444-555555555555").write(
        root / "p" / "77777777-2222-4333-8444-555555555555.jsonl")
    listing = find_transcripts(root, since=1_700_000_000)
    assert len(listing.transcripts) == 1 and listing.older == 1


def test_every_real_transcript_in_the_fixtures_is_scanned_without_error(tmp_path: Path
                                                                        ) -> None:
    root = tmp_path / "projects"
    count = 0
    for path in FIXTURES.rglob("*.jsonl"):
        # Lay each fixture out as Claude Code would: <projects>/<project>/<file>.
        relative = path.relative_to(FIXTURES)
        project = root / "-".join(relative.parts[:2]).replace("_", "-")
        inside = (relative.parts[-3:] if "subagents" in relative.parts
                  else relative.parts[-1:])
        target = project.joinpath(*inside)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        count += 1
    listing = find_transcripts(root)
    assert not listing.skipped
    results = list(scan_transcripts(listing.transcripts, jobs=1))
    assert len(results) == len(listing.transcripts) >= count - 1  # hook_inputs.jsonl too
    assert all(not r.skipped for r in results)
    assert sum(r.broken for r in results) == 0
    assert sum(len(r.loops) for r in results) >= 7


def test_scanning_never_writes_to_a_transcript(root: Path) -> None:
    path = looping_session().write(root / "p" / f"{MAIN}.jsonl")
    tool_loop_agent().write(root / "p" / MAIN / "subagents" / "agent-a.jsonl")
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*")
              if p.is_file()}
    list(scan_transcripts(find_transcripts(root).transcripts, jobs=1))
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*")
             if p.is_file()}
    assert before == after and path in after


def test_results_left_unread_are_read_again_from_the_file(root: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    # Results are left unread (not even copied) and read back from the file when their
    # call repeats: the same loops and tokens as read from memory, in any chunking.
    session = Session(MAIN)
    session.prompt("go")
    for output in ("1 failed", "2 failed", "2 failed", "2 failed", "2 failed"):
        session.noise()
        session.run("pytest -k auth", output, Use(5, 3))
    path = session.write(root / "-home-dev-proj" / f"{MAIN}.jsonl")
    (transcript,) = find_transcripts(root).transcripts
    in_memory = scan_bytes(path.read_bytes(), chunk_size=7, prefilter=False)
    reread: list[tuple[int, int]] = []
    read_again = files._reread

    def counted(fd: int, offset: int, length: int) -> bytes:
        reread.append((offset, length))
        return read_again(fd, offset, length)

    monkeypatch.setattr(files, "_reread", counted)
    for chunk_bytes in (97, 1 << 20):
        result = read_transcript(transcript, chunk_bytes=chunk_bytes)
        assert [loop.replies for loop in result.loops] == [4]
        assert result.loops == in_memory.loops and result.usage == in_memory.usage
    # (in small chunks, a line cut between two is whole only in a copy: that is kept)
    assert reread and all(path.read_bytes()[offset:offset + length].startswith(b"{")
                          for offset, length in reread)
