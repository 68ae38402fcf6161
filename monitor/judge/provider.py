"""litellm underneath the judge client: one request to a judge model, its failure
classified (retryable or not, and why), its answer's usage priced.

litellm is imported off the event loop on first use (it takes seconds). litellm's own
retries are off: the client retries, so every attempt is counted and bounded. The API key
goes only to the configured judge endpoint, and error texts are scrubbed of it.
"""

from __future__ import annotations

import asyncio
import errno
import importlib
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from monitor.config import Judge
from monitor.judge.answers import TOP_LOGPROBS, TokenLogprobs, token_logprobs
from monitor.shared.logs import adopt_library_loggers, route_to_root
from monitor.shared.retry import InvalidRetryAfter, parse_retry_after

log = logging.getLogger(__name__)


LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


def import_litellm() -> Any:
    """litellm, imported (seconds, the first time) and set up: its price list read from
    the package rather than fetched, no telemetry or help text of its own, and its log
    lines routed through the monitor's log (`monitor.shared.logs`)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # litellm puts its handler (records below WARNING to stdout) on its loggers as it is
    # imported, and logs through it while the import goes on.
    route_to_root(*LITELLM_LOGGERS)
    module: Any = importlib.import_module("litellm")
    # Imported by litellm on its first OpenAI-style call, inside that call's timeout.
    importlib.import_module("openai.resources.chat")
    module.suppress_debug_info = True
    module.telemetry = False
    route_to_root(*LITELLM_LOGGERS)
    adopt_library_loggers(*LITELLM_LOGGERS)
    return module


# Failures a retry cannot mend and the user can: logged once per model with the fix.
EXPLAINED = ("auth", "not_found")


def explain(outcome: str, model: str, api_base: str | None, judge: Judge) -> str:
    """What to change when calls to `model` at `api_base` fail with `outcome` ("" when
    only the error itself can say)."""
    where = api_base or "the provider's endpoint"
    if judge.api_key_env is not None and api_base == judge.api_base:
        variable = judge.api_key_env
    else:
        provider = model.split("/", 1)[0] if "/" in model else "openai"
        variable = f"{provider.upper()}_API_KEY (or name another in judge.api_key_env)"
    fixes = {
        "auth": f"the judge refused the credentials: set a valid key in {variable}",
        "not_found": f"{where} has no model {model!r}: check the model name "
        "(judge.model, evaluators[].model) and judge.api_base",
        "rate_limited": "the key works but the provider limits its rate: lower "
        "judge.max_concurrency or raise the quota",
        "timeout": f"no answer within judge.timeout_s ({judge.timeout_s:g}s): is the server "
        f"at {where} up? raise judge.timeout_s for a slow model",
        "unreachable": f"nothing answers at {where}; is the server running?",
    }
    return fixes.get(outcome, "")


# How much of a provider's error message a judge error keeps.
_SAID = 160


class AttemptError(Exception):
    """One attempt failed: `outcome` as counted, and whether trying again may help."""

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
        self.fix = ""  # what to change, where `explain` knows (set by `Provider.send`)

    def described(self) -> str:
        """The fix, if known, then the error: for a log line or a probe's result."""
        return f"{self.fix} ({self})" if self.fix else str(self)


@dataclass(slots=True)
class Reply:
    text: str
    finish_reason: str | None
    input_tokens: int
    output_tokens: int
    cost: float
    logprobs: TokenLogprobs | None = None


@dataclass(frozen=True, slots=True)
class Decoding:
    """How a judge request samples its answer: temperature, and whether to ask for logprobs."""

    temperature: float
    logprobs: bool


GREEDY = Decoding(0.0, False)


class Provider:
    """Sends requests through litellm for the judge client (see the module docstring).

    `on_invalid_retry_after` is told about a `Retry-After` that is neither delta-seconds
    nor an HTTP-date (the model, the value); the attempt then backs off on its own."""

    def __init__(
        self,
        judge: Judge,
        api_key: str | None,
        on_invalid_retry_after: Callable[[str, str], None],
        wall_clock: Callable[[], float] = time.time,
        *,
        explain_failures: bool = True,
    ) -> None:
        self._config = judge
        self._api_key = api_key
        self._on_invalid_retry_after = on_invalid_retry_after
        self._wall_clock = wall_clock
        self._litellm: Any = None
        self._import_lock = asyncio.Lock()
        self._priced_by_litellm: dict[str, bool] = {}
        self._unpriced_logged: set[str] = set()
        self._prepared: set[str] = set()
        self._explain = explain_failures
        self._explained: set[tuple[str, str]] = set()
        self._structured: dict[str, bool] = {}  # by model: asked for structured output

    async def load(self) -> Any:
        if self._litellm is not None:
            return self._litellm
        async with self._import_lock:
            if self._litellm is None:
                self._litellm = await asyncio.to_thread(import_litellm)
        return self._litellm

    async def wants_schema(self, model: str) -> bool:
        """Whether to ask `model` for structured output (`judge.structured_output`; "auto":
        as litellm knows the model, until it refuses a schema)."""
        known = self._structured.get(model)
        if known is not None:
            return known
        mode = self._config.structured_output
        if mode == "auto":
            litellm = await self.load()
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

    def asks_structured(self, model: str) -> bool | None:
        """Whether `model` is asked for structured output; None before its first call."""
        return self._structured.get(model)

    def refuses_schema(self, model: str) -> None:
        """`model` refused `response_format`: it is asked free-form from now on."""
        self._structured[model] = False

    async def request(
        self,
        model: str,
        api_base: str | None,
        messages: list[dict[str, str]],
        max_tokens: int,
        response_format: dict[str, Any] | None,
        sampling: Decoding,
    ) -> dict[str, Any]:
        """The arguments of one `litellm.acompletion` call."""
        litellm = await self.load()
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
        return kwargs

    async def send(self, request: dict[str, Any]) -> Reply:
        """Send `request` (from `request`) within `judge.timeout_s`. Raises `AttemptError`."""
        litellm = await self.load()
        model: str = request["model"]
        logprobs = bool(request.get("logprobs"))
        try:
            async with asyncio.timeout(self._config.timeout_s):
                response = await litellm.acompletion(**request)
        except Exception as exc:
            if isinstance(exc, TimeoutError):
                message = f"no answer within {self._config.timeout_s:g}s"
                error = AttemptError("timeout", message, retryable=True)
            else:
                error = self._classify(model, exc, "response_format" in request, logprobs)
            error.fix = explain(error.outcome, model, request.get("api_base"), self._config)
            if self._explain and error.outcome in EXPLAINED:
                self._explain_once(model, error)
            raise error from None
        choice = response.choices[0]
        text = getattr(choice.message, "content", None) or ""
        usage = getattr(response, "usage", None)
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        return Reply(
            text=text,
            finish_reason=getattr(choice, "finish_reason", None),
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cost=self._cost(litellm, model, response, tokens_in, tokens_out),
            logprobs=token_logprobs(choice) if logprobs else None,
        )

    def _classify(
        self, model: str, exc: Exception, structured: bool, logprobs: bool
    ) -> AttemptError:
        status = getattr(exc, "status_code", None)
        name = type(exc).__name__
        # One line, short: litellm's messages run over lines and repeat its own name.
        said = " ".join(self.scrub(str(exc)).split())
        message = f"{name}: {said[:_SAID] + '…' if len(said) > _SAID else said}"
        lowered = message.lower()
        if "Timeout" in name:
            return AttemptError("timeout", message, retryable=True)
        if _unreachable(exc):  # litellm calls it a server error (500) too
            return AttemptError("unreachable", message, retryable=True)
        # litellm reports a key missing on our side as a server error (500).
        keyless = "Missing credentials" in message or (status == 400 and "api key" in lowered)
        if status in (401, 403) or "Authentication" in name or keyless:
            return AttemptError("auth", message, retryable=False)
        if status == 404 or "NotFound" in name:
            return AttemptError("not_found", message, retryable=False)
        if status == 429 or "RateLimit" in name:
            retry_after = self._retry_after(model, exc)
            return AttemptError("rate_limited", message, retryable=True, retry_after=retry_after)
        if isinstance(status, int) and status >= 500:
            return AttemptError("error", message, retryable=True)
        if (
            "APIConnectionError" in name
            or "ServiceUnavailable" in name
            or "InternalServerError" in name
        ):
            return AttemptError("error", message, retryable=True)
        rejected = status in (400, 422) or "UnsupportedParams" in name
        refused = structured and rejected and _mentions_schema(str(exc))
        no_logprobs = logprobs and rejected and "logprobs" in str(exc).lower() and not refused
        return AttemptError(
            "error", message, retryable=False, schema_refused=refused, logprobs_refused=no_logprobs
        )

    def _explain_once(self, model: str, error: AttemptError) -> None:
        if (model, error.outcome) not in self._explained:
            self._explained.add((model, error.outcome))
            log.error("judge %s: %s: %s", model, error.outcome, error.described())

    def _retry_after(self, model: str, exc: Exception) -> float | None:
        """The provider's `Retry-After`, in seconds, if it sent a readable one."""
        # litellm keeps the provider's headers on the exception; `response` is its own.
        raw = None
        for headers in (
            getattr(exc, "litellm_response_headers", None),
            getattr(getattr(exc, "response", None), "headers", None),
        ):
            if headers is not None and raw is None:
                raw = headers.get("retry-after")
        if raw is None:
            return None
        try:
            return parse_retry_after(raw, now=self._wall_clock())
        except InvalidRetryAfter:
            self._on_invalid_retry_after(model, str(raw))
            return None

    def scrub(self, text: str) -> str:
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


# A connection that no server took: refused, no route, or a host name that does not resolve.
_NO_SERVER = (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH)


def _unreachable(exc: BaseException) -> bool:
    """Whether the failure underneath `exc` (litellm wraps the HTTP client's, which wraps
    the socket's) is that nothing answered at the address."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, socket.gaierror) or (
            isinstance(cause, OSError) and cause.errno in _NO_SERVER
        ):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _mentions_schema(message: str) -> bool:
    lowered = message.lower()
    return any(word in lowered for word in ("response_format", "json_schema", "response format"))
