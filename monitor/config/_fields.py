"""What every section of the configuration is built from: the base model, the error that
names each problem's key, and the field types (durations, endpoints, rates, readable files,
secrets) the sections share."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    model_validator,
)


class ConfigError(Exception):
    """A config that cannot be used; `problems` holds one `path: message` line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class EnvText(str):
    """Text that came from the environment, where every value is text: validation converts
    it to a number or a flag where one is wanted, as it would not text quoted in the file."""

    __slots__ = ()


class QuotedScalar:
    """A number or boolean the file wrote in quotes (`rate: "0.5"`), held in place of the
    string so that validation fails for that key alone and the message can say why."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return repr(self.text)


_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
_BOOLEAN = frozenset({"true", "false", "yes", "no", "on", "off"})


def _scalar_kind(annotation: Any) -> str | None:
    """`number` or `boolean` for a field typed so (optionally `| None`), else None."""
    if get_origin(annotation) in (Union, type(int | None)):
        kinds = {_scalar_kind(a) for a in get_args(annotation) if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else None
    if annotation is bool:
        return "boolean"
    if annotation in (int, float):
        return "number"
    return None


class Section(BaseModel):
    """A section of the configuration: unknown keys are errors, values are frozen, and a
    number or boolean written as a string is refused rather than converted."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    _scalar_fields: ClassVar[dict[str, str] | None] = None

    @classmethod
    def _scalars(cls) -> dict[str, str]:
        """Field name → `number` / `boolean`, for the plain scalar fields (durations, which
        take strings on purpose, have a converter and are left out)."""
        if cls.__dict__.get("_scalar_fields") is None:
            cls._scalar_fields = {
                name: kind
                for name, info in cls.model_fields.items()
                if (kind := _scalar_kind(info.annotation)) is not None
                and not any(isinstance(m, BeforeValidator) for m in info.metadata)
            }
        return cls._scalar_fields or {}

    @model_validator(mode="before")
    @classmethod
    def _quoted_scalars(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        scalars = cls._scalars()
        quoted = {
            key: QuotedScalar(value)
            for key, value in data.items()
            if isinstance(value, str)
            and not isinstance(value, EnvText)
            and (kind := scalars.get(key)) is not None
            and (
                _NUMBER.fullmatch(value.strip())
                if kind == "number"
                else value.strip().lower() in _BOOLEAN
            )
        }
        return {**data, **quoted} if quoted else data


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


def is_loopback_host(host: str) -> bool:
    """Whether `host` (of a `host:port` endpoint; IPv6 in brackets or not) is a loopback
    address; a host name other than `localhost` is not, whatever it resolves to."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _readable_file(value: Any) -> Any:
    if isinstance(value, str) and not Path(value).is_file():
        raise ValueError(f"no such file: {value}")
    return value


ReadableFile = Annotated[str, BeforeValidator(_readable_file)]

Rate = Annotated[float, Field(ge=0, le=1)]


def at_least(floor: float, why: str) -> AfterValidator:
    """A lower bound on a number of seconds, with the reason in the message."""

    def check(value: float) -> float:
        if value < floor:
            raise ValueError(f"must be at least {floor:g} s ({why})")
        return value

    return AfterValidator(check)


def environ_of(info: ValidationInfo) -> Mapping[str, str]:
    """The environment a config is validated against (`load_config(environ=...)`)."""
    context = info.context or {}
    environ: Mapping[str, str] = context.get("environ", os.environ)
    return environ
