"""A RAG app recording its model calls with Grafana's agent-observability SDK (`agento11y`)
in its OpenTelemetry export mode (`AGENTO11Y_PROTOCOL=otel`, experimental features on):
each generation is a GenAI `chat` span with `gen_ai.input.messages`,
`gen_ai.output.messages` and `gen_ai.system_instructions`. Its retriever is a plain
function with no span, and there is no `extraction.conventions` entry. Run as
`python -m tests.frameworks.apps.agento11y_app agento11y otel ENDPOINT`.

Each question is asked under the app's own `POST /ask` span, the documents as numbered
blocks of the system prompt; the app calls the scripted server on 127.0.0.1
(`tests/frameworks/apps/openai_server.py`) itself, planting three wrong facts, and records
the call with `start_generation` / `set_result`. Prints one JSON line per question."""

from __future__ import annotations

import json
import os
import sys
import urllib.request

from tests.frameworks.apps import framework_apps as apps

OTEL_MODE = {"AGENTO11Y_PROTOCOL": "otel", "AGENTO11Y_ENABLE_EXPERIMENTAL_FEATURES": "true"}


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    os.environ.update(OTEL_MODE)  # read by the client when it is made
    from agento11y import (
        Client,
        ClientConfig,
        GenerationStart,
        ModelRef,
        assistant_text_message,
        user_text_message,
    )

    from tests.frameworks.apps.openai_server import serve

    provider, roots = apps.tracer_provider(f"{instrumentation}-{variant}", endpoint)
    # Its own tracer provider: with the global one the client's shutdown cannot flush.
    client = Client(ClientConfig(tracer_provider=provider))
    base = serve(apps.three_planted_answer)

    def ask(question: str) -> tuple[str, list[str]]:
        documents = [apps.KB[uri] for uri in apps.search(question)]  # untraced
        system = apps.numbered_prompt(documents)
        body = {
            "model": "scripted",
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": question},
            ],
        }
        request = urllib.request.Request(
            f"{base}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            answer = str(json.load(reply)["choices"][0]["message"]["content"])
        start = GenerationStart(
            conversation_id="kb-app", model=ModelRef(provider="openai", name="scripted")
        )
        with client.start_generation(start) as recorder:
            recorder.set_result(
                input=[user_text_message(question)],
                output=[assistant_text_message(answer)],
                system_prompt=system,
            )
        return answer, documents

    apps.ask_under_app_spans(provider, ask)
    client.shutdown()
    apps.finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
