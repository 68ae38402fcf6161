"""One test across the fleet (`alerts.fleet`; docs/alerts.md, "One test across the fleet"):
every `query_interval_s` each replica reads the fleet's verdict counters from the Prometheus
that scrapes them all and hands what every replica counted since the last read, by service,
cohort and evaluator revision, to its own engine (`AlertEngine.add_counts`), so every
replica judges the same stream. A read that fails is counted and logged, never raised; an
answer is parsed, and each counter differenced against what was counted, in
`fleet_answer.py`; `stale()` names the rules without a recent good read (`/readyz`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence

import aiohttp

from monitor.alerts.fleet_answer import Answer, ReadFailed, Series, advance, parse_answer
from monitor.config import AlertFleet, AlertRule, JudgeChangedRule
from monitor.results import SEVERITIES, Severity
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

# (rule, service, cohort, histogram, evaluator revision or None)
Sink = Callable[[str, str, str, list[float], str | None], None]
# Joins each replica's evaluator revision (`rag_monitor_evaluator_revision_info`) onto its
# counters; a replica without it (an older release) counts without one.
_JOIN = "on(instance, job, evaluator)"
_DEFAULT_THRESHOLD: Severity = "medium"
# Outcomes of a read (`rag_monitor_alert_fleet_reads_total{outcome}`).
OUTCOMES = (
    "ok",
    "unreachable",
    "timeout",
    "http_error",
    "redirect",
    "too_large",
    "not_json",
    "malformed",
    "internal",
)
# Why a series of an answer was not counted (`..._series_ignored_total{reason}`).
IGNORED = ("malformed", "bad_value", "fell")
# A series missing from the answers this long is forgotten (a replica that went away).
FORGET_AFTER_S = 3600.0
# Same-host redirects followed before a read is given up.
_MAX_REDIRECTS = 3
_CHUNK = 64 * 1024

Labels = tuple[tuple[str, str], ...]


class FleetReader:
    """Reads the fleet's verdict counters from Prometheus for the rules it can read."""

    def __init__(
        self,
        config: AlertFleet,
        rules: Sequence[AlertRule],
        telemetry: Telemetry,
        severity_thresholds: Mapping[str, Severity] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`clock`: seconds since the epoch (tests inject one)."""
        parts = urllib.parse.urlsplit(config.prometheus_url)
        # Credentials travel as a header, never in a URL that could be printed.
        self._headers = (
            {
                "Authorization": aiohttp.encode_basic_auth(
                    urllib.parse.unquote(parts.username),
                    urllib.parse.unquote(parts.password or ""),
                )
            }
            if parts.username
            else {}
        )
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        netloc += f":{parts.port}" if parts.port else ""
        base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        self._url = base + "/api/v1/query"
        self._origin = (parts.scheme, host, parts.port)
        # What log lines and /readyz call the Prometheus.
        self.shown = base
        self._selector = config.selector.strip()
        self._interval = config.query_interval_s
        self._timeout = config.timeout_s
        self._limit = config.max_response_bytes
        self._stale_after = max(60.0, 4 * config.query_interval_s)
        self._rules = [rule for rule in rules if reads(rule)]
        thresholds = list((severity_thresholds or {}).values()) or [_DEFAULT_THRESHOLD]
        # Category counters do not name their grader: a defect at the lowest threshold.
        self._defect_from = min(SEVERITIES.index(t) for t in thresholds)
        self._series: dict[str, dict[Labels, Series]] = {}
        self._clock = clock
        started = clock()
        self._last_good = {rule.name: started for rule in self._rules}
        self._last_error: dict[str, str] = {}
        self._reads = telemetry.counter("alert_fleet_reads")
        for outcome in OUTCOMES:
            self._reads.labels(outcome)
        self._ignored = telemetry.counter("alert_fleet_series_ignored")
        for reason in IGNORED:
            self._ignored.labels(reason)
        self._last_read = telemetry.gauge("alert_fleet_last_read_timestamp_seconds")
        for rule in self._rules:
            self._last_read.labels(rule.name).set(started)
        self._log = RateLimitedLog(log, 60.0, clock)

    def reads(self, rule: AlertRule | JudgeChangedRule) -> bool:
        return any(r.name == rule.name for r in self._rules)

    def stale(self) -> str | None:
        """The rules without a good read for four query intervals (at least a minute), with
        the last failure of each; None when every rule read recently."""
        now = self._clock()
        late = [
            f"{name} for {now - last:.0f}s"
            + (f" ({self._last_error[name]})" if name in self._last_error else "")
            for name, last in self._last_good.items()
            if now - last >= self._stale_after
        ]
        if not late:
            return None
        return f"alerts.fleet: no read of the counters from {self.shown}: {'; '.join(late)}"

    async def run(self, sink: Sink) -> None:
        """Reads every `query_interval_s` until cancelled, handing each rule's new verdicts
        per service, cohort and evaluator revision to `sink(rule, service, cohort,
        histogram, revision)`."""
        timeout = aiohttp.ClientTimeout(total=self._timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                await self.read_once(session, sink)
                await asyncio.sleep(self._interval)

    async def read_once(self, session: aiohttp.ClientSession, sink: Sink) -> None:
        """One read per rule; what fails is counted and logged, never raised."""
        for rule in self._rules:
            try:
                answer = await self._answer(session, rule)
                counts = await asyncio.to_thread(self._counted, rule, answer)
                for (service, cohort, revision), histogram in counts.items():
                    sink(rule.name, service, cohort, histogram, revision or None)
            except asyncio.CancelledError:
                raise
            except ReadFailed as failed:
                self._failed(rule, failed.outcome, failed.detail)
            except Exception as exc:  # a defect here must not stop the reads
                self._failed(rule, "internal", f"{type(exc).__name__} while reading")
            else:
                self._reads.labels("ok").inc()
                self._last_good[rule.name] = now = self._clock()
                self._last_read.labels(rule.name).set(now)
                self._last_error.pop(rule.name, None)

    async def probe(self) -> list[str]:
        """One read of each rule's counters (`check-config --probe`): a problem line per
        rule whose read fails, naming the Prometheus without its password."""
        problems = []
        timeout = aiohttp.ClientTimeout(total=self._timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for rule in self._rules:
                try:
                    await self._answer(session, rule)
                except ReadFailed as failed:
                    problems.append(
                        f"alerts.fleet.prometheus_url: reading rule {rule.name}'s counters "
                        f"from {self.shown} failed ({failed.outcome}: {failed.detail})"
                    )
        return problems

    async def _answer(self, session: aiohttp.ClientSession, rule: AlertRule) -> Answer:
        """`rule`'s answer, read within the timeout; raises `ReadFailed`."""
        try:
            async with asyncio.timeout(self._timeout):
                return await self._fetch(session, self._query_text(rule))
        except TimeoutError:  # the read's deadline, or one of aiohttp's own
            raise ReadFailed("timeout", f"no answer within {self._timeout:g}s") from None

    def _failed(self, rule: AlertRule, outcome: str, detail: str) -> None:
        self._reads.labels(outcome).inc()
        self._last_error[rule.name] = f"{outcome}: {detail}"
        self._log.warning(
            f"{rule.name}/{outcome}",
            "alerts.fleet: reading the verdict counters of rule %s from %s failed (%s: %s); "
            "the rule sees no new verdicts until a read succeeds "
            "(rag_monitor_alert_fleet_reads_total)",
            rule.name,
            self.shown,
            outcome,
            detail,
        )

    def _query_text(self, rule: AlertRule) -> str:
        extra = f",{self._selector}" if self._selector else ""
        if rule.evaluator is not None:
            counts = (
                f'rag_monitor_evaluations_total{{evaluator="{rule.evaluator}",'
                f'outcome=~"pass|fail"{extra}}}'
            )
            info = f'rag_monitor_evaluator_revision_info{{evaluator="{rule.evaluator}"{extra}}}'
            return f"({counts} * {_JOIN} group_left(revision) {info}) or {_JOIN} {counts}"
        return f'rag_monitor_safety_evaluations_total{{category="{rule.category}"{extra}}}'

    # -- one answer ------------------------------------------------------------------------

    async def _fetch(self, session: aiohttp.ClientSession, query: str) -> Answer:
        url = self._url
        try:
            for _ in range(_MAX_REDIRECTS + 1):
                async with session.get(
                    url, params={"query": query}, headers=self._headers, allow_redirects=False
                ) as response:
                    if response.status in (301, 302, 303, 307, 308):
                        url = self._redirect(url, response.headers.get("Location", ""))
                        continue
                    body = await self._body(response)
                    return await asyncio.to_thread(parse_answer, body, response.status)
            raise ReadFailed("redirect", f"more than {_MAX_REDIRECTS} redirects")
        except aiohttp.ClientConnectionError as exc:
            raise ReadFailed("unreachable", type(exc).__name__) from None
        except aiohttp.ClientError as exc:
            raise ReadFailed("http_error", type(exc).__name__) from None

    def _redirect(self, url: str, location: str) -> str:
        """The URL a redirect leads to, if on the configured Prometheus's host."""
        target = urllib.parse.urljoin(url, location)
        parts = urllib.parse.urlsplit(target)
        try:
            origin = (parts.scheme, parts.hostname or "", parts.port)
        except ValueError:
            origin = ("", "", None)
        if origin != self._origin:
            raise ReadFailed("redirect", "redirected to another host; refused")
        return urllib.parse.urlunsplit(parts._replace(query=""))

    async def _body(self, response: aiohttp.ClientResponse) -> bytes:
        length = response.content_length
        if length is not None and length > self._limit:
            raise ReadFailed("too_large", f"{length} bytes, more than {self._limit}")
        body = bytearray()
        async for chunk in response.content.iter_chunked(_CHUNK):
            body += chunk
            if len(body) > self._limit:
                raise ReadFailed("too_large", f"more than {self._limit} bytes")
        return bytes(body)

    # -- counting ----------------------------------------------------------------------------

    def _counted(self, rule: AlertRule, answer: Answer) -> dict[tuple[str, str, str], list[float]]:
        """What each (service, cohort, evaluator revision) counted since the last read,
        `[passes, defects]` (runs in a worker thread; reads of one reader never overlap)."""
        for reason, n in answer.skipped.items():
            self._skip(rule, reason, n)
        now = self._clock()
        known = self._series.setdefault(rule.name, {})
        out: dict[tuple[str, str, str], list[float]] = {}
        by = rule.cohorts.by if rule.cohorts is not None else None
        fell = 0
        for labels, value in answer.series:
            key = tuple(sorted(labels.items()))
            series = known.get(key)
            if series is None:
                known[key] = Series(mark=value, seen=now)
                continue
            series.seen = now
            delta = advance(series, value)
            fell += series.lower is not None
            if delta > 0:
                group = (
                    labels.get("service", ""),
                    labels.get(by, "") if by else "",
                    labels.get("revision", ""),
                )
                histogram = out.setdefault(group, [0.0, 0.0])
                histogram[1 if self._defect(rule, labels) else 0] += delta
        if fell:
            self._skip(rule, "fell", fell)
        for key in [k for k, s in known.items() if now - s.seen > FORGET_AFTER_S]:
            del known[key]
        return {group: h for group, h in out.items() if sum(h) > 0}

    def _skip(self, rule: AlertRule, reason: str, n: int) -> None:
        self._ignored.labels(reason).inc(n)
        self._log.warning(
            f"{rule.name}/ignored/{reason}",
            "alerts.fleet: %d series of rule %s's answer from %s not counted (%s; "
            "rag_monitor_alert_fleet_series_ignored_total)",
            n,
            rule.name,
            self.shown,
            reason,
        )

    def _defect(self, rule: AlertRule, labels: Mapping[str, str]) -> bool:
        if rule.evaluator is not None:
            return labels.get("outcome") == "fail"
        names: tuple[str, ...] = SEVERITIES
        severity = labels.get("severity", "")
        return severity in names and names.index(severity) >= self._defect_from


def reads(rule: AlertRule) -> bool:
    """Whether a rule can be judged on the fleet's counters: not one that measures scores
    or records without context, nor one of cohorts by model (the counters have no such
    label)."""
    if rule.measure != "verdicts":
        return False
    return rule.cohorts is None or rule.cohorts.by in ("version", "route")
