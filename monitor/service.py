"""Runs the pipeline `monitor.pipeline` builds: starts its components in the order their
needs give (what a component needs starts before it: sinks before the evaluation stage,
the evaluation stage before the trace stage, the trace stage before the receivers, the
metrics port first) and stops them in the reverse order, each within what is left of the
deadline. Stopping upstream first lets each stage drain into consumers still running, so
nothing accepted is dropped by the order of operations.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Sequence

from monitor.component import ResultSink
from monitor.config import Config
from monitor.pipeline import Node, build_pipeline
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)

# Decoding and assembly allocate a few container objects per span or record, so CPython's
# default young-generation threshold (700) runs a collection every ~150 spans: about a
# quarter of the ingest CPU at 50k spans/s (bench/ingest.py). The workload makes almost no
# reference cycles, so the monitor process collects less often.
GC_YOUNG_THRESHOLD = 20_000


def tune_gc() -> None:
    """Collect the young generation less often (the `run` and `replay` processes)."""
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def start_order(nodes: Sequence[Node]) -> list[Node]:
    """Every node after the nodes it needs; otherwise in the order given. Raises
    `ValueError` on a cycle."""
    order: list[Node] = []
    placed: set[int] = set()
    visiting: set[int] = set()

    def place(node: Node) -> None:
        if id(node) in placed:
            return
        if id(node) in visiting:
            raise ValueError(f"the pipeline's needs form a cycle through {node.name}")
        visiting.add(id(node))
        for need in node.needs:
            place(need)
        visiting.discard(id(node))
        placed.add(id(node))
        order.append(node)

    for node in nodes:
        place(node)
    return order


class Service:
    def __init__(
        self,
        config: Config,
        *,
        telemetry: Telemetry | None = None,
        serve_http: bool = True,
        with_receivers: bool = True,
        extra_sinks: Sequence[ResultSink] = (),
        wall_clock: Callable[[], float] = time.time,
        monotonic_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """The clocks (tests inject their own) are `build_pipeline`'s."""
        self.pipeline = build_pipeline(
            config,
            self.ready,
            telemetry=telemetry,
            serve_http=serve_http,
            with_receivers=with_receivers,
            extra_sinks=extra_sinks,
            wall_clock=wall_clock,
            monotonic_clock=monotonic_clock,
        )
        self.config = config
        self.telemetry = self.pipeline.telemetry
        self.trace = self.pipeline.trace
        self.stage = self.pipeline.stage
        self.receivers = self.pipeline.receivers
        self.judge = self.pipeline.judge
        self.results_sink = self.pipeline.results_sink
        self.http = self.pipeline.http
        self._order = start_order(self.pipeline.nodes)
        self._started = False
        self.abandoned = 0

    def reopen_files(self) -> None:
        """Open the results file afresh before its next write (SIGHUP)."""
        if self.results_sink is not None:
            self.results_sink.reopen()
            log.info("results file will be reopened before the next write")

    def ready(self) -> tuple[bool, str]:
        if not self._started or not self.stage.accepting:
            return False, "not started"
        for name, check in self.pipeline.readiness:
            ok, reason = check()
            if not ok:
                return False, f"{name}: {reason}"
        said = [said for notice in self.pipeline.notices if (said := notice())]
        return True, "\n".join(["ready", *said])

    async def start(self) -> None:
        started: list[Node] = []
        try:
            for node in self._order:
                await node.component.start()
                started.append(node)
        except Exception:
            for node in reversed(started):
                await node.component.shutdown(0)
            raise
        self._started = True

    async def shutdown(self, deadline_s: float | None = None) -> None:
        """Stop intake, drain, flush, within `deadline_s` (`pipeline.shutdown_timeout_s`
        unless given; `math.inf` waits for all). `abandoned` then says how many sampled
        traces and records were abandoned at the deadline (a trace counts as one)."""
        deadline = self.config.pipeline.shutdown_timeout_s if deadline_s is None else deadline_s
        started = time.monotonic()
        for node in reversed(self._order):
            try:
                await node.component.shutdown(max(0.0, deadline - (time.monotonic() - started)))
            except Exception:
                log.exception("%s failed to shut down", node.name)
        await self.stage.settle_writes()
        # Items the trace stage could not hand on before the deadline are abandoned too
        # (counted once the evaluation stage stopped accepting them).
        self.abandoned = self.stage.abandoned + self.trace.abandoned
        self._started = False
