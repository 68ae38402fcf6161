"""What every section of the configuration is built from: the base model, the error that
names each problem's key, and the field types (durations, endpoints, rates, readable files,
secrets) the sections share."""

from __future__ import annotations

import ipaddress
import math
import os
import re
import urllib.parse
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
    field_validator,
    model_validator,
)


class ConfigError(Exception):
    """A config that cannot be used; `problems` holds one `path: message` line each, and
    `warnings` what the rest of the file says that is likely not meant (`load_config`'s
    `warn`), so that one run reports both."""

    def __init__(self, problems: list[str], warnings: list[str] | None = None) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems
        self.warnings = warnings or []


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


class Refused:
    """A value a section refuses, held in its place by a before-validator that sees several
    keys (a removed key, a token named twice, the Collector's `protocols`), so that the
    validation fails at that value's own path with every other problem of the file,
    rather than stopping the section there, and the message says why (`why`). `key` names
    the key within the value that the problem is at (`thrift` of `protocols`), if not the
    value itself. A field's type, or `extra="forbid"` for a key that is no field, refuses
    it."""

    def __init__(self, value: Any, why: str, key: str | None = None) -> None:
        self.value = value
        self.why = why
        self.key = key

    def __repr__(self) -> str:
        return f"{self.value!r} ({self.why})"


# The largest whole number any knob takes: 2**31 - 1, a signed 32-bit field.
MAX_WHOLE_NUMBER = 2**31 - 1
# The longest text a knob takes: a name, a URL or a path (PATH_MAX on Linux).
MAX_TEXT_CHARS = 4096

_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
_BOOLEAN = frozenset({"true", "false", "yes", "no", "on", "off"})


def _scalar_kind(annotation: Any) -> str | None:
    """`number` or `boolean` for a field typed so (optionally `| None`, `Annotated`), else
    None."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, type(int | None)):
        kinds = {_scalar_kind(a) for a in get_args(annotation) if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else None
    if annotation is bool:
        return "boolean"
    if annotation in (int, float):
        return "number"
    return None


class Section(BaseModel):
    """A section of the configuration: unknown keys are errors, values are frozen, a
    number or boolean written as a string is refused rather than converted, and a key of
    `_removed` is refused saying why it is gone."""

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

    @model_validator(mode="before")
    @classmethod
    def _removed_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not cls._removed:
            return data
        removed = {
            key: Refused(value, cls._removed[key])
            for key, value in data.items()
            if key in cls._removed
        }
        return {**data, **removed} if removed else data

    @field_validator("*")
    @classmethod
    def _within_reach(cls, value: Any, info: ValidationInfo) -> Any:
        """Every knob is refused or honoured: text that is empty or only spaces (leave the
        key out instead), and whole numbers past what the libraries behind the knobs take
        (Kafka's and gRPC's fields are 32-bit), are refused wherever they appear."""
        if isinstance(value, str | int) and not isinstance(value, bool):
            items: Any = (value,)
        elif isinstance(value, list):
            items = value
        else:
            return value
        name = info.field_name or ""
        longest, empty_allowed = cls._text_rules().get(name, (MAX_TEXT_CHARS, False))
        for item in items:
            if isinstance(item, str):
                if not empty_allowed and not item.strip():
                    raise ValueError("must not be empty (leave the key out for its default)")
                if len(item) > longest:
                    raise ValueError(f"must be at most {longest} characters")
            elif type(item) is int and item > MAX_WHOLE_NUMBER:
                raise ValueError(f"must be at most {MAX_WHOLE_NUMBER}")
        return value

    @classmethod
    def _text_rules(cls) -> dict[str, tuple[int, bool]]:
        """Field name → (longest text, whether empty text is left to the field), for the
        fields that differ from the rule (found once per class): those of `_long_text`,
        `_may_be_empty`, and those with a check of their own, which says what is wrong
        with empty text in its own words."""
        if cls.__dict__.get("_text_rules_found") is None:
            own = {
                name
                for d in cls.__pydantic_decorators__.field_validators.values()
                for name in d.info.fields
                if name != "*"
            }
            cls._text_rules_found = {
                name: (cls._long_text.get(name, MAX_TEXT_CHARS), name in cls._may_be_empty | own)
                for name in {*cls._long_text, *cls._may_be_empty, *own}
            }
        return cls._text_rules_found or {}

    # Keys a former version took (key → why it is gone and what to write instead): a file
    # written for it fails naming them, rather than loading with a setting that does nothing.
    _removed: ClassVar[Mapping[str, str]] = {}
    # Text keys whose empty value means something, and keys that hold more than a name or
    # a path (prompts), with their own length bound.
    _may_be_empty: ClassVar[frozenset[str]] = frozenset()
    _long_text: ClassVar[dict[str, int]] = {}
    _text_rules_found: ClassVar[dict[str, tuple[int, bool]] | None] = None


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
    """A Go duration (`1h30m`, `500ms`, `2.5s`, also `1d`) → seconds; `0` is zero. A
    duration too long to be a number (hundreds of digits) is refused."""
    text = value.strip()
    if text == "0":
        return 0.0
    if not _DURATION.fullmatch(text):
        raise ValueError("expected a duration such as 30s, 1h30m, 500ms")
    seconds = sum(float(n) * _UNITS[unit] for n, unit in re.findall(_DURATION_PART, text))
    if not math.isfinite(seconds):
        raise ValueError("is too long to be a duration")
    return seconds


# The longest wait a `*_s` key takes: a day. Every such key is a timeout, an interval or a
# grace; a longer one is a typo, and timers past it overflow some clocks' arithmetic.
MAX_SECONDS = 86_400.0


def _seconds(value: Any) -> Any:
    """A plain number of seconds, or a Go duration string."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return parse_duration(value)
    return value


def _at_most_a_day(value: float) -> float:
    if value > MAX_SECONDS:
        raise ValueError(f"must be at most {MAX_SECONDS:g} s (a day)")
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
Seconds = Annotated[float, BeforeValidator(_seconds), AfterValidator(_at_most_a_day)]
Millis = Annotated[int, BeforeValidator(_milliseconds)]

# The longest duration (windows, budgets) any key takes: ten years.
MAX_DURATION_S = 3650 * 86_400.0


def _positive_duration(value: str) -> str:
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError("must be longer than zero")
    if seconds > MAX_DURATION_S:
        raise ValueError("must be at most 3650d (ten years)")
    return value


# A duration kept as written (shown in alerts and `check-config`); `parse_duration` reads it.
Duration = Annotated[str, BeforeValidator(lambda v: _positive_duration(str(v)))]


def duration_between(low: str, high: str, why: str) -> AfterValidator:
    """Bounds on a `Duration`, written as durations, with the reason in the message."""
    floor, ceiling = parse_duration(low), parse_duration(high)

    def check(value: str) -> str:
        seconds = parse_duration(value)
        if not floor <= seconds <= ceiling:
            raise ValueError(f"{value} is outside {low}..{high} ({why})")
        return value

    return AfterValidator(check)


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


def http_url(value: Any) -> Any:
    """An http or https URL with a host and, if given, a port in 1..65535."""
    if not isinstance(value, str):
        return value
    try:
        parts = urllib.parse.urlsplit(value)
        port = parts.port
    except ValueError as exc:  # a port that is not a number or out of range
        raise ValueError(f"not a usable URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError("expected an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError("the URL names no host")
    if port == 0 or any(c.isspace() for c in value):
        raise ValueError("not a usable URL: a port in 1..65535 and no spaces")
    return value


# An http(s) URL the monitor sends to; `check-config` masks a password inside it.
HttpUrl = Annotated[str, BeforeValidator(http_url)]


# `host:port`, or an http(s) URL (what the OTLP exporters take).
HostPortOrUrl = Annotated[
    str, BeforeValidator(lambda v: http_url(v) if "://" in str(v) else _endpoint(str(v)))
]


def mask_url(url: str) -> str:
    """`url` with the password of its user info masked (`https://user:<masked>@host`)."""
    return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{MASK}@", url)


MASK = "<masked>"
# The password runs to the last `@` before the path, as URL parsers read it.
_URL_PASSWORD = re.compile(r"(?<=://)([^/@:\s]*):[^/\s]*@")


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
    try:
        missing = isinstance(value, str) and not Path(value).is_file()
    except OSError as exc:  # a name too long for the file system, say
        raise ValueError(f"cannot read {value[:100]!r}: {exc.strerror}") from None
    if missing:
        raise ValueError(f"no such file: {value}")
    return value


ReadableFile = Annotated[str, BeforeValidator(_readable_file)]

Rate = Annotated[float, Field(ge=0, le=1)]


def at_most(ceiling: float, why: str) -> AfterValidator:
    """An upper bound on a number, with the reason in the message."""

    def check(value: float) -> float:
        if value > ceiling:
            raise ValueError(f"must be at most {ceiling:g} ({why})")
        return value

    return AfterValidator(check)


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
