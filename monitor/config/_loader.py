"""`load_config`: file, `${env:...}`, overrides, validation; every problem reported as
`path.to.key: what is wrong`, with the environment variable behind it when there is one."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from monitor.config._env import apply_override, env_overrides, expand_env_refs
from monitor.config._fields import ConfigError
from monitor.config._receivers import OTLP_PROTOCOLS
from monitor.config._root import Config
from monitor.config._yaml import read_yaml_file

_SECTIONS = frozenset(Config.model_fields)
_NAMED_PROBLEM = re.compile(r"^([a-z_][a-z0-9_.]*): (.+)$", re.S)


def validation_problems(exc: ValidationError) -> list[str]:
    """A validation error as `path.to.key: what is wrong` lines."""
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
        data = read_yaml_file(Path(path))
        if _literal_token(data):
            raise ConfigError(
                [
                    "receivers.otlp.auth_token: a token is not written into the config file; "
                    "put it in an environment variable and write auth_token_env: <VARIABLE> "
                    "(or auth_token: ${env:<VARIABLE>})"
                ]
            )
        try:
            sources = expand_env_refs(data, env)
        except RecursionError:
            raise ConfigError(["file: invalid YAML: nested too deeply"]) from None
    collector_style = "protocols" in _otlp_section(data)
    for key, key_path, value in env_overrides(env, _SECTIONS):
        if collector_style and key_path[:3] in (["receivers", "otlp", p] for p in OTLP_PROTOCOLS):
            # An override in the plain form applies to a file in the Collector form.
            key_path = [*key_path[:2], "protocols", *key_path[2:]]
        apply_override(data, key_path, value)
        sources[".".join(key_path)] = key
    try:
        return Config.model_validate(data, context={"environ": env})
    except ValidationError as exc:
        problems = validation_problems(exc)
    if collector_style:
        problems = [_as_protocols(p) for p in problems]
    raise ConfigError([_blame_env(p, sources) for p in problems])


def _as_protocols(problem: str) -> str:
    """Name a problem the way the file wrote the key (`protocols.grpc...`)."""
    for name in OTLP_PROTOCOLS:
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
