"""`rag-monitor explain` on a captured trace of each message shape the extraction once read
wrong (`tests/testdata/traces/`, real apps under their real instrumentations, no declared
convention): Anthropic `search_result` and `document` blocks, LlamaIndex's own
OpenTelemetry package behind a query engine and a chat engine (all content in span
events), a Markdown knowledge base and a JSON user message in the prompt. For each, what
explain says leads to the right record of every question: where a span or event that no
convention reads carries the content, the entry it proposes, pasted into a config as a user
would, makes it (events included); where the content is read already, explain says the
record is whole, or that its documents came from the prompt and that no span carries them
(no entry could read them better), and the record as read is the right one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from monitor.config import load_config
from monitor.conventions import Convention
from monitor.extraction import conventions_from_config, extract_records
from monitor.extraction._prompt_templates import TEMPLATES
from tests.extraction.test_explain_events import _explained, _proposal
from tests.extraction.test_message_content import (
    PLANTED,
    TRACES,
    _retrieved_by_llama_index,
    _traces,
)
from tests.frameworks.apps.framework_apps import ANSWERS, KB, PLANTED_THREE, QUESTIONS, search

NO_PROPOSAL = "no entry proposed: no span the conventions leave unread carries documents"


@pytest.fixture(autouse=True)
def _fresh_templates() -> Iterator[None]:
    TEMPLATES.clear()
    yield
    TEMPLATES.clear()


# (fixture, what explain says of its records, the right records' context_source)
FIXTURES = [
    pytest.param("anthropic_search_result", "whole", "message_documents", id="anthropic-search"),
    pytest.param("anthropic_document", "whole", "message_documents", id="anthropic-document"),
    pytest.param("llama_query", "proposal", "retrieval_span", id="llama-query-engine"),
    pytest.param("llama_chat", "proposal", "retrieval_span", id="llama-chat-engine"),
    pytest.param("prompt_markdown_kb", "prompt", "prompt", id="markdown-kb"),
    pytest.param("prompt_json_message", "prompt", "prompt", id="json-message"),
]


def _right_answer(fixture: str, uri: str) -> str:
    # The prompt-layout apps plant `PLANTED_THREE`; the other captures `PLANTED`.
    planted = PLANTED_THREE if fixture.startswith("prompt_") else PLANTED
    return planted.get(uri, ANSWERS[uri])


@pytest.mark.parametrize(("fixture", "said", "source"), FIXTURES)
def test_explain_on_each_wrong_shape_leads_to_the_right_records(
    fixture: str, said: str, source: str, tmp_path: Path
) -> None:
    trace_file = TRACES / f"{fixture}.json"
    out = _explained(trace_file)
    assert out.count("\ntrace ") + out.startswith("trace ") == len(QUESTIONS)
    for line in out.splitlines():
        if "span 'OpenAI.chat'" in line:  # LlamaIndex's model call: its messages' shape
            assert line.endswith(
                "a model call found by structure (role-tagged messages "
                "sent, an assistant's returned); no convention declares it"
            )
    conventions: tuple[Convention, ...] = ()
    if said == "proposal":
        entries = _proposal(out)
        sources = [
            s for e in entries for p in ("input", "output", "documents") for s in e.get(p, [])
        ]
        assert sources and all("event" in s for s in sources)  # the content is in events only
        config_file = tmp_path / "config.yaml"
        config_file.write_text(yaml.safe_dump({"extraction": {"conventions": entries}}))
        conventions = conventions_from_config(load_config(config_file).extraction.conventions)
        again = _explained(trace_file, config_file)
        assert "proposed entry" not in again
        assert again.count(f"whole, its context from {source}") == len(QUESTIONS)
    else:
        assert "proposed entry" not in out
        if said == "whole":
            assert out.count(f"whole, its context from {source}") == len(QUESTIONS)
        else:
            assert out.count("doubtful: its documents were split out of") == len(QUESTIONS)
            assert out.count(NO_PROPOSAL) == len(QUESTIONS)
    TEMPLATES.clear()
    traces = _traces(fixture)
    for spans, (question, answering) in zip(traces, QUESTIONS, strict=True):
        (record,) = extract_records(spans, conventions=conventions)
        llama = fixture.startswith("llama")
        uris = _retrieved_by_llama_index(spans) if llama else search(question, 2)
        assert uris[0] == answering
        assert record.query == question
        context = record.retrieved_context or ()
        assert [(d.doc_uri, d.content) for d in context] == [(u, KB[u]) for u in uris]
        assert record.response == _right_answer(fixture, uris[0])
        assert record.context_source == source
        assert not record.missing()
