"""Per-evaluator totals for the end-of-run table of `rag-monitor replay`."""

from __future__ import annotations

from dataclasses import dataclass

from monitor.evaluators.base import EvalResult
from monitor.records import RagRecord


@dataclass
class EvaluatorTotals:
    count: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    normalized_sum: float = 0.0
    normalized_n: int = 0

    @property
    def mean_normalized(self) -> float | None:
        return self.normalized_sum / self.normalized_n if self.normalized_n else None

    @property
    def fail_rate(self) -> float | None:
        verdicts = self.passed + self.failed
        return self.failed / verdicts if verdicts else None


class SummarySink:
    def __init__(self) -> None:
        self.totals: dict[str, EvaluatorTotals] = {}
        self.records = 0

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def emit(self, record: RagRecord, results: dict[str, EvalResult]) -> None:
        self.records += 1
        for name, result in results.items():
            totals = self.totals.setdefault(name, EvaluatorTotals())
            totals.count += 1
            outcome = result.outcome
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

    def table(self) -> str:
        header = ("evaluator", "count", "mean_normalized", "fail_rate", "errors")
        rows = [header]
        for name in sorted(self.totals):
            t = self.totals[name]
            mean = "-" if t.mean_normalized is None else f"{t.mean_normalized:.3f}"
            rate = "-" if t.fail_rate is None else f"{t.fail_rate:.1%}"
            rows.append((name, str(t.count), mean, rate, str(t.errors)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines = [
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(line.rstrip() for line in lines)
