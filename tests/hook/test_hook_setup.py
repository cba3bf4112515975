"""``loop-killer install`` and ``loop-killer doctor``."""

from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from e2e.harness import claude_binary, missing_claude_reason
from loop_killer import printable
from loop_killer.cli import setup
from loop_killer.hooks.notice import parse_version
from loop_killer.state.status import WatcherHeartbeat, write_heartbeat
from must_run import unavailable


def _real_claude(version: str) -> Path | None:
    # The e2e harness knows where scripts/install-claude-code puts the binaries (it is
    # imported with the module, while HOME is still the suite's, not a test's own).
    return claude_binary(version)


def _fake_claude(folder: Path, *, version: str = "2.1.328 (Claude Code)",
                 plugins: list | None = None) -> Path:
    """A ``claude`` that logs its argv and answers the few commands setup uses."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "claude.log"
    script = folder / "claude"
    script.write_text(f"""#!{sys.executable}
import json, sys
with open({str(log)!r}, "a") as handle:
    handle.write(json.dumps(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
if args == ["--version"]:
    print({version!r})
elif args[:3] == ["plugin", "list", "--json"]:
    print(json.dumps({plugins if plugins is not None else []!r}))
else:
    print("ok: " + " ".join(args))
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _calls(folder: Path) -> list[list[str]]:
    log = folder / "claude.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _args(**values) -> argparse.Namespace:
    return argparse.Namespace(**{"print_only": False, "claude": None, **values})


def test_install_records_the_interpreter_and_registers_the_plugin(
    tmp_path: Path, own_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claude = _fake_claude(tmp_path / "bin")
    env = {**os.environ, "PATH": f"{claude.parent}{os.pathsep}{os.environ['PATH']}"}
    assert setup.install(_args(), env=env) == 0
    recorded = own_home / ".claude" / "loop-killer" / "python"
    assert recorded.read_text().strip() == sys.executable
    root = setup.find_marketplace()
    assert root is not None and (root / "plugin" / "hooks" / "hooks.json").is_file()
    assert _calls(claude.parent) == [
        ["plugin", "marketplace", "add", str(root)],
        ["plugin", "install", "loop-killer@loop-killer"],
    ]
    assert "the plugin is installed" in capsys.readouterr().out


def _venv_seeing_this_package(folder: Path) -> Path:
    """A fresh venv (no system site packages) whose site-packages points at this package
    and orjson by a .pth file, as if both were installed in it; its bin/python."""
    import loop_killer
    import orjson

    venv.create(folder, with_pip=False, system_site_packages=False, symlinks=True)
    (site,) = folder.glob("lib/python3*/site-packages")
    roots = {str(Path(m.__file__).resolve().parents[1]) for m in (loop_killer, orjson)}
    (site / "loop-killer-test.pth").write_text("\n".join(sorted(roots)) + "\n")
    return folder / "bin" / "python"


def test_install_from_a_venv_records_the_venvs_own_python_not_its_base(
    tmp_path: Path, own_home: Path
) -> None:
    python = _venv_seeing_this_package(tmp_path / "venv")
    assert python.is_symlink()  # to the base interpreter, which lacks the venv's packages
    env = {**os.environ, "PATH": str(tmp_path / "empty")}
    done = subprocess.run([str(python), "-m", "loop_killer.cli", "install", "--print-only"],
                          capture_output=True, text=True, env=env, timeout=60, check=False,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    recorded = (own_home / ".claude" / "loop-killer" / "python").read_text().strip()
    assert recorded == str(python)
    assert f"the virtual environment {tmp_path / 'venv'}" in done.stdout


def test_the_recorded_interpreter_is_described_as_people_installed_it() -> None:
    kind = setup.interpreter_kind
    assert kind("/usr", "/usr") == "a Python installation, no virtual environment"
    assert kind("/home/a/.local/share/pipx/venvs/loop-killer", "/usr") == (
        "pipx's environment for it")
    assert kind("/home/a/.local/pipx/venvs/loop-killer", "/usr") == "pipx's environment for it"
    assert kind("/home/a/.local/share/uv/tools/loop-killer", "/usr") == (
        "uv tool's environment for it")
    assert kind("/home/a/src/loop-killer/.venv", "/usr") == (
        "the virtual environment /home/a/src/loop-killer/.venv")
    assert kind() in ("a Python installation, no virtual environment",
                      f"the virtual environment {sys.prefix}")


def test_install_without_claude_prints_the_exact_commands(
    tmp_path: Path, own_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {**os.environ, "PATH": str(tmp_path / "empty")}
    assert setup.install(_args(), env=env) == 0
    out = capsys.readouterr().out
    root = setup.find_marketplace()
    assert f"claude plugin marketplace add {root}" in out
    assert "claude plugin install loop-killer@loop-killer" in out
    assert (own_home / ".claude" / "loop-killer" / "python").exists()


def test_install_never_writes_through_a_linked_state_folder(
    tmp_path: Path, own_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The state folder is a link: the interpreter is not recorded there (the launcher
    would run what that file names), install says so and goes on."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state = own_home / ".claude" / "loop-killer"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.symlink_to(elsewhere)
    env = {**os.environ, "PATH": str(tmp_path / "empty")}
    assert setup.install(_args(), env=env) == 0
    out = capsys.readouterr().out
    assert "cannot record this Python for the plugin's hooks" in out
    assert "claude plugin install loop-killer@loop-killer" in out
    assert list(elsewhere.iterdir()) == []


def test_install_fits_an_80_column_terminal(
    tmp_path: Path, own_home: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """The line saying which Python was recorded names two long paths: cut at spaces to
    the terminal's width (a pipe or a file gets it whole)."""
    monkeypatch.setattr(printable, "terminal_width", lambda stream: 80)
    env = {**os.environ, "PATH": str(tmp_path / "empty")}
    assert setup.install(_args(), env=env) == 0
    lines = capsys.readouterr().out.splitlines()
    recorded = [line for line in lines if not line.startswith("  claude plugin")]
    assert recorded[0].startswith("recorded this Python") and len(recorded) > 2
    assert all(len(line) <= 80 for line in recorded), lines


def test_install_reports_a_failing_claude(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    claude = folder / "claude"
    claude.write_text("#!/bin/sh\necho 'marketplace refused' >&2\nexit 3\n")
    claude.chmod(0o755)
    assert setup.install(_args(claude=str(claude)), env=dict(os.environ)) == 1
    assert "marketplace refused" in capsys.readouterr().err


@pytest.mark.parametrize("version", ["2.1.332", "2.1.328"])
def test_install_with_the_real_claude_cli_is_idempotent(
    version: str, tmp_path: Path, own_home: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    if _real_claude(version) is None:
        unavailable(missing_claude_reason(version))
    claude = str(_real_claude(version))
    env = {**os.environ, "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    monkeypatch.setattr(printable, "terminal_width", lambda stream: 80)
    for _ in range(2):
        assert setup.install(_args(claude=claude), env=env) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("Successfully" in line or "already" in line for line in lines), lines
    assert all(len(line) <= 80 for line in lines), lines  # claude's own answer wrapped too
    listed = subprocess.run([claude, "plugin", "list", "--json"], capture_output=True,
                            text=True, env=env, timeout=120, check=True)
    plugins = [p for p in json.loads(listed.stdout) if not p["id"].endswith("@builtin")]
    assert [p["id"] for p in plugins] == ["loop-killer@loop-killer"]
    assert plugins[0]["enabled"] is True
    checks = {c.what: c for c in setup.run_checks(claude=claude, run=_run_with(env), env=env)}
    assert checks["plugin"].level == "ok"
    assert checks["claude version"].level == "ok"


def _run_with(env):
    def run(argv):
        return subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=120,
                              check=False)
    return run


def test_doctor_reports_each_check(tmp_path: Path, own_home: Path) -> None:
    claude = _fake_claude(tmp_path / "bin", version="2.1.250 (Claude Code)", plugins=[
        {"id": "loop-killer@loop-killer", "version": "0.1.0", "enabled": True,
         "readFromFolder": "/x/plugin"}])
    state = own_home / ".claude" / "loop-killer"
    # The hook's python3 is this test's own, whatever python3 the outer PATH has first.
    _python3_running(sys.executable, claude.parent)
    env = {**os.environ, "PATH": f"{claude.parent}{os.pathsep}{os.environ['PATH']}",
           "TMUX": "/tmp/tmux-0/default,1,0", "TMUX_PANE": "%3"}
    checks = {c.what: c for c in setup.run_checks(claude=None, run=_run_with(env), env=env)}
    assert checks["hook python"].level == "ok"
    assert "imports loop_killer and orjson" in checks["hook python"].detail
    assert checks["plugin"].level == "ok" and "/x/plugin" in checks["plugin"].detail
    assert checks["claude version"].level == "warn"
    assert "older than 2.1.287" in checks["claude version"].detail
    assert checks["watcher"].level == "warn"
    assert checks["state folder"].level == "ok"
    assert "inside tmux" in checks["terminal"].detail
    import time

    write_heartbeat(state, WatcherHeartbeat(pid=os.getpid(), started_at=time.time(),
                                            beat_at=time.time(), root="/r", sessions=2))
    checks = {c.what: c for c in setup.run_checks(claude=None, run=_run_with(env), env=env)}
    assert checks["watcher"].level == "ok"
    assert checks["settings"].level == "ok" and "documented defaults" in checks["settings"].detail
    (state / "config.toml").write_text("[rules]\nsimilar = 2\n")  # out of range
    checks = {c.what: c for c in setup.run_checks(claude=None, run=_run_with(env), env=env)}
    assert checks["settings"].level == "warn"
    assert "rules.similar must be a number from" in checks["settings"].detail


def test_doctor_fails_when_the_plugin_is_missing_or_the_state_is_not_writable(
    tmp_path: Path
) -> None:
    claude = _fake_claude(tmp_path / "bin", plugins=[])
    blocker = tmp_path / "file"
    blocker.write_text("x")
    env = {**os.environ, "PATH": f"{claude.parent}{os.pathsep}{os.environ['PATH']}",
           "LOOP_KILLER_STATE_DIR": str(blocker / "state")}
    checks = {c.what: c for c in setup.run_checks(claude=None, run=_run_with(env), env=env)}
    assert checks["plugin"].level == "fail"
    assert checks["state folder"].level == "fail"
    assert checks["claude version"].level == "ok"
    assert "not inside tmux or screen" in checks["terminal"].detail
    assert setup.doctor(argparse.Namespace(claude=None), run=_run_with(env), env=env) == 1


def test_doctor_knows_when_the_hooks_python3_lacks_the_package(tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    python3 = folder / "python3"
    python3.write_text("#!/bin/sh\nexit 1\n")
    python3.chmod(0o755)
    env = {**os.environ, "PATH": str(folder)}
    checks = {c.what: c for c in setup.run_checks(claude=None, run=_run_with(env), env=env)}
    assert checks["hook python"].level == "fail"
    assert "no interpreter recorded" in checks["hook python"].detail
    setup.record_interpreter(setup.state_dir(env))
    checks = {c.what: c for c in setup.run_checks(claude=None, run=_run_with(env), env=env)}
    assert checks["hook python"].level == "ok"
    # An OK line says what will be used, not only what fails.
    detail = checks["hook python"].detail
    assert f"lacks loop_killer/orjson; the hook uses {os.path.abspath(sys.executable)} " \
           "(recorded by loop-killer install)" in detail
    assert "cannot" not in detail


def _python3_running(python: str, folder: Path) -> Path:
    """A ``python3`` in ``folder`` that runs ``python`` (a wrapper, not a link: a venv's
    python started through a link elsewhere would not see the venv)."""
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def test_the_cli_dispatches_install_and_doctor(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{tmp_path}"}
    done = subprocess.run([sys.executable, "-m", "loop_killer.cli", "install", "--print-only"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "claude plugin install loop-killer@loop-killer" in done.stdout
    done = subprocess.run([sys.executable, "-m", "loop_killer.cli", "doctor"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert "hook python" in done.stdout and "terminal" in done.stdout


def test_versions_are_parsed() -> None:
    assert parse_version("2.1.328 (Claude Code)") == (2, 1, 328)
    assert parse_version("garbage") is None
    assert setup.multiplexer({"STY": "123.pts-0.host"}) == "screen"
    assert setup.multiplexer({}) is None


def test_doctor_never_writes_through_a_linked_state_folder_and_names_linked_sub_folders(
    tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state = tmp_path / "state"
    state.symlink_to(elsewhere)
    env = {**os.environ, "LOOP_KILLER_STATE_DIR": str(state)}
    check = setup._check_state(env)
    assert check.level == "fail" and "is a link" in check.detail
    assert list(elsewhere.iterdir()) == []  # no temporary file made through it

    state.unlink()
    state.mkdir()
    (elsewhere / "requests").mkdir()
    (state / "requests").symlink_to(elsewhere / "requests")
    check = setup._check_state(env)
    assert check.level == "fail"
    assert "requests/ is a link" in check.detail and "remove" in check.detail
    assert list((elsewhere / "requests").iterdir()) == []
    (state / "requests").unlink()
    assert setup._check_state(env).level == "ok"
