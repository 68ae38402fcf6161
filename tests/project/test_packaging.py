"""pyproject.toml declares exactly the distributions whose modules `monitor/` imports, and
every distribution the other folders with code import is declared where they get it:
`training/` in the `training` extra, `tests/` and `bench/` in the `test` extra.

Every third-party import in the package (including imports inside functions,
`importlib.import_module("...")` with a literal name, and `importlib.util.find_spec("...")`:
a package whose files are read without importing it) is resolved to the installed
distribution that ships the imported module's file, and that distribution must be a
declared dependency; a declared dependency nothing imports is a leftover."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
import tomllib
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import monitor

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "monitor"


FIRST_PARTY = frozenset({"monitor", "bench", "tests", "training"})
# Each folder with code → the extras (beside the product's dependencies) it may import from.
FOLDER_EXTRAS = {"training": ("training",), "bench": ("test", "training"), "tests": ("test",)}


def _declared(extras: tuple[str, ...] = ()) -> dict[str, Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    requirements = (Requirement(line) for line in lines)
    return {canonicalize_name(r.name): r for r in requirements}


def _imported_modules(folder: Path = PACKAGE) -> dict[str, set[str]]:
    """Imported name (`a.b.c`, or `a.b.name` for `from a.b import name`) → files of
    `folder` that import it (first-party modules and a folder's own scripts left out)."""
    found: dict[str, set[str]] = {}
    # Benchmark and training scripts also import their neighbours by file name.
    local = {p.stem for p in folder.rglob("*.py")} if folder.name in ("bench", "training") else set()
    for path in folder.rglob("*.py"):
        where = str(path.relative_to(REPO))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Call):
                names = _import_module_names(node)
            for name in names:
                top = name.split(".")[0]
                if top not in FIRST_PARTY | local and top not in sys.stdlib_module_names:
                    found.setdefault(name, set()).add(where)
    return found


def _import_module_names(call: ast.Call) -> list[str]:
    """`import_module("x")`, also when handed over as `to_thread(import_module, "x")`, and
    `find_spec("x")`."""
    parts: list[ast.expr] = [call.func, *call.args]
    for i, part in enumerate(parts):
        name = part.attr if isinstance(part, ast.Attribute) else getattr(part, "id", None)
        if name in ("import_module", "find_spec"):
            return [
                arg.value
                for arg in parts[i + 1 : i + 2]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            ]
    return []


@cache
def _top_level() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


@cache
def _files(distribution: str) -> tuple[str, ...]:
    return tuple(str(f) for f in importlib.metadata.files(distribution) or ())


def _distribution_of(name: str) -> str | None:
    """The distribution shipping `name`. Namespace packages (`google`, `opentelemetry`)
    are split across several: the longest module path one of them ships decides."""
    top = name.split(".")[0]
    candidates = sorted(set(_top_level().get(top, [])))
    if len(candidates) <= 1:
        return canonicalize_name(candidates[0]) if candidates else None
    parts = name.split(".")
    for n in range(len(parts), 1, -1):
        path = "/".join(parts[:n])
        owners = {
            c
            for c in candidates
            if any(f == f"{path}.py" or f.startswith(f"{path}/") for f in _files(c))
        }
        if owners:
            assert len(owners) == 1, f"{name}: shipped by {sorted(owners)}"
            return canonicalize_name(owners.pop())
    return None


def test_every_imported_distribution_is_declared_and_every_declared_one_imported() -> None:
    declared = _declared()
    used: set[str] = set()
    problems = []
    for module, files in sorted(_imported_modules().items()):
        owner = _distribution_of(module)
        if owner is None:
            problems.append(f"{module} (imported by {sorted(files)}) is not installed")
            continue
        used.add(owner)
        if owner not in declared:
            problems.append(f"{module} comes from {owner}, which pyproject.toml does not declare")
    for name in sorted(set(declared) - used):
        problems.append(f"{name} is declared but monitor/ imports nothing from it")
    assert not problems, "\n".join(problems)


def test_every_folder_with_code_imports_only_what_it_declares() -> None:
    problems = []
    for folder, extras in FOLDER_EXTRAS.items():
        declared = _declared(extras)
        for module, files in sorted(_imported_modules(REPO / folder).items()):
            owner = _distribution_of(module)
            if owner is None:
                problems.append(f"{module} (imported by {sorted(files)}) is not installed")
            elif owner not in declared:
                problems.append(
                    f"{module} (imported by {sorted(files)[0]}) comes from {owner}, which "
                    f"pyproject.toml declares neither as a dependency nor in {', '.join(extras)}"
                )
    assert not problems, "\n".join(problems)


def test_the_scan_sees_namespace_packages_and_dynamic_imports() -> None:
    imported = _imported_modules()
    assert "litellm" in imported  # importlib.import_module("litellm")
    assert "wordllama" in imported  # importlib.util.find_spec("wordllama")
    assert _distribution_of("google.protobuf") == "protobuf"
    assert _distribution_of("google.rpc.status_pb2") == "googleapis-common-protos"
    assert _distribution_of("opentelemetry.trace") == "opentelemetry-api"


def test_private_kafka_module_is_bounded_and_codecs_come_from_its_extras() -> None:
    kafka = _declared()["kafka-python"]
    # receivers/kafka/_client.py imports kafka.net, which kafka-python does not promise to keep.
    assert any(spec.operator in ("<", "<=", "==", "~=") for spec in kafka.specifier), kafka
    assert {"lz4", "zstd", "snappy", "crc32c"} <= kafka.extras
    assert importlib.metadata.version("kafka-python") in kafka.specifier
    for codec in ("lz4", "zstandard", "python-snappy", "crc32c"):
        assert codec not in _declared(), f"{codec}: use kafka-python's extra instead"


def test_version_matches_the_package_metadata() -> None:
    assert importlib.metadata.version("rag-monitor") == monitor.__version__
