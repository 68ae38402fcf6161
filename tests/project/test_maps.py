"""The two maps of the package name every package in it: CONTRIBUTING.md's "Where things
live" (as `monitor/<package>/`) and monitor/README.md's table (as `<package>/`)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "monitor"


def _packages() -> list[str]:
    """The package's subpackages, top level and the processors' stages."""
    found = []
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        found.append(init.parent.name)
    for init in sorted((PACKAGE / "processors").glob("*/__init__.py")):
        found.append(f"processors/{init.parent.name}")
    return found


def test_every_package_is_found() -> None:
    assert {"audit", "evidence", "extraction", "processors/trace"} <= set(_packages())


@pytest.mark.parametrize("package", _packages())
def test_each_package_is_on_both_maps(package: str) -> None:
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    readme = (PACKAGE / "README.md").read_text(encoding="utf-8")
    assert f"`monitor/{package}/`" in contributing, (
        f"CONTRIBUTING.md's map lacks monitor/{package}/"
    )
    assert f"`{package}/`" in readme or f"`{package.split('/')[-1]}/`" in readme, (
        f"monitor/README.md's table lacks {package}/"
    )
