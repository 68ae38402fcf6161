"""`/alerts` on the metrics port: the alert rules' firing alerts as last sent, with where the
page says the excess is (`monitor.alerts.attribution`), in JSON — for scripts, chat-ops
bots and the on-call engineer's `curl`.

`GET /alerts` answers `{"alerts": [{rule, service, cohort, status, startsAt, labels,
annotations, attribution: {slices: [{dimension, value, defect_rate, expected,
reference_defect_rate, samples, reference_samples, share_of_excess, p_value}], tested,
level, samples, reference_samples, design_effect, cause: {cause, retrieval_evaluator,
retrieval_defect_rate: {reference, current}, with_retrieval, at_same_retrieval} | null,
traces: [{trace_id, url}]}}], "senders": [{rule, service, flagged, cannot_screen}]}`,
ordered by rule and service; `senders` lists, for each regression rule and service, the
sender keys its sender screen flags and why it cannot screen (`one_sender`, `full`; null:
it can; `AlertEngine.screened_senders`). It shows no record text (dimension values, trace
ids and sender keys only), so it is served like `/metrics`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

PATH = "/alerts"


class FiringAlertsPage:
    """The page, reading `firing` (the engine's `attribution.firing_alerts`) and `senders`
    (its `screened_senders`) per request."""

    def __init__(
        self,
        firing: Callable[[], list[dict[str, Any]]],
        senders: Callable[[], list[dict[str, Any]]] = list,
    ) -> None:
        self._firing = firing
        self._senders = senders

    async def handle(self, request: web.Request) -> web.Response:
        body = json.dumps(
            {"alerts": self._firing(), "senders": self._senders()}, ensure_ascii=False
        )
        return web.Response(text=body, content_type="application/json")
