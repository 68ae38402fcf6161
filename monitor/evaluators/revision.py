"""An evaluator's revision: what decides its verdicts, named so that a change shows.

`revision(entry, judge)` is the monitor's version and a short hash of everything in the
evaluator's config that changes a verdict, as resolved (a default written out is the default
left out: `registry.resolved`): its name, threshold and severity threshold, the
judge's model, prompt, language, rubric and answer format, escalation band, the second stage, the
trustworthiness options. The monitor's version stands for its detector and its default
prompts (both ship with it); an entry of a previous release's revision that this release
carries (`EvaluatorConfig.released`) names that release's version. Not included: sampling and budgets, endpoints and keys,
timeouts and retries (they change which records are judged or how fast, not the verdict).

Every result carries it (`EvalResult.revision`); an alert rule's baseline belongs to one
revision (`monitor.alerts.engine`), and OTLP evaluation events carry it.
"""

from __future__ import annotations

import hashlib
import json

from monitor.config import EvaluatorConfig, Judge
from monitor.evaluators.registry import decisive
from monitor.shared.version import __version__


def revision(entry: EvaluatorConfig, judge: Judge) -> str:
    """`<monitor version>+<8 hex digits>` for `entry` (see the module docstring)."""
    digest = hashlib.sha256(json.dumps(decisive(entry, judge), sort_keys=True).encode())
    version = __version__ if entry.release is None else entry.release[0]
    return f"{version}+{digest.hexdigest()[:8]}"
