"""Round 9's senders behind one gateway (issue 104, item 2): every span arrives through one
collector's address, so the address tells no sender apart; the screen keys the senders
beneath it by what their spans carry (`monitor.records.sender_key`: the instance id and a
digest of the resource's attributes), follows only keys that keep sending (a forger that
writes a new instance id into every trace is screened as the address's pool), and says
when it cannot screen.

The engine runs the default regression rule (`baseline: {}`) on a fake clock, fed counts
every 60 s and judged every 60 s; streams are seeded."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable

import numpy as np
import pytest
from aiohttp.test_utils import make_mocked_request

from monitor.alerts import AlertEngine
from monitor.alerts.rule import Origin
from monitor.evidence.senders import ADMIT_VERDICTS, FULL, ONE_SENDER, Senders, address_of
from monitor.exporters.firing_alerts import FiringAlertsPage
from monitor.records import resource_digest, sender_key
from monitor.telemetry import Telemetry, create_telemetry
from tests.alerts.honest_pods import PODS, RATE, RULE, START

pytestmark = pytest.mark.scorecard

GATEWAY = "10.9.9.9"
STEP_S = 60.0
PER_MIN = 60.0
# The last `_minutes_to_page`'s telemetry.
TELEMETRY: list[Telemetry] = []
# Each forgery's control: its verdicts' mean, sent at a constant rate.
MEANS = {"constant swing": 0.5, "constant twice": RATE}


def _key(instance: str | None, **resource: object) -> str:
    """The key of a sender behind `GATEWAY` whose resource is `resource` (dots written as
    `_`), with `instance` as its `service.instance.id`."""
    attributes = {name.replace("_", "."): value for name, value in resource.items()}
    attributes["service.name"] = "shop"
    if instance is not None:
        attributes["service.instance.id"] = instance
    key = sender_key(GATEWAY, instance, resource_digest(attributes))
    assert key is not None
    return key


def _pod(k: int, now: float, roll_h: float | None) -> str:
    """Honest pod `k`: no instance id, told apart by its host and process (as an SDK's
    resource detectors write them); rolling (`roll_h`): a new instance id every `roll_h`
    hours, the pods one after the other as a rolling deploy restarts them."""
    if roll_h is None:
        return _key(None, host_name=f"shop-{k}", process_pid=7, telemetry_sdk_language="python")
    generation = int((now / 3600 + k * roll_h / PODS) // roll_h)
    return _key(f"shop-{k}-{generation}", host_name=f"shop-{k}-{generation}", process_pid=7)


Forger = Callable[[float, np.random.Generator], str]


def _with_id(now: float, rng: np.random.Generator) -> str:
    return _key("forged", telemetry_sdk_language="go")


def _without_id(now: float, rng: np.random.Generator) -> str:
    return _key(None, telemetry_sdk_language="go")


def _spraying(now: float, rng: np.random.Generator) -> str:
    return _key(f"forged-{rng.integers(1 << 40)}", telemetry_sdk_language="python")


def _minutes_to_page(
    forger: Forger | None,
    share: float,
    forgery: str,
    *,
    roll_h: float | None = None,
    warmup_days: float = 2.0,
    seed: int = 31,
) -> tuple[float, AlertEngine]:
    """Minutes from a doubling of the honest rate (after `warmup_days`) to its page (inf:
    none in six hours), and the engine: `1 - share` of the volume from `PODS` honest pods
    behind `GATEWAY`, and `share` from `forger` (`forgery`: `"swing"`, all failing in even
    hours and all passing in odd ones; `"twice"`, at twice the honest rate in even hours
    and none failing in odd ones: round 7's forgeries), each minute's verdicts under the
    key it gives, each verdict under its own when it sprays; None: no forger, the honest
    verdicts the same. A page before the doubling fails the test."""
    honest_rng, forger_rng = np.random.default_rng(seed), np.random.default_rng(seed + 1)
    now = START
    TELEMETRY.append(create_telemetry())
    del TELEMETRY[:-1]
    engine = AlertEngine([RULE], TELEMETRY[-1], clock=lambda: now, evaluation_interval_s=60.0)
    rise = START + warmup_days * 86_400
    while now < rise + 6 * 3600:
        rate = 2 * RATE if now >= rise else RATE
        volume = honest_rng.poisson(PER_MIN * (1 - share))
        for k, n in enumerate(honest_rng.multinomial(volume, [1 / PODS] * PODS)):
            if n:
                fails = int(honest_rng.binomial(n, rate))
                origin = Origin("shop", sender=_pod(k, now, roll_h))
                engine.count(0, origin, [n - fails, fails], None, now)
        n = int(forger_rng.poisson(PER_MIN * share))
        if forger is not None and n:
            even = int(now // 3600) % 2 == 0
            if forgery == "swing":
                fails = n if even else 0
            elif forgery == "twice":
                fails = int(forger_rng.binomial(n, 2 * RATE)) if even else 0
            else:  # the control: the same mean, at a constant rate
                fails = int(forger_rng.binomial(n, MEANS[forgery]))
            for sent, failed in [(n, fails)] if forger is not _spraying else _each(n, fails):
                origin = Origin("shop", sender=forger(now, forger_rng))
                engine.count(0, origin, [sent - failed, failed], None, now)
        now += STEP_S
        if any(alert.status == "firing" for alert in engine.evaluate()):
            assert now > rise, "a page before the doubling"
            return (now - rise) / 60, engine
    return math.inf, engine


def _each(n: int, fails: int) -> list[tuple[int, int]]:
    """`n` verdicts, `fails` of them failing, one at a time."""
    return [(1, 1)] * fails + [(1, 0)] * (n - fails)


SEEDS = (31, 41, 51)
_NO_FORGER: dict[tuple[float | None, float, int], float] = {}


def _without_forger(roll_h: float | None, share: float, seed: int) -> float:
    """`_minutes_to_page` without a forger (the same for every forger's key)."""
    key = (roll_h, share, seed)
    if key not in _NO_FORGER:
        _NO_FORGER[key] = _minutes_to_page(None, share, "", roll_h=roll_h, seed=seed)[0]
    return _NO_FORGER[key]


@pytest.mark.parametrize(("share", "forgery"), [(0.2, "twice"), (0.02, "swing")])
@pytest.mark.parametrize(
    ("forger", "roll_h"),
    [(_with_id, None), (_without_id, None), (_spraying, 3.0)],
    ids=["forger-with-id", "forger-without-id", "rolling-pods-spraying-forger"],
)
def test_behind_one_gateway_a_doubling_pages_as_soon_as_without_the_forgery(
    forger: Forger, roll_h: float | None, share: float, forgery: str
) -> None:
    """Honest apps without instance ids behind one gateway, and round 7's forgers (a fifth
    of the volume at twice the honest rate in even hours and passing in odd ones; 2 %
    failing all of even hours and passing odd ones) with an id of their own, without one,
    or writing a new one into every trace while the honest pods take new ids every 3 h:
    over three streams, the doubling pages within 1.5 times the honest stream alone at
    2 %, and at a fifth within 1.5 times the same stream with the forger's verdicts at
    their mean rate in every hour (round 9: keyed by address and instance id, nothing
    paged in 6 h but for the sprayed ids at 2 %); the forger is flagged, listed and
    counted, and the honest pods are not. (A fifth of the volume that does not rise
    dilutes the doubling whether it forges or not: at a constant rate, against the honest
    stream alone it pages in about 1.5 to 1.6 times.)"""
    forged = constant = alone = 0.0
    for seed in SEEDS:
        minutes, engine = _minutes_to_page(forger, share, forgery, roll_h=roll_h, seed=seed)
        counted = TELEMETRY[-1].registry.get_sample_value(
            "rag_monitor_alert_senders_flagged", {"service": "shop", "rule": "regression"}
        )
        forged += minutes
        if share < 0.1:
            alone += _without_forger(roll_h, share, seed)
        else:
            constant += _minutes_to_page(
                forger, share, f"constant {forgery}", roll_h=roll_h, seed=seed
            )[0]
    assert forged <= 1.5 * (alone if share < 0.1 else constant)
    (listed,) = engine.screened_senders()
    assert listed["service"] == "shop" and listed["cannot_screen"] is None
    flagged = listed["flagged"]
    assert isinstance(flagged, list) and flagged
    hours = range(0, 54 * 3600, 900)  # every key the pods took over the run
    pods = {_pod(k, START + t, roll_h) for k in range(PODS) for t in hours}
    assert not pods & set(flagged), flagged
    assert counted == len(flagged)


def _blind(keys: Callable[[int, int], str]) -> str | None:
    """Why a screen of 6 hourly buckets cannot screen: 4 senders of 900 verdicts an hour
    at `RATE`, each hour's `keys(sender, trace)` (a trace: 3 verdicts)."""
    rng = np.random.default_rng(7)
    screen = Senders()
    for hour in range(6):
        for sender in range(4):
            for trace in range(300):
                fails = int(rng.binomial(3, RATE))
                screen.add(hour, keys(sender, hour * 300 + trace), 3, fails, fails, solo=True)
        screen.screen()
    return screen.blind()


def test_the_screen_says_when_it_cannot_tell_senders_apart() -> None:
    """One address and resources that are all the same: one sender (`ONE_SENDER`); a new
    instance id in every trace: nothing followed (`FULL`); pods told apart by their
    resources: it can."""
    same = _key(None, telemetry_sdk_language="python")
    assert _blind(lambda sender, trace: same) == ONE_SENDER
    assert _blind(lambda sender, trace: _key(f"id-{trace}-{sender}")) == FULL
    assert _blind(lambda sender, trace: _key(None, host_name=f"h{sender}")) is None
    assert Senders().blind() is None  # nothing sent, nothing to say


def test_a_resources_digest_reads_every_attribute() -> None:
    """The digest is of the resource's names and values, in any order, whatever they are
    (Chinese and Cyrillic values too); the key is the address, then the id and the digest."""
    one = resource_digest({"host.name": "主机-1", "процесс": 7, "k8s.pod.uid": "ａ"})
    assert one == resource_digest({"k8s.pod.uid": "ａ", "процесс": 7, "host.name": "主机-1"})
    assert one != resource_digest({"host.name": "主机-2", "процесс": 7, "k8s.pod.uid": "ａ"})
    assert one != resource_digest({"host.name": "主机-1", "процесс": "7", "k8s.pod.uid": "ａ"})
    assert len(one) == 12 and int(one, 16) >= 0
    assert sender_key("10.0.0.7", "pod-1", one) == f"10.0.0.7/pod-1~{one}"
    assert sender_key("10.0.0.7", None, one) == f"10.0.0.7/~{one}"
    assert sender_key("10.0.0.7", None, None) == "10.0.0.7"
    assert sender_key(None, None, None) is None
    # An id is the sender's own word: it cannot make a key read as another address.
    claimed = sender_key(None, "6.6.6.6/pod-1~abc", one)
    assert claimed == f"6.6.6.6%2Fpod-1%7Eabc~{one}"
    assert claimed is not None and address_of(claimed) is None
    behind = sender_key("10.0.0.7", "6.6.6.6/pod-1", None)
    assert behind is not None and address_of(behind) == "10.0.0.7"


def test_alerts_page_lists_the_flagged_senders() -> None:
    """`GET /alerts` answers the engine's `screened_senders` beside the firing alerts."""
    rows = [{"rule": "r", "service": "店", "flagged": ["10.9.9.9"], "cannot_screen": None}]
    page = FiringAlertsPage(list, lambda: rows)
    response = asyncio.run(page.handle(make_mocked_request("GET", "/alerts")))
    assert response.text is not None
    assert json.loads(response.text) == {"alerts": [], "senders": rows}


def test_a_rule_says_once_per_service_that_it_cannot_screen(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every verdict through one gateway under one resource: the rule's screen cannot tell
    its senders apart; `alert_sender_screen_blind{reason="one_sender"}` is 1 and one log
    line says so, however many evaluations follow."""
    now = START
    telemetry = create_telemetry()
    engine = AlertEngine([RULE], telemetry, clock=lambda: now, evaluation_interval_s=60.0)
    same = _key(None, telemetry_sdk_language="python")
    rng = np.random.default_rng(9)
    caplog.set_level("WARNING", logger="monitor.alerts.engine")
    for _ in range(180):
        n = 60
        fails = int(rng.binomial(n, RATE))
        engine.count(0, Origin("shop", sender=same), [n - fails, fails], None, now)
        now += 60.0
        engine.evaluate()
    labels = {"service": "shop", "rule": "regression"}
    blind = telemetry.registry.get_sample_value(
        "rag_monitor_alert_sender_screen_blind", {**labels, "reason": ONE_SENDER}
    )
    assert blind == 1
    said = [r for r in caplog.records if "cannot tell this service's senders apart" in r.message]
    assert len(said) == 1 and "one_sender" in said[0].message
    assert engine.screened_senders() == [
        {"rule": "regression", "service": "shop", "flagged": [], "cannot_screen": ONE_SENDER}
    ]


def test_a_sender_cannot_write_a_retired_row() -> None:
    """A key ending in `/` (a record given as a record may bring its own instance id) is
    screened as the key without it, not as the row of an address's retired keys."""
    screen = Senders()
    screen.add(0, "pod-1/", ADMIT_VERDICTS, 0, 0, solo=True)
    assert set(screen.snapshot()["senders"]) == {"pod-1"}
