"""Configuration: one YAML file, `${env:VAR}` references, `RAG_MONITOR_<SECTION>__<KEY>`
environment overrides.

A leaf module: it imports nothing of the pipeline. What only a component can judge — an
evaluator name, a judge's prompt, a threshold on a judge's native scale — is checked by that
component's registry after loading (`monitor.evaluators.check_evaluators`, which `Service`
and `check-config` call).

The YAML is read with libyaml's safe loader where installed; duplicate keys, and aliases
that would expand past `MAX_ALIAS_EXPANSION` values, are refused before anything is built.
Unknown keys are rejected and every problem is reported as `path.to.key: what is wrong`
(`ConfigError.problems`). Defaults live in the models; rules that span several fields are
model validators. An empty file (or none) gives the embedded defaults: OTLP on loopback,
metrics on 0.0.0.0:9464, local evaluators only, every trace sampled.

The forms an OpenTelemetry Collector user writes are accepted as they are: the OTLP
receiver's `protocols: {grpc: ..., http: ...}`, Go durations (`1h30m`, `500ms`) and
`${env:VAR}` / `${env:VAR:-default}` references in values.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

ENV_PREFIX = "RAG_MONITOR_"
DEFAULT_LOCAL_EVALUATORS = (
    "local_groundedness",
    "local_relevance",
    "local_retrieval",
    "local_safety",
)
MASK = "<masked>"


# Harm severity buckets, lowest first (DESIGN.md, safety evaluators).
Severity = Literal["very_low", "low", "medium", "high"]


class ConfigError(Exception):
    """A config that cannot be used; `problems` holds one `path: message` line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# -- durations ---------------------------------------------------------------------------

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
_DURATION_PART = r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d)"
_DURATION = re.compile(f"(?:{_DURATION_PART})+")


def parse_duration(value: str) -> float:
    """A Go duration (`1h30m`, `500ms`, `2.5s`, also `1d`) → seconds; `0` is zero."""
    text = value.strip()
    if text == "0":
        return 0.0
    if not _DURATION.fullmatch(text):
        raise ValueError("expected a duration such as 30s, 1h30m, 500ms")
    return sum(float(n) * _UNITS[unit] for n, unit in re.findall(_DURATION_PART, text))


def _seconds(value: Any) -> Any:
    """A plain number of seconds, or a Go duration string."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return parse_duration(value)
    return value


def _milliseconds(value: Any) -> Any:
    """A plain number of milliseconds, or a Go duration string."""
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            seconds = parse_duration(value)
            millis = seconds * 1000
            if millis != int(millis):
                raise ValueError("expected whole milliseconds") from None
            return int(millis)
    return value


# `*_s` keys: a number of seconds or a Go duration (`1m30s`); `*_ms` keys likewise in ms.
Seconds = Annotated[float, BeforeValidator(_seconds)]
Millis = Annotated[int, BeforeValidator(_milliseconds)]


def _positive_duration(value: str) -> str:
    if parse_duration(value) <= 0:
        raise ValueError("must be longer than zero")
    return value


# A duration kept as written (shown in alerts and `check-config`); `parse_duration` reads it.
Duration = Annotated[str, BeforeValidator(lambda v: _positive_duration(str(v)))]


# -- secrets -----------------------------------------------------------------------------


class _SecretMarker:
    """Field metadata: `check-config` prints the value masked."""


SECRET = _SecretMarker()


def _endpoint(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError("expected host:port")
    if not 0 <= int(port) <= 65535:
        raise ValueError(f"port {port} is outside 0..65535")
    return value


Endpoint = Annotated[str, BeforeValidator(lambda v: _endpoint(str(v)))]


# -- receivers ---------------------------------------------------------------------------


class GrpcReceiver(_Section):
    enabled: bool = True
    endpoint: Endpoint = "127.0.0.1:4317"


class HttpReceiver(_Section):
    enabled: bool = True
    endpoint: Endpoint = "127.0.0.1:4318"
    # A request's headers must arrive whole this long after its first byte, and its
    # body after its headers; slower clients are cut off (slow-loris senders).
    read_header_timeout_s: Seconds = Field(default=10.0, gt=0)
    read_timeout_s: Seconds = Field(default=30.0, gt=0)
    # Keep-alive connections idle this long are closed; at most max_connections open.
    idle_timeout_s: Seconds = Field(default=60.0, gt=0)
    max_connections: int = Field(default=1_000, gt=0)


def _readable_file(value: Any) -> Any:
    if isinstance(value, str) and not Path(value).is_file():
        raise ValueError(f"no such file: {value}")
    return value


ReadableFile = Annotated[str, BeforeValidator(_readable_file)]


class ReceiverTls(_Section):
    """TLS for both OTLP receivers; with `client_ca_file`, clients must present a
    certificate signed by that CA (mutual TLS)."""

    cert_file: ReadableFile
    key_file: ReadableFile
    client_ca_file: ReadableFile | None = None


_OTLP_PROTOCOLS = ("grpc", "http")


class OtlpReceiver(_Section):
    grpc: GrpcReceiver = GrpcReceiver()
    http: HttpReceiver = HttpReceiver()
    tls: ReceiverTls | None = None
    # Senders must present `Authorization: Bearer <token>`. The token is read from the
    # environment variable named by `auth_token_env` (filled in here at load time); a token
    # written literally into the config file is refused by `load_config`.
    auth_token: Annotated[str | None, SECRET] = None
    auth_token_env: str | None = None
    max_request_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    # Older spelling of trace_assembly.queue_size (that queue now serves every receiver).
    queue_size: int | None = Field(default=None, gt=0)
    route_attribute: str = "http.route"

    @model_validator(mode="before")
    @classmethod
    def _collector_protocols(cls, data: Any) -> Any:
        """`protocols: {grpc: {...}, http: {...}}`, as the Collector's OTLP receiver is
        written: a protocol listed is enabled, one left out is disabled."""
        if not isinstance(data, dict) or "protocols" not in data:
            return data
        both = [p for p in _OTLP_PROTOCOLS if p in data]
        if both:
            raise ValueError(
                f"protocols: give the receivers either as protocols.grpc / protocols.http "
                f"(Collector style) or as grpc / http, not both (found {', '.join(both)})"
            )
        protocols = data["protocols"]
        if not isinstance(protocols, dict) or not protocols:
            raise ValueError("protocols: expected a mapping with grpc, http or both")
        for name in protocols:
            if name not in _OTLP_PROTOCOLS:
                raise ValueError(f"protocols.{name}: unknown protocol (grpc, http)")
        out = {k: v for k, v in data.items() if k != "protocols"}
        for name in _OTLP_PROTOCOLS:
            if name not in protocols:
                out[name] = {"enabled": False}
                continue
            settings = protocols[name]
            if settings is None:  # `grpc:` with nothing under it: enabled, defaults
                settings = {}
            if not isinstance(settings, dict):
                raise ValueError(f"protocols.{name}: expected a mapping (e.g. endpoint)")
            out[name] = {"enabled": True, **settings}
        return out

    @model_validator(mode="before")
    @classmethod
    def _token_from_env(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict) or data.get("auth_token_env") is None:
            return data
        variable = data["auth_token_env"]
        if data.get("auth_token") is not None:
            raise ValueError("auth_token: give auth_token_env or auth_token, not both")
        environ = _environ(info)
        if not isinstance(variable, str) or variable not in environ:
            raise ValueError(f"auth_token_env: environment variable {variable} is not set")
        return {**data, "auth_token": environ[variable]}

    @field_validator("auth_token")
    @classmethod
    def _usable_token(cls, value: str | None) -> str | None:
        if value is not None and (not value or value != value.strip() or " " in value):
            raise ValueError("must be a non-empty token without spaces")
        return value


def _environ(info: ValidationInfo) -> Mapping[str, str]:
    context = info.context or {}
    environ: Mapping[str, str] = context.get("environ", os.environ)
    return environ


class KafkaReceiver(_Section):
    enabled: bool = False
    bootstrap_servers: list[str] = []
    topics: list[str] = ["otlp_spans"]
    group_id: str = "rag-monitor"
    # Static membership (Kafka group.instance.id, e.g. the pod name): a replica that
    # restarts within session_timeout_ms gets its partitions back without a rebalance.
    group_instance_id: str | None = None
    encoding: Literal["auto", "json", "otlp_proto", "otlp_json"] = "auto"
    dead_letter_topic: str | None = None
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password_env: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    session_timeout_ms: Millis = Field(default=10_000, gt=0)
    heartbeat_interval_ms: Millis = Field(default=3_000, gt=0)
    # Also the rebalance timeout a group join may wait for members: the consumer thread
    # polls continuously (it pauses partitions, never stops polling), so it can be short.
    max_poll_interval_ms: Millis = Field(default=30_000, gt=0)
    max_poll_records: int = Field(default=500, gt=0)
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    # The consumer's fetch limit and what the dead-letter producer may write back: a
    # message the broker accepted (up to this size) can be dead-lettered whole.
    max_message_bytes: int = Field(default=64 * 1024 * 1024, gt=0)

    @model_validator(mode="after")
    def _servers_when_enabled(self) -> KafkaReceiver:
        if self.max_poll_interval_ms < self.session_timeout_ms:
            raise ValueError("max_poll_interval_ms: must be at least session_timeout_ms")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms: must be shorter than session_timeout_ms")
        if self.enabled and not self.bootstrap_servers:
            raise ValueError("bootstrap_servers: required when kafka.enabled is true")
        return self


class Receivers(_Section):
    otlp: OtlpReceiver = OtlpReceiver()
    kafka: KafkaReceiver = KafkaReceiver()


class TraceAssembly(_Section):
    idle_timeout_s: Seconds = Field(default=10.0, gt=0)
    max_open_traces: int = Field(default=10_000, gt=0)
    # Spans of open traces, in (approximate) bytes; beyond it the oldest are released.
    max_open_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    # Spans and records waiting for assembly, from every receiver; full → receivers
    # push back (retryable status, paused Kafka partitions).
    queue_size: int = Field(default=10_000, gt=0)
    queue_bytes: int = Field(default=32 * 1024 * 1024, gt=0)
    # How long a whole trace of a service that sends GenAI log events waits for them (the
    # SDK's log and span batch processors export independently, 5 s apart at most).
    log_events_wait_s: Seconds = Field(default=5.0, ge=0)


# -- sampling, budgets, judge ------------------------------------------------------------

Rate = Annotated[float, Field(ge=0, le=1)]


class SamplingOverride(_Section):
    service: str | None = None
    route: str | None = None
    rate: Rate

    @model_validator(mode="after")
    def _matches_something(self) -> SamplingOverride:
        if self.service is None and self.route is None:
            raise ValueError("service: an override needs a service, a route, or both")
        return self


class AlwaysSample(_Section):
    negative_feedback: bool = True
    error: bool = True


class Sampling(_Section):
    rate: Rate = 1.0
    overrides: list[SamplingOverride] = []
    always: AlwaysSample = AlwaysSample()


class Budget(_Section):
    max_evaluations_per_minute: int | None = Field(default=None, gt=0)
    max_judge_tokens_per_hour: int | None = Field(default=None, gt=0)
    max_judge_cost_usd_per_day: float | None = Field(default=None, gt=0)


class Judge(_Section):
    model: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    timeout_s: Seconds = Field(default=30.0, gt=0)
    max_concurrency: int = Field(default=8, gt=0)
    retries: int = Field(default=3, ge=0)
    cache_size: int = Field(default=10_000, ge=0)
    # Consecutive failed attempts that open a model's circuit breaker, and how long it stays open.
    breaker_failures: int = Field(default=5, gt=0)
    breaker_cooldown_s: Seconds = Field(default=30.0, gt=0)
    # Retry backoff: base · 2^attempt with full jitter, capped (a Retry-After header wins).
    backoff_base_s: Seconds = Field(default=0.5, gt=0)
    backoff_max_s: Seconds = Field(default=20.0, gt=0)
    # USD per 1M tokens, for models litellm has no price for.
    prices: dict[str, dict[Literal["input", "output"], Annotated[float, Field(ge=0)]]] = {}
    # Ask for answers as JSON against each judge's schema (`response_format`): `auto` when
    # litellm knows the model supports it, `on` for servers it cannot know (vLLM,
    # llama.cpp, Ollama, ...), `off` to always ask for the free-form format.
    structured_output: Literal["auto", "on", "off"] = "auto"
    # Upper bound on every judge's answer length (each judge has its own default).
    max_output_tokens: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _backoff_order(self) -> Judge:
        if self.backoff_base_s > self.backoff_max_s:
            raise ValueError("backoff_base_s: must not exceed backoff_max_s")
        return self


RedactionKind = Literal["iban", "card", "ssn", "email", "ipv6", "ipv4", "phone"]


class Redaction(_Section):
    enabled: bool = False
    # Built-in detectors to run (monitor/judge/redaction.py); default all.
    detectors: list[RedactionKind] = ["iban", "card", "ssn", "email", "ipv6", "ipv4", "phone"]
    # Region whose national format phone numbers without a +country prefix are read in.
    phone_region: str = "US"
    patterns: list[str] = []

    @field_validator("phone_region")
    @classmethod
    def _known_region(cls, region: str) -> str:
        import phonenumbers  # only when a config is validated: importing config stays cheap

        if region not in phonenumbers.SUPPORTED_REGIONS:
            raise ValueError(
                f"{region!r} is not a region code phonenumbers knows (e.g. US, GB, DE)"
            )
        return region

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for i, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {i} is not a valid regex: {exc}") from None
        return patterns


# -- trustworthiness_tlm: observed consistency + self-reflection (monitor/judge/README.md) ---

TlmPreset = Literal["low", "medium", "high"]
# samples, reflection on, reflection wordings; temperature and weights are the same for all.
TLM_PRESETS: dict[str, tuple[int, bool, int]] = {
    "low": (3, False, 1),
    "medium": (5, True, 1),
    "high": (8, True, 2),
}


class TlmWeights(_Section):
    # The method's weights (BSDetector: 0.7 consistency, 0.3 self-reflection).
    consistency: float = Field(default=0.7, ge=0)
    reflection: float = Field(default=0.3, ge=0)

    @model_validator(mode="after")
    def _some_weight(self) -> TlmWeights:
        if self.consistency + self.reflection <= 0:
            raise ValueError("weights: at least one must be above 0")
        return self


class TrustworthinessTlm(_Section):
    """`evaluators[].tlm`: options of the `trustworthiness_tlm` evaluator. Unset keys come
    from `preset`."""

    preset: TlmPreset = "medium"
    samples: int | None = Field(default=None, ge=1, le=20)
    temperature: float = Field(default=1.0, gt=0, le=2)
    reflection: bool | None = None
    reflection_wordings: int | None = Field(default=None, ge=1, le=2)
    weights: TlmWeights = TlmWeights()
    # How a sampled answer's agreement with the response is measured: the embedded
    # detector both ways (no network call) or one more judge call per sample.
    agreement: Literal["detector", "judge"] = "detector"
    # Ask for token log-probabilities to sharpen the reflection grade (used where returned).
    logprobs: bool = True

    @property
    def sample_count(self) -> int:
        return self.samples if self.samples is not None else TLM_PRESETS[self.preset][0]

    @property
    def reflections(self) -> int:
        """Reflection calls per record (0 when reflection is off)."""
        _, on, wordings = TLM_PRESETS[self.preset]
        if not (self.reflection if self.reflection is not None else on):
            return 0
        return self.reflection_wordings or wordings

    @model_validator(mode="after")
    def _reflection_weighted(self) -> TrustworthinessTlm:
        if self.reflections and self.weights.reflection == 0:
            raise ValueError(
                "weights.reflection: 0 while reflection is on (its calls would count for "
                "nothing); set reflection: false"
            )
        if self.reflections == 0 and self.weights.consistency == 0:
            raise ValueError("weights.consistency: must be above 0 when reflection is off")
        if self.reflection is False and self.reflection_wordings is not None:
            raise ValueError("reflection_wordings: set, but reflection is off")
        return self


class EvaluatorConfig(_Section):
    name: str
    sample_rate: Rate | None = None
    # On the evaluator's native scale; the evaluator registry checks the range.
    threshold: float | None = None
    severity_threshold: Severity | None = None
    model: str | None = None
    prompt: str | None = None
    # Tiered scoring: run only where `escalate_from`'s normalised score is inside `band`.
    escalate_from: str | None = None
    band: tuple[Rate, Rate] | None = None
    rubric: str | None = None
    # Judge endpoint for this evaluator's model (default `judge.api_base`).
    api_base: str | None = None
    # Options of `trustworthiness_tlm` (the registry rejects them on other evaluators).
    tlm: TrustworthinessTlm | None = None

    @model_validator(mode="after")
    def _band_order(self) -> EvaluatorConfig:
        if self.band is not None and self.band[0] > self.band[1]:
            raise ValueError("band: the lower bound comes first")
        return self


# -- alerts, exporters, pipeline ---------------------------------------------------------


class AlertBaseline(_Section):
    """A regression rule's reference: the trailing `window` before the current one."""

    window: Duration = "24h"
    min_samples: int = Field(default=500, gt=0)


# Regression-rule defaults, from bench/alert_regression.py (see monitor/alerts/README.md).
REGRESSION_CONFIDENCE = 0.99999
REGRESSION_MIN_INCREASE = 0.03
REGRESSION_WINDOW = "30m"
REGRESSION_MIN_SAMPLES = 100


class AlertRule(_Section):
    name: str
    evaluator: str | None = None
    category: str | None = None
    # Exactly one form: an absolute `max_defect_rate`, or a `baseline` to regress against.
    max_defect_rate: Rate | None = None
    baseline: AlertBaseline | None = None
    min_increase: float | None = Field(default=None, gt=0, lt=1)
    window: Duration = "10m"
    min_samples: int = Field(default=30, gt=0)
    confidence: float = Field(default=0.95, gt=0, lt=1)
    severity: str = "warning"

    @model_validator(mode="before")
    @classmethod
    def _regression_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("baseline") is not None:
            data = {
                "window": REGRESSION_WINDOW,
                "min_samples": REGRESSION_MIN_SAMPLES,
                "confidence": REGRESSION_CONFIDENCE,
                "min_increase": REGRESSION_MIN_INCREASE,
                **data,
            }
        return data

    @model_validator(mode="after")
    def _one_source(self) -> AlertRule:
        if (self.evaluator is None) == (self.category is None):
            raise ValueError("evaluator: exactly one of evaluator or category is required")
        if (self.max_defect_rate is None) == (self.baseline is None):
            raise ValueError("max_defect_rate: exactly one of max_defect_rate or baseline")
        if self.baseline is None and self.min_increase is not None:
            raise ValueError("min_increase: only a rule with a baseline takes min_increase")
        if self.baseline is not None and parse_duration(self.baseline.window) <= parse_duration(
            self.window
        ):
            raise ValueError(
                f"baseline.window: {self.baseline.window} must be longer than window {self.window}"
            )
        return self


class Alertmanager(_Section):
    url: str | None = None


class Webhook(_Section):
    url: str
    headers: Annotated[dict[str, str], SECRET] = {}


class Alerts(_Section):
    rules: list[AlertRule] = []
    alertmanager: Alertmanager = Alertmanager()
    webhooks: list[Webhook] = []
    evaluation_interval_s: Seconds = Field(default=15.0, gt=0)
    # Where the rules' windows and firing states are kept across restarts (none: in memory).
    state_file: str | None = None


class PrometheusExporter(_Section):
    endpoint: Endpoint = "0.0.0.0:9464"
    # TLS and basic auth for the metrics port, in the Prometheus exporter-toolkit format
    # (`WebConfig`); re-read when it or a file it names changes.
    web_config_file: str | None = None
    # Serve /debug/records: the last N records extracted and the last N traces that gave
    # none, with the reason (0 = off: the page shows user text, redacted).
    debug_records: int = Field(default=0, ge=0, le=10_000)

    @field_validator("web_config_file")
    @classmethod
    def _web_config_loads(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                load_web_config(value)
            except ConfigError as exc:
                raise ValueError(f"in {value}: " + "; ".join(exc.problems)) from None
        return value


class OtlpExporter(_Section):
    endpoint: str | None = None
    protocol: Literal["grpc", "http/protobuf"] = "grpc"


class Exporters(_Section):
    prometheus: PrometheusExporter = PrometheusExporter()
    otlp: OtlpExporter = OtlpExporter()
    results_file: str | None = None
    # Add what was extracted (query, history, context documents, response), redacted as
    # `redaction` says, to each results line under "extracted".
    results_include_text: bool = False


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


class Pipeline(_Section):
    # Worker processes for the CPU evaluators (0: score them in this process).
    processes: int = Field(default_factory=available_cpus, ge=0, le=256)
    queue_size: int = Field(default=1_000, gt=0)
    # Text of the records waiting for evaluation (query, context, response), in bytes.
    queue_bytes: int = Field(default=32 * 1024 * 1024, gt=0)
    workers: int = Field(default=4, gt=0)
    evaluation_timeout_s: Seconds = Field(default=60.0, gt=0)
    shutdown_timeout_s: Seconds = Field(default=20.0, ge=0)
    max_services: int = Field(default=50, gt=0)
    max_routes: int = Field(default=100, gt=0)


class RecordLimits(_Section):
    """Largest texts a record takes into evaluation, in characters (`monitor.records.
    SizeLimits`): query, history turns and documents over them are truncated with a
    marker, documents past the context total dropped, a record whose response is over
    its limit rejected (`records_rejected_total{reason="response_too_large"}`)."""

    query_chars: int = Field(default=65_536, gt=0)
    document_chars: int = Field(default=262_144, gt=0)
    context_chars: int = Field(default=2_097_152, gt=0)
    response_chars: int = Field(default=262_144, gt=0)


class Config(_Section):
    receivers: Receivers = Receivers()
    trace_assembly: TraceAssembly = TraceAssembly()
    record_limits: RecordLimits = RecordLimits()
    sampling: Sampling = Sampling()
    budget: Budget = Budget()
    judge: Judge = Judge()
    redaction: Redaction = Redaction()
    evaluators: list[EvaluatorConfig] = [EvaluatorConfig(name=n) for n in DEFAULT_LOCAL_EVALUATORS]
    alerts: Alerts = Alerts()
    exporters: Exporters = Exporters()
    pipeline: Pipeline = Pipeline()

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        """`receivers.otlp.queue_size` sets `trace_assembly.queue_size` unless that is set."""
        if not isinstance(data, dict):
            return data
        receivers = data.get("receivers")
        otlp = receivers.get("otlp") if isinstance(receivers, dict) else None
        legacy = otlp.get("queue_size") if isinstance(otlp, dict) else None
        assembly = data.get("trace_assembly")
        if legacy is not None and (assembly is None or isinstance(assembly, dict)):
            merged = dict(assembly or {})
            merged.setdefault("queue_size", legacy)
            data = {**data, "trace_assembly": merged}
        return data

    @model_validator(mode="after")
    def _cross_checks(self) -> Config:
        names = [e.name for e in self.evaluators]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"evaluators: listed twice: {', '.join(duplicates)}")
        for i, rule in enumerate(self.alerts.rules):
            if rule.evaluator is not None and rule.evaluator not in names:
                raise ValueError(
                    f"alerts.rules.{i}.evaluator: {rule.evaluator!r} is not configured"
                )
        for i, spec in enumerate(self.evaluators):
            if spec.escalate_from is not None and spec.escalate_from not in names:
                raise ValueError(
                    f"evaluators.{i}.escalate_from: {spec.escalate_from!r} is not configured"
                )
        return self


# -- the metrics port's web config (Prometheus exporter-toolkit format) ------------------

ClientAuthType = Literal["NoClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"]
TlsVersion = Literal["TLS12", "TLS13"]
# Keys of the exporter-toolkit format this server does not implement: named as such
# rather than as unknown, so a file shared with other exporters gets a precise message.
_TOOLKIT_ONLY = {
    "tls_server_config": {
        "cert",
        "key",
        "client_ca",
        "client_allowed_sans",
        "cipher_suites",
        "prefer_server_cipher_suites",
        "curve_preferences",
    },
    "": {"http_server_config", "rate_limit"},
}
_BCRYPT = re.compile(r"\$2[abxy]?\$(\d\d)\$[./A-Za-z0-9]{53}")


def _toolkit_only(data: Any, section: str) -> Any:
    if isinstance(data, dict):
        for key in data:
            if key in _TOOLKIT_ONLY[section]:
                raise ValueError(
                    f"{key}: part of the Prometheus exporter-toolkit format that rag-monitor "
                    "does not implement"
                )
    return data


class WebTls(_Section):
    cert_file: ReadableFile
    key_file: ReadableFile
    client_ca_file: ReadableFile | None = None
    client_auth_type: ClientAuthType = "NoClientCert"
    min_version: TlsVersion = "TLS12"
    max_version: TlsVersion = "TLS13"

    @model_validator(mode="before")
    @classmethod
    def _supported(cls, data: Any) -> Any:
        data = _toolkit_only(data, "tls_server_config")
        if isinstance(data, dict) and data.get("client_auth_type") in (
            "RequestClientCert",
            "RequireAnyClientCert",
        ):
            raise ValueError(
                "client_auth_type: a client certificate that is not verified proves nothing; "
                "use VerifyClientCertIfGiven or RequireAndVerifyClientCert"
            )
        return data

    @model_validator(mode="after")
    def _consistent(self) -> WebTls:
        verifies = self.client_auth_type != "NoClientCert"
        if verifies and self.client_ca_file is None:
            raise ValueError(
                f"client_ca_file: required with client_auth_type {self.client_auth_type}"
            )
        if not verifies and self.client_ca_file is not None:
            raise ValueError(
                "client_auth_type: client_ca_file is set but client certificates are not "
                "asked for (NoClientCert); use RequireAndVerifyClientCert"
            )
        if self.min_version > self.max_version:
            raise ValueError("min_version: must not be above max_version")
        return self


class WebConfig(_Section):
    """The metrics port's TLS and basic-auth users (the exporter-toolkit web config)."""

    tls_server_config: WebTls | None = None
    # user → bcrypt hash of the password (`htpasswd -nBC 10 "" | tr -d ':\\n'`).
    basic_auth_users: dict[str, str] = {}

    @model_validator(mode="before")
    @classmethod
    def _supported(cls, data: Any) -> Any:
        return _toolkit_only(data, "")

    @field_validator("basic_auth_users")
    @classmethod
    def _bcrypt_hashes(cls, users: dict[str, str]) -> dict[str, str]:
        for user, hashed in users.items():
            if not user or ":" in user:
                raise ValueError(f"{user!r}: a user name is non-empty and has no ':'")
            match = _BCRYPT.fullmatch(hashed or "")
            if match is None or not 4 <= int(match.group(1)) <= 31:
                raise ValueError(
                    f"{user}: expected a bcrypt hash such as $2y$10$... (60 characters)"
                )
        return users


def load_web_config(path: str | Path) -> WebConfig:
    """Read and check a web config file. Raises `ConfigError` (`key: problem` lines)."""
    data = _read_yaml(Path(path))
    try:
        return WebConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format(exc)) from None


# -- loading -----------------------------------------------------------------------------

_SECTIONS = frozenset(Config.model_fields)
_ENV_REF = re.compile(r"\$(\$?)\{([^{}]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PROVIDER = re.compile(r"[a-z][a-z0-9]*:")


# What aliases may add to a file's values in all: far above any config written by hand with
# anchors, far below what stalls loading (nine levels of ten aliases are 10**9 values).
MAX_ALIAS_EXPANSION = 100_000
_MERGE_TAG = "tag:yaml.org,2002:merge"
MAX_DEPTH = 500  # nested mappings and lists; a config needs a handful
_OPENING = frozenset({yaml.MappingStartEvent, yaml.SequenceStartEvent})
_CLOSING = frozenset({yaml.MappingEndEvent, yaml.SequenceEndEvent})
_YamlLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_YamlDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _ConfigLoader(_YamlLoader):  # type: ignore[misc,valid-type]
    """libyaml's safe loader where installed; before anything is built from a document,
    its node graph is checked for duplicate keys and for aliases that expand too far."""

    def construct_document(self, node: yaml.Node) -> Any:
        _check_nodes(node)
        return super().construct_document(node)


def _check_nodes(root: yaml.Node) -> None:
    """Every distinct node is visited once (an alias is the same node object again):
    duplicate keys are named, and the values aliases would add are counted."""
    expanded: dict[int, int] = {}  # node id → values it stands for, aliases expanded
    visiting: set[int] = set()

    def size(node: yaml.Node, path: str) -> int:
        key = id(node)
        if key in expanded:
            return expanded[key]
        if key in visiting:
            raise ConfigError([f"{path or '(top level)'}: a YAML alias refers to itself"])
        visiting.add(key)
        total = 1
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key_node, value_node in node.value:
                name = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                if name is not None and key_node.tag != _MERGE_TAG:
                    line = key_node.start_mark.line + 1
                    seen = first.get((key_node.tag, name))
                    if seen is not None:
                        where = f" in {path}" if path else ""
                        raise ConfigError(
                            [f"line {line}: duplicate key {name!r}{where} (first on line {seen})"]
                        )
                    first[(key_node.tag, name)] = line
                child = f"{path}.{name}" if path else str(name)
                total += size(key_node, path) + size(value_node, child)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                total += size(item, f"{path}.{index}" if path else str(index))
        visiting.discard(key)
        expanded[key] = total
        return total

    added = size(root, "") - len(expanded)
    if added > MAX_ALIAS_EXPANSION:
        raise ConfigError(
            [
                f"file: YAML aliases expand to {added} more values, over the limit of "
                f"{MAX_ALIAS_EXPANSION} (an alias bomb?); write the values out or use fewer aliases"
            ]
        )


def load_yaml(text: str) -> Any:
    """One YAML document, loaded safely; `ConfigError` for duplicate keys, alias bombs and
    nesting past `MAX_DEPTH`."""
    _check_depth(text)
    return yaml.load(text, Loader=_ConfigLoader)  # a SafeLoader subclass


def _check_depth(text: str) -> None:
    """libyaml builds nodes recursively in C, where nesting deep enough overflows the
    stack (a crash, not an exception): the events are counted first, which is flat."""
    depth = 0
    for event in yaml.parse(text, Loader=_YamlLoader):
        kind = type(event)
        if kind in _OPENING:
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigError(["file: invalid YAML: nested too deeply"])
        elif kind in _CLOSING:
            depth -= 1


def dump_yaml(data: Any) -> str:
    """Plain data as YAML, keys in their order (libyaml's dumper where installed)."""
    return yaml.dump(data, Dumper=_YamlDumper, sort_keys=False, allow_unicode=True)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read: {exc.strerror}"]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not UTF-8 text (byte {exc.start})"]) from None
    try:
        data = load_yaml(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "file"
        raise ConfigError([f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}"]) from None
    except RecursionError:
        raise ConfigError(["file: invalid YAML: nested too deeply"]) from None
    except ValueError as exc:  # e.g. an integer over Python's 4300-digit limit
        raise ConfigError([f"file: invalid YAML: {exc}"]) from None
    if not isinstance(data, dict):
        raise ConfigError(["(top level): expected a mapping of sections"])
    return data


def _typed(raw: str) -> Any:
    """A value from the environment: YAML lists, mappings and `null` are parsed, any other
    text stays text (validation converts `0.5`, `true`, `8` where a number or flag is
    wanted) — so a token such as `012345` is never read as an octal number."""
    if not raw:
        return raw
    try:
        parsed = load_yaml(raw)
    except (yaml.YAMLError, ConfigError, ValueError, RecursionError):
        return raw
    return parsed if parsed is None or isinstance(parsed, list | dict) else raw


def _substitute(text: str, environ: Mapping[str, str], used: list[str]) -> Any:
    """Expand `${env:NAME}` and `${env:NAME:-default}` in one YAML string value; `$${`
    is a literal `${`. A value that is one reference alone takes the variable's type."""
    whole = _ENV_REF.fullmatch(text)

    def expand(match: re.Match[str]) -> str:
        if match.group(1):
            return "${" + match.group(2) + "}"
        inner = match.group(2)
        if not inner.startswith("env:"):
            if _ENV_NAME.fullmatch(inner):
                raise ValueError(f"${{{inner}}}: write ${{env:{inner}}}")
            if _PROVIDER.match(inner):
                provider = inner.split(":", 1)[0]
                raise ValueError(
                    f"${{{inner}}}: only the env provider is supported, not {provider}"
                )
            return match.group(0)
        name, sep, default = inner[4:].partition(":-")
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(f"${{{inner}}}: {name!r} is not an environment variable name")
        used.append(name)
        value = environ.get(name)
        if value is None or (sep and value == ""):
            if not sep:
                raise ValueError(f"environment variable {name} is not set (${{{inner}}})")
            return default
        return value

    expanded = _ENV_REF.sub(expand, text)
    if whole is not None and not whole.group(1) and whole.group(2).startswith("env:"):
        return _typed(expanded)
    return expanded


def _walk(node: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any, Any]]:
    """(path, container, key) of every string value, depth first."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in list(items):
        here = (*path, str(key))
        if isinstance(value, str):
            yield here, node, key
        elif isinstance(value, dict | list):
            yield from _walk(value, here)


def _expand_env_refs(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """Substitute `${env:...}` in place; returns {path: variables} for blaming problems."""
    problems: list[str] = []
    sources: dict[str, str] = {}
    for path, container, key in _walk(data, ()):
        text = container[key]
        if "${" not in text:
            continue
        used: list[str] = []
        try:
            container[key] = _substitute(text, environ, used)
        except ValueError as exc:
            problems.append(f"{'.'.join(path)}: {exc}")
            continue
        if used:
            sources[".".join(path)] = ", ".join(f"${{env:{n}}}" for n in used)
    if problems:
        raise ConfigError(problems)
    return sources


def _env_overrides(environ: Mapping[str, str]) -> list[tuple[str, list[str], Any]]:
    """`RAG_MONITOR_<SECTION>__<KEY>=value` → (name, ["section", "key"], value).

    A variable is a config override when its first `__`-separated part names a section (or
    when it has `__` at all, so a misspelt section is reported rather than ignored). Other
    `RAG_MONITOR_*` variables (`RAG_MONITOR_LOG_LEVEL`, ...) belong to the command line."""
    out = []
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        path = [p.lower() for p in key[len(ENV_PREFIX) :].split("__")]
        if path[0] not in _SECTIONS and len(path) == 1:
            continue
        out.append((key, path, _typed(raw)))
    return out


def _apply(data: dict[str, Any], path: list[str], value: Any) -> None:
    node = data
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


_NAMED_PROBLEM = re.compile(r"^([a-z_][a-z0-9_.]*): (.+)$", re.S)


def _format(exc: ValidationError) -> list[str]:
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = "required value is missing"
        elif err["type"] == "extra_forbidden":
            msg = "unknown key"
        # Cross-field validators name their own key first ("key: problem").
        named = _NAMED_PROBLEM.match(msg)
        if named:
            loc = f"{loc}.{named.group(1)}" if loc else named.group(1)
            msg = named.group(2)
        problems.append(f"{loc or '(top level)'}: {msg}")
    return problems


def _otlp_section(data: dict[str, Any]) -> dict[str, Any]:
    receivers = data.get("receivers")
    otlp = receivers.get("otlp") if isinstance(receivers, dict) else None
    return otlp if isinstance(otlp, dict) else {}


def _literal_token(data: dict[str, Any]) -> bool:
    """The file holds the OTLP token itself rather than a reference to the environment."""
    token = _otlp_section(data).get("auth_token")
    return isinstance(token, str) and "${env:" not in token


def load_config(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read YAML (optional), expand `${env:...}`, apply `RAG_MONITOR_*__*` overrides,
    validate. Raises `ConfigError`."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if path is not None:
        data = _read_yaml(Path(path))
        if _literal_token(data):
            raise ConfigError(
                [
                    "receivers.otlp.auth_token: a token is not written into the config file; "
                    "put it in an environment variable and write auth_token_env: <VARIABLE> "
                    "(or auth_token: ${env:<VARIABLE>})"
                ]
            )
        try:
            sources = _expand_env_refs(data, env)
        except RecursionError:
            raise ConfigError(["file: invalid YAML: nested too deeply"]) from None
    collector_style = "protocols" in _otlp_section(data)
    for key, key_path, value in _env_overrides(env):
        if collector_style and key_path[:3] in (["receivers", "otlp", p] for p in _OTLP_PROTOCOLS):
            # An override in the plain form applies to a file in the Collector form.
            key_path = [*key_path[:2], "protocols", *key_path[2:]]
        _apply(data, key_path, value)
        sources[".".join(key_path)] = key
    try:
        return Config.model_validate(data, context={"environ": env})
    except ValidationError as exc:
        problems = _format(exc)
    if collector_style:
        problems = [_as_protocols(p) for p in problems]
    raise ConfigError([_blame_env(p, sources) for p in problems])


def _as_protocols(problem: str) -> str:
    """Name a problem the way the file wrote the key (`protocols.grpc...`)."""
    for name in _OTLP_PROTOCOLS:
        prefix = f"receivers.otlp.{name}."
        if problem.startswith(prefix):
            return f"receivers.otlp.protocols.{name}." + problem[len(prefix) :]
    return problem


def _blame_env(problem: str, sources: dict[str, str]) -> str:
    """Name the environment variable behind a problem, so it is not hunted in the YAML."""
    where = problem.split(": ", 1)[0]
    for path, variable in sources.items():
        if where == path or where.startswith(path + ".") or path.startswith(where + "."):
            return f"{problem} (set by {variable})"
    return problem


# -- showing the effective configuration -------------------------------------------------

_URL_PASSWORD = re.compile(r"(?<=://)([^/@:\s]*):[^/@\s]*@")


def effective_config(config: Config) -> dict[str, Any]:
    """The whole configuration with defaults filled in, as plain data, secrets masked:
    fields marked `SECRET` and passwords inside URLs (`https://user:<masked>@host`)."""
    return _masked(config)


def _masked(model: BaseModel) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if any(isinstance(m, _SecretMarker) for m in info.metadata) and value:
            out[name] = {k: MASK for k in value} if isinstance(value, dict) else MASK
        else:
            out[name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return _masked(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, str):
        return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{MASK}@", value)
    return value
