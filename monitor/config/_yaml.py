"""YAML read safely: libyaml's safe loader where installed; duplicate keys, aliases that
would expand past `MAX_ALIAS_EXPANSION` values and nesting past `MAX_DEPTH` are refused
before anything is built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from monitor.config._fields import ConfigError

# What aliases may add to a file's values in all: far above any config written by hand with
# anchors, far below what stalls loading (nine levels of ten aliases are 10**9 values).
MAX_ALIAS_EXPANSION = 100_000
_MERGE_TAG = "tag:yaml.org,2002:merge"
MAX_DEPTH = 500  # nested mappings and lists; a config needs a handful
_OPENING = frozenset({yaml.MappingStartEvent, yaml.SequenceStartEvent})
_CLOSING = frozenset({yaml.MappingEndEvent, yaml.SequenceEndEvent})
_YamlLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_YamlDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _ConfigLoader(_YamlLoader):  # type: ignore[misc,valid-type]
    """libyaml's safe loader where installed; before anything is built from a document,
    its node graph is checked for duplicate keys and for aliases that expand too far."""

    def construct_document(self, node: yaml.Node) -> Any:
        _check_nodes(node)
        return super().construct_document(node)


def _check_nodes(root: yaml.Node) -> None:
    """Every distinct node is visited once (an alias is the same node object again):
    duplicate keys are named, and the values aliases would add are counted."""
    expanded: dict[int, int] = {}  # node id → values it stands for, aliases expanded
    visiting: set[int] = set()

    def size(node: yaml.Node, path: str) -> int:
        key = id(node)
        if key in expanded:
            return expanded[key]
        if key in visiting:
            raise ConfigError([f"{path or '(top level)'}: a YAML alias refers to itself"])
        visiting.add(key)
        total = 1
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key_node, value_node in node.value:
                name = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                if name is not None and key_node.tag != _MERGE_TAG:
                    line = key_node.start_mark.line + 1
                    seen = first.get((key_node.tag, name))
                    if seen is not None:
                        where = f" in {path}" if path else ""
                        raise ConfigError(
                            [f"line {line}: duplicate key {name!r}{where} (first on line {seen})"]
                        )
                    first[(key_node.tag, name)] = line
                child = f"{path}.{name}" if path else str(name)
                total += size(key_node, path) + size(value_node, child)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                total += size(item, f"{path}.{index}" if path else str(index))
        visiting.discard(key)
        expanded[key] = total
        return total

    added = size(root, "") - len(expanded)
    if added > MAX_ALIAS_EXPANSION:
        raise ConfigError(
            [
                f"file: YAML aliases expand to {added} more values, over the limit of "
                f"{MAX_ALIAS_EXPANSION} (an alias bomb?); write the values out or use fewer aliases"
            ]
        )


def load_yaml(text: str) -> Any:
    """One YAML document, loaded safely; `ConfigError` for duplicate keys, alias bombs and
    nesting past `MAX_DEPTH`."""
    _check_depth(text)
    return yaml.load(text, Loader=_ConfigLoader)  # a SafeLoader subclass


def _check_depth(text: str) -> None:
    """libyaml builds nodes recursively in C, where nesting deep enough overflows the
    stack (a crash, not an exception): the events are counted first, which is flat."""
    depth = 0
    for event in yaml.parse(text, Loader=_YamlLoader):
        kind = type(event)
        if kind in _OPENING:
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigError(["file: invalid YAML: nested too deeply"])
        elif kind in _CLOSING:
            depth -= 1


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
        where = f"line {mark.line + 1}" if mark is not None else "file"
        raise ConfigError([f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}"]) from None
    except RecursionError:
        raise ConfigError(["file: invalid YAML: nested too deeply"]) from None
    except ValueError as exc:  # e.g. an integer over Python's 4300-digit limit
        raise ConfigError([f"file: invalid YAML: {exc}"]) from None
    if not isinstance(data, dict):
        raise ConfigError(["(top level): expected a mapping of sections"])
    return data
