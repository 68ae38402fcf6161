"""The writing system a record is in, and which embedded evaluators can read it.

The embedded detectors' features are bound to what they were measured on: the word checks
of `local_groundedness` read Latin-script languages and Chinese (and Japanese, whose Han
words the Chinese path reads); the safety screen's word lists are English. A record in
another script gets no verdict from them, but a counted skip (`evaluations_skipped{reason=
"unsupported_language"}` and `evaluations_unsupported_language{language}`), a log line
naming the judge evaluators that can score it, and its reason on `/debug/records`.

The script is found by counting letters per Unicode block in the response (else the
question): no model, linear in the text, at most `_SAMPLED` characters read. The majority
decides, not the first script seen (as `where.language` takes it for an alert's labels): a
Thai answer that names a Chinese brand is Thai, an English one quoting a Thai word English.
"""

from __future__ import annotations

from bisect import bisect_right

from monitor.records import RagRecord

# Enough letters to tell a text's script; a long answer is not read to its end.
_SAMPLED = 500
# (first code point, script) of the blocks counted, sorted; a code point belongs to the
# block that starts at or before it, up to the next start ("" = not counted: digits,
# punctuation, symbols, blocks no evaluator depends on).
_BLOCKS: tuple[tuple[int, str], ...] = (
    (0x0000, ""),
    (0x0041, "latin"), (0x005B, ""), (0x0061, "latin"), (0x007B, ""),
    (0x00C0, "latin"), (0x0250, ""),
    (0x0370, "greek"), (0x0400, "cyrillic"), (0x0530, "armenian"), (0x0590, "hebrew"),
    (0x0600, "arabic"), (0x0700, ""), (0x0900, "devanagari"), (0x0980, "indic"),
    (0x0E00, "thai"), (0x0E80, "lao"), (0x0F00, ""),
    (0x10A0, "georgian"), (0x1100, "hangul"), (0x1200, ""),
    (0x1E00, "latin"), (0x1F00, "greek"), (0x2000, ""),
    (0x3040, "kana"), (0x3100, ""), (0x3130, "hangul"), (0x3190, ""),
    (0x3400, "han"), (0x4DC0, ""), (0x4E00, "han"), (0xA000, ""),
    (0xAC00, "hangul"), (0xD7B0, ""), (0xF900, "han"), (0xFB00, ""),
    (0xFB1D, "hebrew"), (0xFB50, "arabic"), (0xFE00, ""), (0xFE70, "arabic"), (0xFF00, ""),
    (0xFF21, "latin"), (0xFF3B, ""), (0xFF41, "latin"), (0xFF5B, ""),
    (0xFF66, "kana"), (0xFFA0, "hangul"), (0xFFE0, ""),
)  # fmt: skip
_STARTS = [start for start, _ in _BLOCKS]

# What the languages are called in a log line and on /debug/records.
LANGUAGE = {
    "latin": "a Latin-script language", "han": "Chinese", "japanese": "Japanese",
    "hangul": "Korean", "thai": "Thai", "arabic": "Arabic", "hebrew": "Hebrew",
    "devanagari": "a Devanagari-script language", "indic": "an Indic-script language",
    "cyrillic": "a Cyrillic-script language", "greek": "Greek", "armenian": "Armenian",
    "georgian": "Georgian", "lao": "Lao", "none": "no letters",
}  # fmt: skip

# The scripts each embedded evaluator was measured on (docs/quality.md); a record in
# another gets no verdict from it. "none": a text without letters (numbers, codes).
_READ_BY_WORDS = frozenset({"latin", "han", "japanese", "none"})
READS: dict[str, frozenset[str]] = {
    "local_groundedness": _READ_BY_WORDS,
    "local_relevance": _READ_BY_WORDS,
    "local_retrieval": _READ_BY_WORDS,
    # Its word lists and injection patterns are English.
    "local_safety": frozenset({"latin", "none"}),
}


def script(text: str) -> str:
    """The script most of `text`'s letters are in (`LANGUAGE`'s keys); Han with kana is
    "japanese"; "none" without letters."""
    sample = text[:_SAMPLED]
    if sample.isascii():
        return "latin" if any(c.isalpha() for c in sample) else "none"
    counts: dict[str, int] = {}
    for char in sample:
        point = ord(char)
        if point < 0x80:
            kind = "latin" if char.isalpha() else ""
        else:
            kind = _BLOCKS[bisect_right(_STARTS, point) - 1][1]
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
    if not counts:
        return "none"
    if counts.get("kana") and counts.get("kana", 0) + counts.get("han", 0) >= max(counts.values()):
        return "japanese"
    best = max(counts, key=lambda k: (counts[k], k))
    return "japanese" if best == "kana" else best


def record_script(record: RagRecord) -> str:
    """The script of the record's response, else of its question."""
    return script(record.response or record.query or "")


def reads(evaluator: str, language: str) -> bool:
    """Whether `evaluator` gives verdicts on text in `language` (a judge reads any)."""
    return language in READS.get(evaluator, (language,))


def unread(evaluator: str, record: RagRecord) -> str | None:
    """The record's script when `evaluator` is an embedded one that cannot read it, else
    None (a judge reads any language)."""
    if evaluator not in READS:
        return None
    found = record_script(record)
    return None if reads(evaluator, found) else found


def reason(language: str, evaluators: list[str]) -> str:
    """Why the embedded `evaluators` gave no verdict on a record in `language`."""
    verb = (
        "was not measured on it and gives"
        if len(evaluators) == 1
        else ("were not measured on it and give")
    )
    return (
        f"{LANGUAGE.get(language, language)}: {', '.join(evaluators)} {verb} no verdict "
        "(a judge evaluator can score it)"
    )
