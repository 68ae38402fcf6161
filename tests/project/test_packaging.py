"""pyproject.toml declares exactly the distributions whose modules `monitor/` imports, and
every distribution the other folders with code import is declared where they get it:
`training/` in the `training` extra, `tests/` and `bench/` in the `test` extra, and the
real-framework apps (`harness/framework_envs.APP_ENVS`), which run from environments of
their own, in their stack's lock: each module they import is found there.

Every third-party import in the package (including imports inside functions,
`importlib.import_module("...")` with a literal name, and `importlib.util.find_spec("...")`:
a package whose files are read without importing it) is resolved to the installed
distribution that ships the imported module's file, and that distribution must be a
declared dependency; a declared dependency nothing imports is a leftover.

Features that are off by default come with an extra (`monitor.config.EXTRA_MODULES`): the
extra declares what the feature imports, and the package imports it only where the feature
is built, so that the default install (no extras) runs the default config."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import monitor
from harness.framework_envs import APP_ENVS, python_of
from monitor.config import EXTRA_MODULES

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "monitor"


FIRST_PARTY = frozenset({"monitor", "harness", "bench", "tests", "training"})
# The extras of the product's features, which `monitor/` may import from (lazily).
FEATURE_EXTRAS = tuple(EXTRA_MODULES)
# Each folder with code → the extras (beside the product's dependencies) it may import from.
FOLDER_EXTRAS = {
    "training": ("training",),
    "bench": ("test", "training"),
    "harness": ("test",),
    "tests": ("test",),
}
# Files of tests/ that run from a framework's environment, never this one: the apps (and
# the MCP server the OpenAI Agents app starts).
APP_FILES = {f"tests/frameworks/apps/{app}_app.py" for app in APP_ENVS} | {
    "tests/frameworks/apps/mcp_kb_server.py"
}


def _project() -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return project


def _requirements(extra: str | None) -> list[Requirement]:
    """The requirements of `extra` (None: the dependencies), each `rag-monitor[...]`
    replaced by what its extras require."""
    project = _project()
    lines = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    found = []
    for requirement in map(Requirement, lines):
        if canonicalize_name(requirement.name) == canonicalize_name(project["name"]):
            found += [r for name in sorted(requirement.extras) for r in _requirements(name)]
        else:
            found.append(requirement)
    return found


def _declared(extras: tuple[str, ...] = ()) -> dict[str, Requirement]:
    requirements = [r for extra in (None, *extras) for r in _requirements(extra)]
    return {canonicalize_name(r.name): r for r in requirements}


def _imported_modules(folder: Path = PACKAGE) -> dict[str, set[str]]:
    """Imported name (`a.b.c`, or `a.b.name` for `from a.b import name`) → files of
    `folder` that import it (first-party modules and a folder's own scripts left out)."""
    found: dict[str, set[str]] = {}
    # Benchmark and training scripts also import their neighbours by file name.
    local = (
        {p.stem for p in folder.rglob("*.py")} if folder.name in ("bench", "training") else set()
    )
    for path in folder.rglob("*.py"):
        where = str(path.relative_to(REPO))
        for name in _imports(path):
            top = name.split(".")[0]
            if top not in FIRST_PARTY | local and top not in sys.stdlib_module_names:
                found.setdefault(name, set()).add(where)
    return found


def _imports(path: Path) -> list[str]:
    """Every name the file at `path` imports (`a.b.c`, or `a.b.name` for `from a.b import
    name`), by statement or by `import_module`/`find_spec` with a literal name."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Call):
            names += _import_module_names(node)
    return names


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
    declared = _declared(FEATURE_EXTRAS)
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
            files -= APP_FILES
            if not files:
                continue
            owner = _distribution_of(module)
            if owner is None:
                problems.append(f"{module} (imported by {sorted(files)}) is not installed")
            elif owner not in declared:
                problems.append(
                    f"{module} (imported by {sorted(files)[0]}) comes from {owner}, which "
                    f"pyproject.toml declares neither as a dependency nor in {', '.join(extras)}"
                )
    assert not problems, "\n".join(problems)


def test_no_test_imports_the_bench() -> None:
    """What tests and bench share lives in harness/, which imports neither; a test never
    imports bench/ (a test may still run a bench script as a user would, as a command)."""
    found = [
        f"{path.relative_to(REPO)}: {name}"
        for folder, others in (("tests", {"bench"}), ("harness", {"bench", "tests"}))
        for path in sorted((REPO / folder).rglob("*.py"))
        for name in _imports(path)
        if name.split(".")[0] in others
    ]
    assert not found, found


def test_every_framework_app_imports_only_what_its_environment_holds() -> None:
    imported = _imported_modules(REPO / "tests")
    for app, env in sorted(APP_ENVS.items()):
        path = f"tests/frameworks/apps/{app}_app.py"
        tops = sorted({m.split(".")[0] for m, files in imported.items() if path in files})
        assert tops, f"{path} imports nothing from outside the repository"
        found = subprocess.run(
            [
                str(python_of(env)),
                "-c",
                "import importlib.util, sys; "
                "print([m for m in sys.argv[1:] if importlib.util.find_spec(m) is None])",
                *tops,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert found.stdout.strip() == "[]", f"{path}: not in the {env} environment: {found.stdout}"


def test_the_scan_sees_namespace_packages_and_dynamic_imports() -> None:
    imported = _imported_modules()
    assert "litellm" in imported  # importlib.import_module("litellm")
    assert "wordllama" in imported  # importlib.util.find_spec("wordllama")
    assert _distribution_of("google.protobuf") == "protobuf"
    assert _distribution_of("google.rpc.status_pb2") == "googleapis-common-protos"
    assert _distribution_of("opentelemetry.trace") == "opentelemetry-api"


def test_private_kafka_module_is_bounded_and_codecs_come_from_its_extras() -> None:
    kafka = _declared(("kafka",))["kafka-python"]
    # receivers/kafka/_client.py imports kafka.net, which kafka-python does not promise to keep.
    assert any(spec.operator in ("<", "<=", "==", "~=") for spec in kafka.specifier), kafka
    assert {"lz4", "zstd", "snappy", "crc32c"} <= kafka.extras
    assert importlib.metadata.version("kafka-python") in kafka.specifier
    for codec in ("lz4", "zstandard", "python-snappy", "crc32c"):
        assert codec not in _declared(FEATURE_EXTRAS), f"{codec}: use kafka-python's extra instead"


# -- extras -----------------------------------------------------------------------------


def test_each_feature_extra_declares_the_module_its_feature_imports() -> None:
    """Apart from the dependencies, with nothing in two extras; `all` is every feature
    extra, and the test extra installs them all so that the suite covers every feature."""
    extras = _project()["optional-dependencies"]
    assert set(extras) == {*FEATURE_EXTRAS, "all", "test", "training"}
    base = _declared()
    seen: dict[str, str] = {}
    for extra, module in EXTRA_MODULES.items():
        declared = {canonicalize_name(r.name) for r in _requirements(extra)}
        assert _distribution_of(module) in declared, f"{extra}: does not declare {module}"
        for name in declared:
            assert name not in base, f"{name}: in the dependencies and in the {extra} extra"
            assert seen.setdefault(name, extra) == extra, f"{name}: in {seen[name]} and {extra}"
    assert set(_declared(("all",))) == set(_declared(FEATURE_EXTRAS))
    assert set(_declared(FEATURE_EXTRAS)) <= set(_declared(("test",)))


def test_the_contract_lists_every_extra() -> None:
    contract = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")
    section = contract.split("## Extras", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([a-z-]+)` \|", section, re.M)
    assert listed == [*FEATURE_EXTRAS, "all"]


def _module_level_imports(tree: ast.Module) -> list[str]:
    """What a module imports when it is imported: its statements outside functions (also
    in class bodies and in `if`/`try`/`with` blocks), but not `if TYPE_CHECKING:`. Names as
    in `_imported_modules`."""
    found: list[str] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending += node.orelse
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            pending += [
                child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt)
            ]
            if isinstance(node, ast.Try):
                pending += [stmt for handler in node.handlers for stmt in handler.body]
    return found


def _eager_imports() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Module of `monitor/` → the package's modules it loads when imported (a module's
    parent packages included), and → the distributions it imports when imported."""
    paths = {
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }
    modules: dict[str, set[str]] = {}
    distributions: dict[str, set[str]] = {}
    for name, path in paths.items():
        modules[name], distributions[name] = set(), set()
        for imported in _module_level_imports(ast.parse(path.read_text(encoding="utf-8"))):
            top = imported.split(".")[0]
            if top == "monitor":
                parts = imported.split(".")
                modules[name] |= {
                    ".".join(parts[:n]) for n in range(1, len(parts) + 1)
                } & paths.keys()
            elif top not in FIRST_PARTY and top not in sys.stdlib_module_names:
                owner = _distribution_of(imported)
                if owner is not None:
                    distributions[name].add(owner)
        modules[name].discard(name)
    return modules, distributions


def _feature_of(module: str) -> str:
    """The feature a module belongs to: a package (`monitor.receivers.kafka`), or the
    module itself when it is a package or sits directly in `monitor/` (`monitor.telemetry`)."""
    is_package = PACKAGE.joinpath(*module.split(".")[1:], "__init__.py").exists()
    return module if is_package or module.count(".") < 2 else module.rpartition(".")[0]


def _loaders(module: str, modules: dict[str, set[str]]) -> set[str]:
    """`module` and every module of the package that loads it when imported."""
    found, pending = {module}, [module]
    while pending:
        current = pending.pop()
        for importer, imported in modules.items():
            if current in imported and importer not in found:
                found.add(importer)
                pending.append(importer)
    return found


def test_an_extra_is_imported_only_where_its_feature_is_built() -> None:
    """A module that imports an extra's distribution when it is imported is itself imported
    that way only within its feature (e.g. monitor/receivers/kafka/); everywhere else inside
    a function, which runs where the config turns the feature on."""
    modules, distributions = _eager_imports()
    in_extras = set(_declared(FEATURE_EXTRAS)) - set(_declared())
    problems = []
    for seed in sorted(m for m, found in distributions.items() if found & in_extras):
        feature = _feature_of(seed)
        for loader in sorted(_loaders(seed, modules)):
            if loader != feature and not loader.startswith(feature + "."):
                extras = sorted(distributions[seed] & in_extras)
                problems.append(f"{loader} loads {seed}, which imports {extras} when imported")
    assert not problems, "\n".join(problems)


def test_the_extras_check_sees_module_level_imports_only() -> None:
    tree = ast.parse(
        "import a\n"
        "from b.c import d\n"
        "if TYPE_CHECKING:\n    import e\n"
        "try:\n    import f\nexcept ImportError:\n    import g\n"
        "class H:\n    import i\n    def j(self):\n        import k\n"
        "def m():\n    import n\n"
    )
    assert sorted(_module_level_imports(tree)) == ["a", "b.c", "b.c.d", "f", "g", "i"]
    modules, distributions = _eager_imports()
    assert "kafka-python" in distributions["monitor.receivers.kafka._status"]
    assert "monitor.receivers.kafka" in modules["monitor.receivers.kafka._status"]
    assert "monitor.receivers.kafka" not in modules["monitor.service"]  # imported in a function
    assert _feature_of("monitor.receivers.kafka._status") == "monitor.receivers.kafka"
    assert _feature_of("monitor.telemetry") == "monitor.telemetry"
    assert _feature_of("monitor.records.redaction") == "monitor.records"


def test_version_matches_the_package_metadata() -> None:
    assert importlib.metadata.version("rag-monitor") == monitor.__version__
