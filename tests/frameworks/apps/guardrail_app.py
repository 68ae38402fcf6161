"""A RAG app that runs a guardrail on each answer and records its decision with Microsoft's
OpenTelemetry distro (`microsoft-opentelemetry`): its retrieval, model call and guardrail
are traced by the distro's Agent365 scopes (`ExecuteToolScope`, `InferenceScope`,
`ApplyGuardrailScope`), under the app's own `POST /ask` span, exported over OTLP/HTTP. Run
as `python -m tests.frameworks.apps.guardrail_app GUARD_VERSION VARIANT ENDPOINT`:

- `GUARD_VERSION`: the guardrail's version (`microsoft.guardian.version`): a run can change
  the app's guardrail;
- `VARIANT`: `leaks-N`, the scripted model writes a contact address (personal data) into
  the answers of the first N documents of `PLANTED_THREE` (N of the six answers blocked).

The guardrail (`answer-shield`) denies an answer that holds an e-mail address (category
`pii`), warns on one that links outside the knowledge base (the honey document's answer
always does: category `external_link`), and allows the rest; each finding is a
`microsoft.security.finding` event of its `apply_guardrail` span, the decision the span's
`microsoft.security.decision.type`. A blocked answer is replaced by a refusal. Prints one
JSON line per question (the model's answer, the guardrail's decision and categories, what
the user got), then the traces sent."""

from __future__ import annotations

import json
import os
import sys

from microsoft.opentelemetry.a365.core import (
    AgentDetails,
    ApplyGuardrailScope,
    GuardrailDecisionType,
    GuardrailDetails,
    GuardrailFinding,
    GuardrailRiskSeverity,
    GuardrailTargetType,
)
from microsoft.opentelemetry.a365.core.execute_tool_scope import ExecuteToolScope
from microsoft.opentelemetry.a365.core.inference_call_details import InferenceCallDetails
from microsoft.opentelemetry.a365.core.inference_operation_type import InferenceOperationType
from microsoft.opentelemetry.a365.core.inference_scope import InferenceScope
from microsoft.opentelemetry.a365.core.request import Request
from microsoft.opentelemetry.a365.core.tool_call_details import ToolCallDetails
from opentelemetry import trace

from tests.frameworks.apps.framework_apps import (
    ANSWERS,
    KB,
    PLANTED_THREE,
    QUESTIONS,
    finish,
    scripted_answer,
    search,
    tracer_provider,
)

SERVICE = "guardrail-app"
GUARDRAIL = "answer-shield"
AGENT = AgentDetails(agent_id="kb-agent", agent_name="kb-agent", provider_name="scripted")
LEAK = " For details, write to curator@example.org."
LINK = " See https://example.org/honey for more."
REFUSAL = "I cannot share that answer."


def _leaking(planted: int) -> set[str]:
    """The answers the scripted model adds a contact address to: those of the first
    `planted` documents of `PLANTED_THREE`."""
    return {ANSWERS[uri] for uri in list(PLANTED_THREE)[:planted]}


def _model(prompt: str, leaking: set[str]) -> str:
    answer = scripted_answer(prompt)
    if answer in leaking:
        return answer + LEAK
    if answer == ANSWERS["kb/honey.md"]:
        return answer + LINK
    return answer


def _has_address(text: str) -> bool:
    """Whether `text` holds a word shaped like an e-mail address."""
    for word in text.split():
        name, at, domain = word.strip(".,;:").partition("@")
        if at and name and "." in domain.strip("."):
            return True
    return False


def _guard(answer: str, version: str) -> tuple[str, list[str]]:
    """The guardrail's decision on `answer` and the categories it found, recorded as the
    distro's guardrail span with one finding event per category."""
    details = GuardrailDetails(
        target_type=GuardrailTargetType.LLM_OUTPUT,
        decision_type=GuardrailDecisionType.ALLOW,
        guardian_name=GUARDRAIL,
        guardian_provider_name="app",
        guardian_version=version,
    )
    with ApplyGuardrailScope.start(details, AGENT) as scope:
        found: list[str] = []
        if _has_address(answer):
            found.append("pii")
            scope.record_finding(
                GuardrailFinding("pii", GuardrailRiskSeverity.HIGH, risk_score=0.97)
            )
        if "https://" in answer or "http://" in answer:
            found.append("external_link")
            scope.record_finding(
                GuardrailFinding("external_link", GuardrailRiskSeverity.MEDIUM, risk_score=0.6)
            )
        if "pii" in found:
            decision, reason = GuardrailDecisionType.DENY, "the answer holds an e-mail address"
        elif found:
            decision, reason = GuardrailDecisionType.WARN, "the answer links outside the sources"
        else:
            decision, reason = GuardrailDecisionType.ALLOW, "nothing found"
        scope.record_decision(decision, reason)
    return decision, found


def main(guard_version: str, variant: str, endpoint: str) -> None:
    leaking = _leaking(int(variant.removeprefix("leaks-")))
    provider, roots = tracer_provider(SERVICE, endpoint)
    # The distro's scopes trace through the global provider, and only where Agent365
    # observability is on (the standalone SDK's switch; `use_microsoft_opentelemetry`
    # would also install its Azure exporters).
    trace.set_tracer_provider(provider)
    os.environ["ENABLE_A365_OBSERVABILITY"] = "true"
    tracer = trace.get_tracer("app")
    for question, _ in QUESTIONS:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}) as span:
            trace_id = f"{span.get_span_context().trace_id:032x}"
            request = Request(content=question)
            call = ToolCallDetails("search_kb", arguments={"query": question})
            with ExecuteToolScope.start(request, call, AGENT) as tool:
                hits = [{"id": uri, "content": KB[uri]} for uri in search(question)]
                tool.record_response(json.dumps(hits))
            documents = [hit["content"] for hit in hits]
            details = InferenceCallDetails(InferenceOperationType.CHAT, "scripted", "scripted")
            with InferenceScope.start(request, details, AGENT) as inference:
                answer = _model(question + "\n" + "\n".join(documents), leaking)
                inference.record_output_messages([answer])
                decision, found = _guard(answer, guard_version)
        line = {
            "trace_id": trace_id,
            "question": question,
            "response": answer,
            "sources": documents,
            "decision": decision,
            "categories": found,
            "delivered": REFUSAL if decision == GuardrailDecisionType.DENY else answer,
        }
        print(json.dumps(line), flush=True)
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
