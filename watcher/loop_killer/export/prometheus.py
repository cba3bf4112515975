"""``loop-killer-watch --metrics HOST:PORT``: the loop figures at ``/metrics`` for
Prometheus (the ``metrics`` extra), read on the client's own server thread when scraped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .metrics import Gauges, MetricsSource, parse_address

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

        loops = CounterMetricFamily(
            "loop_killer_loops", "Loops loop-killer caught, counted when detected",
            labels=["rule", "kind", "project"])
        outcomes = CounterMetricFamily(
            "loop_killer_loop_outcomes", "Loops counted again when their first outcome is "
            "known (a tool-call warning nothing refused after: outcome warned)",
            labels=["rule", "kind", "outcome", "project"])
        refusals = CounterMetricFamily(
            "loop_killer_tool_refusals", "Tool calls refused for repeating the same result",
            labels=["project"])
        avoided = CounterMetricFamily(
            "loop_killer_avoided_tokens", "Tokens a stopped re-prompt loop would still have "
            "spent (its mean tokens per reply x the replies Claude Code's block cap allowed)",
            labels=["rule", "project"])
        with self.source.lock:
            tally = self.source.refresh()
            for (rule, kind, project), count in tally.loops.items():
                loops.add_metric([rule, kind, project], count)
            for (rule, kind, outcome, project), count in tally.outcomes.items():
                outcomes.add_metric([rule, kind, outcome, project], count)
            for project, count in tally.refusals.items():
                refusals.add_metric([project], count)
            for (rule, project), tokens in tally.avoided_tokens.items():
                avoided.add_metric([rule, project], round(tokens))
        gauges = self.source.gauges()
        yield loops
        yield outcomes
        yield refusals
        yield avoided
        for name, text, value in (
                ("loop_killer_sessions_followed", "Session transcripts the watcher follows",
                 gauges.followed),
                ("loop_killer_sessions_live",
                 "Sessions whose transcript grew in the last 5 minutes", gauges.live),
                ("loop_killer_sessions_in_run", "Live sessions in a re-prompt run",
                 gauges.in_run)):
            yield GaugeMetricFamily(name, text, value=value)
        yield from _turns(gauges, self.source.limits)


def _turns(gauges: Gauges, limits: dict[str, float]) -> Iterator[Any]:
    """Each live turn against the budget (only live turns: a session's series goes with
    its turn), and the limits that are on."""
    from prometheus_client.core import GaugeMetricFamily

    labels = ["project", "session"]
    spend = GaugeMetricFamily(
        "loop_killer_turn_spend_usd", "What the live turn has spent (USD, main session "
        "and subagents, priced as scan prices it)", labels=labels)
    reprompts = GaugeMetricFamily(
        "loop_killer_turn_reprompts", "Re-prompts in the live turn", labels=labels)
    minutes = GaugeMetricFamily(
        "loop_killer_turn_duration_minutes", "Minutes since the live turn's prompt",
        labels=labels)
    for turn in gauges.turns:
        spend.add_metric([turn.project, turn.session_id], turn.usd)
        reprompts.add_metric([turn.project, turn.session_id], turn.reprompts)
        if turn.minutes is not None:
            minutes.add_metric([turn.project, turn.session_id], turn.minutes)
    limit = GaugeMetricFamily(
        "loop_killer_budget_limit", "The budget of a turn, per limit that is on "
        "(reprompts, usd, minutes; [budget] in config.toml)", labels=["limit"])
    for name, value in limits.items():
        limit.add_metric([name], value)
    yield from (spend, reprompts, minutes, limit)


class MetricsServer:
    def __init__(self, server: Any, thread: Any, address: tuple[str, int]) -> None:
        self.server = server
        self.thread = thread
        self.address = address

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def serve_metrics(address: str, source: MetricsSource) -> MetricsServer:
    """Serve ``/metrics`` at ``address`` (HOST:PORT) on a thread of its own.
    Raises MetricsUnavailable (a bad address, a port taken, the library missing)."""
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
