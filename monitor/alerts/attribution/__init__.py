"""A page that says where: the slices that carry a regression, retriever or generator, and
the traces to open.

The engine (`monitor.alerts.engine`) shows every record it counts to `observe`, with the
record's dimension values (`monitor.records.where`) and, when a retrieval evaluator judged
it, that verdict; when an entry pages, and at every re-send, `annotations` explains it.

**Slices.** For every value of every dimension (`where.DIMENSIONS`: version, model, route,
document source, number of documents, context length, tool, question language, question
topic) the counts of the rule's defect values are kept in time buckets: `FINE` over the
rule's window, `COARSE` over the reference before it (the baseline window; a day for an
absolute rule; none for a cohort rule, whose reference is the rest of its service in the
same window). At page time the **current** verdicts are the newest buckets that hold the
page's evidence after the most significant change of the service's rate (a cohort rule: the
rule's window), the **reference** the buckets before them (a cohort rule: the other cohorts).

A value's current rate is compared with what the rest of its dimension predicts: its own
reference rate times the rest's rise (current over reference rate), or, for a value with
fewer than `MIN_REFERENCE` reference verdicts (a new version), the rest's current rate. A
rise spread evenly is the same factor on every value, whatever its own rate, so it names
none. A value is **named** when its excess over that prediction is above half of the
rule's `min_increase` (a rise below it is no rise, as for the rule itself) at the level a
look of the rule may use (`stats.look_level`: one false page per `false_page_every` at
every `evaluation_interval_s`), shared among the values tested: a slice is named only where
a cohort rule on its dimension, at the page's own budget, would have paged. Variances are
widened by the design effect of the rule's units (verdicts of one conversation fail
together): measured from `GROUPS` groups of units hashed apart, whose spread beyond
chance is that effect, less a group that stands apart from the others (`spread_of`: one
sender's unit, a forged conversation id, cannot carry it). Named slices are listed by their share of the excess (what their
verdicts failed beyond their own reference rate, of what the service failed beyond its
own), then by evidence.

**Retriever or generator.** With a retrieval evaluator (`RETRIEVAL`, the first that judged
the record) beside the rule's, the rise `within + mix` splits exactly into the rise at the
same retrieval quality (`within`: the rate among records whose retrieval passed and among
those whose retrieval failed, each against its reference, weighted by the current share)
and the rise that came with retrieval failing more often (`mix`: the change of that share
times the gap between the two rates), each tested above half of `min_increase` at the
look's level shared by the two. `retriever` when retrieval failed significantly more often
and `mix` is significant (`both` when `within` is too); `generator` when `within` is
significant, or when retrieval did not fail more often and `within` carries the rise (the
page itself established the rise; with retrieval unchanged it can only be at the same
retrieval quality); else `unclear`.

**Traces.** The last `TRACES` failing verdicts' trace ids are kept with their values; a
page lists up to `SHOWN_TRACES` of the current verdicts, of the first named slice when there
is one, with a link each through `alerts.trace_url`.

**The `Where` alert** (`_where_alert`): when a firing page first names a slice, a
companion alert carries it to the pager, since Alertmanager does not notify for changed
annotations; the engine asks `names_first` at every evaluation of a firing page that has
named none, so the slice goes out when first named, not at the next re-send. Its identity
(the slice and when it was first named) is the engine's entry's (`Entry.where`), handed to
`sent` and `names_first` and given back, so it is saved in the state file with the entry:
after a restart the page's re-sends carry the same `Where` alert and its resolve resolves
it.

**Memory.** Values of each dimension are capped process-wide (`LabelCap`: the values with
traffic hold at most `CAPS[dimension]` slots, `pipeline.max_versions` / `max_routes` for
version and route; a value without a slot counts as `other`, whose counts are kept like a
value's but never named; one 2 MiB sketch per dimension once its slots are full). Per
(rule, service, cohort): one row of `FINE + COARSE` buckets of two float32 counts per held
value, the service's totals and retrieval strata, `GROUPS` unit groups and `TRACES` trace
ids; `bytes_bound` states it; while it fires, the page last sent. Nothing of it is in the
state file (but the `Where` alert's identity, the entry's): after a restart the attribution
starts empty, and a page says so (`no data`).
"""

from monitor.alerts.attribution._attribution import (
    CAPS,
    RETRIEVAL,
    Attribution,
    Key,
    retrieval_verdict,
)
from monitor.alerts.attribution._explanation import Cause, Explanation, Slice, Split

__all__ = [
    "CAPS",
    "RETRIEVAL",
    "Attribution",
    "Cause",
    "Explanation",
    "Key",
    "Slice",
    "Split",
    "retrieval_verdict",
]
