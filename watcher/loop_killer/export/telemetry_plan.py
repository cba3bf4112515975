"""The OpenTelemetry export's pure core: ``plan_export`` (whether, where) and ``LoopEvents``."""

from __future__ import annotations

import json
import urllib.parse
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .. import __version__
from ..engine.tool_repeat import TOOL_CALL_RULES
from ..state.journal import LoopRecord, OutcomeRecord, Record, ToolRecord
from ..state.report import project_label

__all__ = ["EVENT_NAME", "MISSING", "OUTCOME_WAIT", "POLL_EVERY", "Destination", "ExportPlan",
           "LoopEvent", "LoopEvents", "parse_pairs", "plan_export", "settings_env",
           "telemetry_variables"]

ENABLE = "CLAUDE_CODE_ENABLE_TELEMETRY"
SERVICE_NAME = "loop-killer"
EVENT_NAME = "loop_killer.loop_detected"
PROTOCOL = "http/protobuf"
DEFAULT_ENDPOINT = "http://localhost:4318"  # the OTel specification's, for http/protobuf
METRIC_INTERVAL_MS = 60_000  # OTEL_METRIC_EXPORT_INTERVAL's default
LOGS_INTERVAL_MS = 5_000  # OTEL_LOGS_EXPORT_INTERVAL's default (Claude Code's variable)
OUTCOME_WAIT = 120.0  # seconds a loop's event waits for its outcome, then goes without
POLL_EVERY = 1.0  # seconds between two looks at the detection log for new events
_SETTINGS_BYTES = 1 << 20
_TRUE = frozenset({"1", "true", "yes", "on"})  # Claude Code's truthy values
_SIGNALS = {"metrics": "/v1/metrics", "logs": "/v1/logs"}

MISSING = ("OpenTelemetry export needs the OpenTelemetry SDK: pip install "
           "'loop-killer[otel]' (or pip install opentelemetry-sdk "
           "opentelemetry-exporter-otlp-proto-http); going on without export")



def settings_env(text: str | bytes) -> dict[str, str]:
    """The ``env`` block of a Claude Code ``settings.json``, every value as text."""
    try:
        settings = json.loads(text)
    except ValueError:
        return {}
    block = settings.get("env") if isinstance(settings, dict) else None
    if not isinstance(block, dict):
        return {}
    found: dict[str, str] = {}
    for name, value in block.items():
        if isinstance(value, bool):
            found[name] = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            found[name] = str(value)
    return found


def telemetry_variables(environ: Mapping[str, str], settings: Mapping[str, str]) -> dict[str, str]:
    """The settings' ``env``, overridden by the watcher's own environment."""
    def ours(name: str) -> bool:
        return name == ENABLE or name.startswith("OTEL_")
    return {**{k: v for k, v in settings.items() if ours(k)},
            **{k: v for k, v in environ.items() if ours(k)}}


def parse_pairs(text: str) -> dict[str, str]:
    """``key=value,key2=value2``, values percent-decoded; malformed pairs left out."""
    pairs: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = urllib.parse.unquote(key).strip()
        if sep and key:
            pairs[key] = urllib.parse.unquote(value).strip()
    return pairs


@dataclass(frozen=True, slots=True)
class Destination:
    endpoint: str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ExportPlan:
    metrics: Destination | None = None
    logs: Destination | None = None
    metric_interval_ms: int = METRIC_INTERVAL_MS
    logs_interval_ms: int = LOGS_INTERVAL_MS
    resource: Mapping[str, str] = field(default_factory=dict)
    delta: bool = False  # OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta
    notes: tuple[str, ...] = ()  # why something configured is not exported

    @property
    def on(self) -> bool:
        return self.metrics is not None or self.logs is not None


def plan_export(variables: Mapping[str, str]) -> ExportPlan:
    """What to export where, by Claude Code's rule."""
    if variables.get(ENABLE, "").strip().lower() not in _TRUE:
        return ExportPlan()
    notes: list[str] = []
    destinations: dict[str, Destination | None] = {}
    for signal, path in _SIGNALS.items():
        destinations[signal] = None
        exporters = variables.get(f"OTEL_{signal.upper()}_EXPORTER", "")
        if "otlp" not in {name.strip().lower() for name in exporters.split(",")}:
            continue
        upper = signal.upper()
        protocol = (variables.get(f"OTEL_EXPORTER_OTLP_{upper}_PROTOCOL")
                    or variables.get("OTEL_EXPORTER_OTLP_PROTOCOL") or PROTOCOL).strip()
        if protocol != PROTOCOL:
            notes.append(
                f"{signal} not exported: loop-killer speaks OTLP over {PROTOCOL} only, not "
                f"{protocol}; give loop-killer-watch OTEL_EXPORTER_OTLP_PROTOCOL={PROTOCOL} "
                f"and the collector's HTTP endpoint (port 4318) in its environment")
            continue
        endpoint = variables.get(f"OTEL_EXPORTER_OTLP_{upper}_ENDPOINT", "").strip()
        if not endpoint:  # the general endpoint is a base: the signal's path is added
            base = variables.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or DEFAULT_ENDPOINT
            endpoint = base.rstrip("/") + path
        headers = {**parse_pairs(variables.get("OTEL_EXPORTER_OTLP_HEADERS", "")),
                   **parse_pairs(variables.get(f"OTEL_EXPORTER_OTLP_{upper}_HEADERS", ""))}
        destinations[signal] = Destination(endpoint, headers)
    if not notes and not any(destinations.values()):
        notes.append(f"{ENABLE} is set, but neither OTEL_METRICS_EXPORTER nor "
                     "OTEL_LOGS_EXPORTER lists otlp: nothing exported")
    resource = {key: value
                for key, value in parse_pairs(variables.get("OTEL_RESOURCE_ATTRIBUTES", "")).items()
                if key != "service.name"}  # the service is loop-killer, not Claude Code
    resource.update({"service.name": SERVICE_NAME, "service.version": __version__})
    return ExportPlan(
        metrics=destinations["metrics"], logs=destinations["logs"],
        metric_interval_ms=_milliseconds(variables, ("OTEL_METRIC_EXPORT_INTERVAL",),
                                         METRIC_INTERVAL_MS, notes),
        logs_interval_ms=_milliseconds(variables, ("OTEL_LOGS_EXPORT_INTERVAL",
                                                   "OTEL_BLRP_SCHEDULE_DELAY"),
                                       LOGS_INTERVAL_MS, notes),
        resource=resource,
        delta=variables.get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
                            "").strip().lower() == "delta",
        notes=tuple(notes))


def _milliseconds(variables: Mapping[str, str], names: tuple[str, ...], default: int,
                  notes: list[str]) -> int:
    for name in names:
        text = variables.get(name, "").strip()
        if not text:
            continue
        if text.isdigit() and int(text) > 0:
            return int(text)
        notes.append(f"{name}={text!r} is not a number of milliseconds: {default} used")
        return default
    return default


@dataclass(frozen=True, slots=True)
class LoopEvent:
    at: float  # when the loop was detected (seconds since the epoch)
    attributes: Mapping[str, str | int]


@dataclass(slots=True)
class _Held:
    seen: float
    event: LoopEvent


class LoopEvents:
    """One event per detection, held for its first outcome ``wait`` seconds at most."""

    def __init__(self, *, home: str | None = None, wait: float = OUTCOME_WAIT,
                 remember: int = 10_000) -> None:
        self.home = home
        self.wait = wait
        self.remember = remember
        self._held: OrderedDict[tuple[str, str], _Held] = OrderedDict()

    def observe(self, record: Record, now: float) -> list[LoopEvent]:
        session = record.session_id
        if not session:
            return []
        if isinstance(record, LoopRecord) or (isinstance(record, ToolRecord)
                                              and not record.refused):
            return self._detection(record, session, now)
        if isinstance(record, OutcomeRecord):
            key = (session, record.answer_uuid)
            held = self._held.pop(key, None)
            if held is None:  # the hook's outcome may name no answer (the ladder's stop
                # names the refused attempt): the session's latest loop of its kind
                kind = _kind(record.rule)
                key = next((k for k in reversed(self._held) if k[0] == session
                            and self._held[k].event.attributes["kind"] == kind), key)
                held = self._held.pop(key, None)
            if held is not None and record.outcome:
                return [LoopEvent(held.event.at, {**held.event.attributes,
                                                  "outcome": record.outcome})]
            return [held.event] if held is not None else []
        return []

    def due(self, now: float) -> list[LoopEvent]:
        """The events that waited long enough for an outcome: sent without one."""
        ready: list[LoopEvent] = []
        while self._held:
            key, held = next(iter(self._held.items()))
            if now - held.seen < self.wait:
                break
            del self._held[key]
            ready.append(held.event)
        return ready

    def drain(self) -> list[LoopEvent]:
        ready = [held.event for held in self._held.values()]
        self._held.clear()
        return ready

    def _detection(self, record: LoopRecord | ToolRecord, session: str,
                   now: float) -> list[LoopEvent]:
        rule = record.rule or "other"
        at = record.at or now
        attributes: dict[str, str | int] = {
            "session.id": session, "event.name": "loop_detected", "rule": rule,
            "kind": _kind(rule), "event.timestamp": datetime.fromtimestamp(
                at, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")}
        if record.project:
            attributes["project"] = project_label(record.project, self.home)
        attributes["count"] = record.count
        if isinstance(record, LoopRecord):
            attributes["run_length"] = record.run_length
        if record.source:
            attributes["source"] = record.source
        if isinstance(record, ToolRecord) and record.tool:
            attributes["tool"] = record.tool
        event = LoopEvent(at, attributes)
        key = (session, record.answer_uuid if isinstance(record, LoopRecord)
               else record.tool_use_id)
        self._held[key] = _Held(now, event)
        self._held.move_to_end(key)
        overflow = []
        while len(self._held) > self.remember:
            overflow.append(self._held.popitem(last=False)[1].event)
        return overflow


def _kind(rule: str) -> str:
    return "tool" if rule in TOOL_CALL_RULES else "reprompt"
