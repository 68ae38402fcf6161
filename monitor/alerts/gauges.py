"""What the alert engine shows on `/metrics` after each evaluation, per rule and service:
the rates compared, how many verdicts each side held (why a rule cannot page yet), whether
its baseline is ready, how far a sequential test is towards a page, whether a boost is on,
and whether it fires. Kinds call the setters they need (`Kind.publish`)."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from typing import Protocol

from prometheus_client import Gauge

from monitor.alerts.rule import Rule
from monitor.evidence import BLIND_TEXT
from monitor.telemetry import RateLimitedLog, Telemetry

# The engine's logger: what users filter on is one name for the engine's lines.
log = logging.getLogger("monitor.alerts.engine")

EVICTIONS_LOGGED_EVERY_S = 60.0
# How long a screen's reason it cannot screen lasts before it is logged: a key is followed
# once it sent a few verdicts, so at a service's start (its first verdicts, or a restart
# without state) every key is still counted as its address's and the screen reads `full`
# for minutes; a reason that holds through a screen bucket (an hour) is the traffic's.
BLIND_SAID_AFTER_S = 3600.0
# A line when a rule's screen flags senders, at most once an hour per rule, service and set.
_flagged_log = RateLimitedLog(log, 3600.0)


class SenderScreen(Protocol):
    """What a kind's sender screen tells (`monitor.evidence.Senders`)."""

    @property
    def flagged(self) -> frozenset[str]:
        """The sender keys it flags now."""
        ...

    def blind(self) -> str | None:
        """Why it cannot screen now (None: it can)."""
        ...


class AlertGauges:
    def __init__(self, telemetry: Telemetry) -> None:
        self._t = telemetry
        self._evicted = telemetry.counter("alert_conversations_evicted")
        self._evictions_logged = -math.inf
        # Every gauge of a service: `forget_service` removes them.
        self._per_service: list[Gauge] = [
            telemetry.gauge("defect_rate"),
            telemetry.gauge("alert_firing"),
        ]

        def gauge(name: str) -> Gauge:
            self._per_service.append(telemetry.gauge(name))
            return self._per_service[-1]

        self._baseline_rate = gauge("defect_rate_baseline")
        self._samples = gauge("alert_samples")
        self._ready = gauge("alert_baseline_ready")
        self._evidence = gauge("alert_evidence")
        self._fallback = gauge("alert_conversation_fallback")
        self.boost_active = gauge("alert_boost_active")
        self._cohort_rate = gauge("cohort_defect_rate")
        self._cohort_samples = gauge("alert_cohort_samples")
        self._budget_remaining = gauge("slo_error_budget_remaining")
        self._burn_rate = gauge("slo_burn_rate")
        self._flagged = gauge("alert_senders_flagged")
        self._blind = gauge("alert_sender_screen_blind")
        # (service, rule) whose screen was said to be blind (`screen`: once each).
        self._blind_said: set[tuple[str, str]] = set()
        # (service, rule) -> the reason its screen cannot screen, and since when.
        self._blind_since: dict[tuple[str, str], tuple[str | None, float]] = {}
        self.entries_dropped = telemetry.counter("alert_state_entries_dropped")
        self.baselines_started = telemetry.counter("alert_baselines_started")
        self._evaluation_duration = telemetry.histogram("alert_evaluation_duration_seconds")
        self._last_evaluation = telemetry.gauge("alert_last_evaluation_timestamp_seconds")

    def evaluated(self, took_s: float, now: float) -> None:
        """One evaluation of every rule took `took_s` and ended at `now` (epoch seconds)."""
        self._evaluation_duration.observe(took_s)
        self._last_evaluation.set(now)

    def samples(self, service: str, rule: str, window: str, samples: int) -> None:
        self._samples.labels(service, rule, window).set(samples)

    def rate(self, service: str, rule: str, samples: int, mean: float) -> None:
        _set_or_remove(self._t.gauge("defect_rate"), samples, mean, service, rule)

    def baseline_rate(self, service: str, rule: str, samples: int, mean: float) -> None:
        _set_or_remove(self._baseline_rate, samples, mean, service, rule)

    def ready(self, service: str, rule: str, ready: bool) -> None:
        self._ready.labels(service, rule).set(1 if ready else 0)

    def evidence(self, service: str, rule: str, progress: float) -> None:
        self._evidence.labels(service, rule).set(progress)

    def fallback(self, service: str, rule: str, fallback: bool) -> None:
        self._fallback.labels(service, rule).set(1 if fallback else 0)

    def cohort(self, service: str, rule: str, cohort: str, samples: int, mean: float) -> None:
        self._cohort_samples.labels(service, rule, cohort).set(samples)
        _set_or_remove(self._cohort_rate, samples, mean, service, rule, cohort)

    def firing(
        self, rule: Rule, service: str, cohort: str, firing: bool, severity: str | None = None
    ) -> None:
        """Whether the rule fires for `service` (and `cohort`) at `severity` (default: the
        rule's)."""
        cfg = rule.config
        labels = (service, cfg.name, severity or cfg.severity, cohort)
        self._t.gauge("alert_firing").labels(*labels).set(1 if firing else 0)

    def budget_remaining(self, service: str, rule: str, samples: int, remaining: float) -> None:
        _set_or_remove(self._budget_remaining, samples, remaining, service, rule)

    def burn_rate(self, service: str, rule: str, window: str, samples: int, burn: float) -> None:
        _set_or_remove(self._burn_rate, samples, burn, service, rule, window)

    def screen(self, service: str, rule: str, screen: SenderScreen, now: float) -> None:
        """A regression rule's sender screen: how many senders it flags, and why it cannot
        screen (a line when it flags senders, and the first time a service's cannot for
        `BLIND_SAID_AFTER_S` on end)."""
        flagged, blind = screen.flagged, screen.blind()
        self._flagged.labels(service, rule).set(len(flagged))
        for reason in BLIND_TEXT:
            if reason == blind:
                self._blind.labels(service, rule, reason).set(1)
            else:
                try:
                    self._blind.remove(service, rule, reason)
                except KeyError:
                    pass
        if flagged:
            shown = ", ".join(repr(key) for key in sorted(flagged))
            _flagged_log.log(
                f"{rule} flagged {service} {shown}",
                logging.WARNING,
                "alert %s for %s: the sender screen flags %s (their verdicts stand apart "
                "from the other senders': expected at their own clean rate, left out of the "
                "baseline and of the Where; listed on /alerts)",
                rule,
                service,
                shown,
            )
        since = self._blind_since.get((service, rule))
        if blind is None or since is None or since[0] != blind:
            since = self._blind_since[(service, rule)] = (blind, now)
        if (
            blind is not None
            and now - since[1] >= BLIND_SAID_AFTER_S
            and (service, rule) not in self._blind_said
        ):
            self._blind_said.add((service, rule))
            log.warning(
                "alert %s for %s: the sender screen cannot tell this service's senders "
                "apart (%s): %s; a forger sending through the same address is not screened "
                "(alert_sender_screen_blind says while it lasts; said once per service)",
                rule,
                service,
                blind,
                BLIND_TEXT[blind],
            )

    def forget_service(self, service: str) -> None:
        for gauge in self._per_service:
            gauge.remove_by_labels({"service": service})
        for key in [key for key in self._blind_since if key[0] == service]:
            del self._blind_since[key]

    def forget_cohort(self, rules: Iterable[str], cohort: str) -> None:
        for gauge in (self._t.gauge("alert_firing"), self._cohort_rate, self._cohort_samples):
            for name in rules:
                gauge.remove_by_labels({"rule": name, "cohort": cohort})

    def evicted(self, opened: int, closed: int, held_bytes: int, now: float) -> None:
        """An eviction of the conversation budget (`monitor.alerts.entries`): counted, and
        logged at most once a minute."""
        self._evicted.labels("open").inc(opened)
        self._evicted.labels("closed").inc(closed)
        if now - self._evictions_logged >= EVICTIONS_LOGGED_EVERY_S:
            self._evictions_logged = now
            log.warning(
                "alert rules' conversations reached their memory budget (%d bytes): the "
                "oldest forgotten, %d open (closed into their units early) and %d closed; "
                "an app that writes each request its own conversation id fills it (this is "
                "logged at most once a minute, alert_conversations_evicted_total counts all)",
                held_bytes,
                opened,
                closed,
            )


def _set_or_remove(gauge: Gauge, samples: int, value: float, *labels: str) -> None:
    """A rate is shown only while its window holds verdicts."""
    if samples:
        gauge.labels(*labels).set(value)
        return
    try:
        gauge.remove(*labels)
    except KeyError:
        pass
