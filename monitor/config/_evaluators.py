"""`evaluators`, the `judge` model they may call, and `redaction` of what leaves the
process (judge prompts, results text, `/debug/records`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Annotated, ClassVar, Literal

from pydantic import BeforeValidator, Field, PrivateAttr, field_validator, model_validator

from monitor.config._extras import extra_installed, missing_extra
from monitor.config._fields import HttpUrl, Rate, Seconds, Section, at_least

DEFAULT_LOCAL_EVALUATORS = (
    "local_groundedness",
    "local_relevance",
    "local_retrieval",
    "local_safety",
)

# The languages an LLM judge's built-in templates are written in, or `auto` to pick per record.
JudgeLanguage = Literal["en", "zh", "auto"]

# Harm severity buckets, lowest first (the safety evaluators).
Severity = Literal["very_low", "low", "medium", "high"]


class Judge(Section):
    model: str | None = None
    api_base: HttpUrl | None = None
    api_key_env: str | None = None
    timeout_s: Annotated[Seconds, at_least(0.1, "no model answers sooner")] = 30.0
    max_concurrency: int = Field(default=8, gt=0)
    retries: int = Field(default=3, ge=0)
    cache_size: int = Field(default=10_000, ge=0)
    # Consecutive failed attempts that open a model's circuit breaker, and how long it stays open.
    breaker_failures: int = Field(default=5, gt=0)
    breaker_cooldown_s: Seconds = Field(default=30.0, gt=0)
    # Retry backoff: base · 2^attempt with full jitter, capped (a Retry-After header wins).
    backoff_base_s: Seconds = Field(default=0.5, gt=0)
    backoff_max_s: Seconds = Field(default=20.0, gt=0)
    # USD per 1M tokens, for models litellm has no price for.
    prices: dict[str, dict[Literal["input", "output"], Annotated[float, Field(ge=0)]]] = {}
    # Ask for answers as JSON against each judge's schema (`response_format`): `auto` when
    # litellm knows the model supports it, `on` for servers it cannot know (vLLM,
    # llama.cpp, Ollama, ...), `off` to always ask for the free-form format.
    structured_output: Literal["auto", "on", "off"] = "auto"
    # Upper bound on every judge's answer length (each judge has its own default).
    max_output_tokens: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _backoff_order(self) -> Judge:
        if self.backoff_base_s > self.backoff_max_s:
            raise ValueError("backoff_base_s: must not exceed backoff_max_s")
        return self


RedactionKind = Literal["iban", "card", "ssn", "email", "ipv6", "ipv4", "phone"]


class Redaction(Section):
    enabled: bool = False
    # Built-in detectors to run (monitor/records/redaction.py); default all.
    detectors: list[RedactionKind] = ["iban", "card", "ssn", "email", "ipv6", "ipv4", "phone"]
    # Region whose national format phone numbers without a +country prefix are read in.
    phone_region: str = "US"
    patterns: list[str] = []

    @field_validator("phone_region")
    @classmethod
    def _known_region(cls, region: str) -> str:
        if not extra_installed("redaction"):
            return region  # nothing to check against; `_extra_installed` says what is missing
        import phonenumbers  # only when a config is validated: importing config stays cheap

        if region not in phonenumbers.SUPPORTED_REGIONS:
            raise ValueError(
                f"{region!r} is not a region code phonenumbers knows (e.g. US, GB, DE)"
            )
        return region

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for i, pattern in enumerate(patterns):
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {i} is not a valid regex: {exc}") from None
            if compiled.fullmatch(""):
                raise ValueError(f"pattern {i} ({pattern!r}) matches empty text: it finds nothing")
        return patterns

    @model_validator(mode="after")
    def _extra_installed(self) -> Redaction:
        on = self.enabled and "phone" in self.detectors
        problem = missing_extra("redaction", "the phone detector") if on else None
        if problem is not None:
            raise ValueError(f"detectors: {problem} (or leave phone out of redaction.detectors)")
        return self


# -- trustworthiness_tlm: observed consistency + self-reflection (monitor/judge/README.md) ---

TlmPreset = Literal["low", "medium", "high"]
# draws, reflection on, reflection wordings; temperature and weights are the same for all.
TLM_PRESETS: dict[str, tuple[int, bool, int]] = {
    "low": (3, False, 1),
    "medium": (5, True, 1),
    "high": (8, True, 2),
}


class TlmWeights(Section):
    # The method's weights (BSDetector: 0.7 consistency, 0.3 self-reflection).
    consistency: float = Field(default=0.7, ge=0)
    reflection: float = Field(default=0.3, ge=0)

    @model_validator(mode="after")
    def _some_weight(self) -> TlmWeights:
        if self.consistency + self.reflection <= 0:
            raise ValueError("weights: at least one must be above 0")
        return self


class TrustworthinessTlm(Section):
    """`evaluators[].tlm`: options of the `trustworthiness_tlm` evaluator. Unset keys come
    from `preset`."""

    preset: TlmPreset = "medium"
    draws: int | None = Field(default=None, ge=1, le=20)
    temperature: float = Field(default=1.0, gt=0, le=2)
    reflection: bool | None = None
    reflection_wordings: int | None = Field(default=None, ge=1, le=2)
    weights: TlmWeights = TlmWeights()
    # How a drawn answer's agreement with the response is measured: the embedded
    # detector both ways (no network call) or one more judge call per drawn answer.
    agreement: Literal["detector", "judge"] = "detector"
    # Ask for token log-probabilities to sharpen the reflection grade (used where returned).
    logprobs: bool = True

    @property
    def draw_count(self) -> int:
        """The judge's own answers per record (`draws`, else the preset's)."""
        return self.draws if self.draws is not None else TLM_PRESETS[self.preset][0]

    @property
    def reflections(self) -> int:
        """Reflection calls per record (0 when reflection is off)."""
        _, on, wordings = TLM_PRESETS[self.preset]
        if not (self.reflection if self.reflection is not None else on):
            return 0
        return self.reflection_wordings or wordings

    @model_validator(mode="after")
    def _reflection_weighted(self) -> TrustworthinessTlm:
        if self.reflections and self.weights.reflection == 0:
            raise ValueError(
                "weights.reflection: 0 while reflection is on (its calls would count for "
                "nothing); set reflection: false"
            )
        if self.reflections == 0 and self.weights.consistency == 0:
            raise ValueError("weights.consistency: must be above 0 when reflection is off")
        if self.reflection is False and self.reflection_wordings is not None:
            raise ValueError("reflection_wordings: set, but reflection is off")
        return self


# The share of an evaluator's verdicts its next revision scores in shadow by default.
SHADOW_SHARE = 0.2


class RevisionKeys(Section):
    """The keys of an `evaluators[]` entry that decide its verdicts and that its next
    revision (`next`) may hold new values of."""

    # On the evaluator's native scale; the evaluator registry checks the range.
    threshold: float | None = None
    severity_threshold: Severity | None = None
    model: str | None = None
    prompt: str | None = None
    rubric: str | None = None
    # The language of an LLM judge's built-in template: `en`, `zh`, or `auto` (per record,
    # from the share of Han characters in its question and answer).
    language: JudgeLanguage | None = None
    # Options of `trustworthiness_tlm` (the registry rejects them on other evaluators).
    tlm: TrustworthinessTlm | None = None
    # `local_groundedness` only: rescore its uncertain band with the sentence-pair model
    # (monitor/detector/README.md; the registry rejects it on other evaluators).
    second_stage: bool | None = None

    # A prompt or rubric is text of its own, longer than a name.
    _long_text: ClassVar[dict[str, int]] = {"prompt": 65_536, "rubric": 65_536}


REVISION_KEYS = frozenset(RevisionKeys.model_fields)


class _Changeover(Section):
    """The keys `next` opens with: when its shadow ends, and its share."""

    until: Annotated[datetime, BeforeValidator(lambda v: _time(v))]
    share: Annotated[float, Field(gt=0, le=1)] = SHADOW_SHARE


class NextRevision(RevisionKeys, _Changeover):
    """`evaluators[].next`: the revision an evaluator is to become, scored in shadow on
    `share` of the records the evaluator gives a verdict on until `until`, so that the alert
    rules measure its offset on the same records before it is the revision of record
    (docs/alerts.md, "Shadow scoring"). Its `RevisionKeys` are the new values (one left out
    is the entry's own); its verdicts are shadow verdicts, never the service's. The switch
    is the operator's: moving these keys into the entry (and removing `next`) makes the
    entry's revision the one the shadow carried, which the rules recognise. Keys come in the
    order of the bases from last to first: `until`, `share`, the `RevisionKeys`."""

    @property
    def until_s(self) -> float:
        """`until` in seconds since the epoch."""
        return self.until.timestamp()

    def entry(self, current: EvaluatorConfig) -> EvaluatorConfig:
        """The `evaluators[]` entry of the next revision: `current` with the keys written
        here (and no `next`)."""
        new = {key: getattr(self, key) for key in self.model_fields_set & REVISION_KEYS}
        return current.model_copy(update={**new, "next": None})


def _time(value: object) -> datetime:
    """An ISO 8601 time as YAML gives it (text, a date, a time; without a zone: UTC);
    ValueError naming what is wrong."""
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(
                f"{value!r} is not an ISO 8601 time (e.g. 2026-12-01T00:00:00Z)"
            ) from None
    if not isinstance(value, datetime):
        raise ValueError(f"{value!r} is not an ISO 8601 time (e.g. 2026-12-01T00:00:00Z)")
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class _Scored(Section):
    """The keys an `evaluators[]` entry opens with: the evaluator and its share of the
    sample."""

    name: str
    sample_rate: Rate | None = None


class EvaluatorConfig(RevisionKeys, _Scored):
    """An `evaluators[]` entry. Its keys come in the order of the bases from last to first,
    then its own: `name`, `sample_rate`, the `RevisionKeys`, the rest (the order
    `check-config` shows them and reports their problems in)."""

    # Tiered scoring: run only where `escalate_from`'s normalised score is inside `band`.
    escalate_from: str | None = None
    band: tuple[Rate, Rate] | None = None
    # Judge endpoint for this evaluator's model (default `judge.api_base`).
    api_base: HttpUrl | None = None
    # The revision this one is to become, scored in shadow beside it until `until`.
    next: NextRevision | None = None
    # Set only on the entry of a previous release's revision that a monitor release carries
    # (`released`): that release's version and the files of its detector parameters. No
    # config file sets it.
    _release: tuple[str, str, str] | None = PrivateAttr(default=None)

    _removed: ClassVar[Mapping[str, str]] = {
        "previous": "removed: the previous revision scoring a share of the records after the "
        "switch paged a x2 in the change's first hour later than no changeover at all "
        '(docs/alerts.md, "Evaluator changes"); to change an evaluator, score the new '
        "revision in shadow before the switch: next: {until: ..., and its new values}, then "
        "move those keys into the entry (a monitor upgrade that changes the detector does "
        "this on its own)"
    }

    def released(self, version: str, model: str, head: str) -> EvaluatorConfig:
        """This entry as release `version` scored it, with the detector parameters in the
        files `model` and `head` (`monitor.detector.releases`)."""
        entry = self.model_copy(update={"next": None})
        entry._release = (version, model, head)
        return entry

    @property
    def release(self) -> tuple[str, str, str] | None:
        """(version, model file, head file) of a previous release's revision (`released`);
        None: this release's."""
        return self._release

    @model_validator(mode="after")
    def _band_order(self) -> EvaluatorConfig:
        if self.band is not None and self.band[0] > self.band[1]:
            raise ValueError("band: the lower bound comes first")
        if self.next is not None and self.escalate_from is not None:
            raise ValueError(
                "next: an escalated evaluator (escalate_from) is not scored by two "
                "revisions; give next to the evaluator it escalates from"
            )
        return self
