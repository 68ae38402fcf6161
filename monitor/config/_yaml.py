"""YAML read safely: PyYAML's safe loader (libyaml's parser where it is installed) with the
bounds a config needs and PyYAML does not set. Duplicate keys are refused, naming both
lines; aliases that would expand past `MAX_ALIAS_EXPANSION` values (the "billion laughs")
and nesting past `MAX_DEPTH` are refused before any value is built; tags no config needs
(`!!set`, `!!omap`, `!custom`, `!!python/...`) are refused.

The nodes are composed by PyYAML's own composer over libyaml's events rather than by
libyaml's: the latter recurses in C per level of nesting and cannot be bounded (100,000
nested brackets crash the interpreter)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.nodes import CollectionNode, MappingNode, Node, SequenceNode

from monitor.config._fields import ConfigError

# What aliases may add to a file's values in all: far above any config written by hand with
# anchors, far below what stalls loading (nine levels of ten aliases are 10**9 values).
MAX_ALIAS_EXPANSION = 100_000
# Nested mappings and lists; a config needs a handful. PyYAML's composer recurses (three
# frames a level here), so the bound stays well inside Python's recursion limit.
MAX_DEPTH = 100
_MERGE_TAG = "tag:yaml.org,2002:merge"
_YamlDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _line(node: Node | yaml.Event) -> int:
    return int(node.start_mark.line) + 1 if node.start_mark is not None else 0


class _Bounded(Composer, SafeConstructor):
    """The bounds, over the composer and the safe constructor of the loader below."""

    _open: list[str | None]  # the anchors of the collections being composed
    _root: Node | None
    _aliased: bool  # an alias was composed: a node may be reached twice
    peek_event: Callable[[], yaml.Event]  # the parser's (libyaml's or PyYAML's)

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            self._aliased = True
            if event.anchor in self._open:
                problem = f"the YAML alias *{event.anchor} refers to itself"
                raise ConfigError([f"line {_line(event)}: {problem}"])
            if event.anchor not in self.anchors:
                problem = f"the YAML alias *{event.anchor} names no anchor before it"
                raise ConfigError([f"line {_line(event)}: {problem}"])
        if not isinstance(event, yaml.CollectionStartEvent):
            return super().compose_node(parent, index)
        if len(self._open) >= MAX_DEPTH:
            raise ConfigError([f"line {_line(event)}: invalid YAML: nested too deeply"])
        self._open.append(event.anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._open.pop()

    def construct_document(self, node: Node) -> Any:
        # Without an alias the nodes are a tree: nothing expands.
        added = _expanded(node) if self._aliased else 0
        if added > MAX_ALIAS_EXPANSION:
            raise ConfigError(
                [
                    f"YAML aliases expand to more than {MAX_ALIAS_EXPANSION} more values, "
                    "over the limit (an alias bomb?); write the values out or use fewer aliases"
                ]
            )
        self._root = node
        return super().construct_document(node)

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        if isinstance(node, MappingNode):  # also called on others, to say it wants one
            self._check_keys(node)
        return super().construct_mapping(node, deep)

    def _check_keys(self, node: MappingNode) -> None:
        """Merge keys take mappings; no key is a collection or written twice (merged keys
        may be, which is what merging is for)."""
        first: dict[Any, int] = {}
        for key_node, value_node in node.value:
            line = _line(key_node)
            if key_node.tag == _MERGE_TAG:
                merged = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                if not all(isinstance(m, MappingNode) for m in merged):
                    raise ConfigError(
                        [f"line {line}: a merge key (<<) takes a mapping or a list of them"]
                    )
                continue
            if isinstance(key_node, CollectionNode):
                raise ConfigError([f"line {line}: a mapping or list used as a key"])
            key = self.construct_object(key_node)
            if key in first:
                path = self._path(node)
                where = f" in {path}" if path else ""
                raise ConfigError(
                    [f"line {line}: duplicate key {key!r}{where} (first on line {first[key]})"]
                )
            first[key] = line

    def _path(self, target: Node) -> str:
        """Where `target` is in the document, as `sampling.overrides.3` (for a message)."""
        roots = [] if self._root is None else [self._root]
        stack: list[tuple[Node, tuple[str, ...]]] = [(root, ()) for root in roots]
        seen: set[int] = set()
        while stack:
            node, path = stack.pop()
            if node is target:
                return ".".join(path)
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, SequenceNode):
                stack += [(child, (*path, str(i))) for i, child in enumerate(node.value)]
            elif isinstance(node, MappingNode):
                stack += [(v, (*path, str(k.value))) for k, v in node.value]
        return ""


def _expanded(root: Node) -> int:
    """How many more values the document stands for with its aliases expanded than it
    holds: an alias is the node it names, shared, so a node reached twice counts twice."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, SequenceNode):
            children = list(node.value)
        else:
            sizes[id(node)] = 1
            continue
        if children_done:
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
        else:
            stack.append((node, True))
            stack += [(child, False) for child in children if id(child) not in sizes]
    return sizes[id(root)] - len(sizes)


def _refused(loader: _Loader, node: Node) -> Any:
    raise ConfigError([f"line {_line(node)}: unsupported YAML tag {node.tag!r}"])


if hasattr(yaml, "CSafeLoader"):

    class _Loader(_Bounded, yaml.CSafeLoader):
        def __init__(self, stream: str) -> None:
            yaml.CSafeLoader.__init__(self, stream)
            Composer.__init__(self)  # its anchors; libyaml's composer is not used
            self._open, self._root, self._aliased = [], None, False

else:  # pragma: no cover - PyYAML without libyaml

    class _Loader(_Bounded, yaml.SafeLoader):  # type: ignore[no-redef]
        def __init__(self, stream: str) -> None:
            yaml.SafeLoader.__init__(self, stream)
            self._open, self._root, self._aliased = [], None, False


# Tags no constructor knows, and collections a config has no use for.
for _tag in (None, "tag:yaml.org,2002:set", "tag:yaml.org,2002:omap", "tag:yaml.org,2002:pairs"):
    _Loader.add_constructor(_tag, _refused)


def load_yaml(text: str) -> Any:
    """One YAML document, loaded safely (the safe loader's types; `!!set`, `!!omap` and
    other tags no config needs are refused); `ConfigError` for duplicate keys, alias
    bombs, nesting past `MAX_DEPTH` and more than one document."""
    try:
        with _collector_paused():
            return yaml.load(text, Loader=_Loader)
    except ComposerError as exc:
        if exc.context == "expected a single document in the stream" and exc.problem_mark:
            line = exc.problem_mark.line + 1
            raise ConfigError([f"line {line}: expected a single YAML document"]) from None
        raise


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a document loads or is written: either
    creates a node per scalar (and a load a value), kept or freed by their reference
    counts, and the collections their number triggers walk all of them again and again (a
    large file loads several times slower). Turned back on only where it was on."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def dump_yaml(data: Any) -> str:
    """Plain data as YAML, keys in their order (libyaml's dumper where installed)."""
    with _collector_paused():
        return yaml.dump(data, Dumper=_YamlDumper, sort_keys=False, allow_unicode=True)


def read_yaml_file(path: Path) -> dict[str, Any]:
    """A YAML file that holds a mapping (a config, a web config); `ConfigError` naming the
    file, and the line where there is one, otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read: {exc.strerror}"]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not UTF-8 text (byte {exc.start})"]) from None
    try:
        data = load_yaml(text) or {}
    except ConfigError as exc:
        raise ConfigError([f"{path}: {problem}" for problem in exc.problems]) from None
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
