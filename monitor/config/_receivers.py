"""`receivers`: the OTLP receivers (gRPC, HTTP, TLS, bearer token) and the Kafka consumer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from monitor.config._extras import missing_extra
from monitor.config._fields import (
    MASK,
    SECRET,
    Endpoint,
    Millis,
    ReadableFile,
    Refused,
    Seconds,
    Section,
    at_least,
    environ_of,
)

_SLOW_SENDERS = "a sender needs time to send a request"


class GrpcReceiver(Section):
    enabled: bool = True
    endpoint: Endpoint = "127.0.0.1:4317"


class HttpReceiver(Section):
    enabled: bool = True
    endpoint: Endpoint = "127.0.0.1:4318"
    # A request's headers must arrive whole this long after its first byte, and its
    # body after its headers; slower clients are cut off (slow-loris senders).
    read_header_timeout_s: Annotated[Seconds, at_least(0.1, _SLOW_SENDERS)] = 10.0
    read_timeout_s: Annotated[Seconds, at_least(0.1, _SLOW_SENDERS)] = 30.0
    # Keep-alive connections idle this long are closed; at most max_connections open.
    idle_timeout_s: Annotated[Seconds, at_least(0.1, "connections are checked this often")] = 60.0
    max_connections: int = Field(default=1_000, gt=0)


class ReceiverTls(Section):
    """TLS for both OTLP receivers; with `client_ca_file`, clients must present a
    certificate signed by that CA (mutual TLS)."""

    cert_file: ReadableFile
    key_file: ReadableFile
    client_ca_file: ReadableFile | None = None


OTLP_PROTOCOLS = ("grpc", "http")


class OtlpReceiver(Section):
    grpc: GrpcReceiver = GrpcReceiver()
    http: HttpReceiver = HttpReceiver()
    tls: ReceiverTls | None = None
    # Senders must present `Authorization: Bearer <token>`. The token is read from the
    # environment variable named by `auth_token_env` (filled in here at load time); a token
    # written literally into the config file is refused by `load_config`.
    auth_token: Annotated[str | None, SECRET] = None
    auth_token_env: str | None = None
    max_request_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    route_attribute: str = "http.route"

    _removed: ClassVar[Mapping[str, str]] = {
        "queue_size": "removed: it set trace_assembly.queue_size, which bounded nothing; "
        "pipeline.queue_size and pipeline.queue_bytes bound what waits for evaluation, "
        "and receivers are refused while it is full"
    }

    @model_validator(mode="before")
    @classmethod
    def _collector_protocols(cls, data: Any) -> Any:
        """`protocols: {grpc: {...}, http: {...}}`, as the Collector's OTLP receiver is
        written: a protocol listed is enabled, one left out is disabled. What is wrong with
        it is held in its place (`Refused`), so the rest of the section is checked too."""
        if not isinstance(data, dict) or "protocols" not in data:
            return data
        protocols = data["protocols"]
        both = [p for p in OTLP_PROTOCOLS if p in data]
        if both:
            why = (
                f"give the receivers either as protocols.grpc / protocols.http "
                f"(Collector style) or as grpc / http, not both (found {', '.join(both)})"
            )
            return {**data, "protocols": Refused(protocols, why)}
        if not isinstance(protocols, dict) or not protocols:
            why = "expected a mapping with grpc, http or both"
            return {**data, "protocols": Refused(protocols, why)}
        out = {k: v for k, v in data.items() if k != "protocols"}
        unknown = [name for name in protocols if name not in OTLP_PROTOCOLS]
        if unknown:
            why = "unknown protocol (grpc, http)"
            out["protocols"] = Refused(protocols, why, key=str(unknown[0]))
        for name in OTLP_PROTOCOLS:
            if name not in protocols:
                out[name] = {"enabled": False}
                continue
            settings = protocols[name]
            if settings is None:  # `grpc:` with nothing under it: enabled, defaults
                settings = {}
            if isinstance(settings, dict):
                out[name] = {"enabled": True, **settings}
            else:
                out[name] = Refused(settings, "expected a mapping (e.g. endpoint)")
        return out

    @model_validator(mode="before")
    @classmethod
    def _token_from_env(cls, data: Any, info: ValidationInfo) -> Any:
        """`auth_token` from the variable `auth_token_env` names; what is wrong is held in
        its place (`Refused`), so the rest of the section is checked too."""
        if not isinstance(data, dict) or data.get("auth_token_env") is None:
            return data
        variable = data["auth_token_env"]
        environ = environ_of(info)
        out = dict(data)
        if data.get("auth_token") is not None:  # the token itself is not shown
            why = "give auth_token_env or auth_token, not both"
            out["auth_token"] = Refused(MASK, why)
        elif isinstance(variable, str) and variable in environ:
            out["auth_token"] = environ[variable]
        if not isinstance(variable, str) or variable not in environ:
            out["auth_token_env"] = Refused(variable, f"environment variable {variable} is not set")
        return out

    @field_validator("auth_token")
    @classmethod
    def _usable_token(cls, value: str | None) -> str | None:
        if value is not None and (not value or value != value.strip() or " " in value):
            raise ValueError("must be a non-empty token without spaces")
        return value


class KafkaConfig(Section):
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
    def _servers_when_enabled(self) -> KafkaConfig:
        if self.max_poll_interval_ms < self.session_timeout_ms:
            raise ValueError("max_poll_interval_ms: must be at least session_timeout_ms")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms: must be shorter than session_timeout_ms")
        if self.enabled and not self.bootstrap_servers:
            raise ValueError("bootstrap_servers: required when kafka.enabled is true")
        return self

    @model_validator(mode="after")
    def _extra_installed(self) -> KafkaConfig:
        problem = missing_extra("kafka", "the Kafka receiver") if self.enabled else None
        if problem is not None:
            raise ValueError(f"enabled: {problem}")
        return self


class Receivers(Section):
    otlp: OtlpReceiver = OtlpReceiver()
    kafka: KafkaConfig = KafkaConfig()
