"""What a page says: the named slices, retriever or generator, the traces to open; as
annotations, as the log line's text and as JSON (`/alerts`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from monitor.alerts.attribution._buckets import MIN_SLICE
from monitor.alerts.describe import p_text
from monitor.records.where import DIMENSIONS

SHOWN_SLICES = 3

Cause = Literal["retriever", "generator", "both", "unclear"]


@dataclass(frozen=True, slots=True)
class Slice:
    """One value's comparison at page time."""

    dimension: str
    value: str
    samples: int
    rate: float
    reference_samples: int
    reference_rate: float | None  # None: too few reference verdicts of its own
    expected: float
    share: float | None  # of the excess; None when the service has none
    z: float
    # `z` without the verdicts of senders the screen flagged (-inf: too few are left).
    screened_z: float = math.inf
    # Its rise came from flagged senders (`screened_z` short of the level it was named at).
    flagged_only: bool = False

    @property
    def p_value(self) -> float:
        return 0.5 * math.erfc(self.z / math.sqrt(2))

    def as_json(self) -> dict[str, Any]:
        return {
            "dimension": self.dimension,
            "value": self.value,
            "defect_rate": round(self.rate, 4),
            "expected": round(self.expected, 4),
            "reference_defect_rate": (
                None if self.reference_rate is None else round(self.reference_rate, 4)
            ),
            "samples": self.samples,
            "reference_samples": self.reference_samples,
            "share_of_excess": None if self.share is None else round(self.share, 4),
            "p_value": float(f"{self.p_value:.3g}"),
        }


@dataclass(frozen=True, slots=True)
class Change:
    """A value whose share of the verdicts grew at the rise (a version deployed, a model
    switched, the context gone)."""

    dimension: str
    value: str
    before: float  # share of the verdicts before the rise
    since: float  # and since

    def text(self) -> str:
        return (
            f"{self.dimension} {self.value} ({self.before:.0%} of verdicts before the rise, "
            f"{self.since:.0%} since)"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "dimension": self.dimension,
            "value": self.value,
            "share_before": round(self.before, 4),
            "share_since": round(self.since, 4),
        }


@dataclass(frozen=True, slots=True)
class Split:
    """Retriever or generator: the rise split into what came with retrieval failing more
    often (`mix`) and what came at the same retrieval quality (`within`)."""

    cause: Cause
    evaluator: str
    retrieval_rate: tuple[float, float]  # share of failed retrieval: reference, current
    mix: float
    within: float

    def text(self) -> str:
        before, now = self.retrieval_rate
        verdict = {
            "retriever": "the retriever (the index, the documents): retrieval fell with it",
            "generator": "the generator (the model, the prompt): groundedness fell at the "
            "same retrieval quality",
            "both": "both: retrieval fell with it, and groundedness fell at the same "
            "retrieval quality too",
            "unclear": "unclear: neither part is significant alone",
        }[self.cause]
        return (
            f"{verdict}; {self.evaluator} failed {before:.2f} -> {now:.2f} of the time; "
            f"{self.mix:+.2f} came with retrieval, {self.within:+.2f} at the same retrieval"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "retrieval_evaluator": self.evaluator,
            "retrieval_defect_rate": {
                "reference": round(self.retrieval_rate[0], 4),
                "current": round(self.retrieval_rate[1], 4),
            },
            "with_retrieval": round(self.mix, 4),
            "at_same_retrieval": round(self.within, 4),
        }


@dataclass(frozen=True, slots=True)
class Explanation:
    named: list[Slice]
    tested: int
    level: float
    samples: int
    reference_samples: int
    design_effect: float
    split: Split | None
    traces: list[str]
    links: list[str]
    budget: str
    changes: tuple[Change, ...] = ()
    # The slices of the rise's newest window against the same reference, named in the
    # same order (empty when the rise is no longer than that window): what rises now.
    later: tuple[Slice, ...] = ()

    def changed_text(self) -> str:
        """What changed at the rise, or "" when nothing did."""
        return "; ".join(c.text() for c in self.changes)

    def where_text(self) -> str:
        if self.samples == 0:
            return "no data: the attribution has seen no verdicts of this alert (restarted?)"
        if not self.tested:
            # Nothing was compared: "spread evenly" would be a finding the data never gave.
            return (
                f"no slice to compare: no value of {', '.join(DIMENSIONS)} held "
                f"{MIN_SLICE} of the verdicts with as many in the rest, so where the rise "
                "is cannot be told (the app sets service.version, a route, the model)"
            )
        if not self.named:
            return (
                f"no slice: the rise is spread evenly (none of {self.tested} slices rose "
                f"beyond the rest at one false page per {self.budget})"
            )
        parts = []
        for s in self.named[:SHOWN_SLICES]:
            share = f", {s.share:.0%} of the excess" if s.share is not None else ""
            before = f" ({s.reference_rate:.2f} before)" if s.reference_rate is not None else ""
            parts.append(
                f"{s.dimension} {s.value}: {s.rate:.2f} against {s.expected:.2f} "
                f"expected{before}, {s.samples:,} verdicts{share}, {p_text(s.p_value)}"
            )
        more = len(self.named) - SHOWN_SLICES
        tail = f"; {more} more" if more > 0 else ""
        return (
            "; ".join(parts)
            + tail
            + f" ({len(self.named)} of {self.tested} slices named at one false page per "
            f"{self.budget})"
        )

    def annotations(self) -> dict[str, str]:
        out = {"where": self.where_text()}
        if self.changes:
            out["changed"] = self.changed_text()
        if self.named:
            top = self.named[0]
            out["slice"] = f"{top.dimension}={top.value}"
        if self.split is not None:
            out["cause"] = self.split.cause
            out["cause_detail"] = self.split.text()
        if self.traces:
            out["trace_ids"] = " ".join(self.traces)
        if self.links:
            out["trace_urls"] = " ".join(self.links)
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "slices": [s.as_json() for s in self.named],
            "tested": self.tested,
            "level": float(f"{self.level:.3g}"),
            "samples": self.samples,
            "reference_samples": self.reference_samples,
            "design_effect": round(self.design_effect, 3),
            "changed": [c.as_json() for c in self.changes],
            "cause": self.split.as_json() if self.split is not None else None,
            "traces": [
                {"trace_id": t, "url": self.links[k] if k < len(self.links) else None}
                for k, t in enumerate(self.traces)
            ],
        }
