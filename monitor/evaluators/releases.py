"""The detector parameters this release ships, and the previous release's it carries
(docs/alerts.md, "A monitor upgrade shadows itself").

`releases.json` names this release's `version` with the SHA-256 of each parameter file it
ships (`monitor/detector/groundedness_model.json`, `pair_head.npz`), and `previous`: null,
or the version of the release before, whose parameter files are kept as data under
`releases/<version>/` (the same two names). A release whose detector was refitted moves
the files the last release shipped there and names it; `tests/detector/test_releases.py`
checks the digests against the files, so a refit without that step fails there.

What a previous revision covers: the detector's fitted parameters, scored by this release's
code (its features, rules and word vectors) with the entry's own keys. A release that changed
the detector's code, or another evaluator's (a judge's default prompt), carries no previous
revision of it: those verdicts are not reproduced from data, and the alert rules judge on
the interim level after the upgrade, logged so.

Read by the main process (stdlib only: the detector itself loads in the worker processes).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

MANIFEST = Path(__file__).with_name("releases.json")
DETECTOR = Path(__file__).resolve().parent.parent / "detector"
# The detector's parameter files: the first stage's model, the second stage's head.
FILES = ("groundedness_model.json", "pair_head.npz")


@dataclass(frozen=True, slots=True)
class Release:
    """A release's version and its detector's parameter files (model, head)."""

    version: str
    model: Path
    head: Path

    def released(self) -> tuple[str, str, str]:
        """As `EvaluatorConfig.released` takes it."""
        return self.version, str(self.model), str(self.head)


def _manifest(path: Path) -> dict[str, object]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("version"), str):
        raise ValueError(f"{path}: not a releases manifest (no version)")
    return data


def shipped(path: Path = MANIFEST) -> tuple[str, dict[str, str]]:
    """The version the manifest names for this release, and its parameters' digests."""
    data = _manifest(path)
    digests = data.get("parameters")
    if not isinstance(digests, dict) or set(digests) != set(FILES):
        raise ValueError(f"{path}: parameters must name {', '.join(FILES)}")
    return str(data["version"]), {str(k): str(v) for k, v in digests.items()}


def digest(file: Path) -> str:
    return hashlib.sha256(file.read_bytes()).hexdigest()


def previous(path: Path = MANIFEST) -> Release | None:
    """The previous release this one carries (None: its detector's parameters did not
    change, or no release came before); ValueError where the manifest is malformed or its
    files are missing."""
    shipped(path)
    version = _manifest(path).get("previous")
    if version is None:
        return None
    if not isinstance(version, str) or not version or "/" in version or version[0] == ".":
        raise ValueError(f"{path}: previous is not a version")
    folder = path.with_suffix("") / version
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        raise ValueError(f"{path}: release {version} lacks {', '.join(missing)} in {folder}")
    return Release(version, folder / FILES[0], folder / FILES[1])
