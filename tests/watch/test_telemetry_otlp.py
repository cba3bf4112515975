"""End to end: the real ``loop-killer-watch``, configured as Claude Code is (partly in the
``env`` block of its settings.json, partly in the environment), exports to an OTLP/HTTP
receiver on loopback; loops happen, and what arrives is decoded with the official
protobuf messages (opentelemetry-proto)."""

from __future__ import annotations

import gzip
import importlib
import json
import os
import re
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from must_run import unavailable
from transcripts import Lines, append

from .conftest import Env
from .helpers import wait_for


def _needed(module: str) -> Any:
    """The test extra installs it: skipped on a laptop without it, never under CI=true."""
    try:
        return importlib.import_module(module)
    except ImportError:
        unavailable(f"{module} is not installed: pip install -e '.[test]'", module_level=True)


_needed("opentelemetry.sdk")
_needed("opentelemetry.exporter.otlp.proto.http")
_needed("prometheus_client")
logs_service = _needed("opentelemetry.proto.collector.logs.v1.logs_service_pb2")
metrics_service = _needed("opentelemetry.proto.collector.metrics.v1.metrics_service_pb2")


class Receiver:
    """A tiny OTLP/HTTP collector: keeps every POST body to /v1/metrics and /v1/logs."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with receiver.lock:
                    receiver.posts.append((self.path, {name.lower(): value for name, value
                                                       in self.headers.items()}, body))
                self.send_response(200 if self.path in ("/v1/metrics", "/v1/logs") else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def bodies(self, path: str) -> list[bytes]:
        with self.lock:
            return [body for where, _, body in self.posts if where == path]

    def headers(self, path: str) -> list[dict[str, str]]:
        with self.lock:
            return [headers for where, headers, _ in self.posts if where == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def receiver() -> Iterator[Receiver]:  # (tests/conftest.py clears the runner's OTEL_*)
    server = Receiver()
    yield server
    server.close()


def _value(any_value: Any) -> Any:
    return getattr(any_value, any_value.WhichOneof("value"))


def _attributes(key_values: Any) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in key_values}


def loop_events(receiver: Receiver) -> list[dict[str, Any]]:
    """Every loop_killer.loop_detected log record received, with its resource."""
    found = []
    for body in receiver.bodies("/v1/logs"):
        request = logs_service.ExportLogsServiceRequest.FromString(body)
        for resource_logs in request.resource_logs:
            resource = _attributes(resource_logs.resource.attributes)
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    if record.body.string_value == "loop_killer.loop_detected":
                        found.append({"resource": resource, "event_name": record.event_name,
                                      "time": record.time_unix_nano,
                                      **_attributes(record.attributes)})
    return found


def latest_points(receiver: Receiver, name: str) -> list[tuple[dict[str, Any], float]]:
    """The data points of metric ``name`` in the last export that had it."""
    for body in reversed(receiver.bodies("/v1/metrics")):
        request = metrics_service.ExportMetricsServiceRequest.FromString(body)
        for resource_metrics in request.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name != name:
                        continue
                    data = metric.sum if metric.HasField("sum") else metric.gauge
                    return [(_attributes(point.attributes),
                             point.as_int if point.HasField("as_int") else point.as_double)
                            for point in data.data_points]
    return []


def test_the_watcher_exports_loops_and_events_to_an_otlp_collector(
        env: Env, spawn_watcher: Any, receiver: Receiver,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # As a team sets it for Claude Code: in settings.json's env (hooks no longer inherit it).
    config = Path(os.environ["CLAUDE_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "settings.json").write_text(json.dumps({"env": {
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_LOGS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",  # the environment's wins
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer team-token",
        "OTEL_RESOURCE_ATTRIBUTES": "department=platform,service.name=claude-code"}}))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "300")
    monkeypatch.setenv("OTEL_LOGS_EXPORT_INTERVAL", "200")
    # Beside it, the Prometheus endpoint: one source for both. Outcome timeout 2 s: the
    # tool loop's outcome (the watcher's) comes that soon.
    watcher = spawn_watcher("--metrics", "127.0.0.1:0", "--outcome-timeout", "2")
    (scrape_port,) = re.findall(r"Prometheus metrics at http://127\.0\.0\.1:(\d+)/metrics",
                                watcher.stdout())
    assert (f"OpenTelemetry: metrics every 0.3 s to {receiver.url}/v1/metrics, "
            f"loop events to {receiver.url}/v1/logs") in watcher.stdout()

    tools, goal, fired = env.two_loops()
    live = Lines(cwd="/home/dev/migrate")  # a goal answering its first re-prompt
    append(live.path_in(env.root), live.prompt() + live.answer("On it.", tool=True)
           + live.goal() + live.answer("Migrated 3 tables.") + live.reprompt())

    events = wait_for(lambda: len(found := loop_events(receiver)) >= 2 and found, 30,
                      "both loop events at the collector")
    by_session = {event["session.id"]: event for event in events}
    assert len(events) == 2 and set(by_session) == {tools.session_id, goal.session_id}
    tool_event, goal_event = by_session[tools.session_id], by_session[goal.session_id]
    # (no tool-call hook counted that session's calls: nothing warned the model)
    assert (tool_event["rule"], tool_event["kind"], tool_event["outcome"],
            tool_event["project"]) == ("TOOL_REPEAT", "tool", "none", "home-dev-shop")
    assert (goal_event["rule"], goal_event["kind"], goal_event["outcome"],
            goal_event["project"]) == ("SAME_REPLY_TURNS", "reprompt", "cleared",
                                       "home-dev-billing")
    assert goal_event["event_name"] == "loop_killer.loop_detected"
    assert goal_event["event.name"] == "loop_detected"
    assert goal_event["time"] == int(fired["at"] * 1e9)  # when it was detected
    resource = goal_event["resource"]
    assert resource["service.name"] == "loop-killer"
    assert resource["department"] == "platform"

    def counted(name: str, *labels: str) -> dict[tuple[str, ...], float]:
        return {tuple(points[label] for label in labels): value
                for points, value in latest_points(receiver, name)}

    found = wait_for(lambda: len(seen := counted("loop_killer.loops", "rule", "kind",
                                                 "project")) >= 2 and seen,
                     30, "both loops counted")
    assert found == {("TOOL_REPEAT", "tool", "home-dev-shop"): 1,
                     ("SAME_REPLY_TURNS", "reprompt", "home-dev-billing"): 1}
    settled = wait_for(lambda: len(seen := counted("loop_killer.loop_outcomes", "rule",
                                                   "outcome", "project")) >= 2 and seen,
                       30, "both outcomes counted")
    assert settled == {("TOOL_REPEAT", "none", "home-dev-shop"): 1,
                       ("SAME_REPLY_TURNS", "cleared", "home-dev-billing"): 1}
    # The same figures as the Prometheus endpoint's.
    with urllib.request.urlopen(f"http://127.0.0.1:{scrape_port}/metrics", timeout=5) as page:
        scraped = page.read().decode()
    assert ('loop_killer_loops_total{kind="tool",project="home-dev-shop",'
            'rule="TOOL_REPEAT"} 1.0') in scraped
    assert ('loop_killer_loop_outcomes_total{kind="reprompt",outcome="cleared",'
            'project="home-dev-billing",rule="SAME_REPLY_TURNS"} 1.0') in scraped
    assert ('loop_killer_loop_outcomes_total{kind="tool",outcome="none",'
            'project="home-dev-shop",rule="TOOL_REPEAT"} 1.0') in scraped
    (avoided,) = wait_for(lambda: latest_points(receiver, "loop_killer.avoided_tokens"), 10,
                          "the avoided tokens")
    # The loop's replies used 20 tokens each (tests/transcripts.py): 20 x the 5 replies left of 8.
    assert avoided == ({"rule": "SAME_REPLY_TURNS", "project": "home-dev-billing"}, 20 * 5)
    wait_for(lambda: any(value >= 2 for _, value in
                         latest_points(receiver, "loop_killer.sessions.followed")),
             10, "the sessions gauge")
    # The budget's limits that are on (the defaults: minutes is off).
    limits = wait_for(lambda: latest_points(receiver, "loop_killer.budget.limit"), 10,
                      "the budget's limits")
    assert sorted((points["limit"], value) for points, value in limits) == [
        ("reprompts", 100), ("usd", 25.0)]
    # Its live turn, by session.id as on Claude Code's own metrics (no other turn is live).
    (turn,) = wait_for(lambda: latest_points(receiver, "loop_killer.turn.reprompts"), 10,
                       "the live turn's re-prompts")
    assert turn == ({"project": "home-dev-migrate", "session.id": live.session_id}, 1)
    (spent,) = latest_points(receiver, "loop_killer.turn.spend_usd")
    assert spent[0]["session.id"] == live.session_id and 0 < spent[1] < 0.01
    assert all(headers.get("authorization") == "Bearer team-token"
               for headers in receiver.headers("/v1/metrics") + receiver.headers("/v1/logs"))

    # Stopped, the watcher sends what is left and ends promptly.
    watcher.signal(15)
    assert watcher.wait(15) == 0
    assert watcher.stderr() == ""  # nothing failed, nothing to warn of
