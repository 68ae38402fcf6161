"""Who may send verdicts: the screen an app's own verdicts (`external:` and `guardrail:`
evaluators, read from its traces by `monitor.extraction.read_verdicts`) pass before they
join a record's results and go where the monitor's own go (metrics, results file, OTLP
events, the alert engine, whose sender screen then judges them with the record's sender
as it judges the monitor's verdicts).

A verdict is data its sender controls, so (`external_verdicts`): only verdicts sent by the
services named in `services` (all when empty: the `service.name` of the span or log
record carrying it, whichever trace it joins) and the evaluators named in `evaluators` (any when empty)
are taken; per service at most `max_evaluators_per_service` distinct evaluator names, and
per evaluator at most `max_labels_per_evaluator` distinct labels (a guardrail's risk
categories), the first seen holding their places while the service holds its label;
names and labels longer than `max_label_chars` are refused. Services are counted by their
label (`Telemetry.service_cap`), and a label that loses its slot forgets its places, so
what is kept is bounded too. Every refusal is counted in
`external_verdicts_refused_total{service,reason}` and logged once per service and reason
an hour, with the evaluator that was refused (the monitor's own events, read back, at
info level: a collector that sends the app's traces and the monitor's events to the
monitor does that).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from monitor.config import ExternalVerdicts
from monitor.results import EvalResult
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

SERVICE_NOT_ALLOWED = "service_not_allowed"
EVALUATOR_NOT_ALLOWED = "evaluator_not_allowed"
TOO_MANY_EVALUATORS = "too_many_evaluators"
TOO_MANY_LABELS = "too_many_labels"
TOO_LONG = "too_long"
_WHAT = {
    SERVICE_NOT_ALLOWED: "the service is not in external_verdicts.services",
    EVALUATOR_NOT_ALLOWED: "the evaluator is not in external_verdicts.evaluators",
    TOO_MANY_EVALUATORS: "the service already has external_verdicts.max_evaluators_per_service "
    "evaluators",
    TOO_MANY_LABELS: "the evaluator already has external_verdicts.max_labels_per_evaluator "
    "labels (or guardrail categories)",
    TOO_LONG: "its evaluator name or a label is longer than external_verdicts.max_label_chars",
    "own": "it is the monitor's own event, written back into the app's trace (not counted twice)",
    "unreadable": "it names no evaluator, or has neither a label its vocabulary reads nor a "
    "score in 0..1",
    "no_record": "its trace gave no record to join it to",
}


class ExternalScreen:
    """The screen (see the module docstring), on the event loop: `take` gives a record's
    verdicts that pass; `refused` counts what its trace's reading refused."""

    def __init__(self, config: ExternalVerdicts, telemetry: Telemetry) -> None:
        self._config = config
        self._t = telemetry
        self._counter = telemetry.counter("external_verdicts_refused")
        self._services = frozenset(config.services)
        self._evaluators = frozenset(config.evaluators)
        self._names: dict[str, set[str]] = {}  # service label → evaluator names admitted
        self._labels: dict[tuple[str, str], set[str]] = {}  # (service, evaluator) → labels
        self._log = RateLimitedLog(log, interval_s=3600.0)
        # A service label that loses its slot forgets its places: what is kept follows the
        # service labels held, not every one ever seen.
        telemetry.service_cap.on_evict(self._forget)

    def _forget(self, service: str) -> None:
        # Called where the label was looked up (any thread): `list` copies the keys at once.
        if self._names.pop(service, None) is not None:
            for key in list(self._labels):
                if key[0] == service:
                    self._labels.pop(key, None)

    def take(
        self,
        senders: Mapping[str, str],
        label: str,
        verdicts: Mapping[str, EvalResult],
        trace_id: str,
    ) -> dict[str, EvalResult]:
        """Those of one record's `verdicts` that pass; `senders`: the service that sent
        each (the `service.name` of the span or log record carrying it), `label` the
        record's service label, which the bounds are kept by."""
        taken: dict[str, EvalResult] = {}
        for name, result in verdicts.items():
            reason = self._refusal(senders.get(name, ""), label, name, result)
            if reason is None:
                taken[name] = result
            else:
                self.refused(label, {reason: 1}, name, trace_id)
        return taken

    def refused(
        self, label: str, reasons: Mapping[str, int], evaluator: str = "", trace_id: str = ""
    ) -> None:
        """Count refusals of service `label`, by reason, and say each once an hour."""
        for reason, n in reasons.items():
            if n <= 0:
                continue
            self._t.child(self._counter, label, reason).inc(n)
            # The monitor's own events coming back is how a shared collector works: said,
            # not warned of.
            self._log.log(
                f"{label}/{reason}",
                logging.INFO if reason == "own" else logging.WARNING,
                "external verdicts of service %r refused (%s): %s; last: evaluator %r, "
                "trace %s (external_verdicts_refused_total counts them)",
                label,
                reason,
                _WHAT.get(reason, reason),
                evaluator or "(not read)",
                trace_id or "(unknown)",
            )

    def _refusal(self, service: str, label: str, name: str, result: EvalResult) -> str | None:
        config = self._config
        if self._services and service not in self._services:
            return SERVICE_NOT_ALLOWED
        if self._evaluators and name not in self._evaluators:
            return EVALUATOR_NOT_ALLOWED
        labels = _labels_of(result)
        limit = config.max_label_chars
        if len(name) > limit or any(len(text) > limit for text in labels):
            return TOO_LONG
        names = self._names.setdefault(label, set())
        if name not in names:
            if len(names) >= config.max_evaluators_per_service:
                return TOO_MANY_EVALUATORS
        held = self._labels.get((label, name), set())
        new = [text for text in labels if text not in held]
        if len(held) + len(new) > config.max_labels_per_evaluator:
            return TOO_MANY_LABELS
        names.add(name)
        if new:
            self._labels.setdefault((label, name), set()).update(new)
        return None


def _labels_of(result: EvalResult) -> list[str]:
    """What of a verdict a sender names freely: its label, or a guardrail's categories
    (its label is one of three outcomes)."""
    if result.safety is not None:
        return list(result.safety)
    return [result.label] if result.label is not None else []
