"""YAML read safely, and fast: values are built straight from libyaml's events (no node
graph, no recursion), with the safe loader's types; duplicate keys, aliases that would
expand past `MAX_ALIAS_EXPANSION` values and nesting past `MAX_DEPTH` are refused as they
are met, naming the line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from monitor.config._fields import ConfigError

# What aliases may add to a file's values in all: far above any config written by hand with
# anchors, far below what stalls loading (nine levels of ten aliases are 10**9 values).
MAX_ALIAS_EXPANSION = 100_000
MAX_DEPTH = 500  # nested mappings and lists; a config needs a handful
_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"
_COLLECTION_TAGS = (None, "!", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")
_YamlLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_YamlDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
# The safe loader's implicit types of plain scalars, by first character.
_IMPLICIT = Resolver.yaml_implicit_resolvers
_CONSTRUCT = SafeConstructor.yaml_constructors
_MERGE = object()  # the `<<` key
_NO_KEY = object()  # a mapping waiting for a key, not a value


@dataclass(slots=True)
class _Open:
    """A mapping or list being built."""

    value: dict[Any, Any] | list[Any]
    anchor: str | None
    line: int  # where it starts
    size: int = 1  # values it stands for, aliases expanded
    key: Any = _NO_KEY  # a mapping's key waiting for its value
    key_line: int = 0
    lines: dict[Any, int] = field(default_factory=dict)  # key → line, for duplicates
    merges: list[dict[Any, Any]] = field(default_factory=list)


class _Builder:
    """One YAML document from its events."""

    def __init__(self) -> None:
        self.stack: list[_Open] = []
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.expanded = 0  # values aliases added
        self.constructor = SafeConstructor()
        self.documents = 0
        self.result: Any = None

    def feed(self, event: yaml.Event) -> None:
        kind = type(event)
        if kind is yaml.ScalarEvent:
            self.scalar(event)
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            self.open(event, {} if kind is yaml.MappingStartEvent else [])
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            self.close()
        elif kind is yaml.AliasEvent:
            self.alias(event)
        elif kind is yaml.DocumentStartEvent:
            self.documents += 1
            if self.documents > 1:
                raise ConfigError([f"line {_line(event)}: expected a single YAML document"])

    def open(self, event: Any, value: dict[Any, Any] | list[Any]) -> None:
        if event.tag not in _COLLECTION_TAGS:
            raise ConfigError([f"line {_line(event)}: unsupported YAML tag {event.tag!r}"])
        if len(self.stack) >= MAX_DEPTH:
            raise ConfigError(["file: invalid YAML: nested too deeply"])
        self.stack.append(_Open(value, event.anchor, _line(event)))

    def close(self) -> None:
        done = self.stack.pop()
        value = done.value
        if done.merges:  # explicit keys win, then the first mapping merged
            merged: dict[Any, Any] = {}
            for mapping in reversed(done.merges):
                merged.update(mapping)
            merged.update(value)
            value = merged
        self.add(value, done.size, done.anchor, done.line)

    def scalar(self, event: Any) -> None:
        tag = event.tag
        text = event.value
        if tag is None or tag == "!":
            if not event.implicit[0]:
                self.add(text, 1, event.anchor, _line(event))  # quoted: text
                return
            tag = _STR_TAG
            for candidate, pattern in _IMPLICIT.get(text[:1], ()):
                if pattern.match(text):
                    tag = candidate
                    break
        if tag == _STR_TAG:
            value: Any = text
        elif tag == _MERGE_TAG:
            value = _MERGE
        else:
            construct = _CONSTRUCT.get(tag)
            if construct is None or tag.endswith((":map", ":seq", ":omap", ":pairs", ":set")):
                raise ConfigError([f"line {_line(event)}: unsupported YAML tag {tag!r}"])
            node = yaml.ScalarNode(tag, text, event.start_mark, event.end_mark, event.style)
            value = construct(self.constructor, node)
        self.add(value, 1, event.anchor, _line(event))

    def alias(self, event: Any) -> None:
        found = self.anchors.get(event.anchor)
        if found is None:
            if any(frame.anchor == event.anchor for frame in self.stack):
                problem = f"the YAML alias *{event.anchor} refers to itself"
            else:
                problem = f"the YAML alias *{event.anchor} names no anchor before it"
            raise ConfigError([f"line {_line(event)}: {problem}"])
        value, size = found
        self.expanded += size
        if self.expanded > MAX_ALIAS_EXPANSION:
            raise ConfigError(
                [
                    f"file: YAML aliases expand to more than {MAX_ALIAS_EXPANSION} more values, "
                    "over the limit (an alias bomb?); write the values out or use fewer aliases"
                ]
            )
        self.add(value, size, None, _line(event))

    def add(self, value: Any, size: int, anchor: str | None, line: int = 0) -> None:
        if anchor is not None:
            self.anchors[anchor] = (value, size)
        if not self.stack:
            self.result = value
            return
        top = self.stack[-1]
        top.size += size
        container = top.value
        if isinstance(container, list):
            container.append(value)
        elif top.key is _NO_KEY:
            if isinstance(value, dict | list):
                raise ConfigError([f"line {line}: a mapping or list used as a key"])
            top.key, top.key_line = value, line
        else:
            key, top.key = top.key, _NO_KEY
            if key is _MERGE:
                self.merge(top, value, top.key_line)
                return
            first = top.lines.get(key)
            if first is not None:
                where = f" in {self.path()}" if len(self.stack) > 1 else ""
                raise ConfigError(
                    [f"line {top.key_line}: duplicate key {key!r}{where} (first on line {first})"]
                )
            top.lines[key] = top.key_line
            container[key] = value

    def merge(self, top: _Open, value: Any, line: int) -> None:
        """`<<: *base` or `<<: [*a, *b]`: mappings whose keys the mapping takes, its own
        keys first, then the first listed."""
        mappings = value if isinstance(value, list) else [value]
        if not all(isinstance(m, dict) for m in mappings):
            raise ConfigError([f"line {line}: a merge key (<<) takes a mapping or a list of them"])
        top.merges += mappings

    def path(self) -> str:
        """Where the innermost open mapping is, as `sampling.overrides.3`."""
        parts = []
        for frame in self.stack[:-1]:
            if isinstance(frame.value, list):
                parts.append(str(len(frame.value)))
            else:
                parts.append(str(frame.key))
        return ".".join(parts)


def _line(event: Any) -> int:
    return int(event.start_mark.line) + 1 if event.start_mark is not None else 0


def load_yaml(text: str) -> Any:
    """One YAML document, loaded safely (the safe loader's types; `!!set`, `!!omap` and
    other tags no config needs are refused); `ConfigError` for duplicate keys, alias
    bombs, nesting past `MAX_DEPTH` and more than one document."""
    builder = _Builder()
    for event in yaml.parse(text, Loader=_YamlLoader):
        builder.feed(event)
    return builder.result


def dump_yaml(data: Any) -> str:
    """Plain data as YAML, keys in their order (libyaml's dumper where installed)."""
    return yaml.dump(data, Dumper=_YamlDumper, sort_keys=False, allow_unicode=True)


def read_yaml_file(path: Path) -> dict[str, Any]:
    """A YAML file that holds a mapping (a config, a web config); `ConfigError` naming the
    line or the file otherwise."""
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
        problem = getattr(exc, "problem", exc)
        if mark is None:
            raise ConfigError([f"{path}: invalid YAML: {problem}"]) from None
        lines = text.splitlines() or [""]
        line = lines[min(mark.line, len(lines) - 1)]
        if line[mark.column : mark.column + 1] == "\t" or (
            line[: mark.column].isspace() and "\t" in line[: mark.column]
        ):
            problem = f"a tab at column {mark.column + 1}; YAML indents with spaces only"
        raise ConfigError([f"{path}: line {mark.line + 1}: invalid YAML: {problem}"]) from None
    except RecursionError:
        raise ConfigError([f"{path}: invalid YAML: nested too deeply"]) from None
    except ValueError as exc:  # e.g. an integer over Python's 4300-digit limit
        raise ConfigError([f"{path}: invalid YAML: {exc}"]) from None
    if not isinstance(data, dict):
        raise ConfigError(["(top level): expected a mapping of sections"])
    return data
