"""The judge client: every call to an LLM judge goes through here (litellm underneath).

One instance per process, shared by all judge evaluators. Per call it:

1. looks the verdict up in a bounded LRU cache keyed by (evaluator, prompt version,
   model, inputs) — a hit costs nothing and sends nothing; while the same question is
   in flight, identical calls wait for its answer instead of asking again (`cache`);
2. refuses at once while the model's circuit breaker is open (`outcome="circuit_open"`);
3. redacts personal data from every message (`redaction.*`);
4. sends the request under a concurrency semaphore (`judge.max_concurrency`) and a
   per-attempt deadline (`judge.timeout_s`), retrying 429, 5xx, timeouts and connection
   errors up to `judge.retries` times under the retry policy (`monitor/shared/retry.py`:
   exponential backoff from `judge.backoff_base_s` with full jitter, capped at
   `judge.backoff_max_s`; a `Retry-After` from the provider, in seconds or as an
   HTTP-date, is honoured up to the same cap, and an unreadable one is counted in
   `rag_monitor_retry_after_invalid_total{client="judge"}` and ignored);
5. asks for structured output (`response_format` with the judge's JSON schema,
   `monitor/judge/schemas.py`) when `judge.structured_output` says the model takes it,
   and validates the answer against the schema; an answer that does not validate, and
   every answer of a model asked without a schema, goes to the tolerant free-form parser;
   an answer neither can read gets one follow-up asking for the required format, then the
   call ends as a `parse` error (a reply cut off at `max_tokens` is `truncated`). A
   provider that refuses `response_format` is asked again without it, and that model is
   asked free-form from then on;
6. at a caller's request draws at a `temperature` above 0 (the default is 0) and asks
   for the answer tokens' log-probabilities (`logprobs`, `top_logprobs`); a provider
   that refuses them is asked again without, and that model is asked without from then
   on (the verdict then has no `logprobs`);
7. accounts tokens and cost: litellm's price when it knows the model, otherwise
   `judge.prices[model]` (USD per 1M tokens), otherwise zero (logged once per model).

Every attempt is counted in `rag_monitor_judge_requests_total{model,outcome}` with
outcome ok, error, auth, not_found, unreachable, timeout, rate_limited or circuit_open
(auth and not_found logged once per model with the fix, `provider.explain`, the others
at most once a minute, with theirs); every answered call in
`rag_monitor_judge_answers_total{model,format,result}` (format structured or free_form;
result valid, fallback, repaired, parse or truncated). The API key (from the env var
named by `judge.api_key_env`) is passed to litellm only; error texts are scrubbed of it.

Split by job: this module (cache, breaker and retry around each call, the format
follow-up, accounting), `cache` (verdicts by question), `provider` (one litellm request, its
errors classified, its cost, whether a model is asked for structured output),
`answers` (answer formats and verdicts), `breaker` (the per-model circuit breaker),
`metrics` (its own metrics).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from monitor.config import ConfigError, Judge, Redaction
from monitor.judge import schemas
from monitor.judge.answers import (
    ANSWER_RESULTS,
    FORMAT_REMINDER,
    AnswerFormat,
    NoVerdict,
    TokenLogprobs,
    Verdict,
    answer_limit,
    too_long,
)
from monitor.judge.breaker import CircuitBreaker
from monitor.judge.cache import CachedVerdict, VerdictCache, cache_key
from monitor.judge.metrics import judge_metrics
from monitor.judge.parsers import ParsedVerdict, ParseError
from monitor.judge.provider import EXPLAINED, GREEDY, AttemptError, Decoding, Provider, Reply
from monitor.records.redaction import Redactor
from monitor.shared.retry import Retry, RetryPolicy
from monitor.telemetry import RateLimitedLog, Telemetry

# The judge client's public face: evaluators import these from here.
__all__ = [
    "ANSWER_RESULTS",
    "FORMAT_REMINDER",
    "OUTCOMES",
    "AnswerFormat",
    "JudgeClient",
    "TokenLogprobs",
    "Verdict",
    "cache_key",
]

log = logging.getLogger(__name__)
# Where a client that does not log its failures writes them: nowhere.
_UNHEARD = logging.getLogger(f"{__name__}.unheard")
_UNHEARD.disabled = True

OUTCOMES = tuple("ok error auth not_found unreachable timeout rate_limited circuit_open".split())


def longest_call_s(judge: Judge) -> float:
    """The longest a verdict may take by the judge's own settings: an answer and, when it
    is unreadable, one more for the format, each up to `1 + retries` attempts of
    `timeout_s` with `backoff_max_s` between them (a `Retry-After` is capped there too)."""
    attempts = judge.retries + 1
    return 2 * (attempts * judge.timeout_s + judge.retries * judge.backoff_max_s)


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
        wall_clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        log_failures: bool = True,
    ) -> None:
        """`log_failures` False: failed calls are only returned as error verdicts, not
        logged (`check-config --probe` prints them itself). `wall_clock` is what a
        `Retry-After` HTTP-date is measured from."""
        self._config = judge
        self._t = telemetry
        self._extra = judge_metrics(telemetry)
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
        self._cache = VerdictCache(judge.cache_size)
        self._breakers: dict[str, CircuitBreaker] = {}
        self._breaker_threshold = judge.breaker_failures
        self._breaker_cooldown = judge.breaker_cooldown_s
        self._retry = RetryPolicy(
            base_s=judge.backoff_base_s,
            max_s=judge.backoff_max_s,
            max_attempts=judge.retries + 1,
            retry_after_max_s=judge.backoff_max_s,
        )
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._provider = Provider(
            judge,
            self._api_key,
            self._invalid_retry_after,
            wall_clock,
            explain_failures=log_failures,
        )
        self._no_logprobs: set[str] = set()  # models whose server refused `logprobs`
        self._quiet = RateLimitedLog(log if log_failures else _UNHEARD, 60.0, clock)
        for model in models:  # export zeros so the series exist before the first call
            for outcome in OUTCOMES:
                telemetry.counter("judge_requests").labels(model, outcome)
            for direction in ("input", "output"):
                telemetry.counter("judge_tokens").labels(model, direction)
            telemetry.counter("judge_cost_usd").labels(model)
            self._extra.circuit_open.labels(model).set(0)
            for answer_format in ("structured", "free_form"):
                for result in ANSWER_RESULTS:
                    self._extra.answers.labels(model, answer_format, result)

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Import litellm off the event loop (it takes seconds); calls do it lazily too."""
        await self._provider.load()

    async def shutdown(self, deadline_s: float) -> None:
        """Forget the cached verdicts. Calls in flight belong to their callers (the
        evaluation stage waits for or cancels them), so there is nothing to wait for."""
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
        caller that draws answers to one question several times puts the draw's number in
        `inputs`."""
        key = cache_key(evaluator, version, model, inputs) if self._config.cache_size else None
        endpoint = api_base or self._config.api_base
        if self._config.max_output_tokens is not None:
            max_tokens = min(max_tokens, self._config.max_output_tokens)
        sampling = Decoding(temperature, logprobs and model not in self._no_logprobs)
        args = (evaluator, model, endpoint, messages, answer, max_tokens, key, sampling)
        if key is None:
            return await self._ask(*args)
        cached = await self._cache.settled(key)
        if cached is not None:
            self._extra.cache.labels("hit").inc()
            return Verdict(
                value=cached.value,
                explanation=cached.explanation,
                cached=True,
                logprobs=cached.logprobs,
            )
        self._extra.cache.labels("miss").inc()
        with self._cache.asking(key):
            return await self._ask(*args)

    async def _ask(
        self,
        evaluator: str,
        model: str,
        api_base: str | None,
        messages: Sequence[Mapping[str, str]],
        answer: AnswerFormat,
        max_tokens: int,
        key: str | None,
        sampling: Decoding,
    ) -> Verdict[Any]:
        spent = Reply("", None, 0, 0, 0.0)
        structured = answer.schema is not None and await self._provider.wants_schema(model)
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
                except AttemptError as exc:
                    if structured and exc.schema_refused:
                        self._provider.refuses_schema(model)
                        structured = False
                        log.warning(
                            "judge %s refused response_format; asking it free-form from now on: %s",
                            model,
                            exc,
                        )
                        self._extra.retries.labels(model, "structured_unsupported").inc()
                    elif sampling.logprobs and exc.logprobs_refused:
                        self._no_logprobs.add(model)
                        sampling = Decoding(sampling.temperature, False)
                        log.warning(
                            "judge %s refused logprobs; asking it without from now on: %s",
                            model,
                            exc,
                        )
                        self._extra.retries.labels(model, "logprobs_unsupported").inc()
                    else:
                        raise
        except AttemptError as exc:
            if exc.outcome not in EXPLAINED:  # those the provider logged once, with the fix
                self._quiet.warning(
                    f"{exc.outcome}:{model}",
                    "judge %s call failed: %s: %s",
                    model,
                    exc.outcome,
                    exc.described(),
                )
            return self._error(f"{exc.outcome}: {exc.described()}", spent)
        except NoVerdict as exc:
            return self._error(str(exc), spent)
        if key is not None:
            self._cache.put(key, CachedVerdict(parsed.value, parsed.explanation, spent.logprobs))
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
        spent: Reply,
        sampling: Decoding,
    ) -> ParsedVerdict:
        """Ask, read, and on an unreadable answer ask once more for the format.
        Raises `AttemptError` (the call failed) or `NoVerdict` (the answers did)."""
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

        def read(reply: Reply) -> tuple[ParsedVerdict, bool]:
            if len(reply.text) > answer_limit(max_tokens):
                counted.labels(model, answer_format, "truncated").inc()
                raise NoVerdict(too_long(reply.text, max_tokens))
            return answer.read(reply.text, response_format is not None)

        reply = await self._call(
            model, api_base, conversation, max_tokens, spent, response_format, sampling
        )
        try:
            parsed, from_schema = read(reply)
        except ParseError as first:
            if reply.finish_reason == "length":
                counted.labels(model, answer_format, "truncated").inc()
                raise NoVerdict(f"truncated: answer cut off at {max_tokens} tokens") from None
            self._extra.retries.labels(model, "unparseable").inc()
            conversation += [
                {"role": "assistant", "content": reply.text or "(empty)"},
                {"role": "user", "content": answer.reminder.format(hint=answer.hint)},
            ]
            reply = await self._call(
                model, api_base, conversation, max_tokens, spent, response_format, sampling
            )
            try:
                parsed, _ = read(reply)
            except ParseError as second:
                if reply.finish_reason == "length":
                    counted.labels(model, answer_format, "truncated").inc()
                    raise NoVerdict(f"truncated: answer cut off at {max_tokens} tokens") from None
                counted.labels(model, answer_format, "parse").inc()
                self._quiet.warning(
                    f"unreadable:{model}:{evaluator}",
                    "judge %s for %s gave an unreadable answer twice: %s",
                    model,
                    evaluator,
                    second,
                )
                what = "empty answer" if not reply.text.strip() else str(second)
                raise NoVerdict(f"parse: {what} (first attempt: {first})") from None
            counted.labels(model, answer_format, "repaired").inc()
            return parsed
        result = "fallback" if response_format is not None and not from_schema else "valid"
        counted.labels(model, answer_format, result).inc()
        return parsed

    def asks_structured(self, model: str) -> bool | None:
        """Whether `model` is asked for structured output; None before its first call."""
        return self._provider.asks_structured(model)

    @staticmethod
    def _error(message: str, spent: Reply) -> Verdict[Any]:
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
        spent: Reply,
        response_format: dict[str, Any] | None = None,
        sampling: Decoding | None = None,
    ) -> Reply:
        """One request with retries; adds its usage to `spent` (and makes its logprobs the
        ones `spent` carries). Raises `AttemptError`."""
        breaker = self._breakers.setdefault(
            model, CircuitBreaker(self._breaker_threshold, self._breaker_cooldown, self._clock)
        )
        retry = Retry(self._retry, self._rng, self._clock)
        while True:
            try:
                reply = await self._attempt(
                    model,
                    api_base,
                    messages,
                    max_tokens,
                    response_format,
                    sampling or GREEDY,
                    breaker,
                )
            except AttemptError as exc:
                self._t.counter("judge_requests").labels(model, exc.outcome).inc()
                if exc.outcome == "circuit_open":
                    raise
                if exc.outcome == "timeout":  # said from the first, before any breaker opens
                    self._quiet.warning(
                        f"timeout:{model}", "judge %s: timeout: %s (judge.timeout_s)", model, exc
                    )
                if exc.schema_refused or exc.logprobs_refused:
                    breaker.success()  # the model answers; it only wants no schema/logprobs
                    raise
                if breaker.failure():
                    self._extra.circuit_open.labels(model).set(1)
                    log.warning("judge %s circuit opened after repeated failures: %s", model, exc)
                if not exc.retryable or breaker.is_open:
                    raise
                delay = retry.next_delay(exc.retry_after)
                if delay is None:
                    raise
                self._extra.retries.labels(model, exc.outcome).inc()
                await self._sleep(delay)
                continue
            self._t.counter("judge_requests").labels(model, "ok").inc()
            if breaker.is_open:
                log.info("judge %s circuit closed", model)
            breaker.success()
            self._extra.circuit_open.labels(model).set(0)
            spent.input_tokens += reply.input_tokens
            spent.output_tokens += reply.output_tokens
            spent.cost += reply.cost
            spent.logprobs = reply.logprobs
            self._t.counter("judge_tokens").labels(model, "input").inc(reply.input_tokens)
            self._t.counter("judge_tokens").labels(model, "output").inc(reply.output_tokens)
            self._t.counter("judge_cost_usd").labels(model).inc(reply.cost)
            return reply

    async def _attempt(
        self,
        model: str,
        api_base: str | None,
        messages: list[dict[str, str]],
        max_tokens: int,
        response_format: dict[str, Any] | None,
        sampling: Decoding,
        breaker: CircuitBreaker,
    ) -> Reply:
        request = await self._provider.request(
            model, api_base, messages, max_tokens, response_format, sampling
        )
        async with self._semaphore:
            # Asked once a slot is free: a call that queued behind others (the draws of one
            # record) must not go out when the breaker opened while it waited.
            if not breaker.allow():
                raise AttemptError(
                    "circuit_open",
                    f"judge {model} is failing; calls paused for {breaker.remaining():.0f}s more",
                    retryable=False,
                )
            probe = breaker.is_open
            try:
                return await self._provider.send(request)
            except asyncio.CancelledError:
                if probe:  # a cancelled probe must not leave the breaker stuck
                    breaker.abandon()
                raise

    def _count_redaction(self, kind: str, count: int) -> None:
        self._extra.redactions.labels(kind).inc(count)

    def _invalid_retry_after(self, model: str, value: str) -> None:
        self._t.counter("retry_after_invalid").labels("judge").inc()
        self._quiet.warning(
            f"retry-after:{model}",
            "judge %s sent an unreadable Retry-After %r; backing off on our own",
            model,
            value[:64],
        )
