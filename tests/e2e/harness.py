"""Drive the real Claude Code CLI offline: sandboxes, headless runs, the TUI in tmux, transcripts.

Everything here isolates a test from the machine it runs on: each sandbox has its own HOME
(so the real ~/.claude is never read or written), its own git-initialised project and its own
mock API server; environment variables from the outer shell (CLAUDE_*, ANTHROPIC_*, TMUX, ...)
are not passed on; every process started is killed by pid / process group / tmux server name;
every wait has a timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waits import wait_for

from .mock_api import MockAnthropic, Reply

if TYPE_CHECKING:  # Self is in typing only from 3.11; the project supports 3.10
    from typing_extensions import Self

__all__ = [
    "DEFAULT_API_KEY",
    "DEFAULT_VERSIONS",
    "INSTALL_HINT",
    "HeadlessResult",
    "Sandbox",
    "ScreenCondition",
    "TuiSession",
    "assistant_messages",
    "assistant_texts",
    "binary_env_var",
    "claude_binary",
    "claude_cache_dir",
    "entry_text",
    "find_transcripts",
    "goal_statuses",
    "install_plugin",
    "installed_plugins",
    "make_project",
    "missing_claude_reason",
    "missing_tool_reason",
    "prepare_tui_home",
    "project_folder_name",
    "read_jsonl",
    "run_headless",
    "stop_hook_feedback",
    "tool_results",
    "tool_uses",
    "transcript_dir",
]

DEFAULT_VERSIONS = ("2.1.332", "2.1.328", "2.1.250")
INSTALL_HINT = "run scripts/install-claude-code"
# Long enough that its last 20 characters (what .claude.json approves) are key-specific.
DEFAULT_API_KEY = "sk-ant-api03-loop-killer-e2e-0123456789abcdef"

# Only these outer variables reach Claude Code; everything else (CLAUDE_*, ANTHROPIC_*,
# TMUX*, GIT_*, proxies, XDG_*) could point it at real config or the real network.
_PASSTHROUGH = (
    "PATH", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME", "SHELL",
    "PYENV_ROOT", "PYENV_VERSION", "VIRTUAL_ENV",
    # The hooks' python3 imports the package the tests import (a worktree's, say, where
    # the venv's editable install points at another checkout).
    "PYTHONPATH",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
)

def _account_home() -> str | None:
    """The account's own home (from the password database), whatever HOME says now."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_dir or None
    except (ImportError, KeyError):
        return None


# Captured at import, before any fixture swaps HOME for a temp dir (the suite's conftest does):
# pyenv lives in the real home.
_REAL_HOME = Path(_account_home() or os.environ.get("HOME") or Path.home())
# The HOME the suite was started with: scripts/install-claude-code installs under $HOME, so
# the tests look under the same one (not the account's, which differs under sudo -E, or
# with HOME set to another folder).
_HOME_AT_START = Path(os.environ.get("HOME") or Path.home())

LOGIN_TEST_JS = """\
const assert = require('assert');
const { login } = require('../../src/auth');

test('login succeeds with the right password', () => {
  assert.strictEqual(login('alice', 'correct horse'), true);
});

test('login fails with a wrong password', () => {
  assert.strictEqual(login('alice', 'wrong'), false);
});
"""


# -- binaries ------------------------------------------------------------------------------


def claude_cache_dir() -> Path:
    """Where scripts/install-claude-code puts versions, by its rule:
    ``${LOOP_KILLER_CLAUDE_CACHE:-$HOME/.cache/loop-killer/claude-code}``."""
    env = os.environ.get("LOOP_KILLER_CLAUDE_CACHE")
    return Path(env) if env else _HOME_AT_START / ".cache" / "loop-killer" / "claude-code"


def missing_claude_reason(version: str) -> str:
    """Why a test cannot run Claude Code ``version``: where it looked, and the fix."""
    variable = binary_env_var(version)
    explicit = os.environ.get(variable)
    if explicit:
        return f"Claude Code {version}: {variable} is {explicit}, not an executable file"
    return (f"Claude Code {version} not found in {claude_cache_dir() / version}: run "
            f"scripts/install-claude-code {version} (it installs into "
            f"$LOOP_KILLER_CLAUDE_CACHE, else $HOME/.cache/loop-killer/claude-code), or set "
            f"{variable} to the binary")


def missing_tool_reason(tool: str) -> str:
    """Why a test cannot run without ``tool`` (tmux, screen), and the fix."""
    return f"{tool} is not installed (apt install {tool})"


def binary_env_var(version: str) -> str:
    """LOOP_KILLER_CLAUDE_2_1_328 for "2.1.328": an explicit binary path overrides the cache."""
    return "LOOP_KILLER_CLAUDE_" + re.sub(r"[^0-9A-Za-z]", "_", version)


def claude_binary(version: str) -> Path | None:
    """The native `claude` binary for a version, or None when it is not installed."""
    explicit = os.environ.get(binary_env_var(version))
    if explicit:
        path = Path(explicit)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    scoped = claude_cache_dir() / version / "node_modules" / "@anthropic-ai"
    # linux-x64 first (CI), then whatever platform package npm picked on this machine.
    candidates = [
        scoped / "claude-code-linux-x64" / "claude",
        *sorted(scoped.glob("claude-code-*/claude")),
    ]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def _resolve_binary(version: str | Path) -> Path:
    if isinstance(version, Path):
        return version
    path = claude_binary(version)
    if path is None:
        raise FileNotFoundError(missing_claude_reason(version))
    return path


def _version_string(version: str | Path) -> str:
    """The version for .claude.json's lastOnboardingVersion (from the cache path if a Path)."""
    if isinstance(version, str):
        return version
    for part in version.parts:
        if re.fullmatch(r"\d+\.\d+\.\d+", part):
            return part
    out = subprocess.run(
        [str(version), "--version"], check=False, capture_output=True, text=True, timeout=30,
        stdin=subprocess.DEVNULL,
    ).stdout
    match = re.search(r"\d+\.\d+\.\d+", out)
    return match.group(0) if match else "0.0.0"


# -- project and transcripts -----------------------------------------------------------------


def make_project(path: Path, *, env: Mapping[str, str] | None = None) -> Path:
    """A git-initialised project like the fixtures': test/auth/login.test.js, untracked."""
    (path / "test" / "auth").mkdir(parents=True, exist_ok=True)
    (path / "test" / "auth" / "login.test.js").write_text(LOGIN_TEST_JS)
    subprocess.run(
        ["git", "-c", "init.defaultBranch=master", "init", "-q", str(path)],
        check=True, env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
    )
    return path


def project_folder_name(cwd: Path | str) -> str:
    """Claude Code's folder name for a cwd: every non-alphanumeric character becomes '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


def transcript_dir(home: Path, cwd: Path) -> Path:
    """$HOME/.claude/projects/<sanitised cwd>/ (where the session .jsonl files go)."""
    return home / ".claude" / "projects" / project_folder_name(cwd)


def find_transcripts(home: Path, cwd: Path) -> list[Path]:
    """Main session transcripts for cwd, oldest first (subagent files live one level deeper)."""
    folder = transcript_dir(home, cwd)
    if not folder.is_dir():
        return []
    return sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Parsed lines; a half-written last line (the session is still running) is skipped."""
    entries: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                entries.append(value)
    return entries


def entry_text(entry: Mapping[str, Any]) -> str:
    """Text of a user/assistant line: string content, or its text blocks joined."""
    content = (entry.get("message") or {}).get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def stop_hook_feedback(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """User lines that are Stop-hook re-prompts ("Stop hook feedback:\\n<reason>")."""
    return [
        dict(e) for e in entries
        if e.get("type") == "user" and entry_text(e).startswith("Stop hook feedback:")
    ]


def goal_statuses(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The `goal_status` attachments ({met, condition, reason?, sentinel?}), in order."""
    return [
        dict(e["attachment"]) for e in entries
        if e.get("type") == "attachment"
        and isinstance(e.get("attachment"), dict)
        and e["attachment"].get("type") == "goal_status"
    ]


def assistant_messages(entries: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """Assistant lines grouped into API replies (one line per block, same message.id)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        if e.get("type") != "assistant":
            continue
        key = str((e.get("message") or {}).get("id") or e.get("uuid"))
        groups.setdefault(key, []).append(dict(e))
    return list(groups.values())


def assistant_texts(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """One string per API reply: its text blocks concatenated (thinking excluded)."""
    return ["".join(entry_text(line) for line in group) for group in assistant_messages(entries)]


def tool_uses(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """All tool_use blocks from assistant lines."""
    return _blocks_of(entries, "assistant", "tool_use")


def tool_results(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """All tool_result blocks from user lines."""
    return _blocks_of(entries, "user", "tool_result")


def _blocks_of(entries: Sequence[Mapping[str, Any]], role: str, kind: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for e in entries:
        content = (e.get("message") or {}).get("content") if e.get("type") == role else None
        if isinstance(content, list):
            out.extend(b for b in content if isinstance(b, dict) and b.get("type") == kind)
    return out


# -- sandbox -------------------------------------------------------------------------------


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _PASSTHROUGH or k.startswith("LC_")}
    env.setdefault("PATH", os.defpath)
    env.setdefault("LANG", "C.UTF-8")
    # pyenv shims find their root via $HOME/.pyenv unless told: the sandbox HOME has none.
    real_pyenv = _REAL_HOME / ".pyenv"
    if "PYENV_ROOT" not in env and real_pyenv.is_dir():
        env["PYENV_ROOT"] = str(real_pyenv)
    # Hooks that run `python3` should get this interpreter's environment when it is a venv.
    if sys.prefix != sys.base_prefix:
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
        env["VIRTUAL_ENV"] = sys.prefix
    return env


@dataclass
class Sandbox:
    """One test's world: root/home (HOME), root/proj (cwd, git repo), and its mock API."""

    root: Path
    home: Path
    project: Path
    mock: MockAnthropic
    api_key: str = DEFAULT_API_KEY
    extra_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        root: Path,
        mock: MockAnthropic,
        *,
        api_key: str = DEFAULT_API_KEY,
        project_name: str = "proj",
        extra_env: Mapping[str, str] | None = None,
    ) -> Sandbox:
        """Make root/home and a git-initialised root/<project_name>; `mock` must be started."""
        root = root.resolve()  # Claude Code names the transcript folder after the real path
        home = root / "home"
        home.mkdir(parents=True, exist_ok=True)
        sandbox = cls(root=root, home=home, project=root / project_name, mock=mock,
                      api_key=api_key, extra_env=dict(extra_env or {}))
        make_project(sandbox.project, env=sandbox.env)
        return sandbox

    @property
    def env(self) -> dict[str, str]:
        """The complete environment for claude (nothing else is inherited)."""
        env = _base_env()
        env.update(
            HOME=str(self.home),
            TERM="xterm-256color",
            ANTHROPIC_BASE_URL=self.mock.base_url,
            ANTHROPIC_API_KEY=self.api_key,
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_TELEMETRY="1",
            DISABLE_AUTOUPDATER="1",
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
            LOOP_KILLER_DEBUG="1",  # (hook-debug.log: shown with a failed test, conftest)
        )
        env.update(self.extra_env)
        return env

    def add_project(self, name: str) -> Path:
        """Another git-initialised project under root (e.g. a second session in one HOME)."""
        return make_project(self.root / name, env=self.env)

    @property
    def claude_json(self) -> Path:
        return self.home / ".claude.json"

    @property
    def transcript_dir(self) -> Path:
        return transcript_dir(self.home, self.project)

    def transcripts(self, cwd: Path | None = None) -> list[Path]:
        """Session transcripts of the project (or another cwd), oldest first."""
        return find_transcripts(self.home, cwd or self.project)

    def read_transcript(self, cwd: Path | None = None) -> list[dict[str, Any]]:
        """Lines of the newest session transcript of the project; [] if there is none yet."""
        paths = self.transcripts(cwd)
        return read_jsonl(paths[-1]) if paths else []


# -- headless ------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadlessResult:
    """Outcome of `claude -p`. Unpacks as (returncode, output, stderr)."""

    returncode: int
    output: dict[str, Any] | None  # the parsed --output-format json result (None if not JSON)
    stderr: str
    stdout: str
    duration: float
    argv: tuple[str, ...]
    timed_out: bool = False

    def __iter__(self) -> Iterator[Any]:
        return iter((self.returncode, self.output, self.stderr))


def _kill_group(proc: subprocess.Popen[Any], grace: float = 3.0) -> None:
    """SIGTERM the process group, then SIGKILL it: hooks and tools die with claude."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            if sig == signal.SIGKILL:
                return
        except subprocess.TimeoutExpired:
            continue
        # The leader exited; anything left in its group still gets the SIGKILL round.


def run_headless(
    sandbox: Sandbox,
    prompt: str,
    *,
    version: str | Path,
    extra_args: Sequence[str] = (),
    timeout: float = 60.0,
    plugin_dir: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    output_format: str = "json",
) -> HeadlessResult:
    """Run `claude -p PROMPT --output-format json [--plugin-dir DIR] [extra_args]` in the
    sandbox (stdin closed). On timeout the whole process group is killed and timed_out set.
    `output_format="text"`: what a person's script reads (`output` is then None)."""
    binary = _resolve_binary(version)
    argv = [str(binary), "-p", prompt, "--output-format", output_format]
    if plugin_dir is not None:
        argv += ["--plugin-dir", str(plugin_dir)]
    argv += list(extra_args)
    full_env = sandbox.env | dict(env or {})
    start = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=cwd or sandbox.project, env=full_env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        stdout, stderr = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:  # e.g. KeyboardInterrupt while waiting
            _kill_group(proc)
        else:  # claude is gone; leftovers in its group (background tools, hooks) go too
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
    try:
        output = json.loads(stdout) if stdout.strip() else None
    except ValueError:
        output = None
    if not isinstance(output, dict):
        output = None
    return HeadlessResult(
        returncode=proc.returncode, output=output, stderr=stderr, stdout=stdout,
        duration=time.monotonic() - start, argv=tuple(argv), timed_out=timed_out,
    )


# -- set up as a user does ---------------------------------------------------------------------


def _loop_killer_command() -> list[str]:
    """The `loop-killer` command of the package under test (its script beside this Python,
    else the module)."""
    script = Path(sys.executable).with_name("loop-killer")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "loop_killer.cli"]


def install_plugin(
    sandbox: Sandbox, *, version: str | Path, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """`loop-killer install --claude <binary>` in the sandbox's HOME: what the README tells
    a person to run. It records the interpreter and runs the real `claude plugin marketplace
    add` + `claude plugin install` (a local directory marketplace: no network needed)."""
    binary = _resolve_binary(version)
    return subprocess.run(
        [*_loop_killer_command(), "install", "--claude", str(binary)],
        cwd=sandbox.root, env=sandbox.env, stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=timeout, check=False,
    )


def installed_plugins(sandbox: Sandbox, *, version: str | Path) -> list[dict[str, Any]]:
    """`claude plugin list --json` in the sandbox's HOME (what Claude Code will load)."""
    binary = _resolve_binary(version)
    done = subprocess.run(
        [str(binary), "plugin", "list", "--json"], cwd=sandbox.root, env=sandbox.env,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=True,
    )
    listed = json.loads(done.stdout)
    return [p for p in listed if isinstance(p, dict)] if isinstance(listed, list) else []


# -- TUI in tmux -----------------------------------------------------------------------------


def prepare_tui_home(
    sandbox: Sandbox,
    *,
    version: str | Path,
    trust: Sequence[Path] = (),
    timeout: float = 60.0,
) -> None:
    """Make the TUI start straight at the prompt: one headless run with the same HOME (from a
    separate dir, against a throwaway mock, so the test's mock and project see nothing), then
    mark onboarding done, the API key approved and the project (plus `trust`) trusted in
    ~/.claude.json. Without this the TUI shows onboarding, trust and API-key dialogs."""
    init_dir = sandbox.root / "tui-init"
    init_dir.mkdir(exist_ok=True)
    with MockAnthropic(default=Reply(text="ok")) as init_mock:
        env = {"ANTHROPIC_BASE_URL": init_mock.base_url}
        result = run_headless(sandbox, "say ok", version=version, cwd=init_dir, env=env,
                              timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(
            f"onboarding run failed (rc {result.returncode}): {result.stderr[-2000:]}"
        )
    config: dict[str, Any] = {}
    if sandbox.claude_json.is_file():
        config = json.loads(sandbox.claude_json.read_text() or "{}")
    config.update(
        hasCompletedOnboarding=True,
        lastOnboardingVersion=_version_string(version),
        theme="dark",
        hasSeenAutoDefaultNotice=True,
    )
    config["customApiKeyResponses"] = {"approved": [sandbox.api_key[-20:]], "rejected": []}
    projects = config.setdefault("projects", {})
    for project in (sandbox.project, *trust):
        entry = projects.setdefault(str(Path(project).resolve()), {})
        entry.update(hasTrustDialogAccepted=True, hasCompletedProjectOnboarding=True)
    sandbox.claude_json.write_text(json.dumps(config, indent=2))


ScreenCondition = str | Callable[[str], bool]  # text to find, or a test on the screen


class TuiSession:
    """Interactive `claude` in a detached tmux session on a private tmux server (its own
    socket, -S), so a user's own tmux is never touched. Use as a context manager: the server
    is killed on exit, also when the test fails.

        with TuiSession(sandbox, version="2.1.328") as tui:
            tui.wait_ready()
            tui.type_line("Say hello")
            tui.wait_for("Hello from the mock")
            tui.exit()
    """

    _counter = 0

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        version: str | Path,
        extra_args: Sequence[str] = (),
        plugin_dir: Path | None = None,
        width: int = 160,
        height: int = 50,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        prepare: bool = True,
    ) -> None:
        TuiSession._counter += 1
        tag = f"{os.getpid()}-{TuiSession._counter}-{uuid.uuid4().hex[:6]}"
        self.sandbox = sandbox
        self.version = version
        self.binary = _resolve_binary(version)
        self.tag = tag
        self.socket: Path | None = None  # private tmux server socket (-S), made in start()
        self.name = f"claude-{tag}"  # session name
        self.width, self.height = width, height
        self.env = sandbox.env | dict(env or {})
        self.cwd = (cwd or sandbox.project).resolve()
        self.prepare = prepare  # False when this HOME was already prepared (a second session)
        self.argv = [str(self.binary)]
        if plugin_dir is not None:
            self.argv += ["--plugin-dir", str(plugin_dir)]
        self.argv += list(extra_args)
        self.status_file = sandbox.root / f"tui-{tag}.exit-status"
        self.pane_pid: int | None = None  # the wrapper sh; claude is its child, same group
        self.server_pid: int | None = None
        self._started = False
        self._socket_dir: Path | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> Self:
        if shutil.which("tmux") is None:
            raise FileNotFoundError(missing_tool_reason("tmux"))
        if self.prepare:
            prepare_tui_home(self.sandbox, version=self.version, trust=[self.cwd])
        # A private server on a socket in a short-lived dir of our own (-S): a user's tmux is
        # never touched, and kill-server plus rmtree leave nothing behind in /tmp/tmux-UID.
        # Not under the sandbox: socket paths are limited to ~100 characters.
        self._socket_dir = Path(tempfile.mkdtemp(prefix="lk-tmux-", dir=_short_tmp()))
        self.socket = self._socket_dir / "s"
        self._started = True  # from here on close() has something to clean up
        conf = self.sandbox.root / f"tui-{self.tag}.tmux.conf"
        # remain-on-exit keeps the dead pane so exit status and last screen stay readable;
        # status off gives claude the full width x height.
        conf.write_text(
            "set -g remain-on-exit on\n"
            "set -g status off\n"
            "set -g history-limit 5000\n"
        )
        # claude runs under a tiny sh that records its exit status in a file: tmux 3.3a
        # sometimes leaves an exited claude as an unreaped zombie with no pane_dead_status.
        self._tmux("-f", str(conf), "new-session", "-d", "-s", self.name,
                   "-x", str(self.width), "-y", str(self.height),
                   "-c", str(self.cwd), "--",
                   "/bin/sh", "-c", _WRAPPER, "lk-claude", str(self.status_file), *self.argv)
        info = self._tmux("display-message", "-p", "-t", self.name, "#{pane_pid} #{pid}")
        pane_pid, server_pid = info.split()
        self.pane_pid, self.server_pid = int(pane_pid), int(server_pid)
        return self

    def close(self) -> None:
        """Kill the private tmux server, then anything of claude's that survived it."""
        if not self._started:
            return
        self._started = False
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            self._tmux("kill-server", check=False)
        for pid, group in ((self.pane_pid, True), (self.server_pid, False)):
            if pid is not None:
                _kill_pid(pid, group=group)
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- input --------------------------------------------------------------------------------

    def send_keys(self, text: str) -> None:
        """Type text literally (no key names interpreted)."""
        self._tmux("send-keys", "-t", self.name, "-l", text)

    def send_key(self, *keys: str) -> None:
        """Press named keys: "Enter", "Escape", "C-u", "C-c", "BTab", ..."""
        self._tmux("send-keys", "-t", self.name, *keys)

    def send_enter(self) -> None:
        self.send_key("Enter")

    def type_line(self, text: str, *, timeout: float = 10.0) -> None:
        """Type text, wait until the input box shows it, then press Enter (pressing Enter in
        the same burst as the text can be taken as part of a paste)."""
        self.send_keys(text)
        probe = text.strip().splitlines()[-1][-40:] if text.strip() else ""
        if probe:
            self.wait_for(probe, timeout=timeout)
        time.sleep(0.1)  # kept: a gap after the burst, or the TUI takes Enter as pasted text
        self.send_enter()

    # -- output -------------------------------------------------------------------------------

    def capture(self, *, history: bool = False) -> str:
        """The screen as text (capture-pane -p); with history=True also the scrollback."""
        args = ["capture-pane", "-p", "-t", self.name]
        if history:
            args += ["-S", "-"]
        return self._tmux(*args)

    def wait_for(
        self, condition: ScreenCondition, *, timeout: float = 30.0, interval: float = 0.1,
        history: bool = False,
    ) -> str:
        """Poll the screen until it contains the text (or the predicate is true); return it.
        Raises TimeoutError with the last screen in the message."""
        check: Callable[[str], bool]
        check = (lambda s: condition in s) if isinstance(condition, str) else condition
        screen = ""

        def shown() -> bool:
            nonlocal screen
            screen = self.capture(history=history)
            return check(screen)

        wait_for(shown, timeout, lambda: f"the screen to show {condition!r}; last screen:\n"
                 f"{screen}", every=interval)
        return screen

    def wait_ready(self, *, timeout: float = 60.0) -> str:
        """Wait for the start screen with its input prompt."""
        return self.wait_for(lambda s: "Claude Code v" in s and "\u276f" in s, timeout=timeout)

    def is_alive(self) -> bool:
        """True while claude runs in the pane."""
        return self.exit_status() is None

    def exit_status(self) -> int | None:
        """claude's exit status once it has ended (128+N if killed by signal N), else None."""
        try:
            text = self.status_file.read_text().strip()
        except FileNotFoundError:
            return None
        return int(text) if text.lstrip("-").isdigit() else None

    @property
    def claude_pid(self) -> int | None:
        """pid of the running claude (the wrapper's child), None once it ended (Linux only)."""
        if self.pane_pid is None:
            return None
        try:
            children = Path(f"/proc/{self.pane_pid}/task/{self.pane_pid}/children").read_text()
        except OSError:
            return None
        pids = [int(p) for p in children.split()]
        return pids[0] if pids else None

    def wait_exit(self, *, timeout: float = 20.0) -> int:
        (status,) = wait_for(lambda: None if (s := self.exit_status()) is None else (s,),
                             timeout, lambda: f"claude to exit; the screen:\n{self.capture()}",
                             every=0.1)  # a tuple: an exit status of 0 is an event too
        return status

    def exit(self, *, timeout: float = 20.0) -> int:
        """Type /exit and wait for claude to end; returns its exit status."""
        self.type_line("/exit")
        return self.wait_exit(timeout=timeout)

    # -- tmux ---------------------------------------------------------------------------------

    def _tmux(self, *args: str, check: bool = True) -> str:
        # The server inherits this env: only the sandbox's variables reach claude.
        proc = subprocess.run(
            ["tmux", "-S", str(self.socket), *args], check=False, env=self.env,
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=15,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"tmux {shlex.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout


# $1 = status file, the rest = claude's argv. Written via a temp file so a reader never
# sees a half-written status.
_WRAPPER = 'status_file=$1; shift; "$@"; rc=$?; echo "$rc" > "$status_file.tmp"; ' \
    'mv "$status_file.tmp" "$status_file"'


def _short_tmp() -> str | None:
    """/tmp when it exists (short paths for sockets), else the platform default."""
    return "/tmp" if os.path.isdir("/tmp") else None


def _kill_pid(pid: int, *, group: bool, grace: float = 2.0) -> None:
    """SIGTERM then SIGKILL one pid (or its whole process group); silent if already gone."""
    kill: Callable[[int, int], None] = os.killpg if group else os.kill
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _alive(pid, group=group):
            return
        try:
            kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        with contextlib.suppress(TimeoutError):  # still there after the grace: next signal
            wait_for(lambda: not _alive(pid, group=group), grace, every=0.05)


def _proc_states() -> list[tuple[int, int, str]] | None:
    """(pid, pgid, state) of every process, or None without a Linux /proc."""
    if not Path("/proc/self/stat").exists():
        return None
    out: list[tuple[int, int, str]] = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # exited while we looked
        fields = text.rsplit(")", 1)[-1].split()  # after "pid (comm)": state ppid pgrp ...
        out.append((int(text.split(" ", 1)[0]), int(fields[2]), fields[0]))
    return out


def _alive(pid: int, *, group: bool) -> bool:
    """Is pid (or any member of process group pid) running? Zombies count as dead: they have
    exited and only wait for their parent to reap them."""
    states = _proc_states()
    if states is None:
        try:
            (os.killpg if group else os.kill)(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    index = 1 if group else 0
    return any(row[index] == pid and row[2] != "Z" for row in states)
