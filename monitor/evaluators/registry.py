"""Evaluator names → factories, and the config checks only the evaluators can make."""

from __future__ import annotations

import difflib

from monitor.config import (
    Config,
    ConfigError,
    EvaluatorConfig,
    Judge,
    TrustworthinessTlm,
    missing_extra,
)
from monitor.evaluators import f1, local
from monitor.evaluators.base import Evaluator
from monitor.evaluators.factory import BuildContext, Factory
from monitor.judge.definitions import (
    DEFINITIONS,
    JUDGE_EVALUATORS,
    TLM,
    Answer,
    judge_config_problem,
)


# The judge evaluators' modules import the judge client (and, through it, its redaction
# and metrics): imported when a judge is built, so that a process that builds none — the
# worker processes, a sidecar with only local evaluators — does not load them.
def _judge(entry: EvaluatorConfig, context: BuildContext) -> Evaluator:
    from monitor.evaluators.judges import FACTORIES

    return FACTORIES[entry.name](entry, context)


def _tlm(entry: EvaluatorConfig, context: BuildContext) -> Evaluator:
    from monitor.evaluators.tlm import FACTORIES

    return FACTORIES[entry.name](entry, context)


_FACTORIES: dict[str, Factory] = {
    **dict.fromkeys(sorted(DEFINITIONS), _judge),
    TLM: _tlm,
    **f1.FACTORIES,
    **local.FACTORIES,
}

# The native scale `evaluators[].threshold` is compared on, by judge answer kind; None:
# the verdict needs no threshold (YES/NO, PASS/FAIL, safety severity).
_ANSWER_SCALES: dict[Answer, tuple[float, float] | None] = {
    "score5": (1.0, 5.0),
    "rubric": (1.0, 5.0),
    "retrieval": (1.0, 5.0),
    "unit": (0.0, 1.0),
    "chunks": (0.0, 1.0),
    "yes_no": None,
    "pass_fail": None,
    "severity": None,
}
# Local scorers (and `f1`) score 0..1; the safety screen grades severity instead.
_SEVERITY_ONLY = frozenset({"local_safety"})


def known_evaluators() -> frozenset[str]:
    return frozenset(_FACTORIES)


def needs_context(name: str) -> bool:
    """Whether evaluator `name` skips a record that has no context (it cannot score it)."""
    if name in local.CLASSES:
        return "context" in local.CLASSES[name].requires
    definition = DEFINITIONS.get(name)
    return definition is not None and "context" in definition.requires


def threshold_scale(name: str) -> tuple[float, float] | None:
    """The range a threshold for evaluator `name` lies in, or None when it takes none."""
    definition = DEFINITIONS.get(name)
    if definition is not None:
        return _ANSWER_SCALES[definition.answer]
    return None if name in _SEVERITY_ONLY else (0.0, 1.0)


def check_evaluators(config: Config) -> None:
    """`evaluator_problems` of a loaded config; raises `ConfigError` with one
    `evaluators.N.key: problem` line per problem."""
    problems = evaluator_problems(list(config.evaluators), config.judge.model)
    if problems:
        raise ConfigError([f"evaluators.{problem}" for problem in problems])


def default_threshold(name: str) -> float | None:
    """The pass mark an entry without `threshold` gets: the middle of a 0..1 scale, 3 on a
    1..5 scale; None for evaluators that take none."""
    scale = threshold_scale(name)
    if scale is None:
        return None
    return 3.0 if scale == (1.0, 5.0) else 0.5


def default_severity_threshold(name: str) -> str | None:
    """The severity from which a safety evaluator's verdict is a defect when the entry
    names none; None for evaluators that grade no severity."""
    definition = DEFINITIONS.get(name)
    grades = name in _SEVERITY_ONLY or (definition is not None and definition.answer == "severity")
    return "medium" if grades else None


def resolved(entry: EvaluatorConfig) -> EvaluatorConfig:
    """`entry` as its evaluator runs it: the threshold, severity threshold, second stage and
    trustworthiness options it applies where the entry names none filled in, so that an
    entry that writes a default out is the same entry as one that leaves it out."""
    filled: dict[str, object] = {}
    if entry.threshold is None:
        filled["threshold"] = default_threshold(entry.name)
    if entry.severity_threshold is None:
        filled["severity_threshold"] = default_severity_threshold(entry.name)
    if entry.name in DEFINITIONS and entry.language is None:
        filled["language"] = "en"
    if entry.name == "local_groundedness" and entry.second_stage is None:
        filled["second_stage"] = False
    if entry.name == TLM:
        options = entry.tlm or TrustworthinessTlm()
        reflections = options.reflections
        filled["tlm"] = options.model_copy(
            update={
                "draws": options.draw_count,
                "reflection": reflections > 0,
                "reflection_wordings": reflections or None,
            }
        )
    return entry.model_copy(update=filled)


def decisive(entry: EvaluatorConfig, judge: Judge) -> dict[str, object]:
    """What of `entry`, as resolved, decides its verdicts (`monitor.evaluators.revision`)."""
    out = resolved(entry).model_dump(
        mode="json",
        include={
            "name",
            "threshold",
            "severity_threshold",
            "prompt",
            "escalate_from",
            "band",
            "rubric",
            "language",
            "tlm",
            "second_stage",
        },
    )
    if entry.name in JUDGE_EVALUATORS:
        out["model"] = entry.model or judge.model
        out["structured_output"] = judge.structured_output
        out["max_output_tokens"] = judge.max_output_tokens
    return out


def evaluator_problems(entries: list[EvaluatorConfig], judge_model: str | None) -> list[str]:
    """What only the evaluators can judge about `evaluators` entries: every name is known,
    every threshold lies on its evaluator's native scale, every judge has a model and a
    usable prompt, and the extra an entry needs (judges, the second stage) is installed.
    One `N.key: problem` line per problem (N the entry's index)."""
    problems: list[str] = []
    for i, entry in enumerate(entries):
        if entry.next is not None:
            problems.extend(
                _revision_problems(i, "next", entry, entry.next.entry(entry), judge_model)
            )
        if entry.name not in _FACTORIES:
            close = difflib.get_close_matches(entry.name, list(_FACTORIES), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            problems.append(
                f"{i}.name: unknown evaluator {entry.name!r} "
                f"({hint}known: {', '.join(sorted(_FACTORIES))})"
            )
            continue
        if entry.threshold is not None:
            problem = _threshold_problem(entry.name, entry.threshold)
            if problem is not None:
                problems.append(f"{i}.threshold: {problem}")
        if entry.tlm is not None and entry.name != TLM:
            problems.append(f"{i}.tlm: only {TLM} takes tlm options")
        if entry.second_stage is not None and entry.name != "local_groundedness":
            problems.append(f"{i}.second_stage: only local_groundedness takes second_stage")
        elif entry.second_stage and (extra := missing_extra("second-stage", "the second stage")):
            problems.append(f"{i}.second_stage: {extra}")
        if entry.name in JUDGE_EVALUATORS and (
            extra := missing_extra("judges", f"{entry.name}, an LLM judge,")
        ):
            problems.append(f"{i}.name: {extra}")
        model = entry.model or judge_model
        problem = judge_config_problem(
            entry.name, model, entry.prompt, entry.rubric, entry.language
        )
        if problem is not None:
            problems.append(f"{i}.{problem}")
    return problems


def _revision_problems(
    i: int, key: str, entry: EvaluatorConfig, other: EvaluatorConfig, judge_model: str | None
) -> list[str]:
    """What is wrong with entry `i`'s `previous` or `next` (`key`), whose entry is `other`:
    what its values make wrong as an entry (its name is the entry's, checked as the entry),
    or nothing that decides a verdict differs (its revision would be the entry's own)."""
    problems = [
        f"{i}.{key}.{problem.removeprefix('0.')}"
        for problem in evaluator_problems([other], judge_model)
        if not problem.startswith("0.name")
    ]
    judge = Judge(model=judge_model)  # the rest of the judge's settings are both's
    if entry.name in _FACTORIES and decisive(other, judge) == decisive(entry, judge):
        written = "old" if key == "previous" else "new"
        problems.append(
            f"{i}.{key}: the same revision as the evaluator (none of threshold, "
            "severity_threshold, model, prompt, rubric, language, tlm, second_stage differs from "
            f"the entry's own, as the evaluator applies them); write the {written} values"
        )
    return problems


def _threshold_problem(name: str, threshold: float) -> str | None:
    scale = threshold_scale(name)
    if scale is None:
        hint = "; use severity_threshold" if name in _SEVERITY_ONLY else ""
        return f"{name} gives its verdict without a threshold{hint}"
    low, high = scale
    if not low <= threshold <= high:
        return f"{threshold:g} is outside {name}'s scale {low:g}..{high:g}"
    return None


def build(entry: EvaluatorConfig, context: BuildContext) -> Evaluator:
    """The evaluator of a validated `evaluators[]` entry (`check_evaluators` passed)."""
    try:
        factory = _FACTORIES[entry.name]
    except KeyError:
        raise KeyError(f"unknown evaluator {entry.name!r}") from None
    return factory(entry, context)
