"""The plugin's launcher (plugin/hooks/launch.py, standard library only) finds the
installed package without anyone editing paths, or says once what to install."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from .kit import LAUNCHER, answer, fixture_transcript, lines_of, raw, stop_input, write


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
    lines = lines_of(fixture_transcript("goal-same"))
    third = answer(lines, 3)
    return stop_input(write(tmp_path / "proj" / "s.jsonl", lines[: third.first]))


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
    state.mkdir(parents=True)
    (state / "python").write_text(sys.executable + "\n")
    output = _launch(bare_python, plugin_copy, looping)
    assert output is not None and output["continue"] is False  # stdin reached the hook


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
    state.mkdir(parents=True)
    (state / "python").write_text(str(tmp_path / "gone" / "python3") + "\n")
    output = _launch(bare_python, plugin_copy, looping, PATH=str(tmp_path / "no-bin"))
    assert output is not None and "systemMessage" in output and "continue" not in output


def test_in_a_source_checkout_the_launcher_finds_the_package_beside_it(
    tmp_path: Path, looping: dict
) -> None:
    """A python3 with orjson but without loop_killer installed, in a clone: ../watcher."""
    checkout = tmp_path / "clone"
    shutil.copytree(LAUNCHER.parents[1], checkout / "plugin")
    shutil.copytree(LAUNCHER.parents[2] / "watcher" / "loop_killer", checkout / "watcher" /
                    "loop_killer", ignore=shutil.ignore_patterns("__pycache__"))
    code = ("import sys, runpy; sys.path = [p for p in sys.path if 'watcher' not in p "
            "and 'loop_killer' not in p]; import importlib.util as u; "
            "assert u.find_spec('orjson'); "
            "sys.argv = [sys.argv[1]]; runpy.run_path(sys.argv[0], run_name='__main__')")
    env = {**os.environ, "PYTHONNOUSERSITE": "1"}
    # Hide the editable install: run with -S (no site) plus orjson's folder on the path.
    import orjson

    site_dir = str(Path(orjson.__file__).parents[1])
    env["PYTHONPATH"] = site_dir
    done = subprocess.run([sys.executable, "-S", "-c", code,
                           str(checkout / "plugin" / "hooks" / "launch.py")],
                          input=raw(looping), capture_output=True, env=env, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert output["continue"] is False


@pytest.mark.parametrize("kind", ["fifo", "symlink", "folder"])
def test_a_recorded_python_file_that_is_not_a_plain_file_is_never_read(
    tmp_path: Path, plugin_copy: Path, looping: dict, bare_python: str, own_home: Path,
    kind: str,
) -> None:
    """A FIFO would block the hook (and the turn) forever; a link may point anywhere."""
    state = own_home / ".claude" / "loop-killer"
    state.mkdir(parents=True)
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
