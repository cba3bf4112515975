"""The loop figures and one log event per loop, over OTLP to where Claude Code's telemetry goes."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .. import __version__
from ..state.files import config_dir
from ..state.journal import Record
from .metrics import BUDGET_LIMIT, COUNTERS, SESSION_GAUGES, TURN_GAUGES, MetricsSource
from .telemetry_plan import (
    _SETTINGS_BYTES,
    EVENT_NAME,
    MISSING,
    OUTCOME_WAIT,
    POLL_EVERY,
    ExportPlan,
    LoopEvent,
    LoopEvents,
    plan_export,
    settings_env,
    telemetry_variables,
)

__all__ = ["TelemetryExport", "TelemetryUnavailable", "read_settings_env", "start_from_environment"]

log = logging.getLogger("loop_killer.watch")
events_log = logging.getLogger("loop_killer.watch.events")

def read_settings_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``env`` block of Claude Code's ``settings.json``; {} when it cannot be read."""
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
    """Instruments that read ``source`` at each export, and a thread for the events."""

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
            self._thread = threading.Thread(target=self._follow, name="otel-events", daemon=True)
            self._thread.start()

    def _meters(self, resource: Any) -> Any:
        # (the SDK comes with the exporter __init__ found)
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
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
        for figure in COUNTERS:
            meter.create_observable_counter(
                f"loop_killer.{figure.otel}", [self._counter(figure.field, *figure.labels)],
                unit=figure.unit, description=figure.otel_text or figure.text)
        for figures, observe in ((SESSION_GAUGES, self._gauge), (TURN_GAUGES, self._turns)):
            for figure in figures:
                meter.create_observable_gauge(
                    f"loop_killer.{figure.otel}", [observe(figure.field)], unit=figure.unit,
                    description=figure.otel_text or figure.text)
        meter.create_observable_gauge(
            f"loop_killer.{BUDGET_LIMIT.otel}", [self._limits], unit=BUDGET_LIMIT.unit,
            description=BUDGET_LIMIT.otel_text)
        return provider

    def _logs(self, resource: Any) -> tuple[Any, Callable[[LoopEvent], None]]:
        from opentelemetry._logs import SeverityNumber
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

        assert self.plan.logs is not None
        provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        provider.add_log_record_processor(BatchLogRecordProcessor(
            OTLPLogExporter(endpoint=self.plan.logs.endpoint, headers=dict(self.plan.logs.headers)),
            schedule_delay_millis=self.plan.logs_interval_ms))
        logger = provider.get_logger("loop_killer", __version__)

        def emit(event: LoopEvent) -> None:
            # As Claude Code's events: the body names the event, event.name is its short name.
            logger.emit(timestamp=int(event.at * 1e9), body=EVENT_NAME,
                        event_name=EVENT_NAME, severity_number=SeverityNumber.WARN,
                        severity_text="WARN", attributes=dict(event.attributes))
        return provider, emit

    # Instrument callbacks (on the SDK's export thread).
    def _counter(self, field: str, *labels: str) -> Callable[[Any], Iterable[Any]]:
        def observe(_options: Any) -> Iterable[Any]:
            with self.source.lock:
                counts = dict(getattr(self.source.refresh(), field))
            return [self._observation(round(count), dict(zip(
                        labels, key if isinstance(key, tuple) else (key,), strict=True)))
                    for key, count in counts.items()]
        return observe

    def _gauge(self, which: str) -> Callable[[Any], Iterable[Any]]:
        def observe(_options: Any) -> Iterable[Any]:
            return [self._observation(getattr(self.source.gauges(), which))]
        return observe

    def _turns(self, which: str) -> Callable[[Any], Iterable[Any]]:
        def observe(_options: Any) -> Iterable[Any]:
            return [self._observation(value, {"project": turn.project,
                                              "session.id": turn.session_id})
                    for turn in self.source.gauges().turns
                    if (value := getattr(turn, which)) is not None]
        return observe

    def _limits(self, _options: Any) -> Iterable[Any]:
        return [self._observation(value, {"limit": name})
                for name, value in self.source.limits.items()]

    def _on_record(self, record: Record) -> None:  # under the source's lock
        if self._emit is not None:
            for event in self.events.observe(record, time.monotonic()):
                self._emit(event)

    def _follow(self) -> None:
        """Read the log now and then: events go out without waiting for a scrape."""
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
        """Send what is left within ``timeout`` seconds: a dead collector never holds the stop."""
        deadline = time.monotonic() + timeout
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
        closing.join(max(0.0, deadline - time.monotonic()))


def _quiet_sdk_log(every: float = 300.0) -> None:
    """The SDK's complaints as the watcher's: errors only, at most one per ``every`` seconds."""
    ours = logging.getLogger("loop_killer")
    forward = _Forward(ours, every)  # a handler: the SDK logs from child loggers
    sdk = logging.getLogger("opentelemetry")
    sdk.handlers[:] = [forward]
    sdk.propagate = False
    sdk.setLevel(logging.WARNING if ours.isEnabledFor(logging.DEBUG) else logging.ERROR)


class _Forward(logging.Handler):
    """Hands records to another logger's handlers, one per ``every`` seconds at most."""

    def __init__(self, to: logging.Logger, every: float) -> None:
        super().__init__()
        self.to = to
        self.every = every
        self.last = -every

    def emit(self, record: logging.LogRecord) -> None:
        now = time.monotonic()
        if now - self.last < self.every:
            return
        self.last = now
        for handler in self.to.handlers:
            handler.handle(record)


def start_from_environment(source: Callable[[], MetricsSource],
                           environ: Mapping[str, str] | None = None) -> TelemetryExport | None:
    """Start the export when configured, saying what is exported where, or why not."""
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
