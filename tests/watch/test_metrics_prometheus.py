"""End to end: the real ``loop-killer-watch --metrics``, a real Prometheus server (Debian's
``prometheus`` package) scraping it every second on loopback, loops happening, and the
figures read back through Prometheus' HTTP API. Skipped where Prometheus is not installed,
never under CI=true (``.ci/run`` installs it)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from must_run import unavailable
from transcripts import Lines, append

from .conftest import Env
from .helpers import wait_for


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read())


class Prometheus:
    def __init__(self, folder: Path, target: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = folder / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: loop-killer\n"
            f"    static_configs:\n      - targets: ['{target}']\n")
        self.log = folder / "prometheus.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                ["prometheus", f"--config.file={config}",
                 f"--storage.tsdb.path={folder / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True)
        self.until(lambda: self._ready(), 30, "Prometheus to be ready")

    def _ready(self) -> bool:
        assert self.proc.poll() is None, f"prometheus exited: {self.log.read_text()[-2000:]}"
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def query(self, expression: str) -> list[dict[str, Any]]:
        answer = _get(f"{self.url}/api/v1/query?"
                      + urllib.parse.urlencode({"query": expression}))
        assert answer["status"] == "success", answer
        return list(answer["data"]["result"])

    @staticmethod
    def until(predicate: Any, timeout: float, what: str) -> Any:
        """Poll every 0.2 s (a request each time, so never faster) until truthy."""
        return wait_for(predicate, timeout, what, every=0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def prometheus_server(tmp_path: Path) -> Iterator[Any]:
    if shutil.which("prometheus") is None:
        unavailable("prometheus is not installed here: apt-get install -y prometheus")
    pytest.importorskip("prometheus_client")
    started: list[Prometheus] = []

    def start(target: str) -> Prometheus:
        started.append(Prometheus(tmp_path, target))
        return started[-1]

    yield start
    for server in started:
        server.stop()


NOT_STOPPED = (
    'sum by (project) (loop_killer_loops_total) - sum by (project) ('
    'loop_killer_loop_outcomes_total{outcome!~"continued|none|not_requested|other"} '
    'or 0 * loop_killer_loops_total) > 0')
"""docs/monitoring.md's alert rule ("detected but not stopped"), without its ``for:``."""


def _watched(spawn_watcher: Any, prometheus_server: Any) -> tuple[Any, Any]:
    """The real watcher serving metrics (its outcome timeout 2 s), scraped by a real
    Prometheus every second."""
    port = _free_port()
    watcher = spawn_watcher("--metrics", f"127.0.0.1:{port}", "--outcome-timeout", "2")
    assert f"Prometheus metrics at http://127.0.0.1:{port}/metrics" in watcher.stdout()
    server = prometheus_server(f"127.0.0.1:{port}")
    server.until(lambda: server.query('up{job="loop-killer"} == 1'), 30,
                 "Prometheus to scrape the watcher")
    return watcher, server


def test_prometheus_scrapes_the_loops_the_watcher_sees(
        env: Env, spawn_watcher: Any, prometheus_server: Any) -> None:
    _watcher, server = _watched(spawn_watcher, prometheus_server)
    tools, goal, fired = env.two_loops()

    def loops() -> dict[tuple[str, str, str], float]:
        return {(s["metric"]["rule"], s["metric"]["kind"], s["metric"]["project"]):
                float(s["value"][1]) for s in server.query("loop_killer_loops_total")}

    def outcomes() -> dict[tuple[str, str, str], float]:
        return {(s["metric"]["rule"], s["metric"]["outcome"], s["metric"]["project"]):
                float(s["value"][1]) for s in server.query("loop_killer_loop_outcomes_total")}

    found = server.until(lambda: len(seen := loops()) >= 2 and seen, 30,
                         "both loops in Prometheus")
    # (The projects are named from their folders; the test's HOME is not /home/dev.)
    assert found == {("TOOL_REPEAT", "tool", "home-dev-shop"): 1.0,
                     ("SAME_REPLY_TURNS", "reprompt", "home-dev-billing"): 1.0}
    # The tool loop's outcome is the watcher's, after its outcome timeout: no tool-call
    # hook counted that session's calls (no plugin), so nothing warned the model.
    settled = server.until(lambda: len(seen := outcomes()) >= 2 and seen, 30,
                           "both outcomes in Prometheus")
    assert settled == {("TOOL_REPEAT", "none", "home-dev-shop"): 1.0,
                       ("SAME_REPLY_TURNS", "cleared", "home-dev-billing"): 1.0}
    (avoided,) = server.until(lambda: server.query("loop_killer_avoided_tokens_total"), 10,
                              "the avoided tokens")
    assert avoided["metric"]["rule"] == "SAME_REPLY_TURNS"
    assert float(avoided["value"][1]) == 20 * (8 - 3)  # 20 tokens a reply, 5 replies left
    followed = server.until(
        lambda: server.query("loop_killer_sessions_followed >= 2"), 10, "the sessions gauge")
    assert float(followed[0]["value"][1]) == 2
    # The alert's expression: the tool loop nothing stopped; the cleared one is not in it.
    (alert,) = server.until(lambda: server.query(NOT_STOPPED), 10, "the alert's expression")
    assert (alert["metric"], float(alert["value"][1])) == ({"project": "home-dev-shop"}, 1.0)


def test_a_loop_in_a_session_without_the_plugin_is_counted_when_detected(
        env: Env, spawn_watcher: Any, prometheus_server: Any) -> None:
    """No Stop hook takes the request and no Stop hook's word ever comes: the loop is in
    Prometheus within seconds of the watcher's LOOP line (it once waited for an outcome,
    and an alert on loops detected never fired for exactly this case), and the alert's
    expression says it was not stopped, before and after its outcome (none)."""
    watcher, server = _watched(spawn_watcher, prometheus_server)
    s = Lines(cwd="/home/dev/billing")
    append(s.path_in(env.root), s.goal_loop(3))
    server.until(lambda: "-> clear requested" in watcher.stdout(), 30, "the LOOP line")
    (counted,) = server.until(lambda: server.query("sum(loop_killer_loops_total)"), 30,
                              "the loop counted")
    assert float(counted["value"][1]) == 1
    (alert,) = server.until(lambda: server.query(NOT_STOPPED), 10, "the alert's expression")
    assert (alert["metric"], float(alert["value"][1])) == ({"project": "home-dev-billing"},
                                                          1.0)
    (none,) = server.until(lambda: server.query("loop_killer_loop_outcomes_total"), 30,
                           "its outcome")
    assert none["metric"]["outcome"] == "none"  # the request still pending
    assert server.query(NOT_STOPPED)[0]["metric"] == {"project": "home-dev-billing"}


OVER_80_PERCENT = (
    'loop_killer_turn_spend_usd > on() group_left() '
    '0.8 * loop_killer_budget_limit{limit="usd"}')
"""docs/monitoring.md's budget alert ("a turn past 80 % of its spend limit"), without
its ``for:``."""


def test_prometheus_sees_a_live_goal_against_its_budget(
        env: Env, spawn_watcher: Any, prometheus_server: Any) -> None:
    """A goal answering its re-prompts, with a spend limit it has passed: its turn's
    gauges, the limit, the alert's expression, and its BUDGET stop counted as such."""
    env.state.mkdir(parents=True, exist_ok=True)
    (env.state / "config.toml").write_text("[budget]\nusd = 0.000001\n")
    _watcher, server = _watched(spawn_watcher, prometheus_server)
    goal = Lines(cwd="/home/dev/billing")
    append(goal.path_in(env.root), goal.prompt() + goal.answer("Working on it.", tool=True)
           + goal.goal() + goal.answer("Migrated 3 tables.") + goal.reprompt())
    (spent,) = server.until(lambda: server.query("loop_killer_turn_spend_usd"), 30,
                            "the turn's spend")
    assert spent["metric"]["session"] == goal.session_id
    assert spent["metric"]["project"] == "home-dev-billing"
    assert float(spent["value"][1]) > 0.000001
    (reprompts,) = server.query("loop_killer_turn_reprompts")
    assert float(reprompts["value"][1]) == 1
    limits = {s["metric"]["limit"]: float(s["value"][1])
              for s in server.query("loop_killer_budget_limit")}
    assert limits == {"usd": 0.000001, "reprompts": 100}  # minutes: off, none
    (alert,) = server.query(OVER_80_PERCENT)
    assert alert["metric"]["session"] == goal.session_id
    (stopped,) = server.until(lambda: server.query('loop_killer_loops_total{rule="BUDGET"}'),
                              30, "the BUDGET stop counted")
    assert float(stopped["value"][1]) == 1


def test_the_alerts_tested_here_are_the_ones_the_docs_show() -> None:
    docs = Path(__file__).parents[2] / "docs" / "monitoring.md"
    shown = " ".join(docs.read_text().split())
    for expression in (NOT_STOPPED, OVER_80_PERCENT):
        assert " ".join(expression.split()) in shown.replace("( ", "(")
