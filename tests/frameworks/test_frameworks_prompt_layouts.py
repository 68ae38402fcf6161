"""Real RAG apps whose documents reach the model only inside a hand-written prompt
(`tests/frameworks/apps/prompt_layout_app.py`, the `otel-plain` environment: the `openai`
client under `opentelemetry-instrumentation-openai-v2`), with **no declared convention**
and no retriever span: a Markdown knowledge base (`## <id>` sections under `# Role` and
`# Instructions`; `### ` headings with no section around the documents; a bullet list) and
a JSON user message (`question`/`context`, `query`/`documents`, `input`/`sources`, and
fields no list names: `userAsk`, `retrieved.hits[].passage_text`).

Each app: six questions, two documents retrieved per question, a scripted model that
plants a wrong fact in three answers. Each question must give one record with the
question (for JSON, the question field's text, never the whole JSON) and the answer the
app got, the two documents as separate documents in order with no heading or instruction
text, named by their heading or id where the prompt names them; the embedded
groundedness evaluator fails the three planted answers and passes the three others."""

from __future__ import annotations

from functools import partial

import pytest

from harness.framework_envs import against_the_monitor, run_python_app
from monitor.records import CONTEXT_DOUBT
from monitor.telemetry import Telemetry
from tests.frameworks.test_frameworks_undeclared import _three_pass_three_fail

pytestmark = pytest.mark.e2e

# (variant, whether the prompt names each document by its id)
LAYOUTS = [
    pytest.param("markdown-kb", True, id="markdown-kb"),
    pytest.param("markdown-h3", True, id="markdown-h3"),
    pytest.param("markdown-list", False, id="markdown-list"),
    pytest.param("json-message", True, id="json-message"),
    pytest.param("json-query-documents", False, id="json-query-documents"),
    pytest.param("json-input-sources", True, id="json-input-sources"),
    pytest.param("json-own-names", True, id="json-own-names"),
]


@pytest.mark.parametrize(("variant", "named"), LAYOUTS)
async def test_a_prompt_layout_gives_the_question_and_each_document_without_its_heading(
    telemetry: Telemetry, variant: str, named: bool
) -> None:
    stage, answers, traces = await against_the_monitor(
        telemetry, partial(run_python_app, "prompt_layout", "openai-v2", variant)
    )
    await _three_pass_three_fail(stage, answers, traces, f"openai-v2-{variant}", "prompt")
    for answer in answers:
        ((_, record),) = await stage.wait_for(answer["trace_id"])
        uris = [d.doc_uri for d in record.retrieved_context or ()]
        assert uris == (answer["uris"] if named else [None, None]), uris
        assert not any(text.lstrip().startswith("#") for text in record.context_text)
        assert CONTEXT_DOUBT not in record.metadata, record.metadata[CONTEXT_DOUBT]
