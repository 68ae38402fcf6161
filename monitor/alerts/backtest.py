"""`rag-monitor backtest`: the configured alert rules over a timestamped verdict stream, on
simulated time.

A user tries a rule on last month's results before turning it on; the bench replays years
of production-shaped streams through the same code. The engine is the sidecar's
(`AlertEngine`), driven by a clock that follows the rows: before each row, every evaluation
due by its time runs (every `alerts.evaluation_interval_s`, and at once when a test reaches
its budget, as the sidecar's loop does). Nothing is sent anywhere: each page and resolve is
returned with its reason and evidence (`Event`).

Rows, one JSON object per line (gzip when the file name ends in `.gz`), in time order:

- a **results line** (`exporters.results_file`, `replay --output`): `time`, `service`,
  `version`, `route`, `model`, `conversation`, `fingerprint` (the question's: verdicts on
  the same question are one unit of evidence), `trace_id`, `dimensions` (the other values a
  page's attribution looks at: `monitor.records.where`) and `results` (each evaluator's
  verdict, revision and safety grades);
- a **verdict row**: `{"time", "service", "evaluator" (or "category"), "outcome": "pass" |
  "fail"}` or `"score"` (normalised, 1 = good, for rules that measure scores) or counts
  `"passes"` and `"fails"` (many verdicts at once, so that a service-year fits in a file),
  with optional `conversation`, `fingerprint`, `revision`, `version`, `route`, `model`, `trace_id` and
  `dimensions`.

`time` is seconds since the epoch or an ISO 8601 text. A row that cannot be read is refused
with its line number and reason (counted in the summary), a line longer than
`MAX_LINE_BYTES` among them (read no further than that, plain or gzip). A row earlier than
the one before it is replayed at the later time: rows written by evaluations that ran in
parallel come a little out of order, so the summary reports them as information (`late`).
Over a stretch without rows, the clock evaluates the rules' current windows' worth (an SLO
rule's longest burn-rate window) and on while an alert fires (up to the rules' longest
window: every resolve it holds), then jumps to the next row (each jump named in the
summary): without verdicts nothing else changes but what expires.

After the replay the summary gives each (rule, service)'s defect rate per day (UTC), and
the SLO objective its worst day would burn at `SLO_HEADROOM_BURN` of its error budget:
what an `slo.objective` is chosen from (docs/alerts.md, SLO rules). Services past `pipeline.max_services`
fold into `other`, as in the sidecar, and are not judged. A page says where its excess is
(`monitor.alerts.attribution`): the text output adds its `where`, `cause` and trace ids
under it, the JSON output has them among the annotations; a page's `Where` alert (sent when
it first names a slice) is an event of its own, not counted as a page.
"""

from __future__ import annotations

import gzip
import io
import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import orjson

from monitor.alerts.engine import AlertEngine
from monitor.alerts.rule import Origin
from monitor.component import Alert
from monitor.config import Config
from monitor.records.where import Where
from monitor.results import EvalResult
from monitor.telemetry import create_telemetry

# Refused rows named one by one in the summary; the rest are only counted.
SHOWN_REFUSALS = 20
# A longer line is refused unread: a results line is a few kB.
MAX_LINE_BYTES = 8 * 1024 * 1024
# What a too-long line is skipped by, up to its end.
_SKIP_BYTES = 1024 * 1024
# The burn rate a healthy service's worst day may reach under the objective the summary
# suggests: the margin below 1 (the one-day row's rate) the README's SLO section keeps.
SLO_HEADROOM_BURN = 0.9
# Days with fewer verdicts than this share of the median day's (a partial first or last
# day) are listed but do not decide the objective.
_FULL_DAY_SHARE = 0.5
# A row's request fingerprint is at most this long (the sidecar writes 16 hex characters).
MAX_FINGERPRINT_CHARS = 64


@dataclass(frozen=True, slots=True)
class Event:
    """A page or a resolve, as the sidecar would have sent it at `time`."""

    time: float
    status: Literal["firing", "resolved"]
    alert: Alert

    def as_json(self) -> dict[str, Any]:
        return {
            "time": _iso(self.time),
            "status": self.status,
            "rule": self.alert.rule,
            "service": self.alert.service,
            "labels": self.alert.labels,
            "annotations": self.alert.annotations,
        }

    def text(self) -> str:
        cohort = self.alert.labels.get("cohort")
        who = f"{self.alert.service}/{cohort}" if cohort else self.alert.service
        notes = self.alert.annotations
        lines = [
            f"{_iso(self.time)}  {self.status:<8}  "
            f"{self.alert.labels.get('alertname', self.alert.rule)}  {who}: "
            f"{notes.get('description', '')}"
        ]
        for name, shown in (("where", "where"), ("cause_detail", "cause"), ("trace_ids", "traces")):
            if name in notes:
                lines.append(f"    {shown}: {notes[name]}")
        return "\n".join(lines)


@dataclass
class Summary:
    rows: int = 0
    verdicts: float = 0
    late: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    refusals: list[str] = field(default_factory=list)
    latest_by: float = 0.0
    jumps: list[str] = field(default_factory=list)
    first: float | None = None
    last: float | None = None
    pages: Counter[str] = field(default_factory=Counter)
    # (rule, service) -> day (UTC, days since the epoch) -> [verdicts, defect sum]
    days: dict[tuple[str, str], dict[int, list[float]]] = field(default_factory=dict)

    def refuse(self, where: str, reason: str, detail: str) -> None:
        self.refused[reason] += 1
        if len(self.refusals) < SHOWN_REFUSALS:
            self.refusals.append(f"{where}: {detail}")

    def lines(self) -> list[str]:
        span = (
            f" from {_iso(self.first)} to {_iso(self.last)}"
            if self.first is not None and self.last is not None
            else ""
        )
        out = [f"backtest: {self.rows:,} rows, {self.verdicts:,.0f} verdicts{span}"]
        pages = ", ".join(f"{rule} {n}" for rule, n in sorted(self.pages.items())) or "none"
        out.append(f"pages: {pages}")
        if self.late:
            out.append(
                f"note: {self.late:,} rows came up to {self.latest_by:,.0f} s after a later "
                "row (normal when evaluations run in parallel); each was replayed at the "
                "time of the row before it"
            )
        out.extend(f"note: {line}" for line in self.jumps)
        if self.refused:
            reasons = ", ".join(f"{n:,} {reason}" for reason, n in self.refused.most_common())
            out.append(f"refused: {reasons}")
            out.extend(f"  {line}" for line in self.refusals)
        return out + self.day_lines()

    def count_day(self, rule: str, service: str, t: float, verdicts: float, defects: float) -> None:
        by_day = self.days.setdefault((rule, service), {})
        sums = by_day.setdefault(int(t // 86_400), [0.0, 0.0])
        sums[0] += verdicts
        sums[1] += defects

    def day_lines(self) -> list[str]:
        """Each (rule, service)'s defect rate per day, and the objective its worst full day
        would burn at `SLO_HEADROOM_BURN`."""
        if not self.days:
            return []
        out = [
            "defect rate per day (UTC), by rule and service; an SLO objective under which the "
            f"worst full day burns {SLO_HEADROOM_BURN:g} of its error budget:"
        ]
        for (rule, service), by_day in sorted(self.days.items()):
            rates = {day: d / n for day, (n, d) in sorted(by_day.items()) if n > 0}
            if not rates:
                continue
            counts = sorted(n for n, _ in by_day.values())
            median = counts[len(counts) // 2]
            full = [rates[day] for day, (n, _) in by_day.items() if n >= _FULL_DAY_SHARE * median]
            total = sum(n for n, _ in by_day.values())
            mean = sum(d for _, d in by_day.values()) / total
            # Two decimals, rounded down (a lower objective holds); 1 would leave no budget.
            objective = min(0.99, math.floor((1 - max(full) / SLO_HEADROOM_BURN) * 100) / 100)
            held = f"objective {objective:.2f}" if objective > 0 else "no objective holds"
            out.append(
                f"  {rule} {service}: {len(rates)} days, {mean:.4f} over all, worst full day "
                f"{max(full):.4f}: {held}"
            )
            out.append(
                "    "
                + ", ".join(
                    f"{_iso(day * 86_400.0)[:10]} {rate:.4f}" for day, rate in rates.items()
                )
            )
        return out


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Backtest:
    """Replays rows through the rules of `config` (see the module docstring)."""

    def __init__(self, config: Config) -> None:
        alerts = config.alerts
        self._clock = _Clock()
        pipeline = config.pipeline
        self._engine = AlertEngine(
            alerts.rules,
            create_telemetry(
                max_services=pipeline.max_services,
                max_routes=pipeline.max_routes,
                max_versions=pipeline.max_versions,
                allowed_services=pipeline.allowed_services,
                allowed_routes=pipeline.allowed_routes,
                allowed_versions=pipeline.allowed_versions,
                label_idle_s=pipeline.label_idle_s,
                clock=self._clock,
            ),
            severity_thresholds={
                e.name: e.severity_threshold
                for e in config.evaluators
                if e.severity_threshold is not None
            },
            evaluation_interval_s=alerts.evaluation_interval_s,
            clock=self._clock,
            false_page_every=alerts.false_page_every,
            conversation_idle=alerts.conversation_idle,
            conversation_budget=alerts.conversation_budget_bytes,
            trace_url=alerts.trace_url,
        )
        self._interval = alerts.evaluation_interval_s
        # Past this much time without rows, no rule holds anything: the clock jumps; and
        # past `_judging` without rows, once nothing fires, nothing changes but expiry.
        self._horizon = self._engine.longest_window_s + self._interval
        self._judging = self._engine.judging_window_s + self._interval
        self._next: float | None = None
        self._row = ""
        self._firing: set[tuple[str, str, str]] = set()
        self.summary = Summary()

    @property
    def engine(self) -> AlertEngine:
        return self._engine

    def run(self, rows: Iterable[tuple[str, Any]]) -> Iterator[Event]:
        """The pages and resolves of `rows` (`(where, decoded row)` pairs), as they come,
        then those of one last evaluation after the last row."""
        for where, raw in rows:
            if isinstance(raw, _TooLong):
                self.summary.refuse(where, "too_long", str(raw))
                continue
            try:
                row = _Row.of(raw)
            except ValueError as exc:
                self.summary.refuse(where, "invalid", str(exc))
                continue
            self._row = where
            yield from self._advance(row.time)
            self._count(row)
            if self._engine.evaluation_due:
                yield from self._evaluate(self._clock.now)
        if self._next is not None:
            yield from self._advance(self._clock.now + self._interval)

    def _advance(self, t: float) -> Iterator[Event]:
        summary = self.summary
        if self._next is None:
            self._next = t + self._interval
            self._clock.now = t
            summary.first = t
        if t < self._clock.now:
            summary.late += 1
            summary.latest_by = max(summary.latest_by, self._clock.now - t)
            t = self._clock.now
        before = self._clock.now
        while self._next <= t:
            if self._next > before + self._horizon or (
                self._next > before + self._judging and not self._engine.firing()
            ):
                yield from self._jump(before, t)
                break
            yield from self._evaluate(self._next)
            self._next += self._interval
        self._clock.now = t
        summary.last = t

    def _jump(self, before: float, t: float) -> Iterator[Event]:
        """Over the rest of a stretch without rows, one evaluation at its end (on the
        interval's grid) instead of every one in it: nothing is held that long."""
        assert self._next is not None
        skipped = math.floor((t - self._next) / self._interval)
        self._next += skipped * self._interval
        self.summary.jumps.append(
            f"{self._row}: {t - before:,.0f} s after the row before it; the clock "
            f"jumped over {skipped:,} evaluations of an empty stretch"
        )
        yield from self._evaluate(self._next)
        self._next += self._interval

    def _evaluate(self, t: float) -> Iterator[Event]:
        self._clock.now = t
        for alert in self._engine.evaluate():
            name = alert.labels.get("alertname", alert.rule)
            key = (name, alert.service, alert.labels.get("cohort", ""))
            if alert.status == "firing":
                if key in self._firing:
                    continue  # a re-send
                self._firing.add(key)
                if name == alert.rule:  # a page, not its `Where` alert
                    self.summary.pages[alert.rule] += 1
            else:
                self._firing.discard(key)
            yield Event(t, alert.status, alert)

    def _count(self, row: _Row) -> None:
        engine, now = self._engine, self._clock.now
        self.summary.rows += 1
        if row.results is not None:
            engine.count_results(row.origin, row.results, now, row.where)
            self.summary.verdicts += len(row.results)
            for rule in engine.rules:
                values = rule.samples(row.results)
                if values:
                    self._count_day(rule.config.name, row, len(values), sum(values))
            return
        for i, rule in enumerate(engine.rules):
            cfg = rule.config
            if (cfg.evaluator or cfg.category) != row.source or (
                (cfg.evaluator is None) != (row.evaluator is None)
            ):
                continue
            histogram = row.histogram(rule.steps, cfg.measure == "scores")
            if histogram is not None:
                defects = sum(n * k / rule.steps for k, n in enumerate(histogram))
                self._count_day(cfg.name, row, sum(histogram), defects)
                key = engine.count(i, row.origin, histogram, row.revision, now)
                if key is not None:
                    engine.attribution.observe(key, row.where, histogram, None, now)
        self.summary.verdicts += row.verdicts

    def _count_day(self, rule: str, row: _Row, verdicts: float, defects: float) -> None:
        service = row.origin.service
        self.summary.count_day(rule, service, self._clock.now, verdicts, defects)


@dataclass(frozen=True, slots=True)
class _Row:
    time: float
    origin: Origin
    where: Where
    results: dict[str, EvalResult] | None = None
    evaluator: str | None = None
    category: str | None = None
    revision: str | None = None
    passes: float = 0.0
    fails: float = 0.0
    score: float | None = None

    @property
    def source(self) -> str | None:
        return self.evaluator or self.category

    @property
    def verdicts(self) -> float:
        return self.passes + self.fails if self.score is None else 1.0

    def histogram(self, steps: int, scores: bool) -> list[float] | None:
        """The row's verdicts as a rule sees them: `[passes, fails]` for a rule that
        counts verdicts, the score's level for one that measures scores (None: the row
        has nothing such a rule counts)."""
        out = [0.0] * (steps + 1)
        if scores:
            if self.score is None:
                return None
            out[round((1.0 - self.score) * steps)] = 1.0
            return out
        if self.passes + self.fails <= 0:
            return None
        out[0], out[-1] = self.passes, self.fails
        return out

    @classmethod
    def of(cls, raw: Any) -> _Row:
        if isinstance(raw, _Unreadable):
            raise ValueError(f"not JSON ({raw})")
        if not isinstance(raw, dict):
            raise ValueError("expected a JSON object")
        t = _time(raw.get("time"))
        service = _text(raw, "service") or "unknown"
        origin = Origin(
            service,
            _text(raw, "version"),
            _text(raw, "route") or "",
            _text(raw, "model"),
            _text(raw, "conversation"),
            _fingerprint(raw),
        )
        dimensions = raw.get("dimensions")
        if dimensions is not None and not isinstance(dimensions, dict):
            raise ValueError("dimensions: expected an object")
        trace_id = _text(raw, "trace_id")
        where = Where.from_line(
            origin.version,
            origin.model,
            origin.route,
            dimensions,
            trace_id,
            origin.conversation or trace_id or _text(raw, "request_id"),
        )
        results = raw.get("results")
        if results is not None:
            if not isinstance(results, dict):
                raise ValueError("results: expected an object of evaluators")
            parsed = {str(k): EvalResult.from_json(str(k), v) for k, v in results.items()}
            return cls(t, origin, where, results=parsed)
        evaluator, category = _text(raw, "evaluator"), _text(raw, "category")
        if (evaluator is None) == (category is None):
            raise ValueError("a verdict row names an evaluator or a category (exactly one)")
        kwargs: dict[str, Any] = {}
        outcome = raw.get("outcome")
        if outcome is not None:
            if outcome not in ("pass", "fail"):
                raise ValueError(f"outcome: {outcome!r} is not pass or fail")
            kwargs["passes" if outcome == "pass" else "fails"] = 1.0
        elif "passes" in raw or "fails" in raw:
            kwargs["passes"], kwargs["fails"] = _count(raw, "passes"), _count(raw, "fails")
        if raw.get("score") is not None:
            score = raw["score"]
            if isinstance(score, bool) or not isinstance(score, int | float):
                raise ValueError(f"score: {score!r} is not a number")
            if not 0 <= score <= 1:
                raise ValueError(f"score: {score} is not a normalised score in 0..1")
            kwargs["score"] = float(score)
        if not kwargs:
            raise ValueError("a verdict row needs outcome, passes and fails, or score")
        return cls(
            t,
            origin,
            where,
            evaluator=evaluator,
            category=category,
            revision=_text(raw, "revision"),
            **kwargs,
        )


def read_rows(paths: Iterable[Path], max_line: int = MAX_LINE_BYTES) -> Iterator[tuple[str, Any]]:
    """`(file:line, decoded row)` of every non-blank line of `paths`, one file after the
    other; a line that is not JSON comes as `(where, _Unreadable)`, one longer than
    `max_line` bytes as `(where, _TooLong)`, never held whole."""
    for path in paths:
        with _open(path) as lines:
            number = 0
            while line := lines.readline(max_line + 1):
                number += 1
                if len(line) > max_line and not line.endswith(b"\n"):
                    while (rest := lines.readline(_SKIP_BYTES)) and not rest.endswith(b"\n"):
                        pass
                    yield f"{path}:{number}", _TooLong(f"a line longer than {max_line:,} bytes")
                    continue
                if not line.strip():
                    continue
                try:
                    yield f"{path}:{number}", orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    yield f"{path}:{number}", _Unreadable(str(exc))


class _Unreadable(str):
    """A line that is not JSON: refused as such by `_Row.of` (not an object)."""


class _TooLong(str):
    """A line longer than the bound: refused unread."""


def _open(path: Path) -> io.BufferedIOBase:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return path.open("rb")


def _time(raw: Any) -> float:
    if isinstance(raw, bool) or raw is None:
        raise ValueError("time: missing (seconds since the epoch, or ISO 8601)")
    if isinstance(raw, int | float):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            stamp = datetime.fromisoformat(raw)
        except ValueError:
            raise ValueError(f"time: {raw[:40]!r} is not ISO 8601") from None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
        value = stamp.timestamp()
    else:
        raise ValueError(f"time: {raw!r} is not a time")
    if not math.isfinite(value) or not 0 <= value < 1e11:
        raise ValueError(f"time: {raw!r} is out of range")
    return value


def _text(raw: dict[str, Any], key: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{key}: {value!r} is not text")
    return value


def _fingerprint(raw: dict[str, Any]) -> str | None:
    """A row's request fingerprint (`monitor.records.fingerprint`: 16 hex characters; any
    text up to `MAX_FINGERPRINT_CHARS` is taken, as rows may come from other tools)."""
    value = _text(raw, "fingerprint")
    if value is not None and len(value) > MAX_FINGERPRINT_CHARS:
        raise ValueError(f"fingerprint: longer than {MAX_FINGERPRINT_CHARS} characters")
    return value


def _count(raw: dict[str, Any], key: str) -> float:
    value = raw.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e12:
        raise ValueError(f"{key}: {value!r} is not a count")
    return float(value)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
