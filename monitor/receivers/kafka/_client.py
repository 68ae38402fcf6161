"""kafka-python clients: connection and security options, and construction that cleans up
after itself when the brokers are unreachable."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable
from typing import Any, TypeVar

from kafka.net.compat import KafkaNetClient

from monitor.config import ConfigError, KafkaConfig

BOOTSTRAP_TIMEOUT_MS = 5_000
T = TypeVar("T")


def client_options(cfg: KafkaConfig) -> dict[str, Any]:
    """Connection and security options shared by the consumer and the producer."""
    options: dict[str, Any] = {
        "bootstrap_servers": list(cfg.bootstrap_servers),
        "security_protocol": cfg.security_protocol,
        "client_id": f"rag-monitor-{socket.gethostname()}",
        "bootstrap_timeout_ms": BOOTSTRAP_TIMEOUT_MS,
        "reconnect_backoff_max_ms": 5_000,
    }
    if cfg.sasl_mechanism:
        options["sasl_mechanism"] = cfg.sasl_mechanism
        options["sasl_plain_username"] = cfg.sasl_username
        if cfg.sasl_password_env:
            password = os.environ.get(cfg.sasl_password_env)
            if password is None:
                raise ConfigError(
                    [
                        "receivers.kafka.sasl_password_env: environment variable "
                        f"{cfg.sasl_password_env} is not set"
                    ]
                )
            options["sasl_plain_password"] = password
    for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        value = getattr(cfg, key)
        if value:
            options[key] = value
    return options


def construct(kind: Callable[..., T], **options: Any) -> T:
    """Build a kafka-python consumer/producer; if its constructor fails (brokers
    unreachable), close the network client it already started. kafka-python 3.0 leaves
    that client's IO thread running otherwise, one more per retry of a long outage."""
    made: list[KafkaNetClient] = []

    def client(**kwargs: Any) -> KafkaNetClient:
        made.append(KafkaNetClient(**kwargs))
        return made[-1]

    try:
        return kind(kafka_client=client, **options)
    except BaseException:
        for instance in made:
            with contextlib.suppress(Exception):
                instance.close()
        raise
