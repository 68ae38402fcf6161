"""Rule kinds, one module per kind (`pick.py` maps a rule to its kind), each behind two
interfaces: `Kind`, what the engine asks (a `judge` that returns FIRE, RESOLVE or HOLD with
its evidence and changes nothing, what a page says, what `/metrics` shows), and `Keeper`,
how the entries (`monitor.alerts.entries`) keep its state per (service, cohort). The firing
state (`Entry.firing` and what goes with it) is moved by `monitor.alerts.firing` alone,
which runs the kind's `settle` on a resolve. Optional hooks, each a protocol a kind may
also meet (checked once, `entries.Entries`): `Replacing` (`add_replaced`) and `Screening`
(`sent`); and `Reported`, a kind whose entries a report from outside tells, not verdicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from monitor.evidence import NOTHING, Arrival, Moments, Unit

if TYPE_CHECKING:
    from monitor.alerts.gauges import AlertGauges, SenderScreen


Key = tuple[int, str, str]
"""An entry's key: (rule index, service, cohort), the service and cohort as the caps hold
them."""
# A previous revision's verdicts' own revision, and the current revision's on the same records.
Paired = tuple[str | None, Sequence[float]]


def series(key: Key) -> str:
    """What an entry judges, as firing pairs and log lines name it: `service`, or
    `service/cohort` for a cohort rule."""
    return f"{key[1]}/{key[2]}" if key[2] else key[1]


class Decision(Enum):
    """What a judgment asks of the firing state: start firing (of an entry not firing),
    stop (of one firing), or leave it as it is."""

    FIRE = "fire"
    RESOLVE = "resolve"
    HOLD = "hold"


def decide(firing: bool, fire: bool, resolve: bool) -> Decision:
    """The decision of a kind that would `fire` (when not firing) and `resolve` (when
    firing); neither holds the state (hysteresis)."""
    if not firing:
        return Decision.FIRE if fire else Decision.HOLD
    return Decision.RESOLVE if resolve else Decision.HOLD


@dataclass(frozen=True, slots=True)
class Judgment:
    """What one judged (rule, service, cohort) asks for and what it saw.

    - `decision`: FIRE, RESOLVE or HOLD (`Decision`).
    - `current`, `reference`: what was compared (the current window, or a sequential
      test's evidence, against the baseline or the rest of the service).
    - `p_value`: the evidence's p-value, 1.0 until the rule's own thresholds (its
      `min_samples` on both sides) are met: what boosts follow.
    - `note`: why it resolved when not for the usual reason, or why it cannot judge.
    - `figures`: the kind's own numbers, for its `describe` and `settle`.
    - `severity`: the `severity` label of the alert this judgment sends, where the kind
      decides it (an SLO rule's burn-rate rows); None: the rule's `severity`. Labels are
      an alert's identity, so a kind changes it only between a resolve and a new fire.
    """

    decision: Decision
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
    evaluator revision its verdicts came from, and its firing state (moved by the engine
    alone): whether it fires, since when, when last sent, the `severity` it fired at
    (None: the rule's), the last judgment, the judgment it fired on (not saved: None
    after a restart), and `where`, the slice its page named first while it fires (None:
    none yet)."""

    state: Any
    revision: str | None = None
    firing: bool = False
    started_at: float = 0.0
    last_sent: float = 0.0
    judgment: Judgment | None = None
    fired: Judgment | None = None
    where: Named | None = None
    severity: str | None = None


class State(Protocol):
    """A kind's state of one (service, cohort): saves itself for the state file."""

    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, raw: Any) -> None:
        """Takes back `snapshot()` into an empty state; raises TypeError, ValueError,
        KeyError or ArithmeticError on anything else."""
        ...


class Kind(Protocol):
    """What the engine asks of a kind."""

    def judge(self, entries: Mapping[str, Entry], now: float) -> dict[str, Judgment]:
        """A judgment for every judged cohort of one service (`""` for a rule without
        cohorts), of the entries as `Keeper.advance` left them at `now`; changes nothing."""
        ...

    def describe(self, service: str, cohort: str, judgment: Judgment) -> dict[str, str]:
        """The page's annotations: `summary`, `description` and the figures."""
        ...

    def publish(self, gauges: AlertGauges, service: str, entries: Mapping[str, Entry]) -> None:
        """The gauges of one judged (rule, service)."""
        ...


class Keeper(Protocol):
    """How the entries keep a kind's state: new, verdicts and closed conversations in, time
    advanced, a resolve settled. A state saves itself (`State`)."""

    def new_state(self, previous: Entry | None = None, now: float = 0.0, series: str = "") -> State:
        """An empty state for one (service, cohort), `series` as log lines name it; with
        `previous`, an entry whose evaluator revision was replaced at `now`: what of its
        state still holds under the new revision (a regression rule's history, translated)."""
        ...

    def add(
        self,
        state: Any,
        histogram: Sequence[float],
        conversation: Arrival | None,
        now: float,
        firing: bool,
    ) -> bool:
        """Verdicts that arrived together: `histogram[k]` of them at level `k / steps`
        (`conversation`: they belong to one, and what came of it before; its unit comes
        through `add_unit` once it closes), to an entry `firing` or not; True when an
        evaluation is due now."""
        ...

    def add_unit(self, state: Any, unit: Unit, now: float) -> bool:
        """A closed conversation; True when an evaluation is due now."""
        ...

    def advance(self, state: Any, now: float, firing: bool) -> None:
        """Time moves to `now` for an entry `firing` or not, in one step: what left the
        windows goes where it goes, pending verdicts reach the tests."""
        ...

    def settle(self, entry: Entry, judgment: Judgment, now: float) -> None:
        """The side effects of `entry`'s resolve by `judgment` at `now` on its state."""
        ...


@runtime_checkable
class Replacing(Protocol):
    """A kind that learns from the verdicts of the revision an entry's replaced, still
    coming (a rollout with both live; or `paired`, a previous revision scoring records
    again: its revision and the entry's own verdicts on the same records), the old
    revision's level in the new one's terms (regression rules: the overlap); they are
    judged by no rule."""

    def add_replaced(
        self,
        state: Any,
        histogram: Sequence[float],
        now: float,
        firing: bool,
        paired: Paired | None = None,
    ) -> None:
        """Verdicts of the replaced revision, to an entry `firing` or not."""
        ...


@runtime_checkable
class Shadowing(Protocol):
    """A kind that measures a revision scoring records in shadow (`evaluators[].next`)
    against the entry's own on the same records, and carries what it measured into the
    changeover when that revision replaces the entry's (regression rules). Shadow verdicts
    are judged by no rule."""

    def add_shadow(
        self,
        state: Any,
        revision: str,
        shadow: Sequence[float],
        own: Sequence[float],
        now: float,
        firing: bool,
    ) -> None:
        """The shadowed `revision`'s verdicts on one record beside the entry's own."""
        ...

    def switched(self, state: Any, replaced: Entry, revision: str | None) -> None:
        """`state`, new from `replaced` (`Keeper.new_state`), belongs to `revision` now."""
        ...


@runtime_checkable
class Screening(Protocol):
    """A kind whose state screens who sent its verdicts (regression rules: one sender's
    forged hours kept out of what the history measures of its own dispersion)."""

    def sent(
        self,
        state: Any,
        sender: str | None,
        histogram: Sequence[float],
        conversation: Arrival | None,
        now: float,
    ) -> None:
        """Who sent the verdicts `Keeper.add` just took (`monitor.records.sender`; None:
        not known)."""
        ...

    def screen(self, state: Any) -> SenderScreen:
        """`state`'s sender screen."""
        ...


@runtime_checkable
class Reported(Protocol):
    """A kind no verdict enters: each of its entries is told by a report from outside the
    engine (`AlertEngine.report`: the anchor check's on a judge), keyed by what the report
    is of in the place of a service. Its pages are of no service's verdicts: they name
    their subject in their own labels (`labels`), the attribution has nothing to say of
    them, and a state file's pages of subjects it no longer reports on are left out
    (`reports_on`)."""

    def report(self, state: Any, now: float, figures: Mapping[str, float] | None) -> None:
        """A report on the entry's subject at `now`: the figures of what it found, or None
        (nothing to page on)."""
        ...

    def reports_on(self, subject: str) -> bool:
        """Whether the config still has `subject` reported on."""
        ...

    def labels(self, subject: str, severity: str | None) -> dict[str, str]:
        """The labels of a page on `subject` (`severity`: the judgment's, None: the rule's)."""
        ...


class RuleKind(Kind, Keeper, Protocol):
    """A kind as `pick.kind_for` makes it: both interfaces."""
