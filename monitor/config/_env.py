"""The environment in a configuration: `${env:VAR}` / `${env:VAR:-default}` references in
values, and `RAG_MONITOR_<SECTION>__<KEY>` overrides."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from monitor.config._fields import ConfigError, EnvText
from monitor.config._yaml import load_yaml

ENV_PREFIX = "RAG_MONITOR_"
_ENV_REF = re.compile(r"\$(\$?)\{([^{}]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PROVIDER = re.compile(r"[a-z][a-z0-9]*:")


def _typed(raw: str) -> Any:
    """A value from the environment: YAML lists, mappings and `null` are parsed, any other
    text stays text (validation converts `0.5`, `true`, `8` where a number or flag is
    wanted) — so a token such as `012345` is never read as an octal number."""
    if not raw:
        return EnvText(raw)
    try:
        parsed = load_yaml(raw)
    except (yaml.YAMLError, ConfigError, ValueError, RecursionError):
        return EnvText(raw)
    return parsed if parsed is None or isinstance(parsed, list | dict) else EnvText(raw)


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


def expand_env_refs(
    data: dict[str, Any], environ: Mapping[str, str]
) -> tuple[dict[str, str], list[str], list[str]]:
    """Substitute `${env:...}` in place; returns ({path: variables} for blaming problems,
    the references that could not be expanded, the paths of their values). A mapping's
    value that could not be expanded is taken out (validated as if not written, so the
    rest of the file is still checked: every problem in one run); a list's stays as written."""
    problems: list[str] = []
    failed: list[str] = []
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
            failed.append(".".join(path))
            if isinstance(container, dict):
                del container[key]
            continue
        if used:
            sources[".".join(path)] = ", ".join(f"${{env:{n}}}" for n in used)
    return sources, problems, failed


def env_overrides(
    environ: Mapping[str, str], sections: frozenset[str]
) -> list[tuple[str, list[str], Any]]:
    """`RAG_MONITOR_<SECTION>__<KEY>=value` → (name, ["section", "key"], value).

    A variable is a config override when its first `__`-separated part names one of
    `sections` (or
    when it has `__` at all, so a misspelt section is reported rather than ignored). Other
    `RAG_MONITOR_*` variables (`RAG_MONITOR_LOG_LEVEL`, ...) belong to the command line."""
    out = []
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        path = [p.lower() for p in key[len(ENV_PREFIX) :].split("__")]
        if path[0] not in sections and len(path) == 1:
            continue
        out.append((key, path, _typed(raw)))
    return out


def apply_override(data: dict[str, Any], path: list[str], value: Any) -> None:
    """Set `value` at `path` in the loaded data, creating the mappings on the way."""
    node = data
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value
