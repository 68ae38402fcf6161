"""The `Where` alert: an alert of its own that carries the slice a page names to the pager,
since Alertmanager does not notify for changed annotations (docs/alerts.md, "A page that
says where")."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Literal

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
