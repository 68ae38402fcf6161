"""Whether the judges can be reached, known before the monitor starts.

`credential_problems`: every judge model and endpoint the config names, checked for the
credentials litellm will look for, without a call: the variable `judge.api_key_env`
names where the key goes to that endpoint; an `openai/` model at an `api_base` of its
own is a self-hosted server that needs none; otherwise the provider's own variables, as
`litellm.validate_environment` finds them for the model and endpoint. `check-config`,
`run` and `replay` refuse a config with a problem, naming the variable to set.

`ProbeResult`: what `check-config --probe` (`monitor.evaluators.probe`) found of each judge
evaluator, its failure named by kind; `explain` (`provider.py`) says what to change for
each kind (logged with the failure at run time too).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from monitor.config import Config
from monitor.judge.definitions import JUDGE_EVALUATORS
from monitor.judge.provider import import_litellm


@dataclass(frozen=True, slots=True)
class JudgeTarget:
    """One judge model at one endpoint, and the config keys that chose them."""

    model: str
    api_base: str | None  # None: the provider's default endpoint
    model_key: str  # `judge.model` or `evaluators.N.model`
    evaluators: tuple[str, ...]

    def __str__(self) -> str:
        where = f" at {self.api_base}" if self.api_base else ""
        return f"judge {self.model}{where} ({', '.join(self.evaluators)})"


def judge_targets(config: Config) -> list[JudgeTarget]:
    """Each distinct (model, endpoint) of the configured judge evaluators."""
    found: dict[tuple[str, str | None], tuple[str, list[str]]] = {}
    for i, entry in enumerate(config.evaluators):
        model = entry.model or config.judge.model
        if entry.name not in JUDGE_EVALUATORS or model is None:
            continue
        key = f"evaluators.{i}.model" if entry.model else "judge.model"
        endpoint = (model, entry.api_base or config.judge.api_base)
        found.setdefault(endpoint, (key, []))[1].append(entry.name)
    return [
        JudgeTarget(model, base, key, tuple(names)) for (model, base), (key, names) in found.items()
    ]


def credential_problems(
    config: Config, environ: Mapping[str, str] | None = None, litellm: Any = None
) -> list[str]:
    """One line per judge whose credentials are missing, naming the variable to set.
    Imports litellm (seconds) when a judge's provider is to be checked (one whose key is
    not `judge.api_key_env`'s) and `litellm` is not given."""
    env = os.environ if environ is None else environ
    targets = judge_targets(config)
    if not targets:
        return []
    judge = config.judge
    problems = []
    if judge.api_key_env is not None and not env.get(judge.api_key_env):
        problems.append(f"judge.api_key_env: environment variable {judge.api_key_env} is not set")
    for target in targets:
        if judge.api_key_env is not None and target.api_base == judge.api_base:
            continue  # the key of judge.api_key_env, checked above
        if litellm is None:
            litellm = import_litellm()
        try:
            litellm.get_llm_provider(target.model)
        except Exception:
            problems.append(
                f"{target.model_key}: litellm knows no provider for {target.model!r}; "
                "write provider/model (openai/gpt-4o-mini, ollama/llama3, ...)"
            )
            continue
        if target.api_base and target.model.startswith("openai/"):
            continue  # an OpenAI-compatible server of the user's own: no key (`Provider`)
        found = litellm.validate_environment(model=target.model, api_base=target.api_base)
        missing = [name for name in found.get("missing_keys", []) if not env.get(name)]
        if not found.get("keys_in_environment") and missing:
            problems.append(
                f"{target.model_key}: {target} needs {' / '.join(missing)}, which is not set: "
                "set it, or name the variable holding the key in judge.api_key_env"
            )
    return problems


@dataclass(frozen=True, slots=True)
class ProbeResult:
    target: JudgeTarget
    outcome: str  # ok, auth, not_found, unreachable, rate_limited, timeout, error
    detail: str

    def __str__(self) -> str:
        return f"{self.target}: {self.outcome}" + (f": {self.detail}" if self.detail else "")
