"""One engine constructor (`AlertEngine.from_config`): the pipeline and `backtest` build the
same engine from the same config, label caps included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from monitor.alerts.backtest import Backtest
from monitor.alerts.engine import AlertEngine
from monitor.config import load_config
from monitor.pipeline import build_pipeline

CONFIG = """
pipeline: {max_services: 7, max_versions: 5, max_routes: 9, label_idle_s: 120}
record_limits: {label_chars: 40}
evaluators:
  - name: local_groundedness
alerts:
  evaluation_interval_s: 20
  false_page_every: 30d
  conversation_idle: 3m
  trace_url: "http://traces.example/{trace_id}"
  fleet: {prometheus_url: "http://prometheus:9090", query_interval_s: 20}
  rules:
    - name: grounded_regression
      evaluator: local_groundedness
      baseline: {window: 6h, season: day}
    - name: grounded_canary
      evaluator: local_groundedness
      cohorts: {by: version}
"""


def _settings(engine: AlertEngine) -> dict[str, Any]:
    caps = engine._t.service_cap, engine._t.version_cap, engine._t.route_cap
    return {
        "rules": list(engine.rules),
        "interval": engine._interval,
        "resend": engine._outbox._resend,
        "generator_url": engine._outbox._generator_url,
        "idle": engine._idle_s,
        "trace_url": engine.attribution._trace_url,
        "caps": [(c.limit, c.idle_s, c.max_chars, c.allowed) for c in caps],
    }


def _not_ready() -> tuple[bool, str]:
    return False, "not started"


def test_backtest_and_the_pipeline_build_the_same_engine(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text(CONFIG)
    config = load_config(path, environ={})
    pipeline = build_pipeline(config, _not_ready, with_receivers=False, serve_http=False)
    served = next(sink for sink in pipeline.sinks if isinstance(sink, AlertEngine))
    replayed = Backtest(config).engine
    assert _settings(replayed) == _settings(served)
    # What the two used to differ in: the label caps' length and the fleet's resend beat.
    assert _settings(replayed)["caps"][0][2] == 40
    assert _settings(replayed)["resend"] == 40.0
