"""The stages between receivers and outputs: `trace_assembly`, `record_limits`,
`sampling`, `budget` and `pipeline` (the evaluation stage and its worker processes)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import Field, field_validator, model_validator

from monitor.config._fields import Rate, Seconds, Section, at_least

_NO_ASSEMBLY_QUEUE = (
    "removed: the trace stage assembles each delivery in the call that hands it in, so "
    "nothing waits for assembly; what waits for evaluation is bounded by pipeline.queue_size "
    "and pipeline.queue_bytes, and receivers are refused while it is full"
)


class TraceAssembly(Section):
    idle_timeout_s: Annotated[Seconds, at_least(0.1, "open traces are checked this often")] = 10.0
    max_open_traces: int = Field(default=10_000, gt=0)
    # Spans of open traces, in (approximate) bytes; beyond it the oldest are released.
    max_open_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    # How long a whole trace of a service that sends GenAI log events waits for them (the
    # SDK's log and span batch processors export independently, 5 s apart at most).
    log_events_wait_s: Seconds = Field(default=5.0, ge=0)
    # How long a whole trace waits for spans that end after its root (callbacks that trace
    # a model call once the request returned; the next export batch, 5 s later at most).
    late_spans_wait_s: Seconds = Field(default=6.0, ge=0)
    # How long a trace may wait past the idle timeout while one of its model calls is still
    # open (its input log events came, its span has not).
    open_calls_wait_s: Seconds = Field(default=300.0, ge=0)
    # How long a trace may wait past the idle timeout while a span its spans name as parent
    # has not come (a step still running: a slow model call under its request span).
    missing_parent_wait_s: Seconds = Field(default=120.0, ge=0)

    _removed: ClassVar[Mapping[str, str]] = {
        "queue_size": _NO_ASSEMBLY_QUEUE,
        "queue_bytes": _NO_ASSEMBLY_QUEUE,
    }


class SamplingOverride(Section):
    service: str | None = None
    route: str | None = None
    rate: Rate

    @model_validator(mode="after")
    def _matches_something(self) -> SamplingOverride:
        if self.service is None and self.route is None:
            raise ValueError("service: an override needs a service, a route, or both")
        return self


class AlwaysSample(Section):
    negative_feedback: bool = True
    error: bool = True


class Sampling(Section):
    rate: Rate = 1.0
    overrides: list[SamplingOverride] = []
    always: AlwaysSample = AlwaysSample()


class Budget(Section):
    max_evaluations_per_minute: int | None = Field(default=None, gt=0)
    max_judge_tokens_per_hour: int | None = Field(default=None, gt=0)
    max_judge_cost_usd_per_day: float | None = Field(default=None, gt=0)
    # Local evaluations a minute beyond which a boost adds none (the base sample's always
    # run): what a boost may add to the monitor's CPU (docs/contract.md).
    max_local_evaluations_per_minute: int | None = Field(default=6_000, gt=0)


def available_cpus() -> int:
    """CPUs this process may use: its affinity mask, bounded by a cgroup v2 CPU quota
    (`cpu.max`, rounded up), at least 1."""
    cpus = len(os.sched_getaffinity(0))
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, -(-int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return max(1, cpus)


class Pipeline(Section):
    # Worker processes for the CPU evaluators (0: score them in this process); each holds
    # the detector's tables, so more than the CPUs costs memory and gains nothing.
    processes: int = Field(default_factory=available_cpus, ge=0)
    queue_size: int = Field(default=1_000, gt=0)
    # Estimated bytes of the records waiting for or in evaluation (their text and a share
    # per document and history turn; a trace not yet extracted: its spans).
    queue_bytes: int = Field(default=32 * 1024 * 1024, gt=0)
    # Each worker is a task holding a batch in work; more than a thousand gain nothing.
    workers: int = Field(default=4, gt=0, le=1024)
    evaluation_timeout_s: Annotated[
        Seconds, at_least(1.0, "a local scoring batch or a judge call needs longer")
    ] = 60.0
    # One sampled trace's extraction budget (a worker sets a trace past it aside); a
    # batch's deadline adds it for each trace its task extracts.
    extraction_timeout_s: Annotated[
        Seconds, at_least(1.0, "extracting a batch of large traces needs longer")
    ] = 10.0
    shutdown_timeout_s: Seconds = Field(default=20.0, ge=0)
    # Evaluate records whose extraction looks wrong (`extraction_suspect`) like any other.
    evaluate_suspect_records: bool = False
    max_services: int = Field(default=50, gt=0)
    max_routes: int = Field(default=100, gt=0)
    max_versions: int = Field(default=20, gt=0)
    # Values that always keep their own series, outside the caps above.
    allowed_services: list[str] = Field(default_factory=list)
    allowed_routes: list[str] = Field(default_factory=list)
    allowed_versions: list[str] = Field(default_factory=list)
    # A capped value idle this long gives its slot to a new value when all are taken.
    label_idle_s: Annotated[
        Seconds, at_least(1.0, "a shorter idle time lets invented values evict real ones")
    ] = 600.0

    @field_validator("processes")
    @classmethod
    def _within_cpus(cls, processes: int) -> int:
        cpus = available_cpus()
        if processes > cpus:
            raise ValueError(
                f"{processes} worker processes on {cpus} CPUs: each holds its own copy of the "
                f"detector's tables and more than the CPUs add memory, not speed; use at most "
                f"{cpus} (or leave the key out)"
            )
        return processes


class RecordLimits(Section):
    """Largest texts a record takes into evaluation, in characters, and most documents
    (`monitor.records.limits.SizeLimits`): query, history turns and documents over them are
    truncated with a marker, documents past the context total or past `max_documents`
    dropped, a record whose response is over its limit rejected
    (`records_rejected_total{reason="response_too_large"}`); a service, version or route
    longer than `label_chars` is cut to a prefix and a hash of the whole."""

    query_chars: int = Field(default=65_536, gt=0)
    document_chars: int = Field(default=262_144, gt=0)
    context_chars: int = Field(default=2_097_152, gt=0)
    response_chars: int = Field(default=262_144, gt=0)
    max_documents: int = Field(default=1_000, gt=0)
    # Also the longest label value of any series (`pipeline.max_services` bounds how many).
    label_chars: int = Field(default=128, ge=32)
