"""The metrics port's web config: TLS and basic-auth users in the Prometheus exporter-toolkit
format (`exporters.prometheus.web_config_file`). The metrics server (`prometheus.py`) reads
it at start and again when it or a file it names changes; `check-config` reads it too."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError, field_validator, model_validator

from monitor.config import (
    ConfigError,
    ReadableFile,
    Section,
    read_yaml_file,
    validation_problems,
)

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


class WebTls(Section):
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


class WebConfig(Section):
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
    data = read_yaml_file(Path(path))
    try:
        return WebConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc)) from None
