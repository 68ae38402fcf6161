"""The judge client: every call to an LLM judge goes through here (litellm underneath).

One instance per process, shared by all judge evaluators. Per call it:

1. looks the verdict up in a bounded LRU cache keyed by (evaluator, prompt version,
   model, inputs) — a hit costs nothing and sends nothing; while the same question is
   in flight, identical calls wait for its answer instead of asking again;
2. refuses at once while the model's circuit breaker is open (`outcome="circuit_open"`);
3. redacts personal data from every message (`redaction.*`);
4. sends the request under a concurrency semaphore (`judge.max_concurrency`) and a
   per-attempt deadline (`judge.timeout_s`), retrying 429, 5xx, timeouts and connection
   errors up to `judge.retries` times with exponential backoff and full jitter (a
   `Retry-After` from the provider is honoured, capped);
5. asks for structured output (`response_format` with the judge's JSON schema,
   `monitor/judge/schemas.py`) when `judge.structured_output` says the model takes it,
   and validates the answer against the schema; an answer that does not validate, and
   every answer of a model asked without a schema, goes to the tolerant free-form parser;
   an answer neither can read gets one follow-up asking for the required format, then the
   call ends as a `parse` error (a reply cut off at `max_tokens` is `truncated`). A
   provider that refuses `response_format` is asked again without it, and that model is
   asked free-form from then on;
6. at a caller's request samples at a `temperature` above 0 (the default is 0) and asks
   for the answer tokens' log-probabilities (`logprobs`, `top_logprobs`); a provider
   that refuses them is asked again without, and that model is asked without from then
   on (the verdict then has no `logprobs`);
7. accounts tokens and cost: litellm's price when it knows the model, otherwise
   `judge.prices[model]` (USD per 1M tokens), otherwise zero (logged once per model).

Every attempt is counted in `rag_monitor_judge_requests_total{model,outcome}` with
outcome ok, error, timeout, rate_limited or circuit_open; every answered call in
`rag_monitor_judge_answers_total{model,format,result}` (format structured or free_form;
result valid, fallback, repaired, parse or truncated). The API key (from the env var
named by `judge.api_key_env`) is passed to litellm only; error texts are scrubbed of it.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import logging
import os
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from prometheus_client import Counter, Gauge

from monitor.config import ConfigError, Judge, Redaction
from monitor.judge import schemas
from monitor.judge.parsers import Parsed, ParseError
from monitor.judge.schemas import JudgeAnswer
from monitor.redaction import Redactor
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

T = TypeVar("T")

OUTCOMES = ("ok", "error", "timeout", "rate_limited", "circuit_open")
# How an answered call ended: read at once (from the schema, or as free text when no schema
# was asked), read as free text although a schema was asked, read after the format
# follow-up, unreadable twice, cut off at max_tokens.
ANSWER_RESULTS = ("valid", "fallback", "repaired", "parse", "truncated")
FORMAT_REMINDER = (
    "Your answer could not be read. Answer again in exactly the required format: {hint}"
)


@dataclass(frozen=True, slots=True)
class AnswerFormat:
    """How to read one judge's answers."""

    parse_text: Callable[[str], Parsed]  # the tolerant free-form parser
    hint: str  # the required format in words, for the follow-up after an unreadable answer
    schema: type[JudgeAnswer] | None = None  # structured output, where the model takes it
    documents: int = 0  # context documents, for per-document verdicts

    def read(self, text: str, structured: bool) -> tuple[Parsed, bool]:
        """The verdict, and whether it came from the schema. Raises `ParseError`."""
        if structured and self.schema is not None:
            try:
                return schemas.read(self.schema, text, self.documents), True
            except ParseError as exc:
                try:  # a server that ignores response_format may still answer readably
                    return self.parse_text(text), False
                except ParseError:
                    raise exc from None
        return self.parse_text(text), False


@dataclass(frozen=True, slots=True)
class Verdict(Generic[T]):
    """What a judge call produced: a parsed value, or an error saying why there is none."""

    value: T | None
    explanation: str = ""
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cached: bool = False
    # With `logprobs=True` and a server that returns them: each answer token with its
    # most likely alternatives (token, log-probability), the chosen one first.
    logprobs: TokenLogprobs | None = None


TokenLogprobs = tuple[tuple[tuple[str, float], ...], ...]
TOP_LOGPROBS = 5


class _AttemptError(Exception):
    def __init__(
        self,
        outcome: str,
        message: str,
        retryable: bool,
        retry_after: float | None = None,
        schema_refused: bool = False,
        logprobs_refused: bool = False,
    ):
        super().__init__(message)
        self.outcome = outcome
        self.retryable = retryable
        self.retry_after = retry_after
        # The provider rejected the request because of `response_format`.
        self.schema_refused = schema_refused
        # The provider rejected the request because of `logprobs`.
        self.logprobs_refused = logprobs_refused


@dataclass(slots=True)
class _Reply:
    text: str
    finish_reason: str | None
    input_tokens: int
    output_tokens: int
    cost: float
    logprobs: TokenLogprobs | None = None


class _Breaker:
    """Closed → open after `threshold` consecutive failures → half-open after `cooldown`
    (one probe call) → closed on success, open again on failure."""

    def __init__(self, threshold: int, cooldown: float, clock: Callable[[], float]) -> None:
        self._threshold = threshold
        self._cooldown = cooldown
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    def allow(self) -> bool:
        if self._opened_at is None:
            return True
        if self._probing or self._clock() - self._opened_at < self._cooldown:
            return False
        self._probing = True
        return True

    def remaining(self) -> float:
        if self._opened_at is None:
            return 0.0
        return max(0.0, self._cooldown - (self._clock() - self._opened_at))

    @property
    def is_open(self) -> bool:
        return self._opened_at is not None

    def success(self) -> None:
        self._failures = 0
        self._opened_at = None
        self._probing = False

    def abandon(self) -> None:
        """The call let through was cancelled before it could tell anything."""
        self._probing = False

    def failure(self) -> bool:
        """Record a failed attempt; True when this failure opened the breaker."""
        self._failures += 1
        was_open = self._opened_at is not None
        if self._probing or self._failures >= self._threshold:
            self._opened_at = self._clock()
            self._probing = False
            return not was_open
        return False


@dataclass(frozen=True)
class _ExtraMetrics:
    cache: Counter
    redactions: Counter
    retries: Counter
    circuit_open: Gauge
    answers: Counter


def _extra_metrics(telemetry: Telemetry) -> _ExtraMetrics:
    """The judge's own metrics beyond DESIGN.md's table."""
    return _ExtraMetrics(
        cache=telemetry.counter(
            "judge_cache_lookups", "Verdict cache lookups by result (hit, miss).", ("result",)
        ),
        redactions=telemetry.counter(
            "redactions",
            "Personal data replaced before text was sent to a judge, by kind.",
            ("kind",),
        ),
        retries=telemetry.counter(
            "judge_retries",
            "Judge attempts repeated after a retryable failure or an unreadable answer.",
            ("model", "reason"),
        ),
        circuit_open=telemetry.gauge(
            "judge_circuit_open",
            "1 while the circuit breaker for a judge model is open.",
            ("model",),
        ),
        answers=telemetry.counter(
            "judge_answers",
            "Answered judge calls by the format asked for (structured, free_form) and how "
            "the answer was read (valid, fallback, repaired, parse, truncated).",
            ("model", "format", "result"),
        ),
    )


def _answer_limit(max_tokens: int) -> int:
    """Characters an answer may have: a server that ignores `max_tokens` must not make the
    (worst-case quadratic) parsers stall the event loop."""
    return max(32_000, 8 * max_tokens)


def _too_long(text: str, max_tokens: int) -> str:
    return f"truncated: answer of {len(text)} characters ignores max_tokens={max_tokens}"


def cache_key(evaluator: str, version: str, model: str, inputs: Mapping[str, str | None]) -> str:
    blob = json.dumps([evaluator, version, model, dict(sorted(inputs.items()))], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class JudgeClient:
    """Shared, stateless-per-call gateway to judge models. See the module docstring."""

    def __init__(
        self,
        judge: Judge,
        redaction: Redaction,
        telemetry: Telemetry,
        *,
        environ: Mapping[str, str] | None = None,
        models: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._config = judge
        self._t = telemetry
        self._extra = _extra_metrics(telemetry)
        env = os.environ if environ is None else environ
        self._api_key: str | None = None
        if judge.api_key_env is not None:
            self._api_key = env.get(judge.api_key_env) or None
            if self._api_key is None:
                raise ConfigError(
                    [f"judge.api_key_env: environment variable {judge.api_key_env} is not set"]
                )
        self._redact = Redactor(redaction, self._count_redaction)
        self._semaphore = asyncio.Semaphore(judge.max_concurrency)
        self._cache: OrderedDict[str, tuple[Any, str, TokenLogprobs | None]] = OrderedDict()
        self._pending: dict[str, asyncio.Future[None]] = {}
        self._breakers: dict[str, _Breaker] = {}
        self._breaker_threshold = judge.breaker_failures
        self._breaker_cooldown = judge.breaker_cooldown_s
        self._backoff_base = judge.backoff_base_s
        self._backoff_max = judge.backoff_max_s
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._litellm: Any = None
        self._import_lock = asyncio.Lock()
        self._priced_by_litellm: dict[str, bool] = {}
        self._unpriced_logged: set[str] = set()
        self._prepared: set[str] = set()
        self._structured: dict[str, bool] = {}
        self._no_logprobs: set[str] = set()  # models whose server refused `logprobs`
        self._quiet = RateLimitedLog(log, 60.0, clock)
        for model in models:  # export zeros so the series exist before the first call
            for outcome in OUTCOMES:
                telemetry.judge_requests.labels(model, outcome)
            for direction in ("input", "output"):
                telemetry.judge_tokens.labels(model, direction)
            telemetry.judge_cost.labels(model)
            self._extra.circuit_open.labels(model).set(0)
            for answer_format in ("structured", "free_form"):
                for result in ANSWER_RESULTS:
                    self._extra.answers.labels(model, answer_format, result)

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Import litellm off the event loop (it takes seconds); calls do it lazily too."""
        await self._load()

    async def shutdown(self) -> None:
        self._cache.clear()

    # -- the call --------------------------------------------------------------------

    async def judge(
        self,
        *,
        evaluator: str,
        version: str,
        model: str,
        messages: Sequence[Mapping[str, str]],
        inputs: Mapping[str, str | None],
        answer: AnswerFormat,
        max_tokens: int,
        api_base: str | None = None,
        temperature: float = 0.0,
        logprobs: bool = False,
    ) -> Verdict[Any]:
        """Ask `model` (at `api_base`, default `judge.api_base`) and read its answer.

        `temperature` and `logprobs` are part of the request, not of the cache key: a
        caller that samples one question several times puts a sample number in `inputs`."""
        key = cache_key(evaluator, version, model, inputs) if self._config.cache_size else None
        endpoint = api_base or self._config.api_base
        if self._config.max_output_tokens is not None:
            max_tokens = min(max_tokens, self._config.max_output_tokens)
        sampling = _Sampling(temperature, logprobs and model not in self._no_logprobs)
        args = (evaluator, model, endpoint, messages, answer, max_tokens, key, sampling)
        if key is None:
            return await self._ask(*args)
        leader = self._pending.get(key)
        if leader is not None:  # the same question is being asked: wait for its answer
            await asyncio.shield(leader)
        if key in self._cache:
            self._cache.move_to_end(key)
            self._extra.cache.labels("hit").inc()
            value, explanation, tokens = self._cache[key]
            return Verdict(value=value, explanation=explanation, cached=True, logprobs=tokens)
        self._extra.cache.labels("miss").inc()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending[key] = done
        try:
            return await self._ask(*args)
        finally:
            if self._pending.get(key) is done:
                del self._pending[key]
            done.set_result(None)

    async def _ask(
        self,
        evaluator: str,
        model: str,
        api_base: str | None,
        messages: Sequence[Mapping[str, str]],
        answer: AnswerFormat,
        max_tokens: int,
        key: str | None,
        sampling: _Sampling,
    ) -> Verdict[Any]:
        spent = _Reply("", None, 0, 0, 0.0)
        structured = answer.schema is not None and await self._wants_schema(model)
        try:
            parsed = None
            while parsed is None:
                try:
                    parsed = await self._converse(
                        evaluator,
                        model,
                        api_base,
                        messages,
                        answer,
                        structured,
                        max_tokens,
                        spent,
                        sampling,
                    )
                except _AttemptError as exc:
                    if structured and exc.schema_refused:
                        self._structured[model] = structured = False
                        log.warning(
                            "judge %s refused response_format; asking it free-form from now on: %s",
                            model,
                            exc,
                        )
                        self._extra.retries.labels(model, "structured_unsupported").inc()
                    elif sampling.logprobs and exc.logprobs_refused:
                        self._no_logprobs.add(model)
                        sampling = _Sampling(sampling.temperature, False)
                        log.warning(
                            "judge %s refused logprobs; asking it without from now on: %s",
                            model,
                            exc,
                        )
                        self._extra.retries.labels(model, "logprobs_unsupported").inc()
                    else:
                        raise
        except _AttemptError as exc:
            self._quiet.warning(
                f"{exc.outcome}:{model}", "judge %s call failed (%s): %s", model, exc.outcome, exc
            )
            return self._error(f"{exc.outcome}: {exc}", spent)
        except _Unreadable as exc:
            return self._error(str(exc), spent)
        if key is not None:
            self._cache[key] = (parsed.value, parsed.explanation, spent.logprobs)
            while len(self._cache) > self._config.cache_size:
                self._cache.popitem(last=False)
        return Verdict(
            value=parsed.value,
            explanation=parsed.explanation,
            input_tokens=spent.input_tokens,
            output_tokens=spent.output_tokens,
            cost=spent.cost,
            logprobs=spent.logprobs,
        )

    async def _converse(
        self,
        evaluator: str,
        model: str,
        api_base: str | None,
        messages: Sequence[Mapping[str, str]],
        answer: AnswerFormat,
        structured: bool,
        max_tokens: int,
        spent: _Reply,
        sampling: _Sampling,
    ) -> Parsed:
        """Ask, read, and on an unreadable answer ask once more for the format.
        Raises `_AttemptError` (the call failed) or `_Unreadable` (the answers did)."""
        conversation = [
            {"role": m["role"], "content": self._redact(m["content"])} for m in messages
        ]
        response_format: dict[str, Any] | None = None
        if structured and answer.schema is not None:
            last = conversation[-1]
            last["content"] += "\n\n" + schemas.instruction(answer.schema)
            response_format = schemas.response_format(answer.schema, evaluator)
        answer_format = "structured" if response_format is not None else "free_form"
        counted = self._extra.answers

        def read(reply: _Reply) -> tuple[Parsed, bool]:
            if len(reply.text) > _answer_limit(max_tokens):
                counted.labels(model, answer_format, "truncated").inc()
                raise _Unreadable(_too_long(reply.text, max_tokens))
            return answer.read(reply.text, response_format is not None)

        reply = await self._call(
            model, api_base, conversation, max_tokens, spent, response_format, sampling
        )
        try:
            parsed, from_schema = read(reply)
        except ParseError as first:
            if reply.finish_reason == "length":
                counted.labels(model, answer_format, "truncated").inc()
                raise _Unreadable(f"truncated: answer cut off at {max_tokens} tokens") from None
            self._extra.retries.labels(model, "unparseable").inc()
            conversation += [
                {"role": "assistant", "content": reply.text or "(empty)"},
                {"role": "user", "content": FORMAT_REMINDER.format(hint=answer.hint)},
            ]
            reply = await self._call(
                model, api_base, conversation, max_tokens, spent, response_format, sampling
            )
            try:
                parsed, _ = read(reply)
            except ParseError as second:
                if reply.finish_reason == "length":
                    counted.labels(model, answer_format, "truncated").inc()
                    raise _Unreadable(f"truncated: answer cut off at {max_tokens} tokens") from None
                counted.labels(model, answer_format, "parse").inc()
                self._quiet.warning(
                    f"unreadable:{model}:{evaluator}",
                    "judge %s for %s gave an unreadable answer twice: %s",
                    model,
                    evaluator,
                    second,
                )
                what = "empty answer" if not reply.text.strip() else str(second)
                raise _Unreadable(f"parse: {what} (first attempt: {first})") from None
            counted.labels(model, answer_format, "repaired").inc()
            return parsed
        result = "fallback" if response_format is not None and not from_schema else "valid"
        counted.labels(model, answer_format, result).inc()
        return parsed

    async def _wants_schema(self, model: str) -> bool:
        """Whether to ask `model` for structured output (`judge.structured_output`)."""
        known = self._structured.get(model)
        if known is not None:
            return known
        mode = self._config.structured_output
        if mode == "auto":
            litellm = await self._load()
            try:
                wanted = bool(litellm.supports_response_schema(model=model))
            except Exception:  # litellm raises for models it cannot map to a provider
                wanted = False
        else:
            wanted = mode == "on"
        self._structured[model] = wanted
        log.info(
            "judge %s: %s (judge.structured_output=%s)",
            model,
            "structured output (response_format with a JSON schema)"
            if wanted
            else "free-form answers",
            mode,
        )
        return wanted

    @staticmethod
    def _error(message: str, spent: _Reply) -> Verdict[Any]:
        return Verdict(
            value=None,
            error=message,
            input_tokens=spent.input_tokens,
            output_tokens=spent.output_tokens,
            cost=spent.cost,
        )

    async def _call(
        self,
        model: str,
        api_base: str | None,
        messages: list[dict[str, str]],
        max_tokens: int,
        spent: _Reply,
        response_format: dict[str, Any] | None = None,
        sampling: _Sampling | None = None,
    ) -> _Reply:
        """One request with retries; adds its usage to `spent` (and makes its logprobs the
        ones `spent` carries). Raises `_AttemptError`."""
        breaker = self._breakers.setdefault(
            model, _Breaker(self._breaker_threshold, self._breaker_cooldown, self._clock)
        )
        attempts = self._config.retries + 1
        for attempt in range(attempts):
            try:
                reply = await self._attempt(
                    model,
                    api_base,
                    messages,
                    max_tokens,
                    response_format,
                    sampling or _GREEDY,
                    breaker,
                )
            except _AttemptError as exc:
                self._t.judge_requests.labels(model, exc.outcome).inc()
                if exc.outcome == "circuit_open":
                    raise
                if exc.schema_refused or exc.logprobs_refused:
                    breaker.success()  # the model answers; it only wants no schema/logprobs
                    raise
                if breaker.failure():
                    self._extra.circuit_open.labels(model).set(1)
                    log.warning("judge %s circuit opened after repeated failures: %s", model, exc)
                if not exc.retryable:
                    raise
                if attempt + 1 >= attempts or breaker.is_open:
                    raise
                self._extra.retries.labels(model, exc.outcome).inc()
                await self._sleep(self._backoff(attempt, exc.retry_after))
                continue
            self._t.judge_requests.labels(model, "ok").inc()
            if breaker.is_open:
                log.info("judge %s circuit closed", model)
            breaker.success()
            self._extra.circuit_open.labels(model).set(0)
            spent.input_tokens += reply.input_tokens
            spent.output_tokens += reply.output_tokens
            spent.cost += reply.cost
            spent.logprobs = reply.logprobs
            self._t.judge_tokens.labels(model, "input").inc(reply.input_tokens)
            self._t.judge_tokens.labels(model, "output").inc(reply.output_tokens)
            self._t.judge_cost.labels(model).inc(reply.cost)
            return reply
        raise AssertionError("unreachable: the loop returns or raises")

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self._backoff_max)
        ceiling = min(self._backoff_max, self._backoff_base * 2**attempt)
        return self._rng.uniform(0, ceiling)

    async def _attempt(
        self,
        model: str,
        api_base: str | None,
        messages: list[dict[str, str]],
        max_tokens: int,
        response_format: dict[str, Any] | None,
        sampling: _Sampling,
        breaker: _Breaker,
    ) -> _Reply:
        litellm = await self._load()
        if model not in self._prepared:
            self._prepare(litellm, model)
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "temperature": sampling.temperature,
            "max_tokens": max_tokens,
            "timeout": self._config.timeout_s,
            "max_retries": 0,  # retries are ours, so they are counted and bounded
            "num_retries": 0,
        }
        if response_format is not None:
            kwargs["response_format"] = response_format
        if sampling.logprobs:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = TOP_LOGPROBS
        if api_base:
            kwargs["api_base"] = api_base
        # The key goes only to the configured judge endpoint, never to an evaluator's own.
        if self._api_key and api_base == self._config.api_base:
            kwargs["api_key"] = self._api_key
        elif api_base and model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
            # A self-hosted OpenAI-compatible server that wants no key; the SDK insists on one.
            kwargs["api_key"] = "no-key"
        async with self._semaphore:
            # Asked once a slot is free: a call that queued behind others (the samples of one
            # record) must not go out when the breaker opened while it waited.
            if not breaker.allow():
                raise _AttemptError(
                    "circuit_open",
                    f"judge {model} is failing; calls paused for {breaker.remaining():.0f}s more",
                    retryable=False,
                )
            probe = breaker.is_open
            try:
                async with asyncio.timeout(self._config.timeout_s):
                    response = await litellm.acompletion(**kwargs)
            except asyncio.CancelledError:
                if probe:  # a cancelled probe must not leave the breaker stuck
                    breaker.abandon()
                raise
            except TimeoutError:
                raise _AttemptError(
                    "timeout", f"no answer within {self._config.timeout_s:g}s", retryable=True
                ) from None
            except Exception as exc:
                raise self._classify(exc, response_format is not None, sampling.logprobs) from None
        choice = response.choices[0]
        text = getattr(choice.message, "content", None) or ""
        usage = getattr(response, "usage", None)
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        return _Reply(
            text=text,
            finish_reason=getattr(choice, "finish_reason", None),
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cost=self._cost(litellm, model, response, tokens_in, tokens_out),
            logprobs=_token_logprobs(choice) if sampling.logprobs else None,
        )

    def _classify(
        self, exc: Exception, structured: bool = False, logprobs: bool = False
    ) -> _AttemptError:
        status = getattr(exc, "status_code", None)
        name = type(exc).__name__
        message = self._scrub(f"{name}: {str(exc)[:300]}")
        if "Timeout" in name:
            return _AttemptError("timeout", message, retryable=True)
        if status == 429 or "RateLimit" in name:
            return _AttemptError(
                "rate_limited", message, retryable=True, retry_after=_retry_after(exc)
            )
        if isinstance(status, int) and status >= 500:
            return _AttemptError("error", message, retryable=True)
        if (
            "APIConnectionError" in name
            or "ServiceUnavailable" in name
            or "InternalServerError" in name
        ):
            return _AttemptError("error", message, retryable=True)
        rejected = status in (400, 422) or "UnsupportedParams" in name
        refused = structured and rejected and _mentions_schema(str(exc))
        no_logprobs = logprobs and rejected and "logprobs" in str(exc).lower() and not refused
        return _AttemptError(
            "error", message, retryable=False, schema_refused=refused, logprobs_refused=no_logprobs
        )

    def _scrub(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, "[api key]")
            if len(self._api_key) > 8:
                text = text.replace(self._api_key[-8:], "[api key]")
        return text

    def _cost(
        self, litellm: Any, model: str, response: Any, tokens_in: int, tokens_out: int
    ) -> float:
        if self._priced_by_litellm.get(model, True):
            try:
                return float(litellm.completion_cost(completion_response=response, model=model))
            except Exception:
                self._priced_by_litellm[model] = False
        prices = self._config.prices.get(model)
        if prices is None:
            if model not in self._unpriced_logged:
                self._unpriced_logged.add(model)
                log.warning(
                    "no price known for judge model %s; set judge.prices to count its cost", model
                )
            return 0.0
        return (tokens_in * prices.get("input", 0.0) + tokens_out * prices.get("output", 0.0)) / 1e6

    def _count_redaction(self, kind: str, count: int) -> None:
        self._extra.redactions.labels(kind).inc(count)

    async def _load(self) -> Any:
        if self._litellm is not None:
            return self._litellm
        async with self._import_lock:
            if self._litellm is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                module: Any = await asyncio.to_thread(importlib.import_module, "litellm")
                module.suppress_debug_info = True
                module.telemetry = False
                self._litellm = module
        return self._litellm

    def _prepare(self, litellm: Any, model: str) -> None:
        """Give litellm a (zero) price for an Ollama model it does not know: otherwise its
        logging asks the Ollama server for model details with a blocking HTTP call on the
        event loop after every answer."""
        self._prepared.add(model)
        provider = model.split("/", 1)[0]
        if provider in ("ollama", "ollama_chat") and model not in litellm.model_cost:
            entry = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0}
            litellm.register_model({model: {**entry, "litellm_provider": provider, "mode": "chat"}})
            self._priced_by_litellm[model] = False


@dataclass(frozen=True, slots=True)
class _Sampling:
    temperature: float
    logprobs: bool


_GREEDY = _Sampling(0.0, False)


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def _token_logprobs(choice: Any) -> TokenLogprobs | None:
    """The answer's tokens with their top alternatives, from an OpenAI-style
    `choices[0].logprobs.content`; None when the server sent none or sent them unreadably."""
    content = _field(_field(choice, "logprobs"), "content")
    if not isinstance(content, list) or not content:
        return None
    tokens = []
    try:
        for item in content:
            chosen = (str(_field(item, "token")), float(_field(item, "logprob")))
            alternatives = [
                (str(_field(alt, "token")), float(_field(alt, "logprob")))
                for alt in _field(item, "top_logprobs") or ()
            ]
            tokens.append((chosen, *(a for a in alternatives if a[0] != chosen[0])))
    except (TypeError, ValueError):
        return None
    return tuple(tokens)


class _Unreadable(Exception):
    """No verdict in the answers; the message is the result's error text."""


def _mentions_schema(message: str) -> bool:
    lowered = message.lower()
    return any(word in lowered for word in ("response_format", "json_schema", "response format"))


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    raw = headers.get("retry-after")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None
