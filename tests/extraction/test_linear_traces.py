"""A trace's extraction costs in proportion to its spans (issue 104): thousands of sibling
retrieval or tool spans, or of turns each with its retrieval and its answer, run lines of
Python (`sys.settrace`'s line events, as `test_linear_extraction.py` counts them) about four
times as many at four times the spans, not sixteen; and the nested-retrieval and tool
rules, which each span now reads by walking up its own ancestors, keep what comparing
every pair kept.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from monitor.extraction import extract_records
from monitor.extraction._extraction_rule import _outermost, _with_tool_results
from monitor.extraction._span_values import Doc, Retrieval
from monitor.extraction._trace_tree import is_ancestor
from monitor.spans import Span
from tests.extraction.test_linear_extraction import line_events

TRACE = "ab" * 16
SPANS = 300  # the larger trace has four times as many
LINEAR = 4 * 1.5
RETRIEVER = {
    "openinference.span.kind": "RETRIEVER",
    "retrieval.documents.0.document.content": "De Lorean built the car.",
}
TOOL = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "search",
    "gen_ai.tool.call.result": "Ловля рыбы запрещена.",
}


def _id(i: int) -> str:
    return f"{i + 1:016x}"


def _chat(i: int, parent: str, at: int, question: str) -> Span:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": question,
        "gen_ai.completion.0.content": "答案。",
    }
    return Span(TRACE, _id(i), parent, "chat m", at, at + 1, attributes=attributes)


def _root() -> Span:
    return Span(TRACE, _id(0), "", "root", 0, 10**12, attributes={})


def siblings(attributes: dict[str, str]) -> Callable[[int], list[Span]]:
    def build(n: int) -> list[Span]:
        spans = [_root()]
        for i in range(1, n + 1):
            spans.append(
                Span(TRACE, _id(i), _id(0), "step", 10 * i, 10 * i + 5, attributes=dict(attributes))
            )
        return [*spans, _chat(n + 1, _id(0), 10**11, "问题是什么？")]

    return build


def turns(n: int) -> list[Span]:
    """Turns of a conversation, each a retrieval and the answer to its own question."""
    spans = [_root()]
    for i in range(n // 2):
        at = 1_000 * (i + 1)
        spans.append(
            Span(TRACE, _id(2 * i + 1), _id(0), "retrieve", at, at + 1, attributes=dict(RETRIEVER))
        )
        spans.append(_chat(2 * i + 2, _id(0), at + 2, f"第{i}个问题是什么？"))
    return spans


SHAPES: dict[str, Callable[[int], list[Span]]] = {
    "sibling_retrievals": siblings(RETRIEVER),
    "sibling_tools": siblings(TOOL),
    "turns": turns,
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_trace_costs_in_proportion_to_its_spans(shape: str) -> None:
    build = SHAPES[shape]
    small_trace, large_trace = build(SPANS), build(4 * SPANS)
    small = line_events(lambda _: extract_records(small_trace), "")
    large = line_events(lambda _: extract_records(large_trace), "")
    assert extract_records(build(SPANS))
    assert small > 0
    assert large <= LINEAR * small, f"{shape}: {small} lines, then {large} at 4x"


# -- the rules as they read every pair, to compare with ---------------------------------


def _outermost_pairwise(retrievals: list[Retrieval], by_id: dict[str, Span]) -> list[Retrieval]:
    if len(retrievals) < 2:
        return retrievals
    keep = []
    for r in retrievals:
        shadowed = False
        for other in retrievals:
            if other is r or other.reranked or r.reranked:
                continue
            other_has_text = any(d.content for d in other.docs)
            r_has_text = any(d.content for d in r.docs)
            if is_ancestor(other.span, r.span, by_id) and (other_has_text or not r_has_text):
                shadowed = True
            elif is_ancestor(r.span, other.span, by_id) and other_has_text and not r_has_text:
                shadowed = True
            if shadowed:
                break
        if not shadowed:
            keep.append(r)
    return keep


def _tools_pairwise(
    retrievals: list[Retrieval], tools: list[Retrieval], by_id: dict[str, Span]
) -> list[Retrieval]:
    if not tools:
        return retrievals
    keep = [
        t
        for t in tools
        if not any(is_ancestor(t.span, r.span, by_id) for r in retrievals)
        and not any(o is not t and is_ancestor(o.span, t.span, by_id) for o in tools)
    ]
    return sorted(
        [*retrievals, *keep], key=lambda r: (r.span.start_unix_nano, r.span.end_unix_nano)
    )


def _forest(rng: random.Random) -> tuple[list[Span], dict[str, Span]]:
    """A few small trees (a parent is an earlier span, or none), a parent link now and
    then to a span that is not in the trace, and now and then a cycle."""
    count = rng.randint(1, 9)
    spans: list[Span] = []
    for i in range(count):
        parent = _id(rng.randrange(i)) if i and rng.random() < 0.8 else ""
        if rng.random() < 0.05:
            parent = _id(1000)
        spans.append(Span(TRACE, _id(i), parent, f"s{i}", i, 100 - i, attributes={}))
    if count > 2 and rng.random() < 0.1:
        first = spans[0]
        spans[0] = Span(TRACE, first.span_id, _id(count - 1), "s0", 0, 100, attributes={})
    return spans, {s.span_id: s for s in spans}


def _retrievals(rng: random.Random, spans: list[Span]) -> list[Retrieval]:
    out = []
    for _ in range(rng.randint(0, 8)):
        span = rng.choice(spans)
        text = "Le pont mesure 900 mètres." if rng.random() < 0.5 else ""
        out.append(Retrieval(span, None, [Doc(text)], reranked=rng.random() < 0.15))
    return out


def test_the_nested_retrieval_rule_keeps_what_comparing_every_pair_kept() -> None:
    rng = random.Random(104)
    for _ in range(3_000):
        spans, by_id = _forest(rng)
        retrievals = _retrievals(rng, spans)
        assert _outermost(retrievals, by_id) == _outermost_pairwise(retrievals, by_id)


def test_the_tool_rule_keeps_what_comparing_every_pair_kept() -> None:
    rng = random.Random(105)
    for _ in range(3_000):
        spans, by_id = _forest(rng)
        retrievals, tools = _retrievals(rng, spans), _retrievals(rng, spans)
        assert _with_tool_results(retrievals, tools, by_id) == _tools_pairwise(
            retrievals, tools, by_id
        )
