"""OpenTelemetry export beside Claude Code's own: the loop figures and one log event per
detection, to the backend Claude Code's telemetry goes to.

The watcher reads the variables Claude Code reads (``CLAUDE_CODE_ENABLE_TELEMETRY``,
``OTEL_*``) from its environment, or from the ``env`` block of Claude Code's
``settings.json`` (hooks no longer inherit them; the watcher's own environment wins).
Claude Code's rule decides, per signal: telemetry enabled, and ``OTEL_METRICS_EXPORTER`` /
``OTEL_LOGS_EXPORTER`` listing ``otlp``. Only OTLP over ``http/protobuf`` is spoken.

The functional core (``plan_export``, ``LoopEvents``) is pure; ``TelemetryExport`` wires
it to the OpenTelemetry SDK (the optional ``otel`` extra, imported only here, only when
export is on). The metrics are the ``metrics.LoopTally`` figures the Prometheus endpoint
serves, read at each export; the events come from ``MetricsSource.on_record``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .. import __version__
from ..engine.tool_repeat import TOOL_CALL_RULES
from ..state.paths import config_dir
from .metrics import MetricsSource
from .report import project_label

__all__ = [
    "EVENT_NAME",
    "MISSING",
    "OUTCOME_WAIT",
    "Destination",
    "ExportPlan",
    "LoopEvent",
    "LoopEvents",
    "TelemetryExport",
    "TelemetryUnavailable",
    "parse_pairs",
    "plan_export",
    "read_settings_env",
    "start_from_environment",
    "telemetry_variables",
]

log = logging.getLogger("loop_killer.watch")
events_log = logging.getLogger("loop_killer.watch.events")

ENABLE = "CLAUDE_CODE_ENABLE_TELEMETRY"
SERVICE_NAME = "loop-killer"
EVENT_NAME = "loop_killer.loop_detected"
PROTOCOL = "http/protobuf"
DEFAULT_ENDPOINT = "http://localhost:4318"  # the OTel specification's, for http/protobuf
METRIC_INTERVAL_MS = 60_000  # OTEL_METRIC_EXPORT_INTERVAL's default
LOGS_INTERVAL_MS = 5_000  # OTEL_LOGS_EXPORT_INTERVAL's default (Claude Code's variable)
OUTCOME_WAIT = 120.0
"""Seconds a re-prompt loop's event waits for its outcome (the Stop hook's word comes at
the session's next stop) before it is sent without one."""
POLL_EVERY = 1.0  # seconds between two looks at the detection log for new events
_SETTINGS_BYTES = 1 << 20
_TRUE = frozenset({"1", "true", "yes", "on"})  # Claude Code's truthy values
_SIGNALS = {"metrics": "/v1/metrics", "logs": "/v1/logs"}

MISSING = ("OpenTelemetry export needs the OpenTelemetry SDK: pip install "
           "'loop-killer[otel]' (or pip install opentelemetry-sdk "
           "opentelemetry-exporter-otlp-proto-http); going on without export")


# --- the functional core ----------------------------------------------------------------

def settings_env(text: str | bytes) -> dict[str, str]:
    """The ``env`` block of a Claude Code ``settings.json`` (values as Claude Code sets
    them: text, numbers and booleans as text); {} when there is none."""
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


def telemetry_variables(environ: Mapping[str, str],
                        settings: Mapping[str, str]) -> dict[str, str]:
    """The telemetry variables in force: the settings' ``env``, overridden by the
    watcher's own environment (the way to change them for the watcher alone)."""
    def ours(name: str) -> bool:
        return name == ENABLE or name.startswith("OTEL_")
    return {**{k: v for k, v in settings.items() if ours(k)},
            **{k: v for k, v in environ.items() if ours(k)}}


def parse_pairs(text: str) -> dict[str, str]:
    """``key=value,key2=value2`` (``OTEL_EXPORTER_OTLP_HEADERS``,
    ``OTEL_RESOURCE_ATTRIBUTES``), values percent-decoded; malformed pairs are left out."""
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
    """What to export where, by Claude Code's rule (see the module's docstring)."""
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
    """One ``loop_killer.loop_detected`` log event."""
    at: float  # when the loop was detected (seconds since the epoch)
    attributes: Mapping[str, str | int]


@dataclass(slots=True)
class _Held:
    seen: float
    event: LoopEvent


class LoopEvents:
    """Detection-log records in, one event per detection out. A tool-call warning goes
    at once (outcome ``warned``); a re-prompt loop's event waits for its first outcome
    (matched as ``LoopTally`` matches it), at most ``wait`` seconds."""

    def __init__(self, *, home: str | None = None, wait: float = OUTCOME_WAIT,
                 remember: int = 10_000) -> None:
        self.home = home
        self.wait = wait
        self.remember = remember
        self._held: OrderedDict[tuple[str, str], _Held] = OrderedDict()

    def observe(self, record: Mapping[str, Any], now: float) -> list[LoopEvent]:
        session = record.get("session_id")
        if not isinstance(session, str) or not session:
            return []
        event = record.get("event")
        if event == "detection":
            return self._detection(record, session, now)
        if event == "outcome":
            key = (session, _text(record.get("answer_uuid")))
            held = self._held.pop(key, None)
            if held is None:  # the hook's outcome may name no answer: the session's latest
                key = next((k for k in reversed(self._held) if k[0] == session), key)
                held = self._held.pop(key, None)
            outcome = record.get("outcome")
            if held is not None and isinstance(outcome, str) and outcome:
                return [LoopEvent(held.event.at, {**held.event.attributes,
                                                  "outcome": outcome})]
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
        """Every event still waiting (the watcher stops)."""
        ready = [held.event for held in self._held.values()]
        self._held.clear()
        return ready

    def _detection(self, record: Mapping[str, Any], session: str,
                   now: float) -> list[LoopEvent]:
        rule = _text(record.get("rule")) or "other"
        kind = "tool" if rule in TOOL_CALL_RULES else "reprompt"
        attributes: dict[str, str | int] = {"session.id": session, "event.name": "loop_detected",
                                            "rule": rule, "kind": kind}
        at = record.get("at")
        at = float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else now
        attributes["event.timestamp"] = datetime.fromtimestamp(at, timezone.utc).isoformat(
            timespec="milliseconds").replace("+00:00", "Z")
        project = record.get("project")
        if isinstance(project, str) and project:
            attributes["project"] = project_label(project, self.home)
        for name in ("count", "run_length"):
            value = record.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                attributes[name] = value
        for name in ("source", "tool"):
            if value := _text(record.get(name)):
                attributes[name] = value
        event = LoopEvent(at, attributes)
        if kind == "tool":  # a warning: no outcome follows
            return [LoopEvent(at, {**attributes, "outcome": "warned"})]
        key = (session, _text(record.get("answer_uuid")))
        self._held[key] = _Held(now, event)
        self._held.move_to_end(key)
        overflow = []
        while len(self._held) > self.remember:
            overflow.append(self._held.popitem(last=False)[1].event)
        return overflow


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


# --- the shell --------------------------------------------------------------------------

def read_settings_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``env`` block of ``$CLAUDE_CONFIG_DIR/settings.json`` (or
    ``~/.claude/settings.json``); {} when it cannot be read."""
    path = config_dir(environ) / "settings.json"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # never hang on a FIFO
        with os.fdopen(fd, "rb") as file:
            return settings_env(file.read(_SETTINGS_BYTES))
    except OSError:
        return {}


class TelemetryUnavailable(RuntimeError):
    """The export cannot start; the message says why and what to do."""


class TelemetryExport:
    """The plan carried out with the OpenTelemetry SDK: observable instruments that read
    ``source`` at each export, and a thread that turns new log records into events."""

    def __init__(self, plan: ExportPlan, source: MetricsSource, *,
                 poll_every: float = POLL_EVERY, outcome_wait: float = OUTCOME_WAIT) -> None:
        try:  # all of it, before anything starts
            from opentelemetry.exporter.otlp.proto.http import _log_exporter, metric_exporter
            from opentelemetry.metrics import Observation
            from opentelemetry.sdk.resources import Resource
        except ImportError:
            raise TelemetryUnavailable(MISSING) from None
        del _log_exporter, metric_exporter
        self._observation = Observation
        self.plan = plan
        self.source = source
        self.poll_every = poll_every
        self.events = LoopEvents(home=source.tally.home, wait=outcome_wait)
        resource = Resource.create(dict(plan.resource))
        self.meter_provider: Any = self._meters(resource) if plan.metrics else None
        self.logger_provider: Any = None
        self._emit: Callable[[LoopEvent], None] | None = None
        if plan.logs:
            self.logger_provider, self._emit = self._logs(resource)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self._emit is not None:
            source.on_record = self._on_record
            self._thread = threading.Thread(target=self._follow, name="otel-events",
                                            daemon=True)
            self._thread.start()

    def _meters(self, resource: Any) -> Any:
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )
            from opentelemetry.sdk.metrics import (
                Counter,
                Histogram,
                MeterProvider,
                ObservableCounter,
                ObservableGauge,
                ObservableUpDownCounter,
                UpDownCounter,
            )
            from opentelemetry.sdk.metrics.export import (
                AggregationTemporality,
                PeriodicExportingMetricReader,
            )
        except ImportError:
            raise TelemetryUnavailable(MISSING) from None
        assert self.plan.metrics is not None
        temporality: dict[type, AggregationTemporality] | None = None
        if self.plan.delta:  # delta for the counters, as the SDK's "delta" preference does
            delta, cumulative = AggregationTemporality.DELTA, AggregationTemporality.CUMULATIVE
            temporality = {Counter: delta, Histogram: delta, ObservableCounter: delta,
                           UpDownCounter: cumulative, ObservableUpDownCounter: cumulative,
                           ObservableGauge: cumulative}
        exporter = OTLPMetricExporter(endpoint=self.plan.metrics.endpoint,
                                      headers=dict(self.plan.metrics.headers),
                                      preferred_temporality=temporality)
        reader = PeriodicExportingMetricReader(
            exporter, export_interval_millis=self.plan.metric_interval_ms)
        provider = MeterProvider(resource=resource, metric_readers=[reader],
                                 shutdown_on_exit=False)  # close() does it, in time
        meter = provider.get_meter("loop_killer", __version__)
        meter.create_observable_counter(
            "loop_killer.loops", [self._loops], unit="{loop}",
            description="Loops loop-killer caught, counted at their first outcome "
                        "(tool-call warnings at once, outcome warned)")
        meter.create_observable_counter(
            "loop_killer.tool_refusals", [self._refusals], unit="{call}",
            description="Tool calls refused for repeating the same result")
        meter.create_observable_counter(
            "loop_killer.avoided_tokens", [self._avoided], unit="{token}",
            description="Tokens a stopped re-prompt loop would still have spent")
        for name, what, text in (
                ("followed", "followed", "Session transcripts the watcher follows"),
                ("live", "live", "Sessions whose transcript grew in the last 5 minutes"),
                ("in_run", "in_run", "Live sessions in a re-prompt run")):
            meter.create_observable_gauge(f"loop_killer.sessions.{name}",
                                          [self._gauge(what)], unit="{session}",
                                          description=text)
        return provider

    def _logs(self, resource: Any) -> tuple[Any, Callable[[LoopEvent], None]]:
        try:
            from opentelemetry._logs import SeverityNumber
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        except ImportError:
            raise TelemetryUnavailable(MISSING) from None
        assert self.plan.logs is not None
        provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        provider.add_log_record_processor(BatchLogRecordProcessor(
            OTLPLogExporter(endpoint=self.plan.logs.endpoint,
                            headers=dict(self.plan.logs.headers)),
            schedule_delay_millis=self.plan.logs_interval_ms))
        logger = provider.get_logger("loop_killer", __version__)

        def emit(event: LoopEvent) -> None:
            # As Claude Code's events: the body names the event, event.name is its short name.
            logger.emit(timestamp=int(event.at * 1e9), body=EVENT_NAME,
                        event_name=EVENT_NAME, severity_number=SeverityNumber.WARN,
                        severity_text="WARN", attributes=dict(event.attributes))
        return provider, emit

    # Instrument callbacks (on the SDK's export thread): the tally as the endpoint reads it.
    def _loops(self, _options: Any) -> Iterable[Any]:
        with self.source.lock:
            loops = dict(self.source.refresh().loops)
        return [self._observation(count, {"rule": rule, "kind": kind, "outcome": outcome,
                                          "project": project})
                for (rule, kind, outcome, project), count in loops.items()]

    def _refusals(self, _options: Any) -> Iterable[Any]:
        with self.source.lock:
            refusals = dict(self.source.refresh().refusals)
        return [self._observation(count, {"project": project})
                for project, count in refusals.items()]

    def _avoided(self, _options: Any) -> Iterable[Any]:
        with self.source.lock:
            avoided = dict(self.source.refresh().avoided_tokens)
        return [self._observation(round(tokens), {"rule": rule, "project": project})
                for (rule, project), tokens in avoided.items()]

    def _gauge(self, which: str) -> Callable[[Any], Iterable[Any]]:
        def observe(_options: Any) -> Iterable[Any]:
            return [self._observation(getattr(self.source.gauges(), which))]
        return observe

    def _on_record(self, record: Mapping[str, Any]) -> None:
        """Told of each new record, under the source's lock."""
        if self._emit is not None:
            for event in self.events.observe(record, time.monotonic()):
                self._emit(event)

    def _follow(self) -> None:
        """Read the log now and then, so events go out without waiting for a scrape."""
        while not self._stop.wait(self.poll_every):
            try:
                with self.source.lock:
                    self.source.refresh()
                    ready = self.events.due(time.monotonic())
                for event in ready:
                    if self._emit is not None:
                        self._emit(event)
            except Exception:  # export is a side line: the watcher goes on
                log.exception("OpenTelemetry: cannot read the detection log")

    def close(self, timeout: float = 3.0) -> None:
        """Send what is left (events still waiting for an outcome go without one), within
        ``timeout`` seconds: an unreachable collector never holds the watcher's stop."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with self.source.lock:
            self.source.refresh()
            ready = self.events.drain()
        if self._emit is not None:
            for event in ready:
                self._emit(event)

        def shut_down() -> None:
            for provider in (self.logger_provider, self.meter_provider):
                if provider is not None:
                    provider.shutdown()
        closing = threading.Thread(target=shut_down, name="otel-shutdown", daemon=True)
        closing.start()
        closing.join(timeout)


class _Seldom(logging.Filter):
    """One line per ``every`` seconds at most: a collector that is down would otherwise
    be reported at each export, with each retry."""

    def __init__(self, every: float) -> None:
        super().__init__()
        self.every = every
        self.last = -every

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        if now - self.last < self.every:
            return False
        self.last = now
        return True


def _quiet_sdk_log(every: float = 300.0) -> None:
    """The SDK's complaints (a collector unreachable, a refused batch) go where the
    watcher's problems go, in its format, errors only (warnings too with --verbose),
    one every ``every`` seconds at most."""
    ours = logging.getLogger("loop_killer")
    forward = _Forward(ours)
    forward.addFilter(_Seldom(every))  # on the handler: the SDK logs from child loggers
    sdk = logging.getLogger("opentelemetry")
    sdk.handlers[:] = [forward]
    sdk.propagate = False
    sdk.setLevel(logging.WARNING if ours.isEnabledFor(logging.DEBUG) else logging.ERROR)


class _Forward(logging.Handler):
    """Hands records to another logger's handlers (the watcher's stderr, its format)."""

    def __init__(self, to: logging.Logger) -> None:
        super().__init__()
        self.to = to

    def emit(self, record: logging.LogRecord) -> None:
        for handler in self.to.handlers:
            handler.handle(record)


def start_from_environment(source: Callable[[], MetricsSource],
                           environ: Mapping[str, str] | None = None
                           ) -> TelemetryExport | None:
    """Start the export when configured (``source`` makes or gives the metrics source);
    says in one line what is exported where, or why not. Never stops the watcher."""
    environ = os.environ if environ is None else environ
    plan = plan_export(telemetry_variables(environ, read_settings_env(environ)))
    for note in plan.notes:
        log.warning("OpenTelemetry: %s", note)
    if not plan.on:
        return None
    try:
        export = TelemetryExport(plan, source())
    except TelemetryUnavailable as error:
        log.error("%s", error)
        return None
    _quiet_sdk_log()
    sent = [f"metrics every {plan.metric_interval_ms / 1000:g} s to {plan.metrics.endpoint}"
            if plan.metrics else "",
            f"loop events to {plan.logs.endpoint}" if plan.logs else ""]
    events_log.info("OpenTelemetry: %s", ", ".join(part for part in sent if part))
    return export
