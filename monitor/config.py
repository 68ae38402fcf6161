"""Configuration: one YAML file, `RAG_MONITOR_<SECTION>__<KEY>` environment overrides.

Unknown keys are rejected and every problem is reported as `path.to.key: what is wrong`
(`ConfigError.problems`). Defaults live in the models; rules that span several fields are
model validators. An empty file (or none) gives the embedded defaults: OTLP on loopback,
metrics on 0.0.0.0:9464, local evaluators only, every trace sampled.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from monitor.evaluators.base import Severity

ENV_PREFIX = "RAG_MONITOR_"
DEFAULT_LOCAL_EVALUATORS = (
    "local_groundedness",
    "local_relevance",
    "local_retrieval",
    "local_safety",
)


class ConfigError(Exception):
    """A config that cannot be used; `problems` holds one `path: message` line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _endpoint(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("expected host:port")
    return value


class GrpcReceiver(_Section):
    enabled: bool = True
    endpoint: str = "127.0.0.1:4317"
    _check = field_validator("endpoint")(classmethod(lambda cls, v: _endpoint(v)))


class HttpReceiver(_Section):
    enabled: bool = True
    endpoint: str = "127.0.0.1:4318"
    _check = field_validator("endpoint")(classmethod(lambda cls, v: _endpoint(v)))


class ReceiverTls(_Section):
    """TLS for both OTLP receivers; with `client_ca_file`, clients must present a
    certificate signed by that CA (mutual TLS)."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None

    @field_validator("cert_file", "key_file", "client_ca_file")
    @classmethod
    def _readable(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).is_file():
            raise ValueError(f"no such file: {value}")
        return value


class OtlpReceiver(_Section):
    grpc: GrpcReceiver = GrpcReceiver()
    http: HttpReceiver = HttpReceiver()
    tls: ReceiverTls | None = None
    auth_token: str | None = None
    max_request_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    # Accepted spans wait here for trace assembly; full → senders get a retryable status.
    queue_size: int = Field(default=10_000, gt=0)
    route_attribute: str = "http.route"


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
    session_timeout_ms: int = Field(default=10_000, gt=0)
    heartbeat_interval_ms: int = Field(default=3_000, gt=0)
    # Also the rebalance timeout a group join may wait for members: the consumer thread
    # polls continuously (it pauses partitions, never stops polling), so it can be short.
    max_poll_interval_ms: int = Field(default=30_000, gt=0)
    max_poll_records: int = Field(default=500, gt=0)
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"

    @model_validator(mode="after")
    def _servers_when_enabled(self) -> KafkaReceiver:
        if self.max_poll_interval_ms < self.session_timeout_ms:
            raise ValueError("max_poll_interval_ms: must be at least session_timeout_ms")
        if self.enabled and not self.bootstrap_servers:
            raise ValueError("bootstrap_servers: required when kafka.enabled is true")
        return self


class Receivers(_Section):
    otlp: OtlpReceiver = OtlpReceiver()
    kafka: KafkaReceiver = KafkaReceiver()


class TraceAssembly(_Section):
    idle_timeout_s: float = Field(default=10.0, gt=0)
    max_open_traces: int = Field(default=10_000, gt=0)


class SamplingOverride(_Section):
    service: str | None = None
    route: str | None = None
    rate: float = Field(ge=0, le=1)

    @model_validator(mode="after")
    def _matches_something(self) -> SamplingOverride:
        if self.service is None and self.route is None:
            raise ValueError("service: an override needs a service, a route, or both")
        return self


class AlwaysSample(_Section):
    negative_feedback: bool = True
    error: bool = True


class Sampling(_Section):
    rate: float = Field(default=1.0, ge=0, le=1)
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
    timeout_s: float = Field(default=30.0, gt=0)
    max_concurrency: int = Field(default=8, gt=0)
    retries: int = Field(default=3, ge=0)
    cache_size: int = Field(default=10_000, ge=0)
    # Consecutive failed attempts that open a model's circuit breaker, and how long it stays open.
    breaker_failures: int = Field(default=5, gt=0)
    breaker_cooldown_s: float = Field(default=30.0, gt=0)
    # Retry backoff: base · 2^attempt with full jitter, capped (a Retry-After header wins).
    backoff_base_s: float = Field(default=0.5, gt=0)
    backoff_max_s: float = Field(default=20.0, gt=0)
    # USD per 1M tokens, for models litellm has no price for.
    prices: dict[str, dict[Literal["input", "output"], float]] = {}


class Redaction(_Section):
    enabled: bool = False
    patterns: list[str] = []

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for i, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {i} is not a valid regex: {exc}") from None
        return patterns


class EvaluatorConfig(_Section):
    name: str
    sample_rate: float | None = Field(default=None, ge=0, le=1)
    threshold: float | None = None
    severity_threshold: Severity | None = None
    model: str | None = None
    prompt: str | None = None
    # Tiered scoring: run only where `escalate_from`'s normalised score is inside `band`.
    escalate_from: str | None = None
    band: tuple[float, float] | None = None
    rubric: str | None = None
    # Judge endpoint for this evaluator's model (default `judge.api_base`).
    api_base: str | None = None

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        from monitor.evaluators.base import known_evaluators

        known = known_evaluators()
        if name not in known:
            raise ValueError(f"unknown evaluator {name!r} (known: {', '.join(sorted(known))})")
        return name


class AlertRule(_Section):
    name: str
    evaluator: str | None = None
    category: str | None = None
    max_defect_rate: float = Field(ge=0, le=1)
    window: str = "10m"
    min_samples: int = Field(default=30, gt=0)
    confidence: float = Field(default=0.95, gt=0, lt=1)
    severity: str = "warning"

    @field_validator("window")
    @classmethod
    def _duration(cls, value: str) -> str:
        parse_duration(value)
        return value

    @model_validator(mode="after")
    def _one_source(self) -> AlertRule:
        if (self.evaluator is None) == (self.category is None):
            raise ValueError("evaluator: exactly one of evaluator or category is required")
        return self


class Alertmanager(_Section):
    url: str | None = None


class Webhook(_Section):
    url: str
    headers: dict[str, str] = {}


class Alerts(_Section):
    rules: list[AlertRule] = []
    alertmanager: Alertmanager = Alertmanager()
    webhooks: list[Webhook] = []
    evaluation_interval_s: float = Field(default=15.0, gt=0)


class PrometheusExporter(_Section):
    endpoint: str = "0.0.0.0:9464"
    _check = field_validator("endpoint")(classmethod(lambda cls, v: _endpoint(v)))


class OtlpExporter(_Section):
    endpoint: str | None = None
    protocol: Literal["grpc", "http/protobuf"] = "grpc"


class Exporters(_Section):
    prometheus: PrometheusExporter = PrometheusExporter()
    otlp: OtlpExporter = OtlpExporter()
    results_file: str | None = None


class Pipeline(_Section):
    queue_size: int = Field(default=1_000, gt=0)
    workers: int = Field(default=4, gt=0)
    evaluation_timeout_s: float = Field(default=60.0, gt=0)
    shutdown_timeout_s: float = Field(default=20.0, ge=0)
    max_services: int = Field(default=50, gt=0)
    max_routes: int = Field(default=100, gt=0)


class Config(_Section):
    receivers: Receivers = Receivers()
    trace_assembly: TraceAssembly = TraceAssembly()
    sampling: Sampling = Sampling()
    budget: Budget = Budget()
    judge: Judge = Judge()
    redaction: Redaction = Redaction()
    evaluators: list[EvaluatorConfig] = [EvaluatorConfig(name=n) for n in DEFAULT_LOCAL_EVALUATORS]
    alerts: Alerts = Alerts()
    exporters: Exporters = Exporters()
    pipeline: Pipeline = Pipeline()

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
        from monitor.evaluators.judges import judge_config_problem

        for i, spec in enumerate(self.evaluators):
            model = spec.model or self.judge.model
            problem = judge_config_problem(spec.name, model, spec.prompt, spec.rubric)
            if problem is not None:
                raise ValueError(f"evaluators.{i}.{problem}")
        return self


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: str) -> float:
    """`30s`, `10m`, `1h`, `1d` → seconds."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", value.strip())
    if not match:
        raise ValueError("expected a duration such as 30s, 10m, 1h")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _env_overrides(environ: dict[str, str]) -> list[tuple[str, list[str], Any]]:
    """`RAG_MONITOR_A__B__C=value` → (name, ["a", "b", "c"], value parsed as YAML)."""
    out = []
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        path = [p.lower() for p in key[len(ENV_PREFIX) :].split("__")]
        try:
            value = yaml.safe_load(raw) if raw else raw
        except yaml.YAMLError:
            value = raw
        out.append((key, path, value))
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


def load_config(path: str | Path | None = None, environ: dict[str, str] | None = None) -> Config:
    """Read YAML (optional), apply env overrides, validate. Raises `ConfigError`."""
    data: Any = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError([f"{path}: cannot read: {exc.strerror}"]) from None
        except UnicodeDecodeError as exc:
            raise ConfigError([f"{path}: not UTF-8 text (byte {exc.start})"]) from None
        try:
            data = yaml.safe_load(text) or {}
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
    from_env: dict[str, str] = {}
    for key, key_path, value in _env_overrides(dict(os.environ if environ is None else environ)):
        _apply(data, key_path, value)
        from_env[".".join(key_path)] = key
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError([_blame_env(p, from_env) for p in _format(exc)]) from None


def _blame_env(problem: str, from_env: dict[str, str]) -> str:
    """Name the environment variable behind a problem, so it is not hunted in the YAML."""
    where = problem.split(": ", 1)[0]
    for path, variable in from_env.items():
        if where == path or where.startswith(path + ".") or path.startswith(where + "."):
            return f"{problem} (set by {variable})"
    return problem
