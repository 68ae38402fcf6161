"""Conversation memory and the state file, bounded (issue 70, item 2).

An app that writes each request's id as its `session.id` makes every request a
conversation of its own. The alert rules' conversations are bounded per process by a
budget in bytes, oldest first; the state file is bounded with them, and one too large to
load is moved aside, never overwritten; a sidecar restarted on a flooded state reaches
`/readyz` within the Helm chart's 512 MiB (a memory cgroup where this machine allows one).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import random
import subprocess
import sys
import time
import tracemalloc
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.children import spawn
from harness.rag_service import write_config
from harness.servers import monitor_ports, stop_process
from harness.wait import wait_until
from monitor.alerts import AlertEngine, state
from monitor.alerts.entries import CLOSED_BYTES, CONVERSATION_BUDGET, OPEN_BYTES
from monitor.alerts.rule import Origin
from monitor.alerts.state import FORMAT, VERSION, StateFile
from monitor.config import AlertBaseline, RegressionRule
from monitor.evidence.conversations import Conversations, conversation_key
from monitor.telemetry import Telemetry, create_telemetry
from tests.alerts.test_alerts import Clock, gauge, verdict
from tests.alerts.test_alerts_regression import RULE, loads
from tests.alerts.test_alerts_state_hostile import _two_firing_services

REPO = Path(__file__).resolve().parents[2]
SERVICES = 24
LIMIT = 512 * 1024 * 1024  # the Helm chart's memory limit
FLOOD_RULE = RegressionRule(
    name="hallucination_regression", evaluator="local_groundedness", baseline=AlertBaseline()
)
RESULTS = {"local_groundedness": verdict("local_groundedness", passed=True)}


def test_a_conversation_holds_no_more_than_the_budget_counts_it() -> None:
    levels = [0.0, 1.0]
    conversations = Conversations(idle_s=600)
    keys = [conversation_key(f"request-{n}") for n in range(20_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n, key in enumerate(keys):
            conversations.add(key, [1.0, 0.0], levels, 1_700_000_000.0 + n)
        opened = tracemalloc.get_traced_memory()[0] - before
        conversations.close_idle(1_800_000_000.0)
        closed = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert conversations.remembered == len(keys) and len(conversations) == 0
    assert opened / len(keys) <= OPEN_BYTES
    assert closed / len(keys) <= CLOSED_BYTES


def _flood(engine: AlertEngine, clock: Clock, per_service: int, services: int = SERVICES) -> None:
    """`per_service` requests to each service, each its own conversation, a second apart."""
    for n in range(per_service):
        for s in range(services):
            origin = Origin(f"svc-{s}", conversation=f"req-{s}-{n}")
            engine.count_results(origin, RESULTS, clock.now)
        clock.now += 1.0


def _evicted(t: Telemetry, which: str) -> float:
    return gauge(t, "alert_conversations_evicted_total", state=which) or 0.0


def test_per_request_conversations_stay_within_the_budget_oldest_first(
    caplog: pytest.LogCaptureFixture,
) -> None:
    budget = 2 * 1024 * 1024
    t, clock = create_telemetry(), Clock()
    engine = AlertEngine([FLOOD_RULE], t, clock=clock, conversation_budget=budget)
    with caplog.at_level(logging.WARNING, logger="monitor.alerts.engine"):
        _flood(engine, clock, 1_500)  # 36,000 conversations: four times the budget
    held = engine._entries.conversation_bytes
    assert 0.8 * budget <= held <= budget
    assert _evicted(t, "open") > 0
    # Oldest first: every service keeps its latest conversations, none is emptied.
    snapshot = engine.snapshot()[FLOOD_RULE.name]["services"]
    assert len(snapshot) == SERVICES
    kept = [len(s[""]["conversations"]["open"]) for s in snapshot.values()]
    assert min(kept) > 0.8 * max(kept)
    # Logged at most once a minute of the clock's time, with the budget named.
    warnings = [r for r in caplog.records if "reached their memory budget" in r.message]
    assert 1 <= len(warnings) <= 1_500 / 60 + 1
    # The saved conversations are bounded with them.
    assert len(json.dumps(snapshot)) < budget


async def test_a_flooded_state_file_restores_within_the_budget(tmp_path: Path) -> None:
    path = tmp_path / "alerts.state"
    _write_flooded_state(path, per_service=4_000, services=4)  # 32,000 conversations
    t, clock = create_telemetry(), Clock()
    budget = 1024 * 1024
    engine = AlertEngine(
        [FLOOD_RULE], t, clock=clock, state_file=StateFile(str(path), t), conversation_budget=budget
    )
    await engine.start()
    assert loads(t, "loaded") == 1
    assert engine._entries.conversation_bytes <= budget
    assert _evicted(t, "closed") > 0
    await engine.shutdown(10)


async def test_a_state_file_too_large_to_load_is_moved_aside_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "alerts.state"
    await _two_firing_services(path)
    content = path.read_bytes()
    monkeypatch.setattr(state, "MAX_BYTES", len(content) - 1)
    t, clock = create_telemetry(), Clock()
    engine = AlertEngine([RULE], t, clock=clock, state_file=StateFile(str(path), t))
    with caplog.at_level(logging.ERROR, logger="monitor.alerts.state"):
        await engine.start()
    assert loads(t, "too_large") == 1 and engine.firing() == []
    (aside,) = _set_aside(tmp_path)
    assert f"moved to {aside}" in caplog.text
    await engine.shutdown(10)  # saves: a new file, the old one untouched
    assert aside.read_bytes() == content
    assert path.exists() and path.read_bytes() != content


async def test_a_corrupt_state_file_is_moved_aside_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "alerts.state"
    path.write_bytes(b'{"format": "rag-monitor-alert-state", "rules": {')
    t, clock = create_telemetry(), Clock()
    engine = AlertEngine([RULE], t, clock=clock, state_file=StateFile(str(path), t))
    await engine.start()
    assert loads(t, "corrupt") == 1
    await engine.shutdown(10)
    (aside,) = _set_aside(tmp_path, "corrupt")
    assert aside.read_bytes() == b'{"format": "rag-monitor-alert-state", "rules": {'
    assert json.loads(path.read_bytes())["format"] == FORMAT


def _set_aside(folder: Path, outcome: str = "too_large") -> list[Path]:
    return sorted(folder.glob(f"alerts.state.{outcome}-*"))


def _write_flooded_state(path: Path, per_service: int, services: int = SERVICES) -> None:
    """A state file as the engine wrote it before conversations had a budget, after a flood
    of per-request conversation ids: each service's entry full, `per_service` open and as
    many closed conversations."""
    rng = random.Random(7)
    now = time.time()
    entries = {}
    for s in range(services):
        opened = [
            [rng.getrandbits(64), 1, 0.0, 0.0, now - 300 + k * 1e-3, now - 300 + k * 1e-3, 0, 0.0]
            for k in range(per_service)
        ]
        closed = [[rng.getrandbits(64), 1, 0.0, now - 900 + k * 1e-3] for k in range(per_service)]
        entries[f"svc-{s}"] = {"": _saved_entry(opened, closed)}
    rules = {
        FLOOD_RULE.name: {"fingerprint": _fingerprint(), "services": entries},
    }
    path.write_text(
        json.dumps(
            {"format": FORMAT, "version": VERSION, "saved_at": now, "rules": rules},
            separators=(",", ":"),
        )
    )


def _fingerprint() -> str:
    from monitor.alerts.rule import Rule, fingerprint

    return fingerprint(Rule.of(FLOOD_RULE, "90d", {}))


def _saved_entry(opened: list[list[float]], closed: list[list[float]]) -> dict[str, object]:
    engine = AlertEngine([FLOOD_RULE], create_telemetry(), clock=Clock())
    engine.count_results(Origin("svc-0"), RESULTS, Clock().now)
    (entry,) = engine.snapshot()[FLOOD_RULE.name]["services"]["svc-0"].values()
    return {**entry, "conversations": {"open": opened, "closed": closed}}


# -- a real sidecar in 512 MiB ---------------------------------------------------------


@contextlib.contextmanager
def _memory_cgroup(limit: int) -> Iterator[Path]:
    """A memory cgroup (v1 or v2) of `limit` bytes, its folder; skips where none can be
    made (not root, no memory controller)."""
    v1, v2 = Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup")
    name = f"rag-monitor-test-{os.getpid()}"
    if (v1 / "memory.limit_in_bytes").exists():
        group, limit_file = v1 / name, "memory.limit_in_bytes"
    elif "memory" in (
        (v2 / "cgroup.controllers").read_text() if (v2 / "cgroup.controllers").exists() else ""
    ):
        group, limit_file = v2 / name, "memory.max"
    else:
        pytest.skip("no memory cgroup controller")
    try:
        group.mkdir()
        (group / limit_file).write_text(str(limit))
        if (group / "memory.swappiness").exists():
            (group / "memory.swappiness").write_text("0")
    except OSError as exc:
        pytest.skip(f"cannot make a memory cgroup here: {exc}")
    try:
        yield group
    finally:
        procs = group / "cgroup.procs"
        wait_until(lambda: not procs.read_text().split(), 60, "the cgroup's processes to exit")
        group.rmdir()


def _peak(group: Path) -> int:
    for name in ("memory.max_usage_in_bytes", "memory.peak"):
        if (group / name).exists():
            return int((group / name).read_text())
    return 0


def _oom_kills(group: Path) -> int:
    for name in ("memory.oom_control", "memory.events"):
        path = group / name
        if path.exists():
            for line in path.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    return 0


def _start_in(group: Path, tmp: Path, config: Path) -> tuple[subprocess.Popen[bytes], Path, float]:
    """`rag-monitor run` in `group`, until /readyz answers: the process, its log, and the
    seconds it took (reported, not asserted: the machine's speed decides them)."""
    log = tmp / "monitor.log"
    procs = group / "cgroup.procs"
    started = time.monotonic()
    with log.open("w") as out:
        proc = spawn(
            [sys.executable, "-m", "monitor", "run", "--config", str(config)],
            cwd=REPO,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
            stderr=out,
            preexec_fn=lambda: procs.write_text(str(os.getpid())),
        )

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(
                f"rag-monitor exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            )
        port = monitor_ports(log.read_text(errors="replace")).get("metrics")
        if port is None:
            return False
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as resp:
            return bool(resp.status == 200)

    wait_until(ready, 300, "rag-monitor /readyz", interval_s=0.1, errors=(OSError, ValueError))
    return proc, log, time.monotonic() - started


def _restart_in_512_mib(tmp_path: Path, state_path: Path) -> tuple[str, str]:
    """The log of a sidecar started on `state_path` in 512 MiB, and its /metrics once
    ready."""
    config = tmp_path / "monitor.yaml"
    write_config(
        config,
        {
            "state_file": str(state_path),
            "rules": [FLOOD_RULE.model_dump(exclude_defaults=True)],
        },
    )
    with _memory_cgroup(LIMIT) as group:
        size = state_path.stat().st_size
        proc, log, seconds = _start_in(group, tmp_path, config)
        try:
            port = monitor_ports(log.read_text())["metrics"]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
                metrics = resp.read().decode()
        finally:
            stop_process(proc, 60)
        assert _oom_kills(group) == 0, log.read_text()[-3000:]
        assert proc.returncode == 0, log.read_text()[-3000:]
        peak = _peak(group)
    print(
        f"state file {size:,} bytes: /readyz {seconds:.1f} s after the start, peak {peak:,} bytes"
    )
    return log.read_text(), metrics


@pytest.mark.e2e
def test_a_flood_before_the_budget_restarts_in_512_mib_and_its_file_is_kept(
    tmp_path: Path,
) -> None:
    """The file the engine wrote before the budget (24 services x 20,000 open and 20,000
    closed conversations): too large to load within the limit, moved aside and kept."""
    path = tmp_path / "alerts.state"
    _write_flooded_state(path, per_service=20_000)
    size = path.stat().st_size
    assert size > state.MAX_BYTES
    text, metrics = _restart_in_512_mib(tmp_path, path)
    assert 'rag_monitor_alert_state_loads_total{outcome="too_large"} 1.0' in metrics
    (aside,) = _set_aside(tmp_path)
    assert aside.stat().st_size == size
    assert f"moved to {aside}" in text


@pytest.mark.e2e
async def test_a_flood_at_the_budget_restarts_in_512_mib_with_its_state(tmp_path: Path) -> None:
    """24 services flooded with per-request conversations through the engine until its
    budget evicts: the file it saves loads within the limit, and the restart reaches
    /readyz."""
    path = tmp_path / "alerts.state"
    t, clock = create_telemetry(), Clock()
    clock.now = time.time() - 3_000
    engine = AlertEngine([FLOOD_RULE], t, clock=clock, state_file=StateFile(str(path), t))
    per_service = CONVERSATION_BUDGET // (SERVICES * CLOSED_BYTES) + 1_000
    _flood(engine, clock, per_service)
    assert _evicted(t, "open") + _evicted(t, "closed") > 0
    await engine.shutdown(10)
    _, metrics = _restart_in_512_mib(tmp_path, path)
    assert 'rag_monitor_alert_state_loads_total{outcome="loaded"} 1.0' in metrics
    assert not _set_aside(tmp_path)


async def test_the_state_is_saved_an_entry_at_a_time_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop serves other work between one entry's snapshot and the next, and while
    the file is encoded and written in a thread."""
    path = tmp_path / "alerts.state"
    t, clock = create_telemetry(), Clock()
    engine = AlertEngine([FLOOD_RULE], t, clock=clock, state_file=StateFile(str(path), t))
    _flood(engine, clock, 10, services=40)
    turns = 0
    seen_at: list[int] = []
    state_class = type(next(iter(engine._entries.values())).state)
    snapshot = state_class.snapshot

    def counted(state: object) -> dict[str, object]:
        seen_at.append(turns)
        saved: dict[str, object] = snapshot(state)
        return saved

    monkeypatch.setattr(state_class, "snapshot", counted)

    async def other_work() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(other_work())
    await asyncio.sleep(0)
    await engine.shutdown(10)  # saves the state
    task.cancel()
    assert len(seen_at) == 40
    assert all(b > a for a, b in itertools.pairwise(seen_at))
    assert set(json.loads(path.read_text())["rules"][FLOOD_RULE.name]["services"]) == {
        f"svc-{s}" for s in range(40)
    }
