"""The end-of-run table of `rag-monitor replay`: per-evaluator totals, with how many
records each evaluator skipped and why (no query, no context, no response: counted by the
evaluation stage in `evaluations_skipped_total`; no reference: the reference-based
evaluators' "needs expected_response" result)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from monitor.component import Evaluated
from monitor.judge.definitions import NEEDS_REFERENCE
from monitor.results import Results


@dataclass
class EvaluatorTotals:
    count: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    normalized_sum: float = 0.0
    normalized_n: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # reason → records

    @property
    def mean_normalized(self) -> float | None:
        return self.normalized_sum / self.normalized_n if self.normalized_n else None

    @property
    def fail_rate(self) -> float | None:
        verdicts = self.passed + self.failed
        return self.failed / verdicts if verdicts else None


class SummarySink:
    """A result sink that adds up what the replay evaluated, for `table`."""

    def __init__(self) -> None:
        self.totals: dict[str, EvaluatorTotals] = {}
        self.records = 0

    async def start(self) -> None:
        return None

    async def shutdown(self, deadline_s: float) -> None:
        return None

    def emit(self, batch: Sequence[Evaluated]) -> None:
        for evaluated in batch:
            self._add(evaluated.results)

    def _add(self, results: Results) -> None:
        self.records += 1
        for name, result in results.items():
            totals = self.totals.setdefault(name, EvaluatorTotals())
            totals.count += 1
            outcome = result.outcome
            if result.error == NEEDS_REFERENCE:
                totals.count -= 1
                totals.skipped["no_reference"] = totals.skipped.get("no_reference", 0) + 1
                continue
            if outcome == "error":
                totals.errors += 1
                continue
            if outcome == "pass":
                totals.passed += 1
            else:
                totals.failed += 1
            if result.normalized is not None:
                totals.normalized_sum += result.normalized
                totals.normalized_n += 1

    def failed_evaluators(self) -> dict[str, int]:
        """Evaluators that returned nothing but errors → how many."""
        return {n: t.errors for n, t in sorted(self.totals.items()) if t.errors == t.count > 0}

    def table(self, skipped: Mapping[str, Mapping[str, int]] | None = None) -> str:
        """The table; `skipped`: evaluator → reason → records it skipped for lack of input
        (`skipped_counts`)."""
        totals = {name: t for name, t in self.totals.items()}
        for name, reasons in (skipped or {}).items():
            t = totals.setdefault(name, EvaluatorTotals())
            for reason, n in reasons.items():
                t.skipped[reason] = t.skipped.get(reason, 0) + n
        header = ("evaluator", "count", "mean_normalized", "fail_rate", "errors", "skipped")
        rows = [header]
        for name in sorted(totals):
            t = totals[name]
            mean = "-" if t.mean_normalized is None else f"{t.mean_normalized:.3f}"
            rate = "-" if t.fail_rate is None else f"{t.fail_rate:.1%}"
            skips = ", ".join(
                f"{n} {reason.replace('_', ' ')}" for reason, n in sorted(t.skipped.items()) if n
            )
            rows.append((name, str(t.count), mean, rate, str(t.errors), skips or "0"))
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines = [
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(line.rstrip() for line in lines)


def skipped_counts(registry: CollectorRegistry) -> dict[str, dict[str, int]]:
    """evaluator → reason → records, from `evaluations_skipped_total` (all services)."""
    out: dict[str, dict[str, int]] = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name == "rag_monitor_evaluations_skipped_total" and sample.value:
                reasons = out.setdefault(sample.labels["evaluator"], {})
                reason = sample.labels["reason"]
                reasons[reason] = reasons.get(reason, 0) + int(sample.value)
    return out
