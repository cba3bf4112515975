"""The README's commands are what CI runs: keep them from drifting apart."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _shell_blocks(text: str) -> list[str]:
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL)]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    blocks = _shell_blocks((ROOT / "README.md").read_text())
    test_command = next(block for block in blocks if "pytest" in block)
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines


def test_readme_starts_with_the_two_newcomer_commands() -> None:
    text = (ROOT / "README.md").read_text()
    blocks = _shell_blocks(text)
    setup, test = blocks[0], blocks[1]
    # Set-up first: pipx, which works where `pip install` is refused (PEP 668); the commands
    # it runs are the package's own. (tests/test_install_pipx.py runs this block.)
    assert setup.startswith("pipx install --force .")  # a second paste reinstalls
    # By their full path: pipx's folder is not on a fresh account's PATH yet.
    assert "&& ~/.local/bin/loop-killer install && ~/.local/bin/loop-killer-watch" in setup
    # Before it, in one line, what to do where pipx is missing.
    quick_start = text[text.index("## Quick start"):text.index(setup)]
    (told,) = [part for part in quick_start.split("\n\n") if "apt install pipx" in part]
    assert "\n" not in told.strip(), told
    scripts = (ROOT / "pyproject.toml").read_text()
    assert "\nloop-killer = " in scripts and "\nloop-killer-watch = " in scripts
    # Right after it, the fallback without pipx: plain pip in a virtual environment.
    between = text[text.index(setup) + len(setup):text.index(test)]
    assert "python3 -m venv" in between and "/bin/pip install ." in between
    assert "/bin/loop-killer install" in between and "/bin/loop-killer-watch" in between
    # Then the test command, early in the README, after the line that makes a virtual
    # environment where pip refuses (PEP 668): CI runs the command itself (above).
    assert "pytest" in test and "pip install" in test
    assert text.index(test) < len(text) // 3
    just_before = text[:text.index(test)].rsplit("```sh", 1)[0].rstrip().rsplit("\n\n", 1)[-1]
    assert "externally-managed-environment" in just_before
    assert "`python3 -m venv .venv && . .venv/bin/activate`" in just_before


def test_the_launchers_notice_gives_the_readmes_install_commands() -> None:
    """When the hook cannot find the package it says what to run: the Quick start's."""
    setup = _shell_blocks((ROOT / "README.md").read_text())[0]
    launcher = (ROOT / "plugin" / "hooks" / "loop_killer_launch.py").read_text()
    told = re.search(r'folder run: (.*?)"', launcher)
    assert told is not None and setup.startswith(told[1] + " && ")


def test_the_e2e_hint_names_the_folder_the_install_script_and_the_tests_use() -> None:
    text = (ROOT / "README.md").read_text()
    script = (ROOT / "scripts" / "install-claude-code").read_text()
    assert 'CACHE="${LOOP_KILLER_CLAUDE_CACHE:-$HOME/.cache/loop-killer/claude-code}"' in script
    assert "`$LOOP_KILLER_CLAUDE_CACHE`, else `$HOME/.cache/loop-killer/claude-code/`" in text


# -- the README is the newcomer's page; the reference is in docs/ ---------------------------

README_MOST_LINES = 300
"""What it is, the Quick start, what it catches and does, the settings, the commands and
how to test fit in this; the rest belongs in docs/ (issue 33)."""

LINK = re.compile(r"\]\(([^)\s]+)\)")


def _docs() -> dict[Path, str]:
    return {path: path.read_text() for path in [ROOT / "README.md",
                                                *sorted((ROOT / "docs").glob("*.md"))]}


def _anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to
    hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    outside_code = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return {_anchor(heading) for heading in re.findall(r"^#+ (.+)$", outside_code, re.MULTILINE)}


def test_the_readme_stays_short() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MOST_LINES, f"README.md has {len(lines)} lines"


def test_the_readme_links_every_page_of_docs() -> None:
    linked = {target.split("#")[0] for target in LINK.findall((ROOT / "README.md").read_text())}
    pages = {f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md")}
    assert pages, "no docs/*.md"
    assert pages <= linked, f"not linked from the README: {sorted(pages - linked)}"


def test_every_relative_link_in_the_readme_and_docs_leads_somewhere() -> None:
    """A file moved into docs/ keeps its links: each names a file that exists, and a
    heading of it that exists."""
    texts = _docs()
    broken: list[str] = []
    for page, text in texts.items():
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and anchor not in _anchors(texts.get(path, path.read_text())):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken


def test_every_variable_the_package_reads_is_documented() -> None:
    """Every LOOP_KILLER_* name in the package and the plugin is in the README or docs/."""
    read: set[str] = set()
    for folder in ("watcher", "plugin"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".js", ".mjs", ".json", ".sh"):
                read |= set(re.findall(r"LOOP_KILLER_[A-Z_]+", path.read_text()))
    assert "LOOP_KILLER_STATE_DIR" in read  # the search finds them
    documented = "\n".join(_docs().values())
    missing = sorted(name for name in read if not re.search(rf"\b{name}\b", documented))
    assert not missing, f"not in README.md or docs/: {missing}"
