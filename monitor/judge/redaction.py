"""Redaction of personal data before any text leaves the process for a judge.

Built-in kinds: `email`, `phone`, `card` (13–19 digits passing the Luhn check); each
configured `redaction.patterns` regex is its own kind (`custom_0`, `custom_1`, ...).
Every replacement is counted in `rag_monitor_redactions_total{kind}`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from monitor.config import Redaction

_EMAIL = re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}[\s.\-]?)?(?:\(\d{2,4}\)[\s.\-]?|\d{2,4}[\s.\-])\d{3,4}[\s.\-]?\d{3,4}(?!\w)"
)


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


class Redactor:
    """Replaces matches with `[REDACTED:<kind>]`; `on_redact(kind, count)` is told each time."""

    def __init__(self, config: Redaction, on_redact: Callable[[str, int], None]) -> None:
        self.enabled = config.enabled
        self._custom = [(f"custom_{i}", re.compile(p)) for i, p in enumerate(config.patterns)]
        self._on_redact = on_redact

    def __call__(self, text: str) -> str:
        if not self.enabled or not text:
            return text
        text = self._sub("card", _CARD, text, lambda m: _luhn(re.sub(r"\D", "", m.group(0))))
        text = self._sub("email", _EMAIL, text)
        text = self._sub("phone", _PHONE, text)
        for kind, pattern in self._custom:
            text = self._sub(kind, pattern, text)
        return text

    def _sub(
        self,
        kind: str,
        pattern: re.Pattern[str],
        text: str,
        accept: Callable[[re.Match[str]], bool] | None = None,
    ) -> str:
        count = 0

        def replace(match: re.Match[str]) -> str:
            nonlocal count
            if accept is not None and not accept(match):
                return match.group(0)
            count += 1
            return f"[REDACTED:{kind}]"

        out = pattern.sub(replace, text)
        if count:
            self._on_redact(kind, count)
        return out
