"""The house rules a reader relies on: no two package modules import each other (issue
18), the packages import one way, as laid out below (issue 31), and a tool-call hook's path
stays free of the standard library's costly modules."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import loop_killer

PACKAGE = Path(loop_killer.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The package modules ``path`` imports anywhere (inside functions and
    TYPE_CHECKING blocks too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] \
                if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in known else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found & known - {name}


def test_no_two_package_modules_import_each_other() -> None:
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {name: _imports(path, name, set(paths)) for name, path in paths.items()}
    assert len(graph) > 50 and sum(map(len, graph.values())) > 100  # the walk sees them
    mutual = sorted((a, b) for a, targets in graph.items() for b in targets
                    if a < b and a in graph[b])
    assert mutual == []


FOUNDATIONS = frozenset({"loop_killer", "light", "printable", "helptext"})
"""The modules at the top of the package: every package may import them, and they import
no package (``loop_killer`` itself: the version)."""

LAYOUT: dict[str, frozenset[str]] = {
    "engine": frozenset(),  # pure: no I/O
    "state": frozenset({"engine"}),
    "hooks": frozenset({"engine", "state"}),
    "scan": frozenset({"engine", "state"}),
    "export": frozenset({"engine", "state", "scan"}),
    "watch": frozenset({"engine", "state", "hooks", "scan", "export"}),
    "cli": frozenset({"engine", "state", "hooks", "watch"}),
    "top": frozenset({"engine", "state", "scan", "cli"}),
}
"""Each package, and the packages it may import (besides the foundations)."""


def _unit_graph() -> dict[str, dict[str, set[str]]]:
    """unit -> unit it imports -> the module imports that make the edge. A unit is a
    package, or a module at the top (imports inside functions and TYPE_CHECKING too)."""
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, dict[str, set[str]]] = {}
    for name, path in paths.items():
        unit = _unit(name)
        graph.setdefault(unit, {})
        for target in _imports(path, name, set(paths)):
            if _unit(target) != unit:
                graph[unit].setdefault(_unit(target), set()).add(f"{name} -> {target}")
    return graph


def _unit(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def _cycle(graph: dict[str, dict[str, set[str]]]) -> list[str]:
    """One cycle of the graph (its units, the first again at the end), or []."""
    done: set[str] = set()

    def visit(unit: str, path: list[str]) -> list[str]:
        if unit in path:
            return [*path[path.index(unit):], unit]
        if unit in done:
            return []
        for target in sorted(graph.get(unit, {})):
            found = visit(target, [*path, unit])
            if found:
                return found
        done.add(unit)
        return []

    for unit in sorted(graph):
        found = visit(unit, [])
        if found:
            return found
    return []


def test_no_cycle_between_packages() -> None:
    graph = _unit_graph()
    assert {"engine", "state", "watch"} <= set(graph)  # the walk sees them
    cycle = _cycle(graph)
    edges = [sorted(graph[a][b])[:2] for a, b in zip(cycle, cycle[1:], strict=False)]
    assert cycle == [], edges


def test_cycles_are_found_at_any_length() -> None:
    ring = {"a": {"b": {"x"}}, "b": {"c": {"x"}}, "c": {"a": {"x"}}, "d": {"a": {"x"}}}
    assert _cycle(ring) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b": {"x"}}, "b": {}, "c": {"a": {"x"}, "b": {"x"}}}) == []


def test_the_packages_import_one_way_as_laid_out() -> None:
    graph = _unit_graph()
    assert set(graph) == FOUNDATIONS | set(LAYOUT)  # a new package or top module: place it
    wrong = {unit: {target: sorted(why)[:2] for target, why in targets.items()
                    if target not in LAYOUT.get(unit, frozenset()) | FOUNDATIONS
                    or (unit in FOUNDATIONS and target not in FOUNDATIONS)}
             for unit, targets in graph.items()}
    assert {unit: found for unit, found in wrong.items() if found} == {}


_COSTLY = {"dataclasses", "inspect", "pathlib", "typing", "logging", "orjson", "tomllib",
           "json", "re", "enum"}
"""Modules whose import a PostToolUse would pay on every tool call (10 ms and more
together, against a 12 ms interpreter start; ``json`` alone costs 10 ms, as it imports
``re``). The output below holds nothing to mask, so ``re`` is not needed."""


def _post_tool_use(tmp_path: Path, command: str) -> dict[str, object]:
    return {"session_id": "s1", "transcript_path": str(tmp_path / "s1.jsonl"),
            "cwd": str(tmp_path), "permission_mode": "default",
            "hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
            "tool_input": {"command": command}, "tool_use_id": "toolu_1",
            "error": "Exit code 1\nFAIL test/auth/login.test.js", "is_interrupt": False}


def test_a_post_tool_use_of_a_new_call_imports_nothing_costly(tmp_path: Path) -> None:
    code = ("import sys\n"
            "from loop_killer.hooks.entry import main\n"
            "main(sys.stdin.buffer.read())\n"
            "names = sorted(sys.modules)\n"
            "import json\n"
            "sys.stdout.write(json.dumps(names))\n")
    env = {**os.environ, "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude")}
    # What this interpreter loads before any hook (a site's .pth files may load some).
    bare = set(json.loads(subprocess.run(
        [sys.executable, "-c",
         "import sys; names = sorted(sys.modules); import json; print(json.dumps(names))"],
        capture_output=True, check=True, env=env, timeout=60).stdout))
    loaded = []
    for command in ("npm test", "npm run lint"):  # the second: counts already kept
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                              env=env, timeout=60,
                              input=json.dumps(_post_tool_use(tmp_path, command)).encode())
        loaded.append(set(json.loads(done.stdout)) - bare)
    assert (tmp_path / ".claude" / "loop-killer" / "tools" / "s1.json").is_file()
    for modules in loaded:
        assert "loop_killer.hooks.tool_hook" in modules  # the hook did run
        assert modules & _COSTLY == set()


def test_a_settings_problem_costs_a_tool_call_nothing_once_it_was_said(tmp_path: Path) -> None:
    """A bad setting is said once; every later tool call still loads nothing costly (the
    marker that it was said is one exclusive create, in the light state module)."""
    code = ("import sys\n"
            "from loop_killer.hooks.entry import main\n"
            "main(sys.stdin.buffer.read())\n"
            "names = sorted(sys.modules)\n"
            "import json\n"  # (stdout holds the hook's output, stderr goes to its log)
            "open(sys.argv[1], 'w').write(json.dumps(names))\n")
    listed = tmp_path / "modules.json"
    env = {**os.environ, "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude"),
           "LOOP_KILLER_TOOL_REPEAT_WARN": "abc"}
    bare = set(json.loads(subprocess.run(
        [sys.executable, "-c",
         "import sys; names = sorted(sys.modules); import json; print(json.dumps(names))"],
        capture_output=True, check=True, env=env, timeout=60).stdout))
    said, loaded = [], []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code, str(listed)], capture_output=True,
                              check=True, env=env, timeout=60,
                              input=json.dumps(_post_tool_use(tmp_path, "npm test")).encode())
        said.append(done.stdout)
        loaded.append(set(json.loads(listed.read_text())) - bare)
    assert b"LOOP_KILLER_TOOL_REPEAT_WARN" in said[0] and said[1] == b""
    assert loaded[0] & {"orjson", "json", "pathlib", "typing", "dataclasses"} == set()
    assert "loop_killer.hooks.tool_hook" in loaded[1] and loaded[1] & _COSTLY == set()
