"""What every section of the configuration is built from: the base model, the error that
names each problem's key, and the field types (durations, endpoints, rates, readable files,
secrets) the sections share."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo


class ConfigError(Exception):
    """A config that cannot be used; `problems` holds one `path: message` line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class Section(BaseModel):
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


class SecretMarker:
    """Field metadata: `check-config` prints the value masked."""


SECRET = SecretMarker()


# -- addresses, files, rates, the environment ---------------------------------------------


def _endpoint(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError("expected host:port")
    if not 0 <= int(port) <= 65535:
        raise ValueError(f"port {port} is outside 0..65535")
    return value


Endpoint = Annotated[str, BeforeValidator(lambda v: _endpoint(str(v)))]


def _readable_file(value: Any) -> Any:
    if isinstance(value, str) and not Path(value).is_file():
        raise ValueError(f"no such file: {value}")
    return value


ReadableFile = Annotated[str, BeforeValidator(_readable_file)]

Rate = Annotated[float, Field(ge=0, le=1)]


def environ_of(info: ValidationInfo) -> Mapping[str, str]:
    """The environment a config is validated against (`load_config(environ=...)`)."""
    context = info.context or {}
    environ: Mapping[str, str] = context.get("environ", os.environ)
    return environ
