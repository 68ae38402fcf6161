"""A page that says where: the slices that carry a regression, retriever or generator, the
traces to open, and the page's `Where` alert (docs/alerts.md, "A page that says where",
says how each is decided and what it costs).

The engine shows every counted record to `Attribution.observe` with its dimension values
(`monitor.records.where`) and a retrieval evaluator's verdict on it; a firing page's
annotations come from `Attribution.explain`, and `Attribution.sent` answers with the
page's `Where` alert. Nothing of it is saved but the `Where` alert's identity, which is the
entry's (`Entry.where`).
"""

from monitor.alerts.attribution._attribution import CAPS, Attribution, retrieval_verdict
from monitor.alerts.attribution._explanation import Explanation

__all__ = ["CAPS", "Attribution", "Explanation", "retrieval_verdict"]
