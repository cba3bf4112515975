"""``loop-killer-watch --metrics HOST:PORT``: the loop figures at ``/metrics`` for Prometheus."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .metrics import (
    BUDGET_LIMIT,
    COUNTERS,
    SESSION_GAUGES,
    TURN_GAUGES,
    Figure,
    MetricsSource,
    parse_address,
)

__all__ = ["MISSING", "MetricsServer", "MetricsUnavailable", "serve_metrics"]

MISSING = ("--metrics needs the Prometheus client library: pip install "
           "'loop-killer[metrics]' (or pip install prometheus_client)")


class MetricsUnavailable(RuntimeError):
    """The metrics cannot be served; the message says why and what to do."""


class _Collector:
    """Reads the source at each scrape (prometheus_client's custom collector protocol)."""

    def __init__(self, source: MetricsSource) -> None:
        self.source = source

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self.source.lock:
            tally = self.source.refresh()
            counts = [dict(getattr(tally, figure.field)) for figure in COUNTERS]
        for figure, counted in zip(COUNTERS, counts, strict=True):
            family = CounterMetricFamily(_name(figure), figure.text, labels=list(figure.labels))
            for key, count in counted.items():
                family.add_metric(list(key) if isinstance(key, tuple) else [key], round(count))
            yield family
        gauges = self.source.gauges()
        for figure in SESSION_GAUGES:
            yield GaugeMetricFamily(_name(figure), figure.text, value=getattr(gauges, figure.field))
        # Each live turn against the budget (a session's series goes with its turn), limits on.
        for figure in TURN_GAUGES:
            turns = GaugeMetricFamily(_name(figure), figure.text, labels=["project", "session"])
            for turn in gauges.turns:
                if (value := getattr(turn, figure.field)) is not None:
                    turns.add_metric([turn.project, turn.session_id], value)
            yield turns
        limits = GaugeMetricFamily(_name(BUDGET_LIMIT), BUDGET_LIMIT.text, labels=["limit"])
        for name, value in self.source.limits.items():
            limits.add_metric([name], value)
        yield limits


def _name(figure: Figure) -> str:
    return f"loop_killer_{figure.name}"


@dataclass(frozen=True, slots=True)
class MetricsServer:
    server: Any
    thread: Any
    address: tuple[str, int]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def serve_metrics(address: str, source: MetricsSource) -> MetricsServer:
    """Serve ``/metrics`` at ``address`` on a thread; raises MetricsUnavailable."""
    try:
        host, port = parse_address(address)
    except ValueError as error:
        raise MetricsUnavailable(f"--metrics: {error}") from None
    try:
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError:
        raise MetricsUnavailable(MISSING) from None
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(source))
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as error:
        raise MetricsUnavailable(f"--metrics: cannot listen on {host}:{port}: "
                                 f"{error.strerror or error}") from None
    return MetricsServer(server, thread, (host, server.server_port))
