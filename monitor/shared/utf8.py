"""Text as UTF-8 can carry it: JSON may hold a lone UTF-16 surrogate (`"\\ud800"`), which
no UTF-8 encoder writes, so every place untrusted text enters repairs it (`repaired`)."""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def repaired(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (most text: itself)."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)
