"""One JSON value per line, for files and logs read line by line.

JSON allows U+0085, U+2028 and U+2029 raw inside strings, but `str.splitlines()` and other
Unicode-aware line readers end a line at each of them; escaped, one value stays one line
for every reader. Non-ASCII text is otherwise written as it is.
"""

from __future__ import annotations

import json
from typing import Any

_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
# One encoder for every line: `json.dumps` with an option builds a new one per call.
_encode = json.JSONEncoder(ensure_ascii=False).encode


def json_line(value: Any) -> str:
    """`value` as JSON holding no character any line reader breaks at."""
    return _encode(value).translate(_LINE_BREAKS)
