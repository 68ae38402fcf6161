"""Prometheus's answers to the fleet reader (`monitor.alerts.fleet`): an instant vector parsed
and checked series by series, and how a counter's value adds to what was counted (a
counter that fell is held until the next read says whether it started again)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

# A sample past this is no count a counter reaches (floats are exact up to it).
_LARGEST_COUNT = float(2**53)


class ReadFailed(Exception):
    """A read that gave nothing: `outcome` (one of `fleet.OUTCOMES`) and a short description
    written here, never the answer's text."""

    def __init__(self, outcome: str, detail: str) -> None:
        super().__init__(detail)
        self.outcome = outcome
        self.detail = detail


@dataclass(slots=True)
class Series:
    mark: float  # the value counted up to
    seen: float  # when an answer last held it
    lower: float | None = None  # a value below the mark, held until the next read


@dataclass(slots=True)
class Answer:
    """A parsed answer: its series, and how many were skipped for each reason."""

    series: list[tuple[dict[str, str], float]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)


def advance(series: Series, value: float) -> float:
    """What `value` adds to `series`, moving its mark (docs/alerts.md, "Counter quirks are
    never verdicts")."""
    if value >= series.mark:
        delta = value - series.mark
    elif series.lower is None or value < series.lower:
        series.lower = value  # lower than counted: held until the next read says why
        return 0.0
    else:  # lower on two reads running: the counter started again
        delta = value - series.lower
    series.mark, series.lower = value, None
    return float(round(delta))


def parse_answer(body: bytes, status: int) -> Answer:
    """An instant vector from Prometheus's JSON answer; raises `ReadFailed`."""
    try:
        doc: Any = json.loads(body)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested past the stack
        raise ReadFailed(
            "not_json" if status == 200 else "http_error",
            f"HTTP {status}, {len(body)} bytes that are not JSON",
        ) from None
    if not isinstance(doc, dict) or doc.get("status") != "success" or status != 200:
        error = doc.get("errorType") if isinstance(doc, dict) else None
        said = f", {error[:40]!r}" if isinstance(error, str) else ""
        raise ReadFailed(
            "http_error" if status != 200 else "malformed",
            f"HTTP {status}{said}: not a successful Prometheus answer",
        )
    data = doc.get("data")
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise ReadFailed("malformed", "not an instant vector")
    if not isinstance(result, list):
        raise ReadFailed("malformed", "an instant vector without a list of series")
    answer = Answer()
    for item in result:
        reason = _series(item, answer)
        if reason is not None:
            answer.skipped[reason] = answer.skipped.get(reason, 0) + 1
    return answer


def _series(item: Any, answer: Answer) -> str | None:
    """Adds one series of a vector to `answer`; or why it cannot be counted."""
    metric = item.get("metric") if isinstance(item, dict) else None
    value = item.get("value") if isinstance(item, dict) else None
    if not isinstance(metric, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metric.items()
    ):
        return "malformed"
    if not isinstance(value, list) or len(value) != 2 or not isinstance(value[1], str):
        return "malformed"
    try:
        sample = float(value[1])
    except ValueError:
        return "malformed"
    if not (math.isfinite(sample) and 0 <= sample <= _LARGEST_COUNT):
        return "bad_value"
    answer.series.append((metric, sample))
    return None
