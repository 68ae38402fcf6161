"""An evaluator's revision: what decides its verdicts, named so that a change shows.

`revision(entry, judge)` is the monitor's version and a short hash of everything in the
evaluator's config that changes a verdict, as resolved (a default written out is the default
left out: `registry.resolved`): its name, threshold and severity threshold, the
judge's model, prompt, rubric and answer format, escalation band, the second stage, the
trustworthiness options. The monitor's version stands for its detector and its default
prompts (both ship with it). Not included: sampling and budgets, endpoints and keys,
timeouts and retries (they change which records are judged or how fast, not the verdict).

Every result carries it (`EvalResult.revision`); an alert rule's baseline belongs to one
revision (`monitor.alerts.engine`), and OTLP evaluation events carry it.
"""

from __future__ import annotations

import hashlib
import json

from monitor.config import EvaluatorConfig, Judge
from monitor.evaluators.registry import resolved
from monitor.judge.definitions import JUDGE_EVALUATORS
from monitor.shared.version import __version__


def revision(entry: EvaluatorConfig, judge: Judge) -> str:
    """`<monitor version>+<8 hex digits>` for `entry` (see the module docstring)."""
    decisive = resolved(entry).model_dump(
        mode="json",
        include={
            "name",
            "threshold",
            "severity_threshold",
            "prompt",
            "escalate_from",
            "band",
            "rubric",
            "tlm",
            "second_stage",
        },
    )
    if entry.name in JUDGE_EVALUATORS:
        decisive["model"] = entry.model or judge.model
        decisive["structured_output"] = judge.structured_output
        decisive["max_output_tokens"] = judge.max_output_tokens
    digest = hashlib.sha256(json.dumps(decisive, sort_keys=True).encode()).hexdigest()
    return f"{__version__}+{digest[:8]}"
