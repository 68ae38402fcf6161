"""A `LabelCap` of 50 slots raced by one-shot values sprayed at a steady rate on an injected
clock (tests/exporters/test_label_squatting.py, bench/label_squatting.py): whether a value
looked up once a second wins a slot, and how soon."""

from __future__ import annotations

import itertools

from monitor.shared.labels import DECAY_S, SKETCH_BITS
from monitor.telemetry import LabelCap

# Within this long a service sending steadily gets its own series, whatever one-shot
# values are sprayed meanwhile (docs/contract.md, `pipeline.max_services`).
SLOT_WITHIN_S = 60.0
# The bound of docs/contract.md: one-shot values at up to this many a second cannot keep a
# value looked up once a second out of a slot for longer than SLOT_WITHIN_S.
SPRAY_BOUND_PER_S = 200_000
# Long enough for the sketch to hold all a steady spray leaves in it (98% of its spread).
WARM_S = 2 * DECAY_S
IDLE_S = 600.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


class Race:
    """A `LabelCap` of 50 slots under one-shot values sprayed at `per_s` a second on an
    injected clock, with the values it holds followed through its hooks."""

    def __init__(self, per_s: float, sketch_bits: int = SKETCH_BITS) -> None:
        self.clock = Clock()
        self.cap = LabelCap(50, idle_s=IDLE_S, clock=self.clock, sketch_bits=sketch_bits)
        self.holders: set[str] = set()
        self.cap.on_admit(self.holders.add)
        self.cap.on_evict(self.holders.discard)
        self._names = map(str, itertools.count())
        self._per_s = per_s

    def second(self, *steady: str) -> None:
        """One second: each of `steady` looked up once, then the spray's share."""
        for value in steady:
            self.cap(value)
        n = round(self._per_s)
        for _ in range(n):
            self.cap(f"invented-{next(self._names)}")
            self.clock.now += 1 / n
        assert len(self.holders) <= 50


def one_record_a_second_against(race: Race, kept_for_s: float = SLOT_WITHIN_S) -> float:
    """The spray alone until the sketch is warm (every slot taken by it), then a service
    looked up once a second: it takes a slot within SLOT_WITHIN_S and keeps it for
    `kept_for_s` more, the spray going on. Returns the seconds it took to win the slot."""
    for _ in range(round(WARM_S)):
        race.second()
    assert len(race.holders) == 50 and "shop" not in race.holders
    won = None
    second = 0
    while won is None or second < won + kept_for_s:
        second += 1
        race.second("shop")
        if won is None and "shop" in race.holders:
            won = second
        assert won is not None or second < SLOT_WITHIN_S, "no slot within SLOT_WITHIN_S"
        assert won is None or "shop" in race.holders, (won, second)
    return float(won)
