"""The suite's deadlines stretch with the machine's load and still end a failing wait."""

from __future__ import annotations

from harness.wait import MAX_STRETCH, MIN_DEADLINE_S, Deadline


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_quiet_machine_keeps_the_deadline_it_asked_for() -> None:
    clock = _Clock()
    deadline = Deadline(90, clock=clock, stretch=lambda: 1.0)
    clock.now += 89.9
    assert not deadline.passed()
    clock.now += 0.2
    assert deadline.passed()


def test_a_loaded_machine_stretches_it_by_the_load_seen_while_waiting() -> None:
    clock = _Clock()
    loads = iter([3.0, 1.0, 1.0])
    deadline = Deadline(90, clock=clock, stretch=lambda: next(loads))
    clock.now += 100
    assert not deadline.passed()  # three times loaded: 270 s
    clock.now += 160  # the load fell meanwhile: the largest stretch seen holds
    assert not deadline.passed()
    clock.now += 11
    assert deadline.passed()
    assert "x3.0" in deadline.describe()


def test_the_stretch_is_bounded_and_short_deadlines_raised() -> None:
    clock = _Clock()
    deadline = Deadline(1, clock=clock, stretch=lambda: 100.0)
    clock.now += MIN_DEADLINE_S * MAX_STRETCH
    assert deadline.passed()
