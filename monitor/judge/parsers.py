"""Tolerant parsers for judge answers: one explicit pattern list per answer format.

Judges (large hosted models and small local ones alike) wrap their verdicts in prose,
markdown and code fences. Each parser looks for the shapes its format allows, in a fixed
order of preference, and raises `ParseError` when none matches. Nothing here guesses by
grabbing "the first number" or "the first pair of braces".

Verdict words and answer-line labels come from the template that asked for them
(`Words`, from its front matter: `答案` / `是` / `否`, `分数`, ...); the English ones are
the defaults for a template that declares none. Answers are read after NFKC
normalisation, so full-width digits and punctuation (`４`, `：`, `，`) read as their ASCII
forms, and a verdict word is a whole token: the text up to the next space or punctuation
mark (`是，因为…` is 是; `是的` is not 是, and `不通过` is not 通过).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
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


def normalise(text: str) -> str:
    """NFKC: full-width digits, letters and punctuation as their ASCII forms."""
    return unicodedata.normalize("NFKC", text)


@dataclass(frozen=True, slots=True)
class Words:
    """What a template asked the verdict to be written with: the labels an answer line
    opens with, and each verdict word with its value (compared case-insensitively)."""

    labels: tuple[str, ...]
    choices: Mapping[str, bool]

    def value(self, token: str) -> bool | None:
        return self.choices.get(token.casefold())


def words(labels: tuple[str, ...], true: tuple[str, ...], false: tuple[str, ...]) -> Words:
    choices = {normalise(w).casefold(): True for w in true}
    choices.update({normalise(w).casefold(): False for w in false})
    return Words(tuple(normalise(label).casefold() for label in labels), choices)


_LABELS = ("answer", "verdict", "result", "decision", "label")
YES_NO = words(_LABELS, ("yes",), ("no",))
PASS_FAIL = words(_LABELS, ("pass",), ("fail",))
_SEPARATORS = frozenset(":=-")
# Characters an answer line's label may be decorated with before it (markdown, bullets).
_DECOR = frozenset("#>*-•·[]()\"'`“”「」【】 \t")


def _is_break(ch: str) -> bool:
    """Whether `ch` ends a token: a space, a punctuation mark, a symbol, a control."""
    return unicodedata.category(ch)[0] in "ZPSC"


def _token(text: str, start: int) -> tuple[str, int]:
    """The token at `start` after spaces and markup, and where it ends."""
    i = start
    while i < len(text) and (text[i].isspace() or text[i] in _DECOR):
        i += 1
    j = i
    while j < len(text) and not _is_break(text[j]):
        j += 1
    return text[i:j], j


def _labelled(line: str, labels: tuple[str, ...]) -> int | None:
    """Where the value of an answer line starts (after `label:`), or None when the line
    is no answer line: its key (the text before the first separator) is one of `labels`,
    with at most one word before it ("Final answer:", "最终答案：")."""
    cut = next((i for i, ch in enumerate(line) if ch in _SEPARATORS), -1)
    if cut <= 0:
        return None
    key = "".join(ch for ch in line[:cut] if ch not in _DECOR or ch == " ").strip().casefold()
    for label in labels:
        if not key.endswith(label):
            continue
        before = key[: len(key) - len(label)]
        if not before:
            return cut + 1
        # A Latin label is a word of its own; CJK text has no spaces between words.
        joined = before[-1].isascii() and before[-1].isalnum() and label[0].isascii()
        if not joined and len(before.split()) <= 1:
            return cut + 1
    return None


def parse_choice(text: str, vocab: Words, what: str) -> ParsedVerdict:
    """A two-way verdict written with `vocab`'s words: the whole answer, the last answer
    line (`Answer: YES`, `答案：否`), the first token (`Yes, because ...`, `是，因为……`),
    or the last line's only token. Anything else (`maybe`, `也许`) is a `ParseError`."""
    # Explanations keep the judge's own punctuation: lines are read normalised, shown as sent.
    shown = _strip_markup(text).split("\n")
    lines = [normalise(line) for line in shown]
    stripped = "\n".join(lines)
    # 1. The whole answer is the word ("Yes", "no.", "'No'", "是。").
    token, end = _token(stripped, 0)
    rest = stripped[end:]
    value = vocab.value(token)
    if value is not None and all(_is_break(ch) or ch in _DECOR for ch in rest):
        return ParsedVerdict(value, "")
    # 2. An explicit answer line ("Answer: YES", "答案：否"); the last one wins.
    for n in range(len(lines) - 1, -1, -1):
        start = _labelled(lines[n], vocab.labels)
        if start is None:
            continue
        word, _ = _token(lines[n], start)
        found = vocab.value(word)
        if found is not None:
            explanation = "\n".join(shown[:n] + shown[n + 1 :]).strip()
            return ParsedVerdict(found, clip(explanation))
    # 3. The answer starts with the word and goes on to explain ("Yes, because ...").
    if value is not None:
        return ParsedVerdict(value, clip(rest.lstrip(" \t,.:;!-，。：；！、")))
    # 4. The answer ends with the word on its own line.
    last = lines[-1]
    token, end = _token(last, 0)
    value = vocab.value(token)
    if len(lines) > 1 and value is not None and all(_is_break(ch) for ch in last[end:]):
        return ParsedVerdict(value, clip("\n".join(shown[:-1])))
    raise ParseError(f"no {what} verdict found")


# -- 1..N scores ------------------------------------------------------------------------

_NUMBER = r"(\d+(?:\.\d+)?)"
# In order of preference; the last occurrence of a pattern wins (a final answer line
# comes after reasoning that may quote other numbers).
# Runs of spaces and stars are taken whole (possessive): the runs between two optional
# parts would otherwise be split every way before a line fails ("score" and thousands of
# spaces cost their cube).
_SCORE_PATTERNS = (
    re.compile(r"\[\s*+RESULT\s*+\]\s*+:?\s*+" + _NUMBER, re.I),
    re.compile(r"\bscore\s*+(?:is|=|:|-)?\s*+\**+\s*+" + _NUMBER + r"(?:\s*+/\s*+\d+)?", re.I),
    re.compile(r"\*\*\s*+" + _NUMBER + r"\s*+(?:/\s*+\d+)?\s*+\*\*"),
    re.compile(r"\brating\s*+(?:is|=|:)\s*+" + _NUMBER, re.I),
)
_BARE_NUMBER = re.compile(r"^\W*" + _NUMBER + r"(?:\s*/\s*\d+)?\W*$")


def _number(line: str, start: int) -> str | None:
    """The number at `start` after spaces and markup (`4`, `4.5`, `4/5`'s 4), or None."""
    i = start
    while i < len(line) and (line[i].isspace() or line[i] in _DECOR):
        i += 1
    j = i
    while j < len(line) and line[j].isascii() and (line[j].isdigit() or line[j] == "."):
        j += 1
    raw = line[i:j].rstrip(".")
    return raw if raw and raw.count(".") <= 1 else None


def parse_score(text: str, low: int, high: int, labels: tuple[str, ...] = ()) -> ParsedVerdict:
    """`Score: 4`, `4`, `**4**`, `[RESULT] 4`, `score = 4/5` → 4 (within low..high); with
    the template's `labels` first (`分数：4`, `评分: 4/5`, `得分：４分`)."""
    shown = text.strip().split("\n")
    lines = [normalise(line) for line in shown]
    stripped = "\n".join(lines)
    bare = _BARE_NUMBER.match(stripped)
    if bare:
        return ParsedVerdict(_in_range(bare.group(1), low, high), "")
    wanted = tuple(normalise(label).casefold() for label in labels)
    for n in range(len(lines) - 1, -1, -1):
        start = _labelled(lines[n], wanted) if wanted else None
        raw = None if start is None else _number(lines[n], start)
        if raw is not None:
            explanation = "\n".join(shown[:n] + shown[n + 1 :]).strip()
            return ParsedVerdict(_in_range(raw, low, high), clip(_strip_markup(explanation)))
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


def parse_yes_no(text: str, vocab: Words = YES_NO) -> ParsedVerdict:
    """YES/NO (or the template's words for them) in any case, with punctuation or
    markdown, alone or on an answer line."""
    return parse_choice(text, vocab, "YES/NO")


def parse_pass_fail(text: str, vocab: Words = PASS_FAIL) -> ParsedVerdict:
    """JSON `{"REASONING": ..., "SCORE": "PASS"|"FAIL"}` (or the template's words for
    them), else a PASS/FAIL word."""
    try:
        obj = parse_json(normalise(text), ("score",))
    except ParseError:
        return parse_choice(text, vocab, "PASS/FAIL")
    raw = str(obj.value["score"]).strip()
    value = vocab.value(raw)
    if value is None:
        said = " or ".join(w.upper() for w in vocab.choices)
        raise ParseError(f"SCORE must be {said}, got {raw[:20]!r}")
    reasoning = obj.value.get("reasoning", "")
    return ParsedVerdict(value, clip(str(reasoning)))


# -- JSON -------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json|JSON)?\s*+\n?(.*?)```", re.S)


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
    text = normalise(text)
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
    r"^\W*+(?:final\s++)?(?:answer|verdict|grade|choice|rating)\s*+[:=\-]\s*+(.+)$", re.I | re.M
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
