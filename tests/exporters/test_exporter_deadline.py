"""Every exporter honours the shutdown deadline whatever its collector does: a running
`rag-monitor run` exporting evaluation events to a collector that accepts connections,
reads what it is sent and never answers exits within `pipeline.shutdown_timeout_s` (and a
second for the process to end) of SIGTERM, its results file whole.

Over HTTP the exporter's blocked export outlived the deadline (issue 51: 8.6 s with a 5 s
deadline, logs). Over gRPC it cannot: the exporter's shutdown closes its channel, which
cancels the call waiting on the collector, so the thread running it ends at once; the
gRPC cases are kept, and the last test pins that reason."""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.reliability import MonitorProcess, Trace, export_request, post, results_lines
from harness.reliability import trace_ids as make_ids
from harness.wait import wait_until
from monitor.exporters.otlp_events import create_exporter

DEADLINE_S = 2.0
# What the process may take to end once the pipeline has stopped (the bound of the
# contract): the loop's closing, the log's flush and the exit itself, with no interpreter
# teardown (`monitor.__main__.cli`), on a machine whose cores are busy.
EXIT_S = 1.0


class StalledCollector:
    """Accepts every connection and reads everything sent on it; never writes a byte."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen()
        self.endpoint = f"127.0.0.1:{self._sock.getsockname()[1]}"
        self.received = 0
        self._lock = threading.Lock()
        self._connections: list[socket.socket] = []
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                if self._closed.is_set():  # accepted while `close` ran: it is not listed
                    conn.close()
                    return
                self._connections.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self.received += len(data)

    def close(self) -> None:
        with self._lock:
            self._closed.set()
        self._sock.close()
        with self._lock:
            for conn in self._connections:
                with contextlib.suppress(OSError):
                    conn.close()


@contextlib.contextmanager
def stalled_collector() -> Iterator[StalledCollector]:
    collector = StalledCollector()
    try:
        yield collector
    finally:
        collector.close()


@pytest.mark.parametrize(
    ("protocol", "signal_kind"),
    [("grpc", "logs"), ("http/protobuf", "logs"), ("http/protobuf", "spans")],
)
def test_a_collector_that_never_answers_holds_no_exit_past_the_deadline(
    tmp_path: Path, protocol: str, signal_kind: str
) -> None:
    with stalled_collector() as collector:
        monitor = MonitorProcess(
            tmp_path,
            {
                "exporters": {
                    "otlp": {
                        "endpoint": collector.endpoint,
                        "protocol": protocol,
                        "signal": signal_kind,
                    }
                },
                "pipeline": {"shutdown_timeout_s": DEADLINE_S, "processes": 0},
            },
        )
        monitor.start()
        try:
            traces = [Trace(trace_id) for trace_id in make_ids(51, 3)]
            assert post(monitor.http_port, export_request(traces)).status == 200
            monitor.wait_for(lambda: len(monitor.results_lines()) == 3, 60, "three results")
            monitor.wait_for(lambda: collector.received > 0, 30, "an export under way")
            assert monitor.proc is not None
            stopped = time.monotonic()
            monitor.proc.send_signal(signal.SIGTERM)
            code = monitor.proc.wait(timeout=60)
            took = time.monotonic() - stopped
        finally:
            monitor.kill()
    assert code == 0, monitor.log()[-3000:]
    assert took <= DEADLINE_S + EXIT_S, (took, monitor.log()[-3000:])
    # Every line whole: a torn last line fails to parse.
    lines = results_lines(monitor.results, writing=False)
    assert {line["trace_id"] for line in lines} == {t.trace_id.hex() for t in traces}
    assert monitor.results.read_text().endswith("\n")


def test_a_grpc_export_on_a_silent_collector_ends_when_its_exporter_shuts_down() -> None:
    """The gRPC log exporter, its own timeout far away, blocked on a collector that never
    answers: `shutdown` from another thread ends the export (the HTTP exporter's
    `shutdown` closes a session, which does not wake a blocked read)."""
    with stalled_collector() as collector:
        exporter = create_exporter(collector.endpoint, "grpc", timeout_s=600, signal="logs")
        export = threading.Thread(target=exporter.export, args=([],), daemon=True)
        export.start()
        # The channel connects at the first call: bytes received mean the call is on.
        wait_until(lambda: collector.received > 0, 30, "the export's first bytes")
        assert export.is_alive()
        exporter.shutdown()
        export.join(30)
        assert not export.is_alive()
