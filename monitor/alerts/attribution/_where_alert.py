"""The `Where` alert: a page's companion that carries the slice it names to the pager.

A page may fire on a rise's first verdicts, before any slice is told apart at the page's
own budget; the slice is named later, in the annotations of a re-send. Alertmanager does
not notify again for changed annotations (it notifies when a group's set of alerts
changes, or after `repeat_interval`), so the pager would not hear of it. When a firing
page first names a slice, the companion alert is sent: its own alertname (the page's with
`WHERE_SUFFIX`), the page's labels, and the slice in `dimension` and `value`, so it is a
new alert (a new group where alerts are grouped by alertname) and Alertmanager notifies.
It is re-sent with the page, keeps the first named slice in its labels and its `startsAt`
for as long as the page fires (its annotations follow the page's latest), and is resolved
with the page, or when another slice takes over (`_attribution._takes_over`), which is a
new companion. The slice and when it was named are kept with the page's entry
(`Entry.where`), so with `alerts.state_file` this holds across a restart.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Literal

from monitor.component import Alert
from monitor.config import WHERE_SUFFIX

# The page's annotations the companion repeats (what the pager needs to act on the slice).
CARRIED = ("where", "slice", "cause", "cause_detail", "trace_ids", "trace_urls", "judge_changed")


def where_alert(
    page: Alert,
    dimension: str,
    value: str,
    status: Literal["firing", "resolved"],
    starts_at: datetime,
) -> Alert:
    """The companion of `page` naming slice `dimension`=`value`, named first at
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
