"""How many named values a regression rule saves per service (issue 105): what a reader of
the state file must hold to follow a restart. The rule is run as a service lives it on a
simulated clock (senders, one of them screened; conversations; an evaluator revision
scoring in shadow, then the switch to it; a rise that pages), its entry saved as the state
file saves it every quarter hour, and the names counted over all those saves: every key at
every level, named by its path, each once (a key present only at some moments, a shadow's
before the switch, counts). A mapping keyed by data (the sender screen's senders) is one
value; a list is one value, whatever it holds.

The count is pinned from above: a new key fails the test until one goes, or the bound is
raised on purpose. `python -m tests.alerts.test_rule_state_size` prints the names.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.production_streams import EVALUATOR
from monitor.alerts import AlertEngine
from monitor.alerts.rule import Origin
from monitor.config import AlertBaseline, RegressionRule
from monitor.results import EvalResult
from monitor.telemetry import create_telemetry

# Ten hours of a service on a simulated clock.
pytestmark = pytest.mark.scorecard

# The most names a regression rule's saved entry of one service may hold.
MOST_NAMES = 50  # the first level's units after a cut (`first.after`) among them
# Mappings keyed by data, not by names: one value each.
KEYED_BY_DATA = {("state", "history", "senders", "senders")}

START = 1_767_225_600.0  # a Thursday, 00:00 UTC
STEP_S = 60.0
PER_STEP = 30  # records a minute
SWITCH_S = 8 * 3600.0  # revision "b", scoring in shadow until then, becomes the rule's
RISE_S = 6 * 3600.0  # the service's rate doubles for 40 minutes
END_S = 10 * 3600.0
SAVED_EVERY = 15  # steps
FORGER = "6.6.6.6/forged"


def names(saved: Any, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """The paths of every key in `saved`, each once (see the module docstring)."""
    out: set[tuple[str, ...]] = set()
    if isinstance(saved, dict) and path not in KEYED_BY_DATA:
        for key, value in saved.items():
            out.add((*path, key))
            out |= names(value, (*path, key))
    return out


@dataclass
class Run:
    """What the run saved and did: the names of every save, the times pages fired, the
    senders the screen flagged and what the entry held at some save."""

    names: set[tuple[str, ...]] = field(default_factory=set)
    fired: list[float] = field(default_factory=list)
    flagged: set[str] = field(default_factory=set)
    shadowed: bool = False
    translated: bool = False


def _verdict(failed: bool, revision: str) -> dict[str, EvalResult]:
    return {EVALUATOR: EvalResult(EVALUATOR, passed=not failed, revision=revision)}


def run() -> Run:
    """The service's ten hours (see the module docstring), seeded."""
    rng = random.Random(105)
    now = START
    rule = RegressionRule(
        name="regression",
        evaluator=EVALUATOR,
        baseline=AlertBaseline(window="2h", min_samples=300),
        false_page_every="7d",
    )
    engine = AlertEngine([rule], create_telemetry(), clock=lambda: now, evaluation_interval_s=60.0)
    out = Run()
    step = 0
    while now < START + END_S:
        t = now - START
        rate = 0.3 if RISE_S <= t < RISE_S + 2400 else 0.1
        for k in range(PER_STEP):
            n = step * PER_STEP + k
            forger = k % 10 == 0
            pod = k % 4
            origin = Origin(
                "shop",
                conversation=f"c{(n // 3) % 60}" if k % 2 else None,
                fingerprint=f"q{n % 900}",
                sender=FORGER if forger else f"10.0.0.{pod}/pod-{pod}",
            )
            old = rng.random() < (0.6 if forger else rate)
            new = rng.random() < (0.6 if forger else 0.8 * rate)
            if t < SWITCH_S:
                own = _verdict(old, "a")
                engine.count_results(origin, own, now)
                if rng.random() < 0.2:
                    engine.count_shadow(origin, _verdict(new, "b"), now, own)
            else:
                engine.count_results(origin, _verdict(new, "b"), now)
        now += STEP_S
        step += 1
        out.fired += [now - START for a in engine.evaluate() if a.status == "firing"]
        if step % SAVED_EVERY:
            continue
        for row in engine.screened_senders():
            out.flagged.update(row["flagged"])
        entry = json.loads(json.dumps(engine.snapshot()))["regression"]["services"]["shop"][""]
        out.names |= names(entry)
        out.shadowed |= "shadow" in entry["state"]
        out.translated |= entry["state"]["translated"] is not None
    return out


def test_a_regression_rules_saved_state_holds_no_more_names_than_it_did() -> None:
    got = run()
    # The run is the life it says: a page at the rise, the forger screened, a shadow saved
    # before the switch and a translated history after it.
    assert any(RISE_S < t < RISE_S + 2400 for t in got.fired), got.fired
    assert any(key.startswith("6.6.6.6") for key in got.flagged), got.flagged
    assert got.shadowed and got.translated
    assert len(got.names) <= MOST_NAMES, sorted(".".join(p) for p in got.names)


if __name__ == "__main__":
    counted = run()
    for path in sorted(counted.names):
        print(".".join(path))
    print(f"{len(counted.names)} names", file=sys.stderr)
