"""Writes `monitor/detector/traditional.txt`: each Traditional character that OpenCC's
Traditional-to-Simplified conversion turns into one other character, followed by it.

    pip install opencc && python -m training.build_traditional_table

The detector folds Traditional Chinese to Simplified with this table (`cjk.simplified`),
character by character: the table is 26 kB where OpenCC itself would add 7 MB to the
default install. OpenCC's data are Apache-2.0 (https://github.com/BYVoid/OpenCC).
"""

from __future__ import annotations

from pathlib import Path

import opencc

OUT = Path(__file__).resolve().parents[1] / "monitor" / "detector" / "traditional.txt"
# The Han blocks the detector reads (`cjk._HAN_CLASS`).
_BLOCKS = ((0x3400, 0x4DC0), (0x4E00, 0xA000), (0xF900, 0xFB00))


def table() -> str:
    convert = opencc.OpenCC("t2s").convert
    pairs = []
    for low, high in _BLOCKS:
        for point in range(low, high):
            char = chr(point)
            simple = convert(char)
            if simple != char and len(simple) == 1:
                pairs.append(char + simple)
    return "".join(pairs) + "\n"


def main() -> int:
    OUT.write_text(table(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
