"""A RAG app calling its model through the Anthropic SDK, its retrieved documents passed as
the Messages API's citable content blocks in the user message: `search_result` blocks
(variant `search-result`: `source`, `title`, text `content`) or `document` blocks (variant
`document`: `title`, a plain-text `source`), then the question as a text block. Traced by
OpenLLMetry's Anthropic instrumentation (`opentelemetry-instrumentation-anthropic`), content
on; the retriever is a plain function with no span, and there is no
`extraction.conventions` entry. Run as `python -m tests.frameworks.apps.anthropic_app
anthropic search-result|document ENDPOINT`.

Each question is asked under the app's own `POST /ask` span. The model is the scripted
server on 127.0.0.1 (`tests/frameworks/apps/openai_server.py`, its Messages endpoint),
planting three wrong facts. Prints one JSON line per question."""

from __future__ import annotations

import sys
from typing import Any

from tests.frameworks.apps import framework_apps as apps

SYSTEM = "Answer the question from the documents given, and cite them."


def _block(variant: str, uri: str) -> dict[str, Any]:
    text = apps.KB[uri]
    if variant == "search-result":
        return {
            "type": "search_result",
            "source": uri,
            "title": uri,
            "content": [{"type": "text", "text": text}],
            "citations": {"enabled": True},
        }
    return {
        "type": "document",
        "title": uri,
        "source": {"type": "text", "media_type": "text/plain", "data": text},
        "citations": {"enabled": True},
    }


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    import anthropic
    from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

    from tests.frameworks.apps.openai_server import serve

    provider, roots = apps.tracer_provider(f"{instrumentation}-{variant}", endpoint)
    AnthropicInstrumentor().instrument(tracer_provider=provider)
    base = serve(apps.three_planted_answer).removesuffix("/v1")
    client = anthropic.Anthropic(base_url=base, api_key="scripted")

    def ask(question: str) -> tuple[str, list[str]]:
        uris = apps.search(question)  # untraced
        blocks = [*(_block(variant, uri) for uri in uris), {"type": "text", "text": question}]
        message = client.messages.create(
            model="scripted",
            max_tokens=256,
            system=SYSTEM,
            messages=[{"role": "user", "content": blocks}],
        )
        text = "".join(b.text for b in message.content if b.type == "text")
        return text, [apps.KB[uri] for uri in uris]

    apps.ask_under_app_spans(provider, ask)
    apps.finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
