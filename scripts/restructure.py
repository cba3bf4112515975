#!/usr/bin/env python3
"""Move loop_killer's modules into packages by concern (issue 31), rewriting every reference.

Run once from anywhere in a clean checkout: ``python3 scripts/restructure.py`` (``--dry-run``
prints the moves and the files it would change). Driven by MOVES (module -> module) and
PACKAGES (a whole package -> another, for modules MOVES does not name, so modules added
since this table was written move too). It

* ``git mv``s the files (and ``git rm``s a merged package's ``__init__.py``),
* rewrites imports in the package, tests, scripts and the plugin: each relative import is
  resolved from the module's old place, mapped, and written relative to its new place
  (absolute ones stay absolute; a module imported under a new name keeps its old name with
  ``as``, so the code below the import is untouched),
* rewrites every other reference: dotted names (``loop_killer.hook.entry.main`` in
  strings, ``-m``, monkeypatch targets, entry points), paths (``loop_killer/hook/entry.py``,
  ``"loop_killer", "hook", "entry.py"``) and backticked names relative to the package
  (````hook.subagent_id````) in docstrings and docs,
* writes the docstrings of the packages whose contents changed (DOCSTRINGS),
* sorts the changed imports with ``ruff check --select I --fix``.

A tree already restructured is left alone. tests/fixtures (recorded data) is never touched.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "loop_killer"

MOVES: dict[str, str] = {
    # hooks/: every hook event (the Stop hook's hook/, the tool-call hooks' tools/)
    "hook.setup": "cli.setup",
    "tools.hook": "hooks.tool_hook",
    "tools.stop": "hooks.tool_stop",
    "tools.words": "hooks.tool_words",
    "worktree": "hooks.worktree",  # the tool-call hooks' fingerprint of the work tree
    # state/: files shared by the processes, and how they read
    "tools.store": "state.session",  # state.refused reads it: was the state<->tools cycle
    "config": "state.config",  # it reads state.files, and state.refused reads it
    "tailing": "state.tailing",  # a transcript's tail (I/O): the hooks' and the watcher's
    "watch.report": "state.report",  # the words of records: watch, scan, top, cli, export
    # scan/: tokens and their price, counted one way for everyone
    "watch.usage": "scan.usage",  # watch, top and export price as scan does
    # export/: monitoring systems
    "watch.metrics": "export.metrics",
    "watch.prometheus": "export.prometheus",
    "watch.telemetry": "export.telemetry",
    "watch.telemetry_plan": "export.telemetry_plan",
    # cli/: the commands a person runs
    "cli": "cli.__init__",  # the dispatcher: `loop_killer.cli:main` and `-m` stay as they were
    "watch.commands": "cli.commands",
}
"""Old module -> new module, names relative to the package (``x.__init__``: the module
becomes package ``x``)."""

PACKAGES: dict[str, tuple[str, str]] = {
    "hook": ("hooks", ""),
    "tools": ("hooks", "tool_"),
}
"""Old package -> (new package, prefix of its modules' new names), for what MOVES does not
name. The old package's ``__init__`` becomes the new one's (tools' merges into hook's)."""

NEW_FILES = {
    "cli/__main__.py": '''"""``python -m loop_killer.cli``: the command line."""

from loop_killer.cli import main

raise SystemExit(main())
''',
}
"""Files written where they do not exist yet (paths relative to the package)."""

INIT_FROM = {"hooks": "hook"}
"""A merged package's ``__init__.py`` comes from this old package's (the other is removed)."""

DOCSTRINGS: dict[str, str] = {
    "hooks": '''
The hooks: every hook event Claude Code sends the plugin, and what they share.

Claude Code runs the plugin's launcher (``plugin/hooks/launch.py``) for every hook event;
what it cannot settle from stdin runs ``python -m loop_killer.hooks`` (``entry``: stdin
once, dispatch by event, the crash note). The Stop hook (``stop_hook``) ends a turn that
crossed a threshold or has a clear request, and gets ``/goal clear`` run; the tool-call
hooks (``tool_hook``) count each result, warn, refuse and reset. Nothing else is imported
here: a hook imports only what its event needs. The hook input is parsed here, once, and
whose it is (the main session's or a subagent's: ``subagent_id``) is told here.
''',
    "state": '''
Files shared by the watcher, the hooks and the CLI, and how a person reads them.

One module per kind of file: ``files`` (where things live; safe reads and writes: no
links, no FIFOs, bounded; transcripts opened without blocking), ``config`` (the settings
file and its environment overrides), ``inbox`` (clear requests), ``records`` (one record
per detection, things said once), ``journal`` (the detection log), ``status`` (per-session
status, the heartbeat), ``session`` (each session's one record: its tool-call counts and its turn), ``refused``
(whether a call is refused now), ``tailing`` (a transcript's tail, read backwards),
``report`` (the lines a person reads). Imports only the engine and the foundations.
''',
    "watch": '''
The watcher, ``loop-killer-watch`` (``main``): follow every session transcript live, log
detections, write clear requests. The long-running process only: the commands a person
runs are in ``cli``, the monitoring export in ``export``, its words in ``state.report``.
''',
    "scan": '''
``loop-killer scan``: every past loop in the history of Claude Code sessions, and what it
cost. The same engine as the watcher and the hook, pointed at every transcript.

Tokens and their price are counted here, one way for everyone: ``ledger`` (a scope's
usage, once per reply), ``prices`` (the price table and its override file), ``usage`` (a
live session's tally: the watcher, ``top`` and the metrics). The CLI: ``command``.
Nothing is imported here: ``loop-killer --help`` stays quick.
''',
    "export": '''
The loop figures for monitoring systems, from the detection log: ``metrics`` (one source
for them all), ``prometheus`` (``loop-killer-watch --metrics``), ``telemetry`` (the
OpenTelemetry export beside Claude Code's own; ``telemetry_plan``: its pure core). The
watcher imports them only when asked for, so the optional extras stay optional.
''',
    "cli": '''
``loop-killer``: the command line. Parsed and dispatched here, each subcommand imported
only when used, so a call stays quick and never imports watchdog needlessly: ``commands``
(``status``, ``clear``, ``config``) and ``setup`` (``install``, ``doctor``) live in this
package, ``scan`` and ``top`` with theirs, and the plugin's ``hook`` is ``hooks.entry``.
''',
}
"""New docstrings of the packages whose modules changed (names in ``...`` are checked)."""

LAYOUT_DOC = "docs/testing.md"
LAYOUT_ROWS = {
    "hooks/": "every hook event: the entry, the Stop hook (which reply this is, stopping the "
              "turn, the words, terminal typing) and the tool-call hooks (count, warn, refuse, "
              "end the turn, reset)",
    "watch/": "`loop-killer-watch`: following files, sessions, responses, housekeeping, "
              "notifications",
    "export/": "Prometheus metrics and the OpenTelemetry export",
    "cli/": "`loop-killer` and its commands `status` / `clear` / `config` / `install` / "
            "`doctor`",
}
"""Rows of LAYOUT_DOC's table (``| `watcher/loop_killer/PATH` | what |``) written anew;
rows of paths that are gone, or written twice, are dropped."""

SOURCE_ROOTS = ("watcher", "tests", "scripts", "plugin", "docs", ".ci", ".claude-plugin")
SOURCE_FILES = ("README.md", "pyproject.toml")
SKIP = ("tests/fixtures/",)
TEXT_SUFFIXES = {".py", ".md", ".toml", ".json", ".js", ".sh", ".txt", ".cfg", ".ini",
                 ".yml", ".yaml", ""}

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
DOTTED = re.compile(rf"(?<![\w.]){PACKAGE}(?:\.{IDENT})+")
SLASHED = re.compile(rf"(?<![\w-]){PACKAGE}((?:/{IDENT})+(?:\.py)?/?)")
QUOTED = re.compile(rf"""(["']){PACKAGE}\1((?:\s*[,/]\s*(["'])[\w.]+\3)+)""")
QUOTED_PART = re.compile(r"""(\s*[,/]\s*)(["'])([\w.]+)\2""")
TICKED = re.compile(rf"(`+)({IDENT}(?:\.{IDENT})+)\1")


@dataclass
class Tree:
    root: Path
    modules: dict[str, Path]  # old dotted name (with the package) -> file
    moves: dict[str, str]  # old dotted name -> new dotted name, every module that moves

    @property
    def package_dir(self) -> Path:
        return self.root / "watcher" / PACKAGE

    def is_package(self, name: str) -> bool:
        path = self.modules.get(name)
        return path is not None and path.name == "__init__.py"

    def new_name(self, name: str) -> str:
        """``name`` (a module, or a module then attributes) where it lives after the move."""
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            head = ".".join(parts[:cut])
            if head in self.moves:
                return ".".join([self.moves[head], *parts[cut:]]).replace(".__init__", "")
        return name

    def becomes_package(self, name: str) -> bool:
        return self.is_package(name) or self.moves.get(name, "").endswith(".__init__")

    def new_path(self, name: str) -> Path:
        parts = self.new_name(name).split(".")
        if self.becomes_package(name):
            return self.root / "watcher" / Path(*parts) / "__init__.py"
        return self.root / "watcher" / Path(*parts[:-1]) / f"{parts[-1]}.py"


def module_name(path: Path, package_dir: Path) -> str:
    parts = path.relative_to(package_dir.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def load_tree(root: Path) -> Tree:
    package_dir = root / "watcher" / PACKAGE
    modules = {module_name(p, package_dir): p for p in sorted(package_dir.rglob("*.py"))}
    moves: dict[str, str] = {}
    for old, new in MOVES.items():
        path = modules.get(f"{PACKAGE}.{old}")
        if path is not None and path.name != "__init__.py":  # (a package now: moved already)
            moves[f"{PACKAGE}.{old}"] = f"{PACKAGE}.{new}"
    for old, (new, prefix) in PACKAGES.items():
        old_full, new_full = f"{PACKAGE}.{old}", f"{PACKAGE}.{new}"
        if old_full not in modules:
            continue
        moves[old_full] = new_full
        for name in modules:
            if name.startswith(old_full + ".") and name not in moves:
                rest = name[len(old_full) + 1:]
                moves[name] = f"{new_full}.{rest if rest.startswith('__') else prefix + rest}"
    return Tree(root, modules, moves)


# --- imports ------------------------------------------------------------------------------

def _package_of(name: str, is_init: bool) -> str:
    return name if is_init else name.rpartition(".")[0]


def _relative(target: str, package: str) -> str:
    """``target`` written relative to ``package`` (``..state``, ``.``, ``.rows``)."""
    here, there = package.split("."), target.split(".")
    common = 0
    while common < min(len(here), len(there)) and here[common] == there[common]:
        common += 1
    return "." * (len(here) - common + 1) + ".".join(there[common:])


def _alias(name: str, asname: str | None) -> str:
    return f"{name} as {asname}" if asname and asname != name else name


def rewrite_import(node: ast.ImportFrom | ast.Import, tree: Tree, old_package: str | None,
                   new_package: str | None) -> list[str] | None:
    """The statement(s) replacing ``node``, or None when it stays as it is."""
    if isinstance(node, ast.Import):
        names = []
        for alias in node.names:
            new = tree.new_name(alias.name) if alias.name.startswith(PACKAGE) else alias.name
            names.append(_alias(new, alias.asname))
        old = [_alias(a.name, a.asname) for a in node.names]
        return None if names == old else [f"import {', '.join(names)}"]
    if node.level:
        if old_package is None:
            return None  # a relative import outside the package (tests' own helpers)
        base_parts = old_package.split(".")[: len(old_package.split(".")) - node.level + 1]
        base = ".".join([*base_parts, node.module] if node.module else base_parts)
    else:
        base = node.module or ""
    if base != PACKAGE and not base.startswith(PACKAGE + "."):
        return None
    groups: dict[str, list[str]] = {}
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        if candidate in tree.modules:  # a module imported by name
            new = tree.new_name(candidate)
            new_from, _, new_leaf = new.rpartition(".")
            groups.setdefault(new_from, []).append(
                _alias(new_leaf, alias.asname or (alias.name if new_leaf != alias.name else None)))
        else:
            groups.setdefault(tree.new_name(base), []).append(_alias(alias.name, alias.asname))
    lines = []
    for new_from, names in groups.items():
        written = _relative(new_from, new_package) if node.level and new_package else new_from
        lines.append(f"from {written} import {', '.join(names)}")
    return lines


def _old_header(node: ast.ImportFrom) -> str:
    return "." * node.level + (node.module or "")


# --- text ---------------------------------------------------------------------------------

def _defined_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


class TextRewriter:
    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self._defined: dict[str, set[str]] = {}

    def dotted(self, match: re.Match[str]) -> str:
        return self.tree.new_name(match.group(0))

    def _path_parts(self, parts: list[str]) -> list[str] | None:
        """Path components after the package (``hook``, ``entry.py``) at their new place."""
        if not parts:
            return None
        is_file = parts[-1].endswith(".py")
        stem = [*parts[:-1], parts[-1].removesuffix(".py")] if is_file else parts
        name = ".".join([PACKAGE, *stem])
        if stem[-1] == "__init__":
            name = name.rpartition(".")[0]
        if name not in self.tree.modules:
            return None
        new = self.tree.new_name(name).split(".")[1:]
        if not is_file:
            return new if self.tree.is_package(name) else None
        if self.tree.becomes_package(name):
            return [*new, "__init__.py"]
        return [*new[:-1], new[-1] + ".py"]

    def slashed(self, match: re.Match[str]) -> str:
        tail = match.group(1)
        trailing = "/" if tail.endswith("/") else ""
        parts = tail.strip("/").split("/")
        new = self._path_parts(parts)
        return match.group(0) if new is None else f"{PACKAGE}/{'/'.join(new)}{trailing}"

    def quoted(self, match: re.Match[str]) -> str:
        pieces = QUOTED_PART.findall(match.group(2))
        new = self._path_parts([p[2] for p in pieces])
        if new is None:
            return match.group(0)
        separator, quote = pieces[0][0], pieces[0][1]
        quote0 = match.group(1)
        return f"{quote0}{PACKAGE}{quote0}" + "".join(f"{separator}{quote}{p}{quote}"
                                                       for p in new)

    def ticked(self, match: re.Match[str]) -> str:
        """A name relative to the package in backticks, moved only when it surely is one."""
        ticks, ref = match.group(1), match.group(2)
        parts = ref.split(".")
        for cut in range(len(parts), 0, -1):
            head = ".".join([PACKAGE, *parts[:cut]])
            if head not in self.tree.modules:
                continue
            rest = parts[cut:]
            if self.tree.new_name(head) == head:
                return match.group(0)
            if rest and rest[0] not in self._names(head):
                return match.group(0)
            if not rest and cut < 2:
                return match.group(0)  # one word (``hook``, ``config``): too often a word
            new = self.tree.new_name(".".join([head, *rest]))
            return f"{ticks}{new.removeprefix(PACKAGE + '.')}{ticks}"
        return match.group(0)

    def _names(self, module: str) -> set[str]:
        if module not in self._defined:
            self._defined[module] = _defined_names(self.tree.modules[module])
        return self._defined[module]

    def text(self, source: str) -> str:
        source = QUOTED.sub(self.quoted, source)
        source = SLASHED.sub(self.slashed, source)
        source = TICKED.sub(self.ticked, source)
        return DOTTED.sub(self.dotted, source)


# --- one file -----------------------------------------------------------------------------

def _offsets(source: str) -> list[int]:
    starts, total = [], 0
    for line in source.splitlines(keepends=True):
        starts.append(total)
        total += len(line)
    starts.append(total)
    return starts


def _is_python(path: Path, source: str) -> bool:
    return path.suffix == ".py" or (path.suffix == "" and source.startswith("#!")
                                    and "python" in source.splitlines()[0])


def rewrite_file(path: Path, tree: Tree, texts: TextRewriter, warnings: list[str]) -> str:
    """The file's new text (references moved), from its text before the move."""
    source = path.read_text()
    if not _is_python(path, source):
        return texts.text(source)
    try:
        module = ast.parse(source)
    except SyntaxError:
        warnings.append(f"{path}: not Python after all; only text rules applied")
        return texts.text(source)
    old_name = new_name = old_package = new_package = None
    if path.is_relative_to(tree.package_dir):
        old_name = module_name(path, tree.package_dir)
        new_name = tree.new_name(old_name)
        old_package = _package_of(old_name, path.name == "__init__.py")
        new_package = _package_of(new_name, tree.becomes_package(old_name))
    starts = _offsets(source)
    spans: list[tuple[int, int, str]] = []
    for node in ast.walk(module):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        lines = rewrite_import(node, tree, old_package, new_package)
        if lines is None:
            continue
        assert node.end_lineno is not None and node.end_col_offset is not None
        begin = starts[node.lineno - 1] + node.col_offset
        end = starts[node.end_lineno - 1] + node.end_col_offset
        segment = source[begin:end]
        if isinstance(node, ast.ImportFrom) and len(lines) == 1:
            # the same names from another module: only the header changes (comments stay)
            header, _, names = lines[0].partition(" import ")
            same = [_alias(a.name, a.asname) for a in node.names] == names.split(", ")
            old_header = f"from {_old_header(node)} import"
            if same and segment.startswith(old_header):
                spans.append((begin, begin + len(old_header), f"{header} import"))
                continue
        if "#" in segment:
            warnings.append(f"{path}:{node.lineno}: comments inside an import were dropped")
        indent = " " * node.col_offset
        spans.append((begin, end, f"\n{indent}".join(lines)))
    out, last = [], 0
    for begin, end, text in sorted(spans):
        out.append(texts.text(source[last:begin]))
        out.append(text)
        last = end
    out.append(texts.text(source[last:]))
    return "".join(out)


def _docstring(source: str, text: str) -> str:
    module = ast.parse(source)
    lines = source.splitlines(keepends=True)
    new = f'"""{text.strip()}\n"""\n'
    first = module.body[0] if module.body else None
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        assert first.end_lineno is not None
        return "".join([*lines[: first.lineno - 1], new, *lines[first.end_lineno:]])
    return new + ("\n" + source if source.strip() else "")


# --- the run ------------------------------------------------------------------------------

def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                          text=True).stdout


def files_to_rewrite(root: Path) -> list[Path]:
    listed = git(root, "ls-files", "-z", "--", *SOURCE_ROOTS, *SOURCE_FILES).split("\0")
    paths = []
    for name in filter(None, listed):
        path = root / name
        if (any(name.startswith(skip) for skip in SKIP) or path.suffix not in TEXT_SUFFIXES
                or not path.is_file() or path.is_symlink()):
            continue
        try:
            path.read_text()
        except UnicodeDecodeError:
            continue
        paths.append(path)
    return paths


def _ruff(root: Path, paths: list[Path]) -> None:
    """Sort the changed imports; say which lines a longer name pushed past the limit."""
    python_files = [str(p) for p in paths if p.suffix == ".py" and p.exists()]
    ruff = shutil.which("ruff")
    command = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    try:
        subprocess.run([*command, "check", "--select", "I", "--fix", "--quiet", *python_files],
                       cwd=root, capture_output=True, text=True, check=False)
        long = subprocess.run([*command, "check", "--select", "E501", "--output-format",
                               "concise", "--quiet", *python_files],
                              cwd=root, capture_output=True, text=True, check=False)
    except OSError as error:
        print(f"warning: no ruff ({error}): run `ruff check --select I --fix` yourself")
        return
    for line in long.stdout.splitlines():
        print(f"warning: wrap by hand: {line}")


def _layout_rows(root: Path) -> None:
    path = root / LAYOUT_DOC
    prefix = f"| `watcher/{PACKAGE}/"
    lines = path.read_text().splitlines(keepends=True) if path.exists() else []
    rows = [i for i, line in enumerate(lines) if line.startswith(prefix)]
    if not rows:
        print(f"warning: {LAYOUT_DOC} has no layout table to update")
        return
    kept, seen = [], set()
    for line in lines[rows[0]: rows[-1] + 1]:
        where = line[len(prefix):].partition("`")[0]
        gone = not (root / "watcher" / PACKAGE / where).exists()
        if where in LAYOUT_ROWS or where in seen or gone:
            continue
        seen.add(where)
        kept.append(line)
    kept += [f"{prefix}{where}` | {what} |\n" for where, what in LAYOUT_ROWS.items()]
    path.write_text("".join([*lines[: rows[0]], *kept, *lines[rows[-1] + 1:]]))


def _check_docstrings(tree: Tree, warnings: list[str]) -> None:
    package_dir = tree.package_dir
    for package, text in DOCSTRINGS.items():
        for word in re.findall(rf"``({IDENT})``", text):
            exists = ((package_dir / package / f"{word}.py").exists()
                      or (package_dir / word).is_dir() or word in {"subagent_id"})
            if not exists and word not in {"status", "clear", "config", "install", "doctor",
                                           "hook", "scan", "top"}:
                warnings.append(f"{package}/__init__.py's docstring names ``{word}``, "
                                "which is not there")


def _refusal(root: Path, tree: Tree, merged_away: set[Path]) -> str | None:
    """Why this tree cannot be restructured, or None."""
    for old in tree.moves:
        target = tree.new_path(old)
        if target.exists() and tree.modules[old] not in merged_away:
            return f"{target.relative_to(root)} exists already; a half-done tree?"
    if git(root, "status", "--porcelain", "--untracked-files=no"):
        return "the work tree has uncommitted changes; commit or stash them first"
    return None


def _new_texts(root: Path, tree: Tree, merged_away: set[Path],
               warnings: list[str]) -> dict[Path, str]:
    """Every file whose text changes or that moves, by its path after the move."""
    texts = TextRewriter(tree)
    new_texts: dict[Path, str] = {}
    for path in files_to_rewrite(root):
        if path == Path(__file__).resolve() or path in merged_away:
            continue  # (the script's own table and examples; a merged __init__)
        text = rewrite_file(path, tree, texts, warnings)
        after = path
        if path.is_relative_to(tree.package_dir):
            after = tree.new_path(module_name(path, tree.package_dir))
        if text != path.read_text() or after != path:
            new_texts[after] = text
    return new_texts


def _apply(root: Path, tree: Tree, merged_away: set[Path], new_texts: dict[Path, str]) -> None:
    for old in sorted(tree.moves, key=lambda name: -name.count(".")):
        if tree.modules[old] not in merged_away:
            target = tree.new_path(old)
            target.parent.mkdir(parents=True, exist_ok=True)
            git(root, "mv", str(tree.modules[old]), str(target))
    for path in merged_away:
        git(root, "rm", "-q", str(path))
    for path, text in new_texts.items():
        path.write_text(text)
    for name, text in NEW_FILES.items():
        path = tree.package_dir / name
        if path.parent.is_dir() and not path.exists():
            path.write_text(text)
            new_texts[path] = text
    for package, text in DOCSTRINGS.items():
        init = tree.package_dir / package / "__init__.py"
        if init.parent.is_dir():
            init.write_text(_docstring(init.read_text() if init.exists() else "", text))
            new_texts[init] = init.read_text()
    for old in PACKAGES:  # an emptied package folder must not linger as a namespace package
        folder = tree.package_dir / old
        if folder.is_dir() and not any(folder.rglob("*.py")):
            shutil.rmtree(folder)
    _layout_rows(root)
    _ruff(root, list(new_texts))
    git(root, "add", "-A", "--", "watcher", LAYOUT_DOC,
        *[str(p) for p in new_texts if p.exists()])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    root = Path(git(Path.cwd(), "rev-parse", "--show-toplevel").strip())
    tree = load_tree(root)
    if not tree.moves:
        print("nothing to move: the tree is restructured already")
        return 0
    merged_away = {tree.modules[f"{PACKAGE}.{old}"] for old in PACKAGES
                   if f"{PACKAGE}.{old}" in tree.modules and old not in INIT_FROM.values()}
    refusal = _refusal(root, tree, merged_away)
    if refusal and not args.dry_run:
        print(f"error: {refusal}")
        return 1
    for old, new in sorted(tree.moves.items()):
        print(f"move {old.removeprefix(PACKAGE + '.'):24} -> {new.removeprefix(PACKAGE + '.')}")
    warnings: list[str] = []
    new_texts = _new_texts(root, tree, merged_away, warnings)
    if args.dry_run:
        for path in sorted(new_texts):
            print(f"rewrite {path.relative_to(root)}")
        for path in sorted(merged_away):
            print(f"remove {path.relative_to(root)} (its package merges)")
        return 0
    _apply(root, tree, merged_away, new_texts)
    _check_docstrings(tree, warnings)
    for warning in warnings:
        print(f"warning: {warning}")
    print(f"moved {len(tree.moves)} modules, rewrote {len(new_texts)} files (staged); now: "
          "ruff check, mypy, the tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
