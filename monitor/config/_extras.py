"""Features that are off by default and come with an extra of the distribution
(pyproject.toml's `[project.optional-dependencies]`): the default install serves the
default config, and a config that turns such a feature on while its extra is not installed
is refused at load, naming the extra and the command that installs it.

Whether an extra is installed is asked of the import system without importing anything
(`importlib.util.find_spec`), so validating a config stays cheap.
"""

from __future__ import annotations

import importlib.util

# Extra → the top-level module its distribution provides, which the feature imports.
EXTRA_MODULES = {
    "judges": "litellm",
    "second-stage": "onnxruntime",
    "redaction": "phonenumbers",
    "kafka": "kafka",
}


def extra_installed(extra: str) -> bool:
    return importlib.util.find_spec(EXTRA_MODULES[extra]) is not None


def missing_extra(extra: str, feature: str) -> str | None:
    """None when `extra` is installed; else what to tell the user who configured `feature`."""
    if extra_installed(extra):
        return None
    return f"{feature} needs the {extra} extra (not installed): pip install 'rag-monitor[{extra}]'"
