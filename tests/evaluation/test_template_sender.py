"""The instruction template a worker learns from a service's prompts (documents only in the
prompt) is learned per sender as the sender screen keys it: the client address the receiver
saw, with the resource's `service.instance.id` beneath it (`monitor.records.sender`), both
from the delivery the task extracts. A forger that writes an honest pod's instance id from
another address is another sender: its prompts, however many, never teach the honest pod's
template, so a document that opens an honest prompt stays a document.

Each trace is one GenAI chat span whose system prompt holds a header line and the documents
as blank-line blocks; the task (`_task.run`) extracts it with the delivery's metadata."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from monitor.extraction import TraceRecords
from monitor.extraction._prompt_templates import TEMPLATES
from monitor.processors.evaluation._task import Batch, Job, Settings, run
from monitor.records import CLIENT_ADDRESS, INSTANCE_ID
from monitor.spans import Span

HEADER = "Acme knowledge service."
TARGET = "Honey never spoils: its low moisture and high acidity stop microbes growing."
FACTS = [f"Fact number {n} is a plain statement about topic {n}." for n in range(60)]
HONEST, FORGER = "10.0.0.1", "6.6.6.6"


@pytest.fixture(autouse=True)
def _fresh_templates() -> Iterator[None]:
    TEMPLATES.clear()
    yield
    TEMPLATES.clear()


def _documents(n: int, address: str, header: str, docs: list[str]) -> list[str]:
    """The documents of the record the task extracts from question `n`'s trace, sent from
    `address` by a pod whose instance id is `pod-a`."""
    question = f"question {n}?"
    sent = [("system", f"{header}\n\n" + "\n\n".join(docs)), ("user", question)]
    messages = [{"role": r, "parts": [{"type": "text", "content": t}]} for r, t in sent]
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": "An answer."}]}]
    span = Span(
        trace_id=f"{n + 1:032x}",
        span_id=f"{n + 1:016x}",
        parent_span_id="",
        name="chat m",
        start_unix_nano=1,
        end_unix_nano=2,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.input.messages": json.dumps(messages),
            "gen_ai.output.messages": json.dumps(answer),
        },
        service="kb-app",
        resource={INSTANCE_ID: "pod-a"},
    )
    job = Job((), spans=[span], metadata={CLIENT_ADDRESS: address})
    (outcome,) = run(Batch([job]), {}, Settings(), [])
    assert isinstance(outcome.extraction, TraceRecords)
    (record,) = outcome.extraction.records
    return [d.content or "" for d in record.retrieved_context]


def test_a_forger_writing_an_honest_pods_instance_id_cannot_teach_its_template() -> None:
    for n in range(4):  # the honest pod's template: the header
        assert (
            _documents(n, HONEST, HEADER, FACTS[2 * n : 2 * n + 2])[-2:] == FACTS[2 * n : 2 * n + 2]
        )
    # From another address under the same instance id: a prompt that breaks the template,
    # then prompts that all open with the target document.
    _documents(100, FORGER, "Another header entirely.", [FACTS[50], FACTS[51]])
    for k in range(48):
        _documents(200 + k, FORGER, HEADER, [TARGET, FACTS[k]])
    honest = [TARGET, FACTS[10]]
    assert _documents(10, HONEST, HEADER, honest) == honest
