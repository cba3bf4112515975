"""Settings people can change: ``config.toml`` in the state folder, overridden by
``LOOP_KILLER_*`` variables. A bad file never stops anything: ``problems`` says what is wrong."""

from __future__ import annotations

import os
import sys

from ..engine.budget import BUDGET_MINUTES, BUDGET_REPROMPTS, BUDGET_USD, DEFAULT_BUDGET, Budget
from ..engine.edits import EDIT_OSCILLATION_WARN
from ..engine.rules import (
    DEFAULT_THRESHOLDS,
    IDLE_TURNS,
    RULE_EDIT_OSCILLATION,
    RULE_IDLE,
    RULE_SAME,
    SAME_REPLY_TURNS,
    SIMILAR,
    Thresholds,
)
from ..engine.tool_repeat import (
    DEFAULT_IGNORED,
    RULE_TOOL_REPEAT,
    TOOL_REPEAT_BLOCK,
    TOOL_REPEAT_STOP,
    TOOL_REPEAT_WARN,
    ToolRepeatCounter,
)
from ..engine.waiting import WAIT_MINUTES
from ..light import Value

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path
    from typing import Any

__all__ = ["CONFIG_NAME", "Settings", "config_path", "load_settings", "parse_settings",
           "transcript_cwd"]

CONFIG_NAME = "config.toml"
_MAX_BYTES = 64 * 1024
SWITCHABLE_RULES = (RULE_SAME, RULE_IDLE, RULE_TOOL_REPEAT, RULE_EDIT_OSCILLATION)
_OFF_WORDS = frozenset({"0", "off", "false", "no"})

# setting -> (table, key, environment variable, default, low, high)
_NUMBERS: dict[str, tuple[str, str, str, float, float, float]] = {
    "same_reply_turns": ("rules", "same_reply_turns", "LOOP_KILLER_SAME_REPLY_TURNS",
                         SAME_REPLY_TURNS, 2, 100),
    "idle_turns": ("rules", "idle_turns", "LOOP_KILLER_IDLE_TURNS", IDLE_TURNS, 2, 1000),
    "similar": ("rules", "similar", "LOOP_KILLER_SIMILAR", SIMILAR, 0.01, 1.0),
    "tool_repeat_warn": ("rules", "tool_repeat_warn", "LOOP_KILLER_TOOL_REPEAT_WARN",
                         TOOL_REPEAT_WARN, 2, 100),
    "tool_repeat_block": ("rules", "tool_repeat_block", "LOOP_KILLER_TOOL_REPEAT_BLOCK",
                          TOOL_REPEAT_BLOCK, 2, 1000),
    "tool_repeat_stop": ("rules", "tool_repeat_stop", "LOOP_KILLER_TOOL_REPEAT_STOP",
                         TOOL_REPEAT_STOP, 1, 1000),
    "edit_oscillation_warn": ("rules", "edit_oscillation_warn",
                              "LOOP_KILLER_EDIT_OSCILLATION_WARN", EDIT_OSCILLATION_WARN, 1, 100),
    "wait_minutes": ("rules", "wait_minutes", "LOOP_KILLER_WAIT_MINUTES", WAIT_MINUTES,
                     0.05, 1440),
    # A turn's budget (``engine.budget``); 0 switches a limit off.
    "budget_reprompts": ("budget", "reprompts", "LOOP_KILLER_BUDGET_REPROMPTS",
                         BUDGET_REPROMPTS, 0, 100_000),
    "budget_usd": ("budget", "usd", "LOOP_KILLER_BUDGET_USD", BUDGET_USD, 0, 1_000_000),
    "budget_minutes": ("budget", "minutes", "LOOP_KILLER_BUDGET_MINUTES", BUDGET_MINUTES,
                       0, 100_000),
}


class Settings(Value):
    """The effective settings, where each came from, and what was wrong."""

    __slots__ = ("thresholds", "tool_repeat_warn", "tool_repeat_block", "tool_repeat_stop",
                 "edit_oscillation_warn", "ignore_tools", "rules_off", "projects_off",
                 "metrics", "budget", "sources", "problems")
    thresholds: Thresholds
    tool_repeat_warn: int
    tool_repeat_block: int
    tool_repeat_stop: int  # refused attempts of one call in a turn that end it
    edit_oscillation_warn: int  # a file's returns to an earlier content that warn
    ignore_tools: frozenset[str]
    rules_off: frozenset[str]
    projects_off: tuple[str, ...]
    metrics: str  # HOST:PORT where the watcher serves Prometheus metrics ("" none)
    budget: Budget  # a turn's limits (``engine.budget``)
    sources: Mapping[str, str]  # setting -> where it came from
    problems: tuple[str, ...]

    def __init__(self, *, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                 tool_repeat_warn: int = TOOL_REPEAT_WARN,
                 tool_repeat_block: int = TOOL_REPEAT_BLOCK,
                 tool_repeat_stop: int = TOOL_REPEAT_STOP,
                 edit_oscillation_warn: int = EDIT_OSCILLATION_WARN,
                 ignore_tools: frozenset[str] = DEFAULT_IGNORED,
                 rules_off: frozenset[str] = frozenset(), projects_off: tuple[str, ...] = (),
                 metrics: str = "", budget: Budget = DEFAULT_BUDGET,
                 sources: Mapping[str, str] | None = None, problems: tuple[str, ...] = ()) -> None:
        self._set(thresholds=thresholds, tool_repeat_warn=tool_repeat_warn,
                  tool_repeat_block=tool_repeat_block, tool_repeat_stop=tool_repeat_stop,
                  edit_oscillation_warn=edit_oscillation_warn, ignore_tools=ignore_tools,
                  rules_off=rules_off, projects_off=projects_off, metrics=metrics,
                  budget=budget, sources={} if sources is None else sources, problems=problems)

    def shown(self) -> dict[str, Any]:
        """Every setting by name, as ``loop-killer config`` shows it."""
        thresholds, budget = self.thresholds, self.budget
        return {
            "same_reply_turns": thresholds.same_reply_turns, "idle_turns": thresholds.idle_turns,
            "similar": thresholds.similar, "tool_repeat_warn": self.tool_repeat_warn,
            "tool_repeat_block": self.tool_repeat_block, "tool_repeat_stop": self.tool_repeat_stop,
            "edit_oscillation_warn": self.edit_oscillation_warn,
            "wait_minutes": thresholds.wait_minutes, "rules_off": sorted(self.rules_off),
            "projects_off": list(self.projects_off), "ignore_tools": sorted(self.ignore_tools),
            "metrics": self.metrics, "budget_reprompts": budget.reprompts, "budget_usd": budget.usd,
            "budget_minutes": budget.minutes}

    def rule_on(self, rule: str) -> bool:
        return rule not in self.rules_off

    def tool_counter(self, state: object = None) -> ToolRepeatCounter:
        """A tool-repeat counter with these settings (counts from ``state`` if given)."""
        oscillation = self.edit_oscillation_warn if self.rule_on(RULE_EDIT_OSCILLATION) else 0
        return ToolRepeatCounter.from_state(state, ignored=self.ignore_tools,
                                            block=self.tool_repeat_block, oscillation=oscillation,
                                            wait=self.thresholds.wait_seconds)

    def project_off(self, *, cwd: str = "", folder: str = "") -> bool:
        """Whether loop-killer does nothing for this project, by ``cwd`` else ``folder``."""
        if cwd:
            return any(_within(cwd, prefix) for prefix in self.projects_off)
        return bool(folder) and any(folder == _mangle(prefix.rstrip("/") or "/")
                                    for prefix in self.projects_off)

    def hook_off(self, data: object) -> bool:
        """``project_off`` for a hook's input: its ``cwd``, else its transcript's folder."""
        if not isinstance(data, dict) or not self.projects_off:
            return False
        cwd, path = data.get("cwd"), data.get("transcript_path")
        return self.project_off(
            cwd=cwd if isinstance(cwd, str) else "",
            folder=os.path.basename(os.path.dirname(path)) if isinstance(path, str) else "")


def _within(path: str, prefix: str) -> bool:
    base = prefix.rstrip("/")
    return path in (prefix, base) or path.startswith(base + "/")


def _mangle(path: str) -> str:
    return "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in path)


_CWD = b'"cwd":"'
_CWD_TRIES = 8


def line_cwd(line: bytes) -> str:
    """A transcript line's top-level ``cwd`` (not a nested one); "" when it has none."""
    import orjson  # (only the watcher and the scan read transcripts here: not a hook)

    try:
        entry = orjson.loads(line)
    except orjson.JSONDecodeError:
        return ""
    cwd = entry.get("cwd") if isinstance(entry, dict) else None
    return cwd if isinstance(cwd, str) else ""


def transcript_cwd(data: bytes | None, known: str = "") -> str:
    """The last top-level ``cwd`` in ``data``; one written as ``known``, unparsed."""
    if not data:
        return ""
    end = len(data)
    if known:
        import orjson

        at = data.rfind(_CWD)
        if at >= 0 and data.startswith(b'"cwd":' + orjson.dumps(known), at):
            return known
    for _ in range(_CWD_TRIES):
        at = data.rfind(_CWD, 0, end)
        if at < 0:
            return ""
        start = data.rfind(b"\n", 0, at) + 1
        stop = data.find(b"\n", at)
        cwd = line_cwd(data[start:stop if stop >= 0 else len(data)])
        if cwd:
            return cwd
        end = start  # a cut or odd line: the one before it
    return ""


def config_path(state: Path | str) -> Path:
    from pathlib import Path

    return Path(os.path.join(state, CONFIG_NAME))


def load_settings(state: Path | str, env: Mapping[str, str] | None = None) -> Settings:
    """The settings from ``<state>/config.toml`` and the environment; never raises."""
    from .files import NotAFile, read_small_file

    env = os.environ if env is None else env
    path = os.path.join(state, CONFIG_NAME)
    try:
        text: bytes | None = read_small_file(path, _MAX_BYTES)
    except FileNotFoundError:
        text = None
    except (NotAFile, OSError) as error:
        reason = "a symlink" if getattr(error, "errno", None) == getattr(os, "ELOOP", 40) \
            else (str(error).split(": ", 1)[-1] or type(error).__name__)
        problem = f"{path}: cannot be read ({reason}); using the defaults"
        return parse_settings(None, env, where=str(path), problems=(problem,))
    return parse_settings(text, env, where=str(path))


def parse_settings(text: bytes | None, env: Mapping[str, str], *, where: str = CONFIG_NAME,
                   problems: tuple[str, ...] = ()) -> Settings:
    """The settings from a config file's bytes (None: no file) and the environment."""
    found: list[str] = list(problems)
    table: dict[str, Any] = {}
    if text is not None:
        table = _parse_toml(text, where, found)
        _report_unknown(table, where, found)
    sources: dict[str, str] = {}
    numbers: dict[str, float] = {}
    for name, (section, key, variable, default, low, high) in _NUMBERS.items():
        numbers[name] = default
        sources[name] = "default"
        value = _section(table, section, where, found).get(key)
        if value is not None:
            checked = _number(value, default, low, high)
            if checked is None:
                found.append(f"{where}: {section}.{key} must be {_range(default, low, high)} "
                             f"(it is {value!r}); using {default}")
            else:
                numbers[name], sources[name] = checked, where
        if variable in env:
            checked = _number(_from_text(env[variable]), default, low, high)
            if checked is None:
                found.append(f"${variable} must be {_range(default, low, high)} (it is "
                             f"{env[variable]!r}); ignored")
            else:
                numbers[name], sources[name] = checked, f"${variable}"
    if numbers["tool_repeat_block"] < numbers["tool_repeat_warn"]:
        found.append(f"tool_repeat_block ({numbers['tool_repeat_block']:g}) is below "
                     f"tool_repeat_warn ({numbers['tool_repeat_warn']:g}); using "
                     f"{TOOL_REPEAT_WARN} and {TOOL_REPEAT_BLOCK}")
        numbers["tool_repeat_warn"], numbers["tool_repeat_block"] = (TOOL_REPEAT_WARN,
                                                                     TOOL_REPEAT_BLOCK)
    rules_off = _names(table, "rules", "off", "LOOP_KILLER_RULES_OFF", ",", env, where, found,
                       sources, "rules_off")
    unknown = sorted(set(rules_off) - set(SWITCHABLE_RULES))
    if unknown:
        found.append(f"unknown rule{'s' if len(unknown) > 1 else ''} to switch off: "
                     f"{', '.join(unknown)} (known: {', '.join(SWITCHABLE_RULES)})")
    if env.get("LOOP_KILLER_TOOL_REPEAT", "").strip().lower() in _OFF_WORDS:
        rules_off = (*rules_off, RULE_TOOL_REPEAT)
        sources["rules_off"] = "$LOOP_KILLER_TOOL_REPEAT"
    projects = _paths(_names(table, "projects", "off", "LOOP_KILLER_PROJECTS_OFF",
                             os.pathsep, env, where, found, sources, "projects_off"),
                      sources["projects_off"], found)
    ignored = _ignored(table, env, where, found, sources)
    metrics = _section(table, "watcher", where, found).get("metrics", "")
    sources["metrics"] = where if metrics else "default"
    if not isinstance(metrics, str):
        found.append(f"{where}: watcher.metrics must be a string such as "
                     "\"127.0.0.1:9464\"; ignored")
        metrics, sources["metrics"] = "", "default"
    thresholds = DEFAULT_THRESHOLDS.replace(same_reply_turns=int(numbers["same_reply_turns"]),
                         idle_turns=int(numbers["idle_turns"]), similar=numbers["similar"],
                         off=frozenset(rules_off) & {RULE_SAME, RULE_IDLE},
                         wait_minutes=numbers["wait_minutes"])
    return Settings(
        thresholds=thresholds,
        tool_repeat_warn=int(numbers["tool_repeat_warn"]),
        tool_repeat_block=int(numbers["tool_repeat_block"]),
        tool_repeat_stop=int(numbers["tool_repeat_stop"]),
        edit_oscillation_warn=int(numbers["edit_oscillation_warn"]),
        ignore_tools=ignored,
        rules_off=frozenset(rule for rule in rules_off if rule in SWITCHABLE_RULES),
        projects_off=projects,
        metrics=metrics.strip(),
        budget=Budget(int(numbers["budget_reprompts"]), numbers["budget_usd"],
                      numbers["budget_minutes"]),
        sources=sources,
        problems=tuple(found),
    )


def _parse_toml(text: bytes, where: str, found: list[str]) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10: the backport (a dependency there only)
        import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]
    try:
        parsed: dict[str, Any] = tomllib.loads(text.decode("utf-8"))
        return parsed
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        found.append(f"{where}: not valid TOML ({error}); using the defaults")
    except RecursionError:  # arrays or tables nested deeper than the parser can go
        found.append(f"{where}: not valid TOML (nested too deeply); using the defaults")
    except Exception as error:  # noqa: BLE001 - a bad file must never stop a hook
        found.append(f"{where}: not valid TOML ({type(error).__name__}); using the defaults")
    return {}


_MAX_UNKNOWN = 5  # unknown names said one by one; beyond, how many more


def _known_names() -> dict[str, frozenset[str]]:
    known: dict[str, set[str]] = {"rules": {"off"}, "tools": {"ignore"}, "projects": {"off"},
                                   "watcher": {"metrics"}}
    for section, key, *_ in _NUMBERS.values():
        known.setdefault(section, set()).add(key)
    return {section: frozenset(keys) for section, keys in known.items()}


_KNOWN = _known_names()


def _report_unknown(table: dict[str, Any], where: str, found: list[str]) -> None:
    """Say each name the file has that no setting reads (a misspelling, else silent)."""
    unknown: list[str] = []
    for name, value in table.items():
        keys = _KNOWN.get(name)
        if keys is None:
            shown = f"[{_shown(name)}]" if isinstance(value, dict) else _shown(name)
            unknown.append(f"unknown {'table' if isinstance(value, dict) else 'key'} "
                           f"{shown}{_guess(name, None)}")
        elif isinstance(value, dict):
            unknown += [f"unknown key {name}.{_shown(key)}{_guess(key, name)}"
                        for key in value if key not in keys]
    for problem in unknown[:_MAX_UNKNOWN]:
        found.append(f"{where}: {problem}; ignored")
    if len(unknown) > _MAX_UNKNOWN:
        found.append(f"{where}: {len(unknown) - _MAX_UNKNOWN} more unknown names; ignored")


def _guess(name: str, section: str | None) -> str:
    """`` (did you mean …?)`` for a name close to a known key of ``section``, else ""."""
    if section is not None:
        return _closest(name, {key: f"{section}.{key}" for key in _KNOWN[section]})
    return (_closest(name, {table: f"[{table}]" for table in _KNOWN})
            or _closest(name, {key: f"{table}.{key}" for table, keys in sorted(_KNOWN.items())
                               for key in sorted(keys)}))


def _closest(name: str, options: dict[str, str]) -> str:
    import difflib  # (only for a misspelled name: not on every hook's path)

    close = difflib.get_close_matches(name, sorted(options), n=1)
    return f" (did you mean {options[close[0]]}?)" if close else ""


def _shown(name: str) -> str:
    """A name from the file as it may be shown: on one line, no control codes."""
    from ..printable import printable  # (only for a misspelled name: not on every hook's path)

    return printable(name, 60) or repr(name)


def _paths(prefixes: Iterable[str], source: str, found: list[str]) -> tuple[str, ...]:
    """The project paths switched off, ``~`` expanded; empty or relative ones refused."""
    kept: list[str] = []
    for prefix in prefixes:
        path = os.path.expanduser(prefix)
        if not path.strip():
            found.append(f"{source}: projects.off holds an empty path, which would switch "
                         "loop-killer off everywhere; ignored")
        elif not os.path.isabs(path):
            found.append(f"{source}: projects.off: {_shown(prefix)} is not an absolute path "
                         "(it would match nothing); ignored")
        else:
            kept.append(path)
    return tuple(kept)


def _section(table: dict[str, Any], name: str, where: str, found: list[str]) -> dict[str, Any]:
    value = table.get(name, {})
    if isinstance(value, dict):
        return value
    problem = f"{where}: [{name}] must be a table; ignored"
    if problem not in found:
        found.append(problem)
    return {}


def _from_text(text: str) -> object:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _number(value: object, default: float, low: float, high: float) -> float | None:
    whole = isinstance(default, int)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if whole and not (isinstance(value, int) or float(value).is_integer()):
        return None
    if not low <= value <= high:
        return None
    return int(value) if whole else float(value)


def _range(default: float, low: float, high: float) -> str:
    whole = "whole " if isinstance(default, int) else ""
    return f"a {whole}number from {low:g} to {high:g}"


def _names(table: dict[str, Any], section: str, key: str, variable: str, separator: str,
           env: Mapping[str, str], where: str, found: list[str], sources: dict[str, str],
           setting: str) -> tuple[str, ...]:
    """A list of names from the file, or from the environment when set."""
    sources[setting] = "default"
    names: tuple[str, ...] = ()
    value = _section(table, section, where, found).get(key)
    if value is not None:
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            names, sources[setting] = tuple(value), where
        else:
            found.append(f"{where}: {section}.{key} must be a list of strings; ignored")
    if variable in env:
        names = tuple(item.strip() for item in env[variable].split(separator) if item.strip())
        sources[setting] = f"${variable}"
    return names


def _ignored(table: dict[str, Any], env: Mapping[str, str], where: str, found: list[str],
             sources: dict[str, str]) -> frozenset[str]:
    """The tools not counted (names or patterns; ``default``: the built-in list)."""
    names = _names(table, "tools", "ignore", "LOOP_KILLER_IGNORE_TOOLS", ",", env, where,
                   found, sources, "ignore_tools")
    if sources["ignore_tools"] == "default":
        return DEFAULT_IGNORED
    ignored: set[str] = set()
    for name in names:
        ignored |= DEFAULT_IGNORED if name == "default" else {name}
    return frozenset(ignored)
