"""``loop-killer scan``: the table, the JSON document, the options, the pool."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from loop_killer import cli
from loop_killer.scan import pool
from loop_killer.scan.files import find_transcripts
from loop_killer.scan.report import Progress
from loop_killer.state.files import projects_dir
from transcripts import START, Transcript, Use, total

SESSION_A = "aaaaaaaa-2222-4333-8444-555555555555"
SESSION_B = "bbbbbbbb-2222-4333-8444-555555555555"
SAME = "I am still working on the auth tests; the condition is not met yet."
LOOP_KEYS = {"session_id", "project", "transcript_path", "kind", "rule", "replies",
             "first_at", "last_at", "tokens", "avoidable_tokens", "cost_usd", "what"}
TOKEN_KEYS = {"input", "output", "cache_read", "cache_creation", "total"}
SESSION_KEYS = {"session_id", "project", "first_at", "tokens", "cost_usd", "models", "loops",
                "loops_cost_usd", "claude_code_cost_usd"}


def history(root: Path) -> dict[str, list[Use]]:
    """Two projects: a SAME loop (with a cost-state line) and, a month later, a tool loop
    in a subagent. Returns each loop's replies' usage."""
    a = Transcript(SESSION_A, cwd="/home/dev/billing")
    a.prompt("go")
    a.goal()
    a.reply("ok", Use(1, 1))
    same = [Use(1000 + i, 100, 50_000, 10) for i in range(5)]
    for use in same:
        a.reprompt()
        a.reply(SAME, use)
    a.cost_state(12.5)
    a.write(root / "-home-dev-billing" / f"{SESSION_A}.jsonl")

    b = Transcript(SESSION_B, cwd="/home/dev/auth")
    b.prompt("hi")
    b.reply("hello", Use(1, 1))
    b.write(root / "-home-dev-auth" / f"{SESSION_B}.jsonl")
    agent = Transcript(SESSION_B, cwd="/home/dev/auth", sidechain=True,
                       model="claude-haiku-4-5-20251001", start=START.replace(month=4))
    agent.user("find the bug")
    tool = [Use(200 + i, 20) for i in range(4)]
    for use in tool:
        agent.run("pytest -x", "\x1b[31mFAILED\x1b[0m test_auth.py", use, is_error=True)
    agent.write(root / "-home-dev-auth" / SESSION_B / "subagents" / "agent-x1.jsonl")
    return {"same": same, "tool": tool}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["scan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_document_has_exactly_the_documented_schema(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    uses = history(projects_dir())
    code, out, _ = run(capsys, "--json")
    assert code == 0
    document = json.loads(out)  # exactly one document
    assert set(document) >= {"loops", "totals"}
    loops = document["loops"]
    assert len(loops) == 2
    for loop in loops:
        assert set(loop) == LOOP_KEYS
        assert set(loop["tokens"]) == TOKEN_KEYS
    assert set(document["totals"]) == {"loops", "tokens", "avoidable_tokens", "cost_usd"}
    same, tool = loops  # biggest first: the SAME loop costs more
    assert (same["kind"], same["rule"], same["replies"]) == ("reprompt", "SAME_REPLY_TURNS", 5)
    assert same["session_id"] == SESSION_A and same["project"] == "-home-dev-billing"
    assert same["tokens"]["total"] == total(uses["same"])
    assert same["avoidable_tokens"] == total(uses["same"][3:])
    assert (tool["kind"], tool["rule"], tool["replies"]) == ("tool", "TOOL_REPEAT", 4)
    assert tool["session_id"] == SESSION_B
    assert tool["transcript_path"].endswith("subagents/agent-x1.jsonl")
    assert tool["avoidable_tokens"] == total(uses["tool"][3:])
    sonnet = sum(u.input * 3 + u.output * 15 + u.cache_read * 0.3 + u.cache_creation * 3.75
                 for u in uses["same"]) / 1e6
    assert same["cost_usd"] == pytest.approx(sonnet, abs=1e-6)
    totals = document["totals"]
    assert totals["loops"] == 2
    assert totals["tokens"]["total"] == total(uses["same"]) + total(uses["tool"])
    assert totals["avoidable_tokens"] == same["avoidable_tokens"] + tool["avoidable_tokens"]
    assert totals["cost_usd"] == pytest.approx(same["cost_usd"] + tool["cost_usd"], abs=1e-6)
    (session_a, _) = document["sessions"]
    assert session_a["session_id"] == SESSION_A
    assert session_a["claude_code_cost_usd"] == 12.5
    assert session_a["cost_usd"] > session_a["loops_cost_usd"] > 0
    assert set(session_a) == SESSION_KEYS and set(session_a["tokens"]) == TOKEN_KEYS
    assert session_a["tokens"]["total"] == total(uses["same"]) + 2  # and the first reply
    (model,) = session_a["models"]
    assert (model["model"], model["price"]) == ("claude-sonnet-4-5-20250929", "exact")
    assert model["tokens"] == session_a["tokens"] and model["cost_usd"] == session_a["cost_usd"]
    assert document["scan"]["transcripts"] == 3


def test_each_json_loop_says_what_looped_as_the_table_does(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    history(projects_dir())
    same, tool = json.loads(run(capsys, "--json")[1])["loops"]
    assert same["what"] == f"3 similar replies to re-prompts: {SAME}"
    assert tool["what"] == "Bash: pytest -x (subagent)"
    monkeypatch.setenv("COLUMNS", "300")  # (the full table, its What column whole)
    table = run(capsys)[1]
    for loop in (same, tool):
        assert f"│ {loop['what']} " in table, table


def test_the_table_is_biggest_first_with_totals(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # (wide enough for the full table)
    history(projects_dir())
    code, out, err = run(capsys)
    assert code == 0 and err == ""
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if "Replies" in line)
    rows = [line for line in lines[header + 2:] if line.startswith("│")]
    assert "billing" in rows[0] and "re-prompt, same" in rows[0]
    assert "auth" in rows[1] and "tool repeat" in rows[1] and "(subagent)" in rows[1]
    assert "Bash: pytest -x" in rows[1]
    assert rows[-1].startswith("│ Total") and "2 loops" in rows[-1]
    assert "\x1b" not in out  # nothing from a transcript reaches the terminal unclean
    assert "by Claude Code" in out and "$12.50" in out
    assert "Read 3 transcripts" in out


def test_since_and_project_filter_loops(capsys: pytest.CaptureFixture[str]) -> None:
    history(projects_dir())
    _, out, _ = run(capsys, "--json", "--since", "2026-03-15")
    assert [loop["kind"] for loop in json.loads(out)["loops"]] == ["tool"]
    _, out, _ = run(capsys, "--json", "--since", "2026-03-01T08:00:00Z")
    assert len(json.loads(out)["loops"]) == 2
    _, out, _ = run(capsys, "--json", "--project", "BILLING")
    assert [loop["session_id"] for loop in json.loads(out)["loops"]] == [SESSION_A]


def test_a_prices_file_changes_the_cost(capsys: pytest.CaptureFixture[str], tmp_path: Path
                                        ) -> None:
    history(projects_dir())
    prices = tmp_path / "p.json"
    _, out, _ = run(capsys, "--json")
    default = json.loads(out)["totals"]["cost_usd"]
    prices.write_text('{"claude-haiku": [0, 0, 0, 0]}')  # the subagent's model
    _, out, _ = run(capsys, "--json", "--prices", str(prices))
    cheaper = json.loads(out)["totals"]["cost_usd"]
    assert 0 < cheaper < default
    prices.write_text('{"claude": [0, 0, 0, 0]}')  # a user's key wins over longer defaults
    _, out, _ = run(capsys, "--json", "--prices", str(prices))
    assert json.loads(out)["totals"]["cost_usd"] == 0


def test_bad_options_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "p.json"
    bad.write_text("{")
    code, out, err = run(capsys, "--prices", str(bad))
    assert code == 2 and out == "" and "p.json" in err
    with pytest.raises(SystemExit) as exit_:
        cli.main(["scan", "--since", "last tuesday"])
    assert exit_.value.code == 2


def test_json_top_lists_fewer_loops_and_keeps_the_totals_of_all(
        capsys: pytest.CaptureFixture[str]) -> None:
    """An audit found ``--json --top 1`` counting one loop in ``totals`` while its tokens
    were every loop's, and ``--top -1`` taken (it dropped the last row)."""
    history(projects_dir())
    everything = json.loads(run(capsys, "--json")[1])
    first = json.loads(run(capsys, "--json", "--top", "1")[1])
    assert len(everything["loops"]) == 2 and first["loops"] == everything["loops"][:1]
    assert first["totals"] == everything["totals"] and first["totals"]["loops"] == 2
    for bad in ("-1", "two"):
        with pytest.raises(SystemExit) as exit_:
            cli.main(["scan", "--top", bad])
        assert exit_.value.code == 2


def test_no_history_is_no_loops(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys)
    assert code == 0 and "No loops found." in out
    code, out, _ = run(capsys, "--json")
    document = json.loads(out)
    assert document["loops"] == [] and document["totals"]["loops"] == 0


def test_every_core_gives_the_same_result(monkeypatch: pytest.MonkeyPatch) -> None:
    root = projects_dir()
    history(root)
    for n in range(6):
        session = Transcript(f"cccccccc-2222-4333-8444-{n:012d}")
        session.prompt("go")
        session.goal()
        for i in range(3 + n):
            session.reprompt()
            session.reply(SAME, Use(i, 1))
        session.write(root / f"-home-dev-p{n}" / f"{session.session_id}.jsonl")
    listing = find_transcripts(root)
    one = sorted(pool.scan_transcripts(listing.transcripts, jobs=1), key=lambda r: r.path)
    monkeypatch.setattr(pool, "IN_PROCESS_BYTES", 0)
    monkeypatch.setattr(pool, "BATCH_BYTES", 1)
    seen: list[tuple[int, int]] = []
    two = sorted(pool.scan_transcripts(listing.transcripts, jobs=2,
                                       progress=lambda done, all_: seen.append((done, all_))),
                 key=lambda r: r.path)
    assert one == two and len(one) == 9
    assert seen[-1][0] == seen[-1][1]


def test_a_worker_dying_before_it_is_handed_a_task_costs_no_file(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool broken at a hand-out (a worker killed, out of memory): this process reads
    what the pool could not take, and the task lost with the worker is all that is lost."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    root = projects_dir()
    history(root)
    for n in range(4):
        session = Transcript(f"cccccccc-2222-4333-8444-{n:012d}")
        session.prompt("go")
        session.reply(SAME, Use(n, 1))
        session.write(root / f"-home-dev-p{n}" / f"{session.session_id}.jsonl")
    listing = find_transcripts(root)
    one = sorted(pool.scan_transcripts(listing.transcripts, jobs=1), key=lambda r: r.path)
    monkeypatch.setattr(pool, "IN_PROCESS_BYTES", 0)
    monkeypatch.setattr(pool, "batches", lambda files: [[file] for file in files])
    real = ProcessPoolExecutor.submit
    handed: list[int] = []

    def submit(self: ProcessPoolExecutor, *args: object) -> object:
        handed.append(1)
        if len(handed) > 1:
            raise BrokenProcessPool("a worker died")
        return real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(ProcessPoolExecutor, "submit", submit)
    two = sorted(pool.scan_transcripts(listing.transcripts, jobs=2), key=lambda r: r.path)
    assert len(handed) == 2 and len(one) > 2
    assert two == one


def test_batches_put_big_files_alone_and_small_ones_together() -> None:
    from loop_killer.scan.files import Transcript

    files = [Transcript(f"/{i}", "p", "s", False, size)
             for i, size in enumerate([10, 50, 3, 100, 7, 60])]
    tasks = pool.batches(files, batch_bytes=60)
    assert [[t.size for t in task] for task in tasks] == [[100], [60], [50, 10], [7, 3]]


def test_progress_bar_draws_and_wipes_its_line() -> None:
    stream = io.StringIO()
    bar = Progress(stream, width=60, interval=0)
    bar(5_000_000, 10_000_000)
    bar(10_000_000, 10_000_000)
    bar.close()
    text = stream.getvalue()
    assert "50.0%" in text and "100.0%" in text and text.endswith("\r\x1b[2K")


def test_help_does_not_load_the_scan_machinery() -> None:
    code = ("import sys; from loop_killer import cli; sys.argv = ['loop-killer', 'scan', "
            "'--help']\ntry:\n    cli.main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('loop_killer.scan')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=os.environ.copy()).stdout
    assert "--prices" in out
    assert out.strip().splitlines()[-1] == "['loop_killer.scan', 'loop_killer.scan.command']"


def test_the_scan_judges_with_the_settings_in_force(capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    """The same config.toml as the watcher and the hooks: a 5-answer SAME run is no loop
    when a loop takes 6 similar replies, and a tool rule switched off finds no tool loop."""
    history(projects_dir())
    _, out, _ = run(capsys, "--json")
    assert sorted(loop["rule"] for loop in json.loads(out)["loops"]) == [
        "SAME_REPLY_TURNS", "TOOL_REPEAT"]
    config = Path(os.environ["CLAUDE_CONFIG_DIR"]) / "loop-killer" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[rules]\nsame_reply_turns = 6\nidle_turns = 20\noff = ["TOOL_REPEAT"]\n')
    _, out, _ = run(capsys, "--json")
    assert json.loads(out)["loops"] == []
    config.write_text("[rules]\nsame_reply_turns = 1\n")
    code, out, err = run(capsys, "--json")
    assert code == 0 and "same_reply_turns must be a whole number" in err
    assert len(json.loads(out)["loops"]) == 2  # the defaults hold


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_prices_file_that_is_not_a_file_is_one_clear_line_and_exit_2(tmp_path: Path,
                                                                       kind: str) -> None:
    """``--prices FIFO`` blocked for ever and ``--prices /dev/zero`` read until the memory
    ran out; the process here is bounded in both, so the test fails rather than hangs."""
    path = tmp_path / "prices.json" if kind == "fifo" else Path("/dev/zero")
    if kind == "fifo":
        os.mkfifo(path)
    code = ("import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "from loop_killer import cli\n"
            "sys.exit(cli.main(sys.argv[1:]))\n")
    done = subprocess.run([sys.executable, "-c", code, "scan", "--prices", str(path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"loop-killer scan: {path}: not a regular file\n"


def test_json_is_cleaned_of_control_codes_as_the_table_is(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    """A project folder, a root and a timestamp holding a bidi override and C1 codes
    (which JSON leaves raw, unlike C0 ones) never reach the terminal; the JSON is valid."""
    from loop_killer.printable import printable

    root = tmp_path / "r\u202eoot"
    evil = "-home-dev-\u202eevil\x9b[2J"
    a = Transcript(SESSION_A, cwd="/home/dev/x")
    a.prompt("go")
    a.goal()
    a.reply("ok", Use(1, 1))
    for _ in range(4):
        a.reprompt()
        a.reply(SAME, Use(10, 10))
    a.cost_state(1.0)
    path = root / evil / f"{SESSION_A}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(a.data().replace(b'Z"', b'Z\\u202e\\u0085"'))  # in every timestamp
    code, out, _ = run(capsys, "--json", "--root", str(root))
    assert code == 0
    assert not any(ch in out for ch in "\u202e\x9b\x85"), out
    document = json.loads(out)
    (loop,) = document["loops"]
    assert loop["project"] == printable(evil) == "-home-dev- evil [2J"
    assert loop["transcript_path"] == f"{tmp_path}/r oot/{printable(evil)}/{SESSION_A}.jsonl"
    assert loop["first_at"].endswith("Z")
    assert document["sessions"][0]["project"] == printable(evil)
    assert document["scan"]["root"] == f"{tmp_path}/r oot"


def test_a_root_that_is_no_folder_or_dates_out_of_order_are_told_not_read_as_no_loops(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A typo must not read as a history without loops."""
    code, out, err = run(capsys, "--root", str(tmp_path / "nonexistent"))
    assert (code, out) == (2, "")
    assert err == f"loop-killer scan: --root {tmp_path / 'nonexistent'}: no such folder\n"
    code, out, err = run(capsys, "--since", "2026-01-01", "--until", "2020-01-01")
    assert (code, out) == (2, "") and "--since is after --until" in err
    history(projects_dir())
    code, out, _ = run(capsys, "--json", "--since", "2020-01-01", "--until", "2020-01-01")
    assert code == 0 and json.loads(out)["loops"] == []  # (a day's span is fine)


def test_the_scan_leaves_out_projects_switched_off_as_the_watcher_and_hooks_do(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29, item 7. ``/home/dev/billing/sub``'s transcript opens with lines that
    carry no cwd (a summary, a file-history snapshot) and its folder's name cannot tell it
    from ``/home/dev/billing-sub``: the cwd its lines give decides. Its subagent's file is
    left out too; the other project's loop stays. Results kept in the cache from before the
    setting are judged again (the cache holds what files hold, whatever the setting)."""
    history(projects_dir())
    sub = Transcript("cccccccc-2222-4333-8444-555555555555", cwd="/home/dev/billing/sub")
    sub.raw(b'{"type":"summary","summary":"Auth","leafUuid":"x"}')
    sub.raw(b'{"type":"file-history-snapshot","messageId":"m","snapshot":{},'
            b'"isSnapshotUpdate":false}')
    sub.prompt("go")
    sub.goal()
    sub.reply("ok", Use(1, 1))
    for _ in range(3):
        sub.reprompt()
        sub.reply(SAME, Use(1, 1))
    sub.write(projects_dir() / sub.project / f"{sub.session_id}.jsonl")
    _, out, _ = run(capsys, "--json")  # (fills the cache before the setting)
    assert len(json.loads(out)["loops"]) == 3
    config = Path(os.environ["CLAUDE_CONFIG_DIR"]) / "loop-killer" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[projects]\noff = ["/home/dev/billing", "/home/dev/auth"]\n')
    for _ in range(2):  # read, then from the cache
        _, out, _ = run(capsys, "--json")
        document = json.loads(out)
        assert document["loops"] == [] and document["sessions"] == []
        assert document["scan"]["skipped"] == {"project_off": 4}  # 3 sessions, 1 subagent
    config.write_text('[projects]\noff = ["/home/dev/billing/sub"]\n')
    _, out, _ = run(capsys, "--json")
    assert {loop["session_id"] for loop in json.loads(out)["loops"]} == {SESSION_A, SESSION_B}
    code, out, _ = run(capsys)
    assert code == 0 and "skipped: 1 in projects switched off." in " ".join(out.split())
