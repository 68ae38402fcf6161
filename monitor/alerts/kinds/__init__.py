"""Rule kinds: one module per form of rule, each behind one interface.

As the Collector's tail-sampling policies each take a trace and return a decision, each
kind takes its entries' windows and returns a `Judgment` per cohort; the engine
(`monitor.alerts.engine`) keeps the firing state, sends pages and resolves, and knows no
kind. A kind owns the state it keeps per (service, cohort) (`new_state`, `snapshot`,
`restore`), how verdicts and closed conversations enter it (`add`, `add_unit`), what it
decides (`judge`), what a page says (`describe`) and what it shows on `/metrics`
(`publish`).

| kind | config | module |
|---|---|---|
| absolute | `max_defect_rate` | `absolute.py` |
| regression | `baseline` | `regression.py` |
| cohorts | `cohorts` | `cohorts.py` |
| slo | `slo` | `slo.py` |

`forms.kind_for(rule, ...)` picks the kind from the rule's form (the only place that does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from monitor.alerts.evidence import NOTHING, Arrival, Moments, Unit

if TYPE_CHECKING:
    from monitor.alerts.gauges import AlertGauges


@dataclass(frozen=True, slots=True)
class Judgment:
    """What one judged (rule, service, cohort) asks for and what it saw.

    - `fire`: start firing (if not firing); `resolve`: stop (if firing); neither holds
      the state (hysteresis).
    - `current`, `reference`: what was compared (the current window, or a sequential
      test's evidence, against the baseline or the rest of the service).
    - `p_value`: the evidence's p-value, 1.0 until the rule's own thresholds (its
      `min_samples` on both sides) are met: what boosts follow.
    - `note`: why it resolved when not for the usual reason, or why it cannot judge.
    - `figures`: the kind's own numbers, for its `describe`.
    - `severity`: the `severity` label of the alert this judgment sends, where the kind
      decides it (an SLO rule's burn-rate rows); None: the rule's `severity`. Labels are
      an alert's identity, so a kind changes it only between a resolve and a new fire.
    """

    fire: bool
    resolve: bool
    current: Moments = NOTHING
    reference: Moments = NOTHING
    p_value: float = 1.0
    note: str = ""
    figures: Mapping[str, float] = field(default_factory=dict)
    severity: str | None = None


class Named(NamedTuple):
    """The slice a firing page named first: its `Where` alert's identity
    (`monitor.alerts.attribution`), the `dimension` and `value` in its labels, and `at`, when
    it was named (the clock's seconds: the `Where` alert's `startsAt`)."""

    dimension: str
    value: str
    at: float


@dataclass(slots=True)
class Entry:
    """One (rule, service, cohort) as the engine keeps it: the kind's own `state`, the
    evaluator revision its verdicts came from, and its firing state: since when, when last
    sent, and `where`, the slice its page named first while it fires (None: none yet)."""

    state: Any
    revision: str | None = None
    firing: bool = False
    started_at: float = 0.0
    last_sent: float = 0.0
    judgment: Judgment | None = None
    where: Named | None = None


class Kind(Protocol):
    """One form of alert rule (see the module docstring)."""

    def new_state(self) -> Any:
        """An empty state for one (service, cohort)."""
        ...

    def succeed(self, state: Any, now: float) -> Any:
        """The state of an entry whose evaluator revision replaced `state`'s at `now`: what
        of it still holds under the new revision (a regression rule's history, translated),
        else an empty one."""
        ...

    def add(
        self, state: Any, histogram: Sequence[float], conversation: Arrival | None, now: float
    ) -> bool:
        """Verdicts that arrived together: `histogram[k]` of them at level `k / steps`
        (`conversation`: they belong to one, and what came of it before; its unit comes
        through `add_unit` once it closes); True when an evaluation is due now."""
        ...

    def add_unit(self, state: Any, unit: Unit, now: float) -> bool:
        """A closed conversation; True when an evaluation is due now."""
        ...

    def judge(self, entries: Mapping[str, Entry], now: float) -> dict[str, Judgment]:
        """A judgment for every judged cohort of one service (`""` for a rule without
        cohorts)."""
        ...

    def describe(self, service: str, cohort: str, judgment: Judgment) -> dict[str, str]:
        """The page's annotations: `summary`, `description` and the figures."""
        ...

    def publish(self, gauges: AlertGauges, service: str, entries: Mapping[str, Entry]) -> None:
        """The gauges of one judged (rule, service)."""
        ...

    def snapshot(self, state: Any) -> dict[str, Any]: ...

    def restore(self, state: Any, raw: Any) -> None:
        """Takes back `snapshot()` into an empty `state`; raises TypeError, ValueError,
        KeyError or ArithmeticError on anything else."""
        ...
