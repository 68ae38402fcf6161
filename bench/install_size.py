"""What an install of rag-monitor takes on disk: a new virtual environment (`python -m venv`,
as the README's first command makes one) for the default install, one for each extra, and
the full install (`all`: every extra) as the reference measured in the same run.

    python bench/install_size.py [--extras judges kafka ...] [--keep DIR] [--all-from VENV]
                                 [--write-docs]

Each environment gets the package built from this checkout and its dependencies at the
versions of `tests/requirements.lock` (uv, `--compile-bytecode` so that the files are those
`pip install` leaves: pip compiles every module it installs). Size on disk is the blocks of
the environment's files and folders, as `du` counts them (a file linked twice counted once); distributions are the
environment's `*.dist-info` folders, its own pip and setuptools and rag-monitor included.
Downloads come from uv's cache where they are (`bash tests/run.sh` fills it), else from
the package index.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import bench_docs, bench_smoke  # noqa: E402

LOCK = REPO / "tests" / "requirements.lock"
MIB = 1024 * 1024
# Extras that are not product features.
_NOT_FEATURES = frozenset({"all", "test", "training"})


@dataclass(frozen=True)
class Install:
    name: str  # "default", an extra, or "all"
    bytes_on_disk: int
    distributions: dict[str, int]  # distribution name → bytes on disk of its files


def feature_extras() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [extra for extra in project["optional-dependencies"] if extra not in _NOT_FEATURES]


def _uv() -> str:
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.exists() else shutil.which("uv")
    if found is None:
        sys.exit("install_size: needs uv (pip install uv, or bash tests/run.sh)")
    return found


def _source(into: Path) -> Path:
    """What the distribution is built from (pyproject.toml's readme and package, and the
    distributions of its own that extras install), copied so that no build output lands in
    the checkout."""
    for folder in ("monitor", "extras"):  # extras/: distributions the extras install
        shutil.copytree(
            REPO / folder, into / folder, ignore=shutil.ignore_patterns("__pycache__", "build")
        )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, into / name)
    return into


def _disk_bytes(paths: list[Path], seen: set[tuple[int, int]]) -> int:
    total = 0
    for path in paths:
        stat = path.lstat()
        if (stat.st_dev, stat.st_ino) not in seen:
            seen.add((stat.st_dev, stat.st_ino))
            total += stat.st_blocks * 512
    return total


def _entries(folder: Path) -> list[Path]:
    """Every file and folder under `folder` (folders take blocks too, as `du` counts them)."""
    return [Path(root, name) for root, dirs, files in os.walk(folder) for name in dirs + files]


def _pycache(folder: Path, listed: dict[Path, list[str]]) -> list[str]:
    """The names in `folder`'s `__pycache__`, listed once per folder (a glob per module
    would read the folder again for each)."""
    if folder not in listed:
        cache = folder / "__pycache__"
        listed[folder] = os.listdir(cache) if cache.is_dir() else []
    return listed[folder]


def _per_distribution(venv: Path) -> dict[str, int]:
    """Distribution → bytes on disk of the files its RECORD lists (with their bytecode)."""
    site = next(venv.glob("lib/python*/site-packages"))
    sizes: dict[str, int] = {}
    pycache: dict[Path, list[str]] = {}
    for info in site.glob("*.dist-info"):
        record = info / "RECORD"
        name = info.name.removesuffix(".dist-info").rsplit("-", 1)[0]
        listed = [site / line.split(",")[0] for line in record.read_text().splitlines() if line]
        files = [p for p in listed if p.is_file()]
        cached = {
            p.parent / "__pycache__" / name
            for p in files
            if p.suffix == ".py"
            for name in _pycache(p.parent, pycache)
            if name.startswith(f"{p.stem}.") and name.endswith(".pyc")
        }
        sizes[name] = _disk_bytes(files + sorted(cached), set())
    return sizes


def measure(
    name: str, source: Path, scratch: Path, with_pip: bool = True, bytecode: bool = True
) -> Install:
    venv = scratch / f"venv-{name}"
    without = [] if with_pip else ["--without-pip"]
    subprocess.run([sys.executable, "-m", "venv", *without, str(venv)], check=True)
    target = str(source) if name == "default" else f"{source}[{name}]"
    compile_ = ["--compile-bytecode"] if bytecode else []
    subprocess.run(
        [
            _uv(),
            "pip",
            "install",
            "--quiet",
            *compile_,
            "--python",
            str(venv / "bin" / "python"),
            "-c",
            str(LOCK),
            target,
        ],
        check=True,
        cwd=source,  # where the lock's relative paths (./extras/...) are found
    )
    return measured(name, venv)


def measured(name: str, venv: Path) -> Install:
    """The install in the environment `venv`, as it is on disk."""
    return Install(name, _disk_bytes(_entries(venv), set()), _per_distribution(venv))


def report(installs: list[Install], largest: int) -> str:
    full = next(i for i in installs if i.name == "all")
    default = next(i for i in installs if i.name == "default")
    lines = [
        "| install | MiB on disk | distributions | share of the full install | over the default |",
        "|---|---|---|---|---|",
    ]
    for install in installs:
        command = (
            "pip install ." if install.name == "default" else f"pip install '.[{install.name}]'"
        )
        added = install.bytes_on_disk - default.bytes_on_disk
        lines.append(
            f"| `{command}` | {install.bytes_on_disk / MIB:.0f} | {len(install.distributions)} "
            f"| {install.bytes_on_disk / full.bytes_on_disk:.2f} "
            f"| {'' if install is default else f'+{added / MIB:.0f} MiB'} |"
        )
    heavy = sorted(default.distributions.items(), key=lambda item: -item[1])[:largest]
    lines += [
        "",
        f"The default install's {largest} largest distributions (MiB on disk): "
        + ", ".join(f"{name} {size / MIB:.0f}" for name, size in heavy),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    extras = feature_extras()
    parser.add_argument("--extras", nargs="*", choices=extras, default=extras)
    parser.add_argument("--largest", type=int, default=8, help="distributions to name")
    parser.add_argument("--keep", type=Path, help="build the environments here and keep them")
    parser.add_argument(
        "--all-from",
        type=Path,
        help="measure this environment, already built, as the full install instead of "
        "building one (--smoke: this interpreter's, a superset of `all`)",
    )
    parser.add_argument(
        "--without-pip",
        action="store_true",
        help="environments without their own pip and setuptools (--smoke: venv's pip "
        "install is most of its time)",
    )
    parser.add_argument(
        "--without-bytecode",
        action="store_true",
        help="environments without the bytecode pip would compile (--smoke: compiling is "
        "most of the install's CPU)",
    )
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(
        parser,
        extras=[],
        largest=2,
        all_from=Path(sys.prefix),
        without_pip=True,
        without_bytecode=True,
    )
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="install-size-"))
    scratch.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        source = _source(scratch / "source")
        options = (not args.without_pip, not args.without_bytecode)
        installs = [measure(name, source, scratch, *options) for name in ["default", *args.extras]]
        if args.all_from is None:
            installs.append(measure("all", source, scratch, *options))
        else:
            installs.append(measured("all", args.all_from))
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    body = (
        f"Python {sys.version.split()[0]}, the versions of `{LOCK.relative_to(REPO)}`; "
        f"{time.monotonic() - started:.0f} s in all.\n\n{report(installs, args.largest)}"
    )
    print(body)
    if args.write_docs:
        bench_docs.write_block("docs/performance.md", "install-size", body)


if __name__ == "__main__":
    main()
