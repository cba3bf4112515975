"""The README's set-up on a Python that refuses pip (PEP 668), done for real with pipx.

Debian's and Ubuntu's /usr/bin/python3 (and Homebrew's) carry an EXTERNALLY-MANAGED file:
``pip install .`` stops with "externally-managed-environment". The README says ``pipx install
.`` instead. Here pipx (from PyPI, into a folder of its own: this test's environment is left
as it is) installs this checkout with such a Python when the machine has one (else with
this one) into a temporary PIPX_HOME / PIPX_BIN_DIR; then ``loop-killer install`` (pipx's
command) records pipx's venv python, and the plugin's launcher, started the way Claude Code
starts it (``python3 launch.py``) by a python3 WITHOUT the package, hands the hook to that
venv: a loop reaching its third similar answer is stopped. Also without the recorded file,
through the shebang of pipx's ``loop-killer`` on PATH.

Needs the network (pipx and the package's dependencies come from PyPI): without it the
tests skip on a laptop and fail under CI=true.

And the README's Quick start block itself, run as written by bash with the pipx on PATH
(Debian's, from apt, in CI), in a fresh HOME whose PATH lacks ``~/.local/bin``: twice, as a
person who pastes it again would.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest
from hook.kit import looping_stop, raw
from must_run import unavailable

ROOT = Path(__file__).resolve().parents[1]
CANDIDATES = ("/usr/bin/python3", "/opt/homebrew/bin/python3", "/usr/local/bin/python3")


def _run(argv: list[str], env: dict[str, str], *, timeout: float = 300,
         stdin: bytes | None = None, cwd: Path | None = None
         ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, env=env, input=stdin, capture_output=True, timeout=timeout,
                          check=False, cwd=cwd)


def _externally_managed(python: str) -> bool:
    probe = ("import os, sysconfig; print(os.path.isfile(os.path.join("
             "sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))")
    try:
        done = subprocess.run([python, "-I", "-c", probe], capture_output=True, text=True,
                              timeout=30, check=False)
    except OSError:
        return False
    return done.stdout.strip() == "True"


def _pep668_python() -> str | None:
    """A Python on this machine that refuses ``pip install`` (PEP 668), if any."""
    for candidate in CANDIDATES:
        if os.access(candidate, os.X_OK) and _externally_managed(candidate):
            return candidate
    return None


def _has_package(python: str) -> bool:
    done = subprocess.run([python, "-I", "-c", "import loop_killer"], capture_output=True,
                          timeout=30, check=False)
    return done.returncode == 0


@dataclass(frozen=True)
class PipxInstall:
    base: str  # the Python pipx ran with (and made the venv from)
    home: Path  # HOME of the person who ran the set-up
    bin_dir: Path  # PIPX_BIN_DIR: where `loop-killer` and `loop-killer-watch` are
    venv: Path  # pipx's venv for loop-killer
    env: dict[str, str]  # the person's environment (PATH has bin_dir)


@pytest.fixture(scope="module")
def pipx_install(tmp_path_factory: pytest.TempPathFactory) -> PipxInstall:
    base = _pep668_python() or sys.executable
    root = tmp_path_factory.mktemp("pipx")
    home, bin_dir, pipx_home, lib = (root / "home", root / "bin", root / "pipx-home",
                                     root / "pipx-lib")
    home.mkdir()
    env = {
        "HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "PIPX_HOME": str(pipx_home), "PIPX_BIN_DIR": str(bin_dir),
        "PIPX_MAN_DIR": str(root / "man"), "LANG": "C.UTF-8",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONFIG_FILE",
                 "SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY", "https_proxy", "NO_PROXY"):
        if name in os.environ:
            env[name] = os.environ[name]
    # pipx itself: from PyPI into a folder of its own, for the base Python's version.
    version = _run([base, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], env)
    got = _run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(lib),
                "--only-binary=:all:", "--python-version", version.stdout.decode().strip(),
                "pipx"], {**env, "HOME": str(root)})
    if got.returncode != 0:
        unavailable(f"could not install pipx from PyPI: {got.stderr.decode()[-500:]}")
    pipx_env = {**env, "PYTHONPATH": str(lib)}
    done = _run([base, "-m", "pipx", "install", str(ROOT)], pipx_env, cwd=root)
    if done.returncode != 0:
        unavailable(f"pipx install . failed: {(done.stdout + done.stderr).decode()[-1500:]}")
    return PipxInstall(base=base, home=home, bin_dir=bin_dir,
                       venv=pipx_home / "venvs" / "loop-killer", env=env)


@pytest.fixture(scope="module")
def python3_without_the_package(pipx_install: PipxInstall,
                                tmp_path_factory: pytest.TempPathFactory) -> str:
    """The python3 Claude Code starts the hook with: the system's, when it lacks the
    package (as on a PEP 668 system), else a bare venv."""
    if not _has_package(pipx_install.base):
        return pipx_install.base
    folder = tmp_path_factory.mktemp("bare")
    venv.create(folder, with_pip=False, system_site_packages=False, symlinks=True)
    python = str(folder / "bin" / "python3")
    assert not _has_package(python)
    return python


@pytest.fixture
def installed_plugin(pipx_install: PipxInstall) -> Path:
    """The plugin as Claude Code runs it after `loop-killer install`: the marketplace is a
    local folder (the one pipx's wheel ships), and Claude Code (2.1.250 and 2.1.332, traced)
    starts the hooks from that folder itself, not from its cache copy."""
    (plugin,) = pipx_install.venv.glob("lib/python3*/site-packages/loop_killer/_plugin/plugin")
    assert not (plugin.parent / "watcher").exists()  # no source checkout to fall back on
    return plugin


def _looping_stop(folder: Path, session_id: str, env: dict[str, str]) -> dict:
    """The Stop of the third similar answer to a re-prompt, the turn's hooks before it run
    (in this process). Each test its own session: the pipx home (and its state folder) is
    shared by the module, and another test's record would count in this turn."""
    return looping_stop(folder / "proj" / f"{session_id}.jsonl", env)


def _hook(python3: str, plugin: Path, data: dict, env: dict[str, str]) -> dict | None:
    full = {**env, "CLAUDE_PLUGIN_ROOT": str(plugin),
            "CLAUDE_PLUGIN_DATA": f"{env['HOME']}/.claude/plugins/data/loop-killer-loop-killer"}
    done = _run([python3, str(plugin / "hooks" / "launch.py")], full, stdin=raw(data),
                timeout=60)
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    text = done.stdout.decode().strip()
    return json.loads(text) if text else None


def test_the_old_set_up_command_is_refused_by_an_externally_managed_python() -> None:
    base = _pep668_python()
    if base is None:
        pytest.skip("no externally-managed (PEP 668) Python on this machine")
    done = _run([base, "-m", "pip", "install", "--dry-run", "--no-deps", str(ROOT)],
                {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.environ["HOME"]})
    if b"No module named pip" in done.stderr:
        pytest.skip(f"{base} has no pip at all")
    assert done.returncode != 0
    assert b"externally-managed-environment" in done.stdout + done.stderr


def test_pipx_gives_the_commands_and_install_records_pipxs_venv_python(
    pipx_install: PipxInstall
) -> None:
    assert sorted(p.name for p in pipx_install.bin_dir.iterdir()) == [
        "loop-killer", "loop-killer-watch"]
    done = _run(["loop-killer", "install", "--print-only"], pipx_install.env)
    assert done.returncode == 0, done.stderr
    recorded = pipx_install.home / ".claude" / "loop-killer" / "python"
    assert recorded.read_text().strip() == str(pipx_install.venv / "bin" / "python")
    out = done.stdout.decode()
    assert "pipx's environment for it" in out
    marketplace = next(line.split("add ", 1)[1] for line in out.splitlines()
                       if "claude plugin marketplace add" in line)
    assert Path(marketplace).is_relative_to(pipx_install.venv)  # the wheel's own copy
    assert (Path(marketplace) / ".claude-plugin" / "marketplace.json").is_file()


def test_the_hook_run_by_a_python3_without_the_package_uses_pipxs_venv(
    pipx_install: PipxInstall, python3_without_the_package: str, installed_plugin: Path,
    tmp_path: Path,
) -> None:
    assert _run(["loop-killer", "install", "--print-only"], pipx_install.env).returncode == 0
    # PATH without pipx's bin folder: only the recorded interpreter can lead to the package.
    env = {**pipx_install.env, "PATH": f"/usr/bin{os.pathsep}/bin"}
    output = _hook(python3_without_the_package, installed_plugin,
                   _looping_stop(tmp_path, "recorded-interpreter", env), env)
    assert output is not None and output["continue"] is False, output
    assert "SAME_REPLY_TURNS" in json.dumps(output)


def test_without_a_recorded_interpreter_pipxs_command_on_path_leads_to_it(
    pipx_install: PipxInstall, python3_without_the_package: str, installed_plugin: Path,
    tmp_path: Path,
) -> None:
    (pipx_install.home / ".claude" / "loop-killer" / "python").unlink(missing_ok=True)
    output = _hook(python3_without_the_package, installed_plugin,
                   _looping_stop(tmp_path, "shebang-on-path", pipx_install.env),
                   pipx_install.env)
    assert output is not None and output["continue"] is False, output


def test_the_pipx_venv_is_not_this_test_environment(pipx_install: PipxInstall) -> None:
    venv_python = pipx_install.venv / "bin" / "python"
    assert _has_package(str(venv_python))
    probe = _run([str(venv_python), "-c", "import loop_killer, sys; print(loop_killer.__file__)"],
                 pipx_install.env)
    assert Path(probe.stdout.decode().strip()).is_relative_to(pipx_install.venv)
    assert sysconfig.get_path("purelib") not in probe.stdout.decode()


# -- the Quick start block, as a person pastes it ------------------------------------------

FRESH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # Debian's
WATCHER_STARTED = re.compile(r"^\d\d:\d\d:\d\d\s+(waiting for \S+ to appear|watching |polling )")
BLOCK_DEADLINE = 600.0  # pipx builds the wheel and fetches its dependencies from PyPI


def quick_start_block() -> str:
    """The first shell block of the README's Quick start section, as it is shown."""
    text = (ROOT / "README.md").read_text()
    start = text.index("## Quick start")
    section = text[start:text.index("\n## ", start + 1)]
    return re.findall(r"```sh\n(.*?)```", section, re.DOTALL)[0].strip()


def _run_until_the_watcher_starts(block: str, env: dict[str, str]) -> str:
    """Run ``block`` with bash from the checkout until the watcher prints its start-up
    line, then end the whole process group (the watcher runs forever). All output."""
    proc = subprocess.Popen(["bash", "-c", block], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.decode("utf-8", "replace"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + BLOCK_DEADLINE
    try:
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError("no watcher start-up line within "
                                     f"{BLOCK_DEADLINE:g} s:\n{''.join(seen)}") from None
            if line is None:
                raise AssertionError(f"the block ended ({proc.wait()}) before the watcher "
                                     f"started:\n{''.join(seen)}")
            seen.append(line)
            if WATCHER_STARTED.match(line):
                return "".join(seen)
    finally:
        _end_group(proc)


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=30)
            break
        except subprocess.TimeoutExpired:
            continue


def test_the_quick_start_block_works_as_written_on_a_fresh_account(tmp_path: Path) -> None:
    pipx = shutil.which("pipx", path=FRESH_PATH) or shutil.which("pipx")
    if pipx is None:
        unavailable("pipx is not installed (apt install pipx): the README's Quick start "
                     "runs it")
    block = quick_start_block()
    home = tmp_path / "home"
    home.mkdir()
    folders = FRESH_PATH.split(os.pathsep)
    if str(Path(pipx).parent) not in folders:
        folders.append(str(Path(pipx).parent))
    path = os.pathsep.join(folders)
    assert str(home / ".local" / "bin") not in path  # the commands are not on PATH yet
    # A fresh account: no PIPX_*, XDG_* or VIRTUAL_ENV from whoever runs the tests, so pipx
    # puts everything under this HOME; the real ~/.local and ~/.claude are never touched.
    env = {"HOME": str(home), "PATH": path, "LANG": "C.UTF-8", "SHELL": "/bin/bash",
           "CLAUDE_CONFIG_DIR": str(home / ".claude"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONFIG_FILE",
                 "SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY", "https_proxy", "NO_PROXY",
                 "no_proxy", "USER", "LOGNAME"):
        if name in os.environ:
            env[name] = os.environ[name]
    # Twice: pasting the block again must work as well (no "already seems to be installed").
    for attempt in (1, 2):
        output = _run_until_the_watcher_starts(block, env)
        assert "command not found" not in output, output
        recorded = (home / ".claude" / "loop-killer" / "python").read_text().strip()
        assert Path(recorded).is_relative_to(home), recorded  # pipx's venv under this HOME
        assert "claude plugin install loop-killer@loop-killer" in output, output
        assert str(home / ".claude" / "projects") in output.splitlines()[-1], attempt
