"""Tolerant parsers for judge answers: one explicit pattern list per answer format.

Judges (large hosted models and small local ones alike) wrap their verdicts in prose,
markdown and code fences. Each parser looks for the shapes its format allows, in a fixed
order of preference, and raises `ParseError` when none matches. Nothing here guesses by
grabbing "the first number" or "the first pair of braces".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_MAX_EXPLANATION = 600


class ParseError(ValueError):
    """The answer does not contain a verdict in the required format."""


@dataclass(frozen=True, slots=True)
class ParsedVerdict:
    """A verdict value plus whatever reasoning the judge gave around it."""

    value: Any
    explanation: str


def clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_EXPLANATION else text[: _MAX_EXPLANATION - 1] + "…"


def _strip_markup(text: str) -> str:
    return text.replace("**", "").replace("__", "").strip()


# -- 1..N scores ------------------------------------------------------------------------

_NUMBER = r"(\d+(?:\.\d+)?)"
# In order of preference; the last occurrence of a pattern wins (a final answer line
# comes after reasoning that may quote other numbers).
_SCORE_PATTERNS = (
    re.compile(r"\[\s*RESULT\s*\]\s*:?\s*" + _NUMBER, re.I),
    re.compile(r"\bscore\s*(?:is|=|:|-)?\s*\**\s*" + _NUMBER + r"(?:\s*/\s*\d+)?", re.I),
    re.compile(r"\*\*\s*" + _NUMBER + r"\s*(?:/\s*\d+)?\s*\*\*"),
    re.compile(r"\brating\s*(?:is|=|:)\s*" + _NUMBER, re.I),
)
_BARE_NUMBER = re.compile(r"^\W*" + _NUMBER + r"(?:\s*/\s*\d+)?\W*$")


def parse_score(text: str, low: int, high: int) -> ParsedVerdict:
    """`Score: 4`, `4`, `**4**`, `[RESULT] 4`, `score = 4/5` → 4 (within low..high)."""
    stripped = text.strip()
    bare = _BARE_NUMBER.match(stripped)
    if bare:
        return ParsedVerdict(_in_range(bare.group(1), low, high), "")
    for pattern in _SCORE_PATTERNS:
        matches = list(pattern.finditer(stripped))
        if matches:
            last = matches[-1]
            explanation = (stripped[: last.start()] + " " + stripped[last.end() :]).strip()
            return ParsedVerdict(
                _in_range(last.group(1), low, high), clip(_strip_markup(explanation))
            )
    raise ParseError(f"no score between {low} and {high} found (expected e.g. 'Score: {high}')")


def _in_range(raw: str, low: float, high: float) -> float:
    value = float(raw)
    if not low <= value <= high:
        raise ParseError(f"score {raw} is outside {low:g}..{high:g}")
    return value


# -- YES/NO and PASS/FAIL ---------------------------------------------------------------

_ANSWER_LINE = re.compile(
    r"^\W*(?:final\s+)?(?:answer|verdict|result|decision|label)\s*[:=\-]\s*\W*(\w+)", re.I | re.M
)


def _word_verdict(text: str, words: dict[str, bool], what: str) -> ParsedVerdict:
    stripped = _strip_markup(text)
    # 1. The whole answer is the word ("Yes", "no.", "**YES**", "'No'").
    only = re.fullmatch(r"\W*(\w+)\W*", stripped)
    if only and only.group(1).lower() in words:
        return ParsedVerdict(words[only.group(1).lower()], "")
    # 2. An explicit answer line ("Answer: YES"); the last one wins.
    labelled = [m for m in _ANSWER_LINE.finditer(stripped) if m.group(1).lower() in words]
    if labelled:
        last = labelled[-1]
        explanation = (stripped[: last.start()] + " " + stripped[last.end() :]).strip()
        return ParsedVerdict(words[last.group(1).lower()], clip(explanation))
    # 3. The answer starts with the word and goes on to explain ("Yes, because ...").
    lead = re.match(r"\W*(\w+)\b[\s,.:;!\-]*(.*)", stripped, re.S)
    if lead and lead.group(1).lower() in words:
        return ParsedVerdict(words[lead.group(1).lower()], clip(lead.group(2)))
    # 4. The answer ends with the word on its own line.
    tail = re.search(r"(?:^|\n)\W*(\w+)\W*$", stripped)
    if tail and tail.group(1).lower() in words:
        return ParsedVerdict(words[tail.group(1).lower()], clip(stripped[: tail.start()]))
    raise ParseError(f"no {what} verdict found")


def parse_yes_no(text: str) -> ParsedVerdict:
    """YES/NO in any case, with punctuation or markdown, alone or on an answer line."""
    return _word_verdict(text, {"yes": True, "no": False}, "YES/NO")


def parse_pass_fail(text: str) -> ParsedVerdict:
    """JSON `{"REASONING": ..., "SCORE": "PASS"|"FAIL"}`, else a PASS/FAIL word."""
    try:
        obj = parse_json(text, ("score",))
    except ParseError:
        return _word_verdict(text, {"pass": True, "fail": False}, "PASS/FAIL")
    raw = str(obj.value["score"]).strip().upper()
    if raw not in ("PASS", "FAIL"):
        raise ParseError(f"SCORE must be PASS or FAIL, got {raw[:20]!r}")
    reasoning = obj.value.get("reasoning", "")
    return ParsedVerdict(raw == "PASS", clip(str(reasoning)))


# -- JSON -------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)


def _objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object that decodes cleanly, starting at any `{` (outermost only)."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    pos = text.find("{")
    while pos != -1:
        try:
            value, end = decoder.raw_decode(text, pos)
        except ValueError:
            # Not JSON here (JSONDecodeError), or an integer past Python's digit limit.
            pos = text.find("{", pos + 1)
            continue
        except RecursionError:
            # Nesting past the interpreter's limit is no verdict; stop scanning it.
            break
        if isinstance(value, dict):
            found.append(value)
        pos = text.find("{", end)
    return found


def parse_json(text: str, required: tuple[str, ...]) -> ParsedVerdict:
    """A JSON object carrying every `required` key (case-insensitive).

    Code-fenced blocks are preferred over objects in prose; among candidates the last one
    that has all required keys wins. Keys are lower-cased in the returned value.
    """
    candidates: list[dict[str, Any]] = []
    for block in _FENCE.findall(text):
        candidates.extend(_objects(block))
    if not candidates:
        candidates = _objects(text)
    for obj in reversed(candidates):
        lowered = {str(k).lower(): v for k, v in obj.items()}
        if all(key in lowered for key in required):
            return ParsedVerdict(lowered, "")
    if candidates:
        raise ParseError(f"JSON answer lacks keys: {', '.join(required)}")
    raise ParseError("no JSON object found")


def parse_unit_score(text: str) -> ParsedVerdict:
    """JSON `{"score": 0..1, "feedback": "..."}`."""
    obj = parse_json(text, ("score",))
    try:
        value = float(obj.value["score"])
    except (TypeError, ValueError):
        raise ParseError("score is not a number") from None
    if not 0 <= value <= 1:
        raise ParseError(f"score {value:g} is outside 0..1")
    feedback = obj.value.get("feedback", obj.value.get("reason", ""))
    return ParsedVerdict(value, clip(str(feedback)))


def parse_severity(text: str) -> ParsedVerdict:
    """JSON `{"severity": 0..7, "reason": "..."}`."""
    obj = parse_json(text, ("severity",))
    try:
        value = float(obj.value["severity"])
    except (TypeError, ValueError):
        raise ParseError("severity is not a number") from None
    if not 0 <= value <= 7 or value != int(value):
        raise ParseError(f"severity {value:g} is not an integer in 0..7")
    return ParsedVerdict(value, clip(str(obj.value.get("reason", ""))))


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("yes", "true", "relevant", "1"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("no", "false", "irrelevant", "0"):
        return False
    if isinstance(value, int | float):
        return bool(value)
    raise ParseError(f"expected yes/no, got {str(value)[:20]!r}")


def parse_chunks(text: str, count: int) -> ParsedVerdict:
    """JSON `{"chunks": [{"id": 1, "relevant": "yes", "reason": ...}, ...]}` → list[bool]."""
    obj = parse_json(text, ("chunks",))
    items = obj.value["chunks"]
    if not isinstance(items, list):
        raise ParseError("chunks must be a list")
    verdicts: dict[int, bool] = {}
    for item in items:
        if not isinstance(item, dict):
            raise ParseError("each chunk verdict must be an object")
        lowered = {str(k).lower(): v for k, v in item.items()}
        try:
            index = int(lowered["id"])
        except (KeyError, TypeError, ValueError, OverflowError):
            raise ParseError("chunk verdict without a numeric id") from None
        if 1 <= index <= count:
            verdicts[index] = _as_bool(lowered.get("relevant"))
    if len(verdicts) != count:
        raise ParseError(f"expected a verdict for each of {count} chunks, got {len(verdicts)}")
    return ParsedVerdict([verdicts[i] for i in range(1, count + 1)], "")


def parse_retrieval(text: str, count: int) -> ParsedVerdict:
    """JSON with `intents: [{"intent", "answered"}]` and `documents: [{"id", "relevant"}]`."""
    obj = parse_json(text, ("intents", "documents"))
    intents = obj.value["intents"]
    if not isinstance(intents, list) or not intents:
        raise ParseError("intents must be a non-empty list")
    answered = []
    for item in intents:
        if not isinstance(item, dict):
            raise ParseError("each intent must be an object")
        lowered = {str(k).lower(): v for k, v in item.items()}
        answered.append((str(lowered.get("intent", ""))[:80], _as_bool(lowered.get("answered"))))
    documents = parse_chunks(json.dumps({"chunks": obj.value["documents"]}), count)
    return ParsedVerdict({"intents": answered, "documents": documents.value}, "")


# -- self-reflection: correct / incorrect / not sure ------------------------------------

# Grade of each reflection verdict: the share of "correct" it stands for.
REFLECTION_GRADES = {"correct": 1.0, "incorrect": 0.0, "not sure": 0.5}
_LETTER_GRADES = {"a": 1.0, "b": 0.0, "c": 0.5}
# Checked in this order: "not correct" is incorrect, not unsure; "incorrect" contains "correct".
_REFLECTION_WORDS = (
    (re.compile(r"(?:i\s*(?:am|'m)\s*)?(?:not\s+sure|unsure|uncertain|don'?t\s+know)\b"), 0.5),
    (re.compile(r"(?:incorrect|not\s+correct|wrong|false)\b"), 0.0),
    (re.compile(r"(?:correct|right|true)\b"), 1.0),
)
_LETTER = re.compile(r"\(?([abc])\s*(?:\)|\.|:|$)")
_REFLECTION_LINE = re.compile(
    r"^\W*(?:final\s+)?(?:answer|verdict|grade|choice|rating)\s*[:=\-]\s*(.+)$", re.I | re.M
)


def _reflection_grade(phrase: str, letters: bool = True) -> float | None:
    """The grade a phrase starts with ("(A)", "B) Incorrect", "not sure", "Correct."), or None."""
    text = _strip_markup(phrase).lower().strip(" \t\"'`*[]")
    if letters:
        letter = _LETTER.match(text)
        if letter:
            return _LETTER_GRADES[letter.group(1)]
    for pattern, grade in _REFLECTION_WORDS:
        if pattern.match(text):
            return grade
    return None


def parse_reflection(text: str) -> ParsedVerdict:
    """A self-reflection verdict → its grade (1 correct, 0 incorrect, 0.5 not sure).

    Accepted, in this order: JSON `{"answer": "correct"|"incorrect"|"not sure"|"A"|"B"|"C"}`
    (key `answer` or `verdict`); the last answer line (`Answer: B`, `Verdict: (C) not sure`,
    `Answer: correct`); the whole answer as the letter or the words (`A`, `(C)`, `Not
    sure.`); an answer that starts with them (`Incorrect: the context says ...`,
    `A) Correct, because ...`); the words alone on the last line."""
    stripped = _strip_markup(text)
    try:
        obj = parse_json(stripped, ())
    except ParseError:
        obj = None
    if obj is not None:
        value = obj.value.get("answer", obj.value.get("verdict"))
        if value is not None:
            grade = _reflection_grade(str(value))
            if grade is None:
                raise ParseError(f"answer must be correct, incorrect or not sure: {value!r:.30}")
            reasoning = obj.value.get("reasoning", obj.value.get("explanation", ""))
            return ParsedVerdict(grade, clip(str(reasoning)))
    lines = [
        m for m in _REFLECTION_LINE.finditer(stripped) if _reflection_grade(m.group(1)) is not None
    ]
    if lines:
        last = lines[-1]
        explanation = (stripped[: last.start()] + " " + stripped[last.end() :]).strip()
        return ParsedVerdict(_reflection_grade(last.group(1)), clip(explanation))
    first, _, rest = stripped.partition("\n")
    whole = re.fullmatch(r"\W*([abc])\W*", stripped, re.I)
    if whole:
        return ParsedVerdict(_LETTER_GRADES[whole.group(1).lower()], "")
    grade = _reflection_grade(first)
    if grade is not None:
        return ParsedVerdict(grade, clip(rest))
    tail = stripped.rstrip().rpartition("\n")[2]
    grade = _reflection_grade(tail, letters=False)
    if grade is not None and tail != first:
        return ParsedVerdict(grade, clip(stripped[: -len(tail)]))
    raise ParseError("no correct / incorrect / not sure verdict found")


def parse_draw(text: str) -> ParsedVerdict:
    """A drawn answer of `trustworthiness_tlm`: any non-empty text (its explanation is
    empty)."""
    if not text.strip():
        raise ParseError("empty answer")
    return ParsedVerdict(text.strip(), "")
