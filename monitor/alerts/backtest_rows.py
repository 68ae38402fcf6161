"""The rows `backtest` replays (`monitor.alerts.backtest`): results lines as the sidecar
writes them (`results.path`, gzip or not), or count rows, read one line at a time; a line
longer than `MAX_LINE_BYTES` is skipped unread and refused."""

from __future__ import annotations

import gzip
import io
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from monitor.alerts.rule import Origin
from monitor.records.where import Where
from monitor.results import EvalResult
from monitor.shared.labels import model_name

# A longer line is refused unread: a results line is a few kB.
MAX_LINE_BYTES = 8 * 1024 * 1024
# What a too-long line is skipped by, up to its end.
_SKIP_BYTES = 1024 * 1024
# A row's request fingerprint is at most this long (the sidecar writes 16 hex characters).
MAX_FINGERPRINT_CHARS = 64


@dataclass(frozen=True, slots=True)
class Row:
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
    # A verdict row's old revision's verdict on the same record (its `previous`): its
    # revision, and whether it failed.
    previous: tuple[str | None, bool] | None = None
    # A results line's old revisions' verdicts on the record, by evaluator (its
    # `previous`), each paired with the evaluator's own in `results`.
    paired: dict[str, EvalResult] | None = None

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
    def of(cls, raw: Any) -> Row:
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
            model_name(_text(raw, "model")),
            _text(raw, "conversation"),
            _fingerprint(raw),
            _text(raw, "sender"),
        )
        dimensions = raw.get("dimensions")
        if dimensions is not None and not isinstance(dimensions, dict):
            raise ValueError("dimensions: expected an object")
        if dimensions is not None and dimensions.get("documents") == "0":
            origin = replace(origin, context=False)  # as live: the record had no context
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
            return cls(t, origin, where, results=parsed, paired=_paired(raw, parsed))
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
        if raw.get("previous") is not None:
            kwargs["previous"] = _previous(raw["previous"], kwargs)
        return cls(
            t,
            origin,
            where,
            evaluator=evaluator,
            category=category,
            revision=_text(raw, "revision"),
            **kwargs,
        )


def _previous(raw: Any, counts: dict[str, Any]) -> tuple[str | None, bool]:
    """A row's `previous`: `{"revision", "outcome"}` of the previous revision on the same
    record, on a row of one verdict (`counts`: the row's)."""
    if "score" in counts or counts.get("passes", 0.0) + counts.get("fails", 0.0) != 1:
        raise ValueError("previous: only on a row of one verdict (outcome, or one pass or fail)")
    if not isinstance(raw, dict) or raw.get("outcome") not in ("pass", "fail"):
        raise ValueError('previous: expected {"revision", "outcome": "pass" | "fail"}')
    return _text(raw, "revision"), raw["outcome"] == "fail"


def _paired(raw: dict[str, Any], results: dict[str, EvalResult]) -> dict[str, EvalResult] | None:
    """A results line's `previous` (absent from lines written before it, and from those
    of records no previous revision scored): each a verdict on the record whose
    evaluator's own verdict is in `results`, as the sidecar writes them."""
    previous = raw.get("previous")
    if previous is None:
        return None
    if not isinstance(previous, dict):
        raise ValueError("previous: expected an object of evaluators")
    out = {}
    for key, value in previous.items():
        name = str(key)
        result = EvalResult.from_json(name, value, "previous")
        own = results.get(name)
        if result.outcome == "error" or own is None or own.outcome == "error":
            raise ValueError(
                f"previous.{name}: a previous revision's verdict comes with its evaluator's "
                "own verdict on the record in results"
            )
        out[name] = result
    return out or None


def read_rows(paths: Iterable[Path], max_line: int = MAX_LINE_BYTES) -> Iterator[tuple[str, Any]]:
    """`(file:line, decoded row)` of every non-blank line of `paths`, one file after the
    other; a line that is not JSON comes as `(where, _Unreadable)`, one longer than
    `max_line` bytes as `(where, TooLong)`, never held whole."""
    for path in paths:
        with _open(path) as lines:
            number = 0
            while line := lines.readline(max_line + 1):
                number += 1
                if len(line) > max_line and not line.endswith(b"\n"):
                    while (rest := lines.readline(_SKIP_BYTES)) and not rest.endswith(b"\n"):
                        pass
                    yield f"{path}:{number}", TooLong(f"a line longer than {max_line:,} bytes")
                    continue
                if not line.strip():
                    continue
                try:
                    yield f"{path}:{number}", orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    yield f"{path}:{number}", _Unreadable(str(exc))


class _Unreadable(str):
    """A line that is not JSON: refused as such by `Row.of` (not an object)."""


class TooLong(str):
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
