"""Which instrumentation wrote a trace, by the conventions its spans follow, and the switch
of that stack that turns its content capture on: what a log line says when a model call
was traced but its question or answer was not (`_suspect.py`). Both come from the
conventions table (`marks`, `marked_values`, `marked_names`, `language`, a prefixed
`placeholders` value, `switch`): the
first convention whose marks any span carries (a version of a stack whose switch works
otherwise is an entry of its own, before the stack's, marked by what only it writes); a
trace of none of them is `unknown`. And what a stack advises for a cause (`advice`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from monitor.conventions import Convention
from monitor.extraction._table import active
from monitor.spans import Span

UNKNOWN = "unknown"


def _marked(convention: Convention, span: Span) -> bool:
    a = span.attributes
    if (
        convention.language is not None
        and span.resource.get("telemetry.sdk.language") != convention.language
    ):
        return False
    if convention.marked_names and span.name.startswith(convention.marked_names):
        return True
    for key, values in convention.marked_values.items():
        value = a.get(key)  # any attribute value may come: a list is no mark
        if isinstance(value, str) and value in values:
            return True
    if convention.placeholders and _holds_placeholder(convention.placeholders, a):
        return True
    prefixes = tuple(m for m in convention.marks if m.endswith((".", ":")))
    exact = [m for m in convention.marks if not m.endswith((".", ":"))]
    return any(m in a for m in exact) or bool(prefixes and any(k.startswith(prefixes) for k in a))


def _holds_placeholder(placeholders: tuple[str, ...], attributes: dict[str, Any]) -> bool:
    """Whether a value holds what only this stack writes where it withheld content (its
    prefixed placeholders, `HIDDEN:`): a mark of the stack."""
    marks = tuple(p for p in placeholders if p.endswith(":"))
    return bool(marks) and any(
        isinstance(v, str) and any(m in v for m in marks) for v in attributes.values()
    )


def convention_of(spans: Sequence[Span]) -> Convention | None:
    """The entry of the stack that wrote these spans (the first convention any span
    carries the marks of: a stack's version with an entry of its own comes before the
    stack's), or None."""
    for convention in active():
        if any(_marked(convention, s) for s in spans):
            return convention
    return None


def instrumentation_of(spans: Sequence[Span]) -> str:
    """The name of the stack that wrote these spans (`convention_of`), or `unknown`."""
    convention = convention_of(spans)
    return UNKNOWN if convention is None else convention.name


def advice(spans: Sequence[Span], cause: str) -> str | None:
    """What the stacks whose marks these spans carry advise for `cause` (the table's
    `advice`), or None."""
    for convention in active():
        said = convention.advice.get(cause)
        if said and any(_marked(convention, s) for s in spans):
            return said
    return None


def content_switch(instrumentation: str | None) -> str:
    """What turns content capture on in that stack."""
    switch = next((c.switch for c in active() if c.name == instrumentation and c.switch), None)
    return switch or (
        "turn on the instrumentation's content capture (see the README's 'Tracing your app')"
    )
