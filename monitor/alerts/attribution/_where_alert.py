"""The `Where` alert: an alert of its own that carries the slice a page names to the pager,
since Alertmanager does not notify for changed annotations (docs/alerts.md, "A page that
says where")."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Literal

from monitor.alerts.attribution._explanation import Explanation, Slice
from monitor.alerts.kinds import Named
from monitor.component import Alert
from monitor.config import WHERE_SUFFIX

# The page's annotations the `Where` alert repeats (what the pager needs to act on the slice).
CARRIED = (
    "where",
    "slice",
    "changed",
    "cause",
    "cause_detail",
    "trace_ids",
    "trace_urls",
    "judge_changed",
)


def where_alert(
    page: Alert,
    dimension: str,
    value: str,
    status: Literal["firing", "resolved"],
    starts_at: datetime,
) -> Alert:
    """The `Where` alert of `page` naming slice `dimension`=`value`, named first at
    `starts_at`; it ends when the page does (the page's `endsAt`)."""
    name = page.labels.get("alertname", page.rule)
    labels = {
        **page.labels,
        "alertname": name + WHERE_SUFFIX,
        "dimension": dimension,
        "value": value,
    }
    notes = page.annotations
    annotations = {k: notes[k] for k in CARRIED if k in notes}
    subject = f"{page.service}/{labels['cohort']}" if "cohort" in labels else page.service
    annotations["summary"] = f"{name} on {subject}: the excess is in {dimension} {value}"
    annotations["description"] = notes.get("where", annotations["summary"])
    annotations["page"] = name
    return replace(page, status=status, labels=labels, annotations=annotations, starts_at=starts_at)


# A slice named first gives way to another that carries at least this many times its share
# of the excess, over the whole rise or over its newest window, or when it is no longer
# named: a decoy that rose first cannot hold the `Where` alert when the rise is elsewhere.
TAKE_OVER = 2.0


def successor_of(explanation: Explanation | None, where: Named) -> Slice | None:
    """The slice that takes over from `where`, the slice named first (None: none does):
    the top slice of the rise's newest window once it outweighs `where` there (a later
    rise of another slice, while the first one's still fills the older part of the whole
    rise), or of the whole rise when its newest window names none."""
    if explanation is None or not explanation.named:
        return None
    named = list(explanation.later) or explanation.named
    return named[0] if takes_over(named, where) else None


def takes_over(named: list[Slice], where: Named) -> bool:
    """Whether `named`'s top slice takes over from `where`."""
    top = named[0]
    if (top.dimension, top.value) == (where.dimension, where.value) or top.flagged_only:
        return False
    held = [s for s in named if (s.dimension, s.value) == where[:2]]
    if not held:
        return True
    return (top.share or 0.0) >= TAKE_OVER * (held[0].share or 0.0)
