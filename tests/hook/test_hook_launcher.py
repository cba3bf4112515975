"""The plugin's launcher (plugin/hooks/launch.py, standard library only) finds the
installed package without anyone editing paths, or says once what to install."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest
from must_run import unavailable

from .kit import (
    LAUNCHER,
    LAUNCHER_MODULE,
    answer,
    fixture_transcript,
    lines_of,
    looping_stop,
    raw,
    stop_input,
    write,
)


@pytest.fixture(scope="session")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A python3 that has neither loop_killer nor orjson (a venv without site packages)."""
    folder = tmp_path_factory.mktemp("bare-venv")
    venv.create(folder, with_pip=False, system_site_packages=False, symlinks=True)
    python = str(folder / "bin" / "python3")
    probe = subprocess.run([python, "-c", "import loop_killer"], capture_output=True,
                           check=False)
    assert probe.returncode != 0
    return python


@pytest.fixture
def plugin_copy(tmp_path: Path) -> Path:
    """The plugin as Claude Code installs it: a copy of plugin/ alone, files not executable."""
    target = tmp_path / "installed-plugin"
    shutil.copytree(LAUNCHER.parents[1], target)
    launcher = target / "hooks" / "launch.py"
    launcher.chmod(0o644)
    return target


@pytest.fixture
def looping(tmp_path: Path) -> dict:
    return looping_stop(tmp_path / "proj" / "s.jsonl")


def _launch(python: str, plugin: Path, data: dict, **env: str) -> dict | None:
    full = {**os.environ, "CLAUDE_PLUGIN_ROOT": str(plugin),
            "CLAUDE_PLUGIN_DATA": str(plugin.parent / "plugin-data"), **env}
    done = subprocess.run([python, str(plugin / "hooks" / "launch.py")], input=raw(data),
                          capture_output=True, env=full, timeout=60, check=False)
    assert done.returncode == 0
    assert done.stderr == b""
    text = done.stdout.decode().strip()
    return json.loads(text) if text else None


def test_the_launcher_runs_the_hook_with_a_python3_that_has_the_package(
    plugin_copy: Path, looping: dict
) -> None:
    assert not os.access(plugin_copy / "hooks" / "launch.py", os.X_OK)
    output = _launch(sys.executable, plugin_copy, looping)
    assert output is not None and output["continue"] is False


def test_the_launcher_uses_the_interpreter_loop_killer_install_recorded(
    plugin_copy: Path, looping: dict, bare_python: str, own_home: Path
) -> None:
    state = own_home / ".claude" / "loop-killer"
    state.mkdir(parents=True, exist_ok=True)
    (state / "python").write_text(sys.executable + "\n")
    output = _launch(bare_python, plugin_copy, looping)
    assert output is not None and output["continue"] is False  # stdin reached the hook


@pytest.mark.parametrize("how", ["linked state folder", "world-writable file"])
def test_a_recorded_interpreter_anyone_could_have_written_is_never_run(
    tmp_path: Path, plugin_copy: Path, looping: dict, bare_python: str, own_home: Path,
    how: str,
) -> None:
    """The launcher runs the interpreter the file names: never from a state folder that
    is a link (it may point anywhere), nor from a file everyone may write."""
    state = own_home / ".claude" / "loop-killer"
    if how == "linked state folder":
        elsewhere = tmp_path / "elsewhere"
        state.rename(elsewhere)  # (the turn's record so far with it)
        state.symlink_to(elsewhere)
    else:
        state.mkdir(parents=True, exist_ok=True)
    (state / "python").write_text(sys.executable + "\n")
    if how == "world-writable file":
        (state / "python").chmod(0o666)
    output = _launch(bare_python, plugin_copy, looping, PATH=str(tmp_path / "no-bin"))
    assert output is not None and "cannot find the loop-killer Python package" in output[
        "systemMessage"]


def test_the_recorded_interpreters_packages_run_in_this_python3_when_its_version_fits(
    tmp_path: Path, plugin_copy: Path, looping: dict, bare_python: str, own_home: Path
) -> None:
    """Set-up (a) of scripts/hook-timing: the python3 on PATH lacks the package, which
    lives in a venv of the same Python version. Its site-packages are imported by the
    python3 already running (one interpreter start, not two): shown here by a recorded
    interpreter that cannot be started at all."""
    import loop_killer
    import orjson

    venv_root = tmp_path / "package-venv"
    site = venv_root / "lib" / "python{}.{}".format(*sys.version_info[:2]) / "site-packages"
    site.mkdir(parents=True)
    (site / "loop_killer").symlink_to(Path(loop_killer.__file__).parent)
    (site / "orjson").symlink_to(Path(orjson.__file__).parent)
    (venv_root / "bin").mkdir()
    (venv_root / "bin" / "python").write_text("not an interpreter\n")  # never started
    state = own_home / ".claude" / "loop-killer"
    state.mkdir(parents=True, exist_ok=True)
    (state / "python").write_text(str(venv_root / "bin" / "python") + "\n")
    output = _launch(bare_python, plugin_copy, looping, PATH=str(tmp_path / "no-bin"))
    assert output is not None and output["continue"] is False
    # Another version's folder is not this Python's: left alone (nothing else to run).
    site.parent.rename(site.parent.with_name("python3.0"))
    quiet = _launch(bare_python, plugin_copy, looping, PATH=str(tmp_path / "no-bin"))
    assert quiet is not None and "cannot find the loop-killer Python package" in (
        quiet["systemMessage"])


def test_the_launcher_uses_the_shebang_of_a_loop_killer_script_on_path(
    tmp_path: Path, plugin_copy: Path, looping: dict, bare_python: str
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "loop-killer"
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom loop_killer.cli import main\n"
                      "sys.exit(main())\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    output = _launch(bare_python, plugin_copy, looping,
                     PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert output is not None and output["continue"] is False


def test_pips_long_shebang_form_is_understood(
    tmp_path: Path, plugin_copy: Path, looping: dict, bare_python: str
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "loop-killer"
    script.write_text(f"#!/bin/sh\n'''exec' \"{sys.executable}\" \"$0\" \"$@\"\n' '''\n")
    output = _launch(bare_python, plugin_copy, looping,
                     PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert output is not None and output["continue"] is False


def test_without_the_package_it_blocks_nothing_and_says_once_what_to_install(
    tmp_path: Path, plugin_copy: Path, looping: dict, bare_python: str
) -> None:
    empty_path = str(tmp_path / "no-bin")
    first = _launch(bare_python, plugin_copy, looping, PATH=empty_path)
    assert first is not None and set(first) == {"systemMessage"}
    assert "cannot find the loop-killer Python package" in first["systemMessage"]
    assert "loop-killer install" in first["systemMessage"]
    assert _launch(bare_python, plugin_copy, looping, PATH=empty_path) is None
    assert (plugin_copy.parent / "plugin-data" / "missing-package-notice").exists()


def test_a_stale_recorded_interpreter_is_skipped(
    tmp_path: Path, plugin_copy: Path, looping: dict, bare_python: str, own_home: Path
) -> None:
    state = own_home / ".claude" / "loop-killer"
    state.mkdir(parents=True, exist_ok=True)
    (state / "python").write_text(str(tmp_path / "gone" / "python3") + "\n")
    output = _launch(bare_python, plugin_copy, looping, PATH=str(tmp_path / "no-bin"))
    assert output is not None and "systemMessage" in output and "continue" not in output


def _clone(root: Path) -> Path:
    """A source checkout: plugin/ beside watcher/loop_killer (and what pip needs to build)."""
    shutil.copytree(LAUNCHER.parents[1], root / "plugin",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(LAUNCHER.parents[2] / "watcher" / "loop_killer",
                    root / "watcher" / "loop_killer",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(LAUNCHER.parents[2] / ".claude-plugin", root / ".claude-plugin")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(LAUNCHER.parents[2] / name, root / name)
    return root


def _orjson_alone(folder: Path) -> Path:
    """A folder holding orjson and nothing else (this suite's site-packages may also hold
    loop_killer, which would hide the fallback under test)."""
    import orjson

    folder.mkdir(parents=True)
    (folder / "orjson").symlink_to(Path(orjson.__file__).parent, target_is_directory=True)
    return folder


def _launch_in_checkout(python: str, checkout: Path, looping: dict, path: list[Path],
                        tmp_path: Path) -> dict:
    """The checkout's launcher run by ``python`` with exactly ``path`` as its site (no
    site-packages, no .pth files); nothing recorded, no loop-killer on PATH: only the
    checkout beside it can give the package."""
    env = {**os.environ, "PYTHONNOUSERSITE": "1", "PATH": str(tmp_path / "no-bin"),
           "PYTHONPATH": os.pathsep.join(map(str, path)),
           "CLAUDE_PLUGIN_DATA": str(tmp_path / "plugin-data")}
    done = subprocess.run([python, "-S", str(checkout / "plugin" / "hooks" / "launch.py")],
                          input=raw(looping), capture_output=True, env=env, timeout=60,
                          check=False, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    output = json.loads(done.stdout)
    assert output.get("continue") is False, output  # stopped, not "cannot find the package"
    return output


def test_in_a_source_checkout_the_launcher_finds_the_package_beside_it(
    tmp_path: Path, looping: dict
) -> None:
    """A python3 with orjson but without loop_killer installed, in a clone: ../watcher."""
    checkout = _clone(tmp_path / "clone")
    _launch_in_checkout(sys.executable, checkout, looping,
                        [_orjson_alone(tmp_path / "orjson-only")], tmp_path)


@pytest.mark.parametrize("leftover", ["namespace", "stale"])
def test_a_leftover_loop_killer_folder_does_not_hide_the_checkout(
    tmp_path: Path, looping: dict, leftover: str
) -> None:
    """Ahead of the checkout on the path: the ``loop_killer/_plugin`` folder an editable
    install leaves in site-packages (no ``__init__.py``: a namespace package), or an old
    package without the hook entry. Either is not the package; the checkout is used."""
    checkout = _clone(tmp_path / "clone")
    site = tmp_path / "site-packages"
    (site / "loop_killer" / "_plugin" / "plugin").mkdir(parents=True)
    if leftover == "stale":
        (site / "loop_killer" / "__init__.py").write_text("")
    _launch_in_checkout(sys.executable, checkout, looping,
                        [site, _orjson_alone(tmp_path / "orjson-only")], tmp_path)


def test_after_pip_install_e_in_a_venv_the_checkout_still_runs_the_hook(
    tmp_path: Path, looping: dict
) -> None:
    """The layout for real: ``pip install -e`` of a checkout into a venv (hatchling, orjson
    and watchdog from PyPI), then that venv's site-packages without its .pth files."""
    checkout = _clone(tmp_path / "clone")
    folder = tmp_path / "venv"
    venv.create(folder, with_pip=True, symlinks=True)
    python = str(folder / "bin" / "python")
    done = subprocess.run([python, "-m", "pip", "install", "--quiet",
                           "--disable-pip-version-check", "-e", str(checkout)],
                          capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        unavailable(f"pip install -e failed (no index reachable?): {done.stderr[-500:]}")
    (site,) = folder.glob("lib/python3*/site-packages")
    assert (site / "loop_killer" / "_plugin").is_dir()  # what hatch's force-include leaves
    assert not (site / "loop_killer" / "__init__.py").exists()
    _launch_in_checkout(python, checkout, looping, [site], tmp_path)


@pytest.mark.parametrize("kind", ["fifo", "symlink", "folder"])
def test_a_recorded_python_file_that_is_not_a_plain_file_is_never_read(
    tmp_path: Path, plugin_copy: Path, looping: dict, bare_python: str, own_home: Path,
    kind: str,
) -> None:
    """A FIFO would block the hook (and the turn) forever; a link may point anywhere."""
    state = own_home / ".claude" / "loop-killer"
    state.mkdir(parents=True, exist_ok=True)
    recorded = state / "python"
    if kind == "fifo":
        os.mkfifo(recorded)
    elif kind == "symlink":
        target = tmp_path / "elsewhere"
        target.write_text(sys.executable + "\n")
        recorded.symlink_to(target)
    else:
        recorded.mkdir()
    marker = plugin_copy.parent / "plugin-data" / "missing-package-notice"
    marker.parent.mkdir()
    os.mkfifo(marker)  # the notice marker too
    output = _launch(bare_python, plugin_copy, looping, PATH=str(tmp_path / "no-bin"))
    assert output is not None and "cannot find the loop-killer Python package" in output[
        "systemMessage"]


# -- the fast path: a normal turn decides from stdin and one stat, starts nothing ----------


def _recorder(tmp_path: Path, state: Path, real: str = sys.executable) -> Path:
    """Record (as ``loop-killer install`` does) an interpreter that leaves a mark when it is
    started, then runs the real one: proof of whether the launcher started the package."""
    marker = tmp_path / "package-started"
    _record_script(state, tmp_path / "recorded-bin",
                   f'echo started >> "{marker}"\nexec "{real}" "$@"')
    return marker


def _record_script(state: Path, folder: Path, body: str) -> None:
    """Record a shell script as the interpreter ``loop-killer install`` found."""
    script = folder / "python3"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    state.mkdir(parents=True, exist_ok=True)
    (state / "python").write_text(f"{script}\n")


def _run(python: str, plugin: Path, stdin: bytes, *args: str,
         **env: str) -> subprocess.CompletedProcess[bytes]:
    full = {**os.environ, "CLAUDE_PLUGIN_ROOT": str(plugin),
            "CLAUDE_PLUGIN_DATA": str(plugin.parent / "plugin-data"), **env}
    done = subprocess.run([python, *args, str(plugin / "hooks" / "launch.py")], input=stdin,
                          capture_output=True, env=full, timeout=120, check=False)
    assert done.returncode == 0
    return done


def _event(event: str, session_id: str = "s", **fields: object) -> bytes:
    data = {"session_id": session_id, "transcript_path": f"/nowhere/{session_id}.jsonl",
            "cwd": "/tmp", "hook_event_name": event, **fields}
    return json.dumps(data).encode()


@pytest.fixture
def normal_turn(tmp_path: Path) -> dict:
    """A Stop for a reply to a person's prompt, on a real transcript (no session record)."""
    lines = lines_of(fixture_transcript("goal-same"))
    return stop_input(write(tmp_path / "proj" / "s.jsonl", lines[: answer(lines, 3).first]),
                      active=False)


def test_a_normal_turn_starts_no_package_and_prints_nothing(
    tmp_path: Path, plugin_copy: Path, bare_python: str, state: Path, normal_turn: dict
) -> None:
    marker = _recorder(tmp_path, state)
    crafted = {**normal_turn, "last_assistant_message": 'x", "stop_hook_active":true}'}
    for stdin in (raw(normal_turn), raw({**normal_turn, "stop_hook_active": "true"}),
                  raw(crafted), json.dumps(crafted, separators=(",", ":")).encode(),
                  _event("PreToolUse", tool_name="Bash", tool_input={"command": "ls"}),
                  _event("UserPromptSubmit", prompt="go on")):
        done = _run(bare_python, plugin_copy, stdin)
        assert (done.stdout, done.stderr) == (b"", b"")
        assert not marker.exists(), stdin[:80]
    # The same recorder does start the package when there is something to do: a re-prompt's
    # Stop, and then the next turn's first Stop, which the session's record sends on.
    looping = looping_stop(Path(normal_turn["transcript_path"]))
    done = _run(bare_python, plugin_copy, raw(looping))
    assert json.loads(done.stdout)["continue"] is False
    assert marker.read_text() == "started\n"
    _run(bare_python, plugin_copy, raw(normal_turn))
    assert marker.read_text() == "started\n" * 2


@pytest.mark.parametrize("event", ["PostToolUse", "PostToolUseFailure"])
def test_after_a_tool_call_the_package_always_runs(
    tmp_path: Path, plugin_copy: Path, bare_python: str, state: Path, event: str
) -> None:
    marker = _recorder(tmp_path, state)
    done = _run(bare_python, plugin_copy, _event(event, tool_name="Bash",
                                                 tool_input={"command": "ls"}))
    assert done.stderr == b""
    assert marker.exists()


@pytest.mark.parametrize("event", ["PreToolUse", "UserPromptSubmit"])
def test_a_tool_history_sends_the_tool_events_to_the_package(
    tmp_path: Path, plugin_copy: Path, bare_python: str, state: Path, event: str
) -> None:
    marker = _recorder(tmp_path, state)
    (state / "tools").mkdir()
    (state / "tools" / "other.json").write_text("{}")
    (state / "tools" / "other.refuse").write_text("")
    _run(bare_python, plugin_copy, _event(event, tool_name="Bash"))
    assert not marker.exists()
    (state / "tools" / "s.json").write_text("{}")
    _run(bare_python, plugin_copy, _event(event, tool_name="Bash"))
    # A PreToolUse needs the package only when a call of the session may be refused.
    assert marker.exists() == (event == "UserPromptSubmit")
    (state / "tools" / "s.refuse").write_text("")
    _run(bare_python, plugin_copy, _event(event, tool_name="Bash"))
    assert marker.exists()


def test_a_mod_plan_waiting_to_be_logged_sends_a_normal_turn_to_the_package(
    tmp_path: Path, plugin_copy: Path, bare_python: str, state: Path, normal_turn: dict
) -> None:
    """The package's Stop hook sweeps the mod's outcome records into the detection log;
    after a stop the next turn is usually a person's, so the launcher looks for them."""
    marker = _recorder(tmp_path, state)
    (state / "outcomes").mkdir()
    _run(bare_python, plugin_copy, raw(normal_turn))
    assert not marker.exists()
    (state / "outcomes" / "some-stop.plan").write_text("{}")
    _run(bare_python, plugin_copy, raw(normal_turn))
    assert marker.exists()


def _modules_imported(python: str, *args: str, stdin: bytes = b"") -> set[str]:
    """The modules a Python process imported (``-X importtime`` lists each one)."""
    done = subprocess.run([python, "-X", "importtime", *args], input=stdin,
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == 0
    names = set()
    for line in done.stderr.decode().splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip())
    names.discard("package")  # the header line
    return names


def test_in_process_a_normal_turn_imports_nothing_but_the_json_scanner(
    plugin_copy: Path, normal_turn: dict
) -> None:
    """With the package importable by the python3 that runs the launcher: the launcher's
    own module (``loop_killer_launch``, kept compiled) and the C JSON scanner, no more."""
    launcher = str(plugin_copy / "hooks" / "launch.py")
    bare = _modules_imported(sys.executable, "-c", "pass")
    for stdin in (raw(normal_turn), _event("PreToolUse", tool_name="Bash"),
                  _event("UserPromptSubmit", prompt="go on")):
        extra = _modules_imported(sys.executable, launcher, stdin=stdin) - bare
        assert extra <= {"loop_killer_launch", "_json"}, extra
    # The same check sees the package when it runs.
    extra = _modules_imported(sys.executable, launcher,
                              stdin=raw({**normal_turn, "stop_hook_active": True})) - bare
    assert "loop_killer.hooks.entry" in extra


def test_a_pending_request_reaches_the_package_on_a_normal_turn(
    tmp_path: Path, plugin_copy: Path, bare_python: str, state: Path, normal_turn: dict
) -> None:
    from loop_killer.state.inbox import ClearRequest, write_request

    marker = _recorder(tmp_path, state)
    write_request(state, ClearRequest(
        session_id="s", rule="MANUAL", count=2, run_length=2, answer_uuid="",
        answer_digest="", transcript_path=normal_turn["transcript_path"],
        created_at=time.time(), source="manual"))
    done = _run(bare_python, plugin_copy, raw(normal_turn))
    assert json.loads(done.stdout)["continue"] is False
    assert marker.exists()
    assert not (state / "requests" / "s.json").exists()


@pytest.mark.parametrize("kind", ["fifo", "symlink", "dangling", "folder"])
def test_odd_things_at_the_request_path_never_hang_or_mislead_the_hook(
    tmp_path: Path, plugin_copy: Path, state: Path, normal_turn: dict, kind: str
) -> None:
    """The launcher only lstats the path; the package takes it and refuses it."""
    from loop_killer.state.inbox import ClearRequest

    requests = state / "requests"
    requests.mkdir(parents=True)
    path = requests / "s.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":  # to a request that would be valid as a plain file
        target = tmp_path / "elsewhere.json"
        target.write_bytes(ClearRequest(
            session_id="s", rule="MANUAL", count=2, run_length=2, answer_uuid="",
            answer_digest="", transcript_path=normal_turn["transcript_path"],
            created_at=time.time(), source="manual").to_json())
        path.symlink_to(target)
    elif kind == "dangling":
        path.symlink_to(tmp_path / "gone.json")
    else:
        path.mkdir()
    done = _run(sys.executable, plugin_copy, raw(normal_turn))
    output = json.loads(done.stdout) if done.stdout.strip() else {}
    assert output.get("continue") is not False
    assert "decision" not in output


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_odd_things_at_the_tools_path_never_hang_the_hook(
    tmp_path: Path, plugin_copy: Path, state: Path, kind: str
) -> None:
    tools = state / "tools"
    tools.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(tools / "s.json")
    else:
        (tools / "s.json").symlink_to(tmp_path / "gone.json")
    done = _run(sys.executable, plugin_copy, _event("PreToolUse", tool_name="Bash",
                                                    tool_input={"command": "ls"}))
    output = json.loads(done.stdout) if done.stdout.strip() else {}
    assert "decision" not in output


# -- the input is handed on intact ---------------------------------------------------------


def _copying_python(tmp_path: Path, state: Path) -> Path:
    """A recorded "interpreter" that only keeps what it finds on its stdin."""
    copy = tmp_path / "stdin-copy"
    _record_script(state, tmp_path / "copy-bin", f'"{shutil.which("cat")}" > "{copy}"')
    return copy


@pytest.mark.parametrize("size", [0, 70_000, 31 * 1024 * 1024])
def test_after_an_exec_the_interpreter_reads_the_same_bytes(
    tmp_path: Path, plugin_copy: Path, bare_python: str, state: Path, size: int
) -> None:
    copy = _copying_python(tmp_path, state)
    message = ("é\u2028 \"x\" \\ " * (size // 12 + 1))[:size // 2]
    stdin = (b"\n  " + json.dumps({"hook_event_name": "Stop", "session_id": "s",
                                   "transcript_path": "/p/s.jsonl", "stop_hook_active": True,
                                   "last_assistant_message": message},
                                  ensure_ascii=False).encode() + b"\n")
    assert len(stdin) <= 32 * 1024 * 1024
    _run(bare_python, plugin_copy, stdin, PATH=str(tmp_path / "no-bin"))
    assert copy.read_bytes() == stdin


def test_without_memfd_the_input_goes_back_through_a_temporary_file(tmp_path: Path) -> None:
    code = (
        "import importlib.util, os, sys\n"
        "spec = importlib.util.spec_from_file_location('l', sys.argv[1])\n"
        "l = importlib.util.module_from_spec(spec); spec.loader.exec_module(l)\n"
        "del os.memfd_create\n"
        "raw = bytes(range(256)) * 4096\n"
        "assert l._refill_stdin(raw)\n"
        "got = b''\n"
        "while True:\n"
        "    chunk = os.read(0, 1 << 20)\n"
        "    if not chunk: break\n"
        "    got += chunk\n"
        "print(got == raw)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(LAUNCHER_MODULE)], input=b"other",
                          capture_output=True, timeout=60, check=False)
    assert done.stdout == b"True\n", done.stderr


@pytest.fixture
def fake_package(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A stand-in ``loop_killer`` (and ``orjson``) whose hook entry keeps its input; its
    ``main`` takes the raw bytes (today's) or reads stdin itself (an older package)."""
    root = tmp_path / "fake-site"
    (root / "orjson").mkdir(parents=True)
    (root / "orjson" / "__init__.py").write_text("")
    hook = root / "loop_killer" / "hooks"
    hook.mkdir(parents=True)
    (root / "loop_killer" / "__init__.py").write_text("")
    (hook / "__init__.py").write_text("")
    signature = "raw=None" if request.param == "raw" else ""
    read = "" if request.param == "raw" else "raw = None\n    "
    (hook / "entry.py").write_text(
        "import os, sys\n"
        f"def main({signature}):\n"
        f"    {read}if raw is None:\n"
        "        raw = sys.stdin.buffer.read()\n"
        "    with open(os.environ['LK_TEST_COPY'], 'wb') as handle:\n"
        "        handle.write(raw)\n"
        "    return 0\n")
    return root


@pytest.mark.parametrize("fake_package", ["raw", "stdin"], indirect=True)
def test_in_process_the_package_gets_the_same_bytes(
    tmp_path: Path, plugin_copy: Path, bare_python: str, fake_package: Path
) -> None:
    copy = tmp_path / "entry-got"
    stdin = b" " + _event("PostToolUse", tool_name="Bash", tool_response="\u00e9" * 100_000)
    _run(bare_python, plugin_copy, stdin, PYTHONPATH=str(fake_package),
         LK_TEST_COPY=str(copy))
    assert copy.read_bytes() == stdin


# -- bad input: nothing shown, nothing started -----------------------------------------------


BAD_INPUTS = {
    "empty": b"",
    "not json": b"Stop hook_event_name",
    "not utf-8": b'{"hook_event_name": "Stop", "x": "\xff"}',
    "a list": b'[{"hook_event_name": "PostToolUse", "session_id": "s"}]',
    "deep list": b"[" * 100_000,
    "deep object": b'{"hook_event_name": "PostToolUse", "x": ' + b'{"a": ' * 100_000,
    "deep but closed": b'{"hook_event_name": "PostToolUse", "x": ' + b"[" * 100_000
                       + b"]" * 100_000 + b"}",
    "trailing junk": b'{"hook_event_name": "PostToolUse", "session_id": "s"} }',
    "too large": b'{"hook_event_name": "PostToolUse", "session_id": "s", "x": "'
                 + b"a" * (32 * 1024 * 1024) + b'"}',
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_exits_silently_without_starting_the_package(
    tmp_path: Path, plugin_copy: Path, bare_python: str, state: Path, name: str
) -> None:
    marker = _recorder(tmp_path, state)
    done = _run(bare_python, plugin_copy, BAD_INPUTS[name])
    assert (done.stdout, done.stderr) == (b"", b"")
    assert not marker.exists()


@pytest.mark.parametrize("name", ["deep object", "too large", "not json"])
def test_bad_input_in_process_exits_silently(plugin_copy: Path, name: str) -> None:
    done = _run(sys.executable, plugin_copy, BAD_INPUTS[name])
    assert (done.stdout, done.stderr) == (b"", b"")
