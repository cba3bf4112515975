"""OpenTelemetry export, the functional core: when it is on and where it goes (Claude
Code's variables, from the environment or the ``env`` block of its settings.json), the
one event per detection, and the one line when the SDK is missing."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from loop_killer.export import telemetry
from loop_killer.export.metrics import MetricsSource
from loop_killer.export.telemetry import read_settings_env
from loop_killer.export.telemetry_plan import (
    DEFAULT_ENDPOINT,
    ExportPlan,
    LoopEvents,
    parse_pairs,
    plan_export,
    settings_env,
    telemetry_variables,
)
from loop_killer.state import journal

from .conftest import Env
from .helpers import without_library

ON = {"CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_METRICS_EXPORTER": "otlp",
      "OTEL_LOGS_EXPORTER": "otlp"}


def test_off_unless_telemetry_is_enabled_and_an_exporter_is_otlp() -> None:
    assert plan_export({}) == ExportPlan()
    assert not plan_export({**ON, "CLAUDE_CODE_ENABLE_TELEMETRY": "0"}).on
    assert not plan_export({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                            "OTEL_METRICS_EXPORTER": "otlp"}).on
    console = plan_export({"CLAUDE_CODE_ENABLE_TELEMETRY": "true",
                           "OTEL_METRICS_EXPORTER": "console,prometheus"})
    assert not console.on
    assert console.notes and "lists otlp" in console.notes[0]
    only_metrics = plan_export({"CLAUDE_CODE_ENABLE_TELEMETRY": "yes",
                                "OTEL_METRICS_EXPORTER": "console, OTLP"})
    assert only_metrics.metrics is not None and only_metrics.logs is None
    assert only_metrics.metrics.endpoint == DEFAULT_ENDPOINT + "/v1/metrics"  # the spec's
    assert only_metrics.notes == ()


def test_endpoints_headers_intervals_and_resource() -> None:
    plan = plan_export({
        **ON, "OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector.example:4318/otlp/",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "https://logs.example/ingest",
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20abc, x-team = infra ,bad",
        "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "x-team=logs",
        "OTEL_METRIC_EXPORT_INTERVAL": "10000", "OTEL_LOGS_EXPORT_INTERVAL": "1000",
        "OTEL_RESOURCE_ATTRIBUTES": "department=eng,service.name=claude-code",
        "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "Delta"})
    assert plan.metrics is not None and plan.logs is not None
    assert plan.metrics.endpoint == "https://collector.example:4318/otlp/v1/metrics"
    assert plan.logs.endpoint == "https://logs.example/ingest"  # a signal's own: as it is
    assert plan.metrics.headers == {"Authorization": "Bearer abc", "x-team": "infra"}
    assert plan.logs.headers == {"Authorization": "Bearer abc", "x-team": "logs"}
    assert (plan.metric_interval_ms, plan.logs_interval_ms) == (10_000, 1_000)
    assert plan.resource["service.name"] == "loop-killer"
    assert plan.resource["department"] == "eng"
    assert plan.delta and plan.notes == ()
    bad = plan_export({**ON, "OTEL_METRIC_EXPORT_INTERVAL": "soon"})
    assert bad.metric_interval_ms == 60_000 and "soon" in bad.notes[0]
    assert parse_pairs("a=1,=2,b,c=x%3Dy") == {"a": "1", "c": "x=y"}


def test_grpc_is_said_to_be_unsupported_per_signal() -> None:
    plan = plan_export({**ON, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                        "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/protobuf"})
    assert plan.metrics is None and plan.logs is not None
    (note,) = plan.notes
    assert note.startswith("metrics not exported") and "grpc" in note
    assert "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf" in note


def _write_settings(folder: Path, settings: Any) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.json").write_text(json.dumps(settings))


def test_the_env_block_of_claude_codes_settings_is_read(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    config = Path(os.environ["CLAUDE_CONFIG_DIR"])
    _write_settings(config, {"model": "opus", "env": {
        "CLAUDE_CODE_ENABLE_TELEMETRY": 1, "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://from-settings:4318",
        "OTEL_EXPORTER_OTLP_HEADERS": "k=v", "UNRELATED": "x", "NESTED": {"no": 1}}})
    found = read_settings_env(os.environ)
    assert found["CLAUDE_CODE_ENABLE_TELEMETRY"] == "1"
    assert found["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://from-settings:4318"
    assert "NESTED" not in found
    # The watcher's own environment wins, variable by variable; others are not taken.
    variables = telemetry_variables(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://from-env:4318", "PATH": "/bin"}, found)
    assert variables == {"CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_METRICS_EXPORTER": "otlp",
                         "OTEL_EXPORTER_OTLP_ENDPOINT": "http://from-env:4318",
                         "OTEL_EXPORTER_OTLP_HEADERS": "k=v"}
    plan = plan_export(variables)
    assert plan.metrics is not None
    assert plan.metrics.endpoint == "http://from-env:4318/v1/metrics"
    # Without CLAUDE_CONFIG_DIR: ~/.claude/settings.json.
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    _write_settings(env.home / ".claude", {"env": {"OTEL_LOGS_EXPORTER": "otlp"}})
    assert read_settings_env(os.environ) == {"OTEL_LOGS_EXPORTER": "otlp"}
    # Unreadable, malformed or missing: nothing, never an error.
    (env.home / ".claude" / "settings.json").write_text("{not json")
    assert read_settings_env(os.environ) == {}
    assert read_settings_env({"CLAUDE_CONFIG_DIR": str(env.home / "nowhere")}) == {}
    assert settings_env('{"env": ["x"]}') == {}


def detection(session: str, rule: str, **more: Any) -> journal.Record | None:
    """A detection as the log reads it back."""
    return journal.decode({"event": "detection", "session_id": session, "rule": rule,
                           "at": 1_700_000_000.5, "project": "-home-dev-shop", "count": 3,
                           "source": "watcher", **more})


def outcome(session: str, answer_uuid: str, word: str) -> journal.Record:
    return journal.OutcomeRecord(session_id=session, answer_uuid=answer_uuid, outcome=word)


def test_one_event_per_detection_with_its_outcome_when_known() -> None:
    events = LoopEvents(home="/home/dev", wait=60)
    # A tool-call warning's event waits for its outcome too: the watcher's "warned", or
    # the ladder's stop (which names the refused attempt: the session's latest tool loop).
    assert events.observe(detection("s1", "TOOL_REPEAT", tool="Bash", tool_use_id="t3"),
                          now=0) == []
    (warned,) = events.observe(outcome("s1", "t3", "warned"), now=0.5)
    assert warned.attributes == {
        "session.id": "s1", "event.name": "loop_detected", "rule": "TOOL_REPEAT",
        "kind": "tool", "outcome": "warned", "project": "shop", "count": 3,
        "source": "watcher", "tool": "Bash", "event.timestamp": "2023-11-14T22:13:20.500Z"}
    assert warned.at == 1_700_000_000.5
    events.observe(detection("s5", "TOOL_REPEAT", tool_use_id="t3"), now=0.6)
    (stopped,) = events.observe(journal.OutcomeRecord(session_id="s5", answer_uuid="r1",
                                                      rule="TOOL_REPEAT", outcome="stopped"),
                                now=0.7)
    assert (stopped.attributes["kind"], stopped.attributes["outcome"]) == ("tool", "stopped")
    # A re-prompt loop's event waits for the outcome: the first one, once.
    assert events.observe(detection("s2", "SAME_REPLY_TURNS", answer_uuid="a"), now=1) == []
    assert events.observe(journal.ToolRecord(session_id="s2", refused=True), now=2) == []
    (cleared,) = events.observe(outcome("s2", "a", "cleared"), now=3)
    assert cleared.attributes["outcome"] == "cleared"
    assert cleared.attributes["kind"] == "reprompt" and cleared.attributes["session.id"] == "s2"
    assert events.observe(outcome("s2", "a", "clear_failed"), now=4) == []
    # An outcome naming another answer (the hook's own): the session's latest detection.
    events.observe(detection("s3", "MANUAL", answer_uuid=""), now=5)
    events.observe(detection("s3", "IDLE_TURNS", answer_uuid="b"), now=6)
    (idle,) = events.observe(outcome("s3", "z", "stopped"), now=7)
    assert (idle.attributes["rule"], idle.attributes["outcome"]) == ("IDLE_TURNS", "stopped")
    # No outcome within the wait: sent without one; at the stop, whatever still waits.
    assert events.due(now=64) == []
    (manual,) = events.due(now=65)
    assert manual.attributes["rule"] == "MANUAL" and "outcome" not in manual.attributes
    events.observe(detection("s4", "SAME_REPLY_TURNS", answer_uuid="c"), now=70)
    assert [e.attributes["session.id"] for e in events.drain()] == ["s4"]
    assert events.observe(journal.LoopRecord(session_id=""), now=71) == []


def test_without_the_sdk_one_line_says_what_to_install_and_the_watcher_goes_on(
        env: Env, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    without_library(monkeypatch, "opentelemetry")
    caplog.set_level(logging.INFO, logger="loop_killer")
    made: list[MetricsSource] = []

    def source() -> MetricsSource:
        made.append(MetricsSource(env.state))
        return made[-1]

    assert telemetry.start_from_environment(source, {**ON, "HOME": str(env.home)}) is None
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 1, lines
    assert "pip install 'loop-killer[otel]'" in lines[0]
    assert made and made[0].on_record is None  # nothing was left hooked in
    caplog.clear()
    assert telemetry.start_from_environment(source, {"HOME": str(env.home)}) is None
    assert caplog.records == []  # not configured: not a word


def test_an_unreachable_collector_never_holds_the_watchers_stop(env: Env) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    import socket
    import time

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    plan = plan_export({**ON, "OTEL_EXPORTER_OTLP_ENDPOINT": closed,
                        "OTEL_METRIC_EXPORT_INTERVAL": "100"})
    telemetry._quiet_sdk_log()  # as the watcher does: its retries are not this test's output
    export = telemetry.TelemetryExport(plan, MetricsSource(env.state), poll_every=0.05)
    started = time.monotonic()
    export.close(timeout=1.0)
    assert time.monotonic() - started < 2.5
