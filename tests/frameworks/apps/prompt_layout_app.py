"""A RAG app whose retrieved documents reach the model only inside its prompt, laid out as
RAG apps write prompts by hand rather than as numbered or tagged blocks: a Markdown
knowledge base or a JSON user message. The plain `openai` client, traced by the official
`opentelemetry-instrumentation-openai-v2` (content as span attributes); the retriever is a
plain function with no span, and there is no `extraction.conventions` entry. Run as
`python -m tests.frameworks.apps.prompt_layout_app openai-v2 VARIANT ENDPOINT`:

- `markdown-kb`: the system message is `# Role`, `# Instructions` (a list of rules) and a
  `# Knowledge base` section with a `## <id>` heading per document;
- `markdown-h3`: `### ` headings throughout, the template's sections first, then a
  `### <id>` section per document, no section around them;
- `markdown-list`: a bullet list of rules, then the knowledge base as a bullet list, one
  document an item;
- `json-message`: the user message is `{"task", "question", "context": [{"id", "text"}]}`
  under a system prompt that never changes;
- `json-query-documents`: `{"instructions", "query", "documents": [text, ...]}`;
- `json-input-sources`: `{"input", "sources": [{"source", "content"}]}`;
- `json-own-names`: fields named as no list would name them, the documents one object
  deep: `{"instruction", "userAsk", "retrieved": {"hits": [{"ref", "passage_text"}]}}`.

Each question is asked under the app's own `POST /ask` span. The model is the scripted
server on 127.0.0.1 (`tests/frameworks/apps/openai_server.py`), planting three wrong facts
(`three_planted_answer`). Prints one JSON line per question, with the ids of the documents
given (`uris`)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tests.frameworks.apps.framework_apps import (
    KB,
    QUESTIONS,
    finish,
    search,
    three_planted_answer,
    tracer_provider,
)

OPENAI_V2 = {
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
}
SYSTEM = "Trivia desk of the city library."
RULES = ("Answer only from the knowledge base.", "Cite the id of the document you used.")

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

Messages = list[dict[str, str]]


def _markdown_kb(question: str, uris: list[str]) -> Messages:
    rules = "\n".join(f"- {rule}" for rule in RULES)
    kb = "\n".join(f"## {uri}\n{KB[uri]}\n" for uri in uris)
    system = (
        "# Role\nYou are the trivia desk of the city library.\n\n"
        f"# Instructions\n{rules}\n\n# Knowledge base\n\n{kb}"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def _markdown_h3(question: str, uris: list[str]) -> Messages:
    kb = "\n".join(f"### {uri}\n\n{KB[uri]}\n" for uri in uris)
    system = (
        "### Task\nYou are the trivia desk of the city library.\n\n"
        f"### Rules\n{' '.join(RULES)}\n\n{kb}"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def _markdown_list(question: str, uris: list[str]) -> Messages:
    rules = "\n".join(f"* {rule}" for rule in RULES)
    kb = "\n".join(f"- {KB[uri]}" for uri in uris)
    system = f"Rules:\n{rules}\n\nKnowledge base:\n{kb}"
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def _json_message(question: str, uris: list[str]) -> Messages:
    user = {
        "task": "Answer the question from the context only.",
        "question": question,
        "context": [{"id": uri, "text": KB[uri]} for uri in uris],
    }
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": json.dumps(user)}]


def _json_query_documents(question: str, uris: list[str]) -> Messages:
    user = {
        "instructions": "Answer from the documents; say so when they do not tell.",
        "query": question,
        "documents": [KB[uri] for uri in uris],
    }
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": json.dumps(user)}]


def _json_input_sources(question: str, uris: list[str]) -> Messages:
    user = {"input": question, "sources": [{"source": uri, "content": KB[uri]} for uri in uris]}
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": json.dumps(user)}]


def _json_own_names(question: str, uris: list[str]) -> Messages:
    hits = [{"ref": uri, "passage_text": KB[uri]} for uri in uris]
    user = {
        "instruction": "Answer from the retrieved passages only.",
        "userAsk": question,
        "retrieved": {"hits": hits},
    }
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": json.dumps(user)}]


LAYOUTS: dict[str, Callable[[str, list[str]], Messages]] = {
    "markdown-kb": _markdown_kb,
    "markdown-h3": _markdown_h3,
    "markdown-list": _markdown_list,
    "json-message": _json_message,
    "json-query-documents": _json_query_documents,
    "json-input-sources": _json_input_sources,
    "json-own-names": _json_own_names,
}


def _typed(messages: Messages) -> list[ChatCompletionMessageParam]:
    out: list[Any] = messages  # each a system or user message, as the API takes them
    return out


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    os.environ.update(OPENAI_V2)  # read by the instrumentation when it starts
    from openai import OpenAI
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    from tests.frameworks.apps.openai_server import serve

    provider, roots = tracer_provider(f"{instrumentation}-{variant}", endpoint)
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    client = OpenAI(base_url=serve(three_planted_answer), api_key="scripted")
    tracer = provider.get_tracer("app")
    layout = LAYOUTS[variant]
    for question, _ in QUESTIONS:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}) as span:
            trace_id = f"{span.get_span_context().trace_id:032x}"
            uris = search(question)  # untraced
            completion = client.chat.completions.create(
                model="scripted", messages=_typed(layout(question, uris))
            )
        line = {
            "trace_id": trace_id,
            "question": question,
            "response": completion.choices[0].message.content or "",
            "sources": [KB[uri] for uri in uris],
            "uris": uris,
        }
        print(json.dumps(line), flush=True)
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
