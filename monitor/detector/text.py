"""Tokenisation shared by the detectors: words, light stems, numbers and sentences."""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, TypeVar

from monitor.detector import cjk
from monitor.shared.recurring import recurring_cache, scoped_by

# A word (a letter, then letters and apostrophes), or a number with its $, % or ordinal
# suffix. The two start with different characters, so their order does not change what
# matches; words come first as the more frequent, and runs are matched possessively.
_TOKEN = re.compile(
    r"[^\W\d_](?:[^\W\d_]++|')*+|\$?\d+(?:[.,]\d+)*+(?:\s?%|\s?percent|(?:st|nd|rd|th)\b)?"
)
# The same on ASCII text, where a letter (`[^\W\d_]`) is one of `[a-zA-Z]`: a set of
# ranges, which the regex engine tests faster than character categories.
_ASCII_TOKEN = re.compile(
    r"[a-zA-Z](?:[a-zA-Z]++|')*+|\$?\d+(?:[.,]\d+)*+(?:\s?%|\s?percent|(?:st|nd|rd|th)\b)?"
)


# Entries of each per-token cache (a folded word, its stem, a number's value...): a worker's
# memory for them is bounded by this many tokens each, whatever the traffic's vocabulary
# (numbers, names and ids make it grow without end); a few thousand words cover a text.
TOKEN_CACHE = 4_096


def _find_tokens(text: str) -> list[str]:
    pattern, plain = _token_pattern(text)
    if cjk.is_chinese(plain):
        # The spans of a record's text are kept for the slots' reading of it: cut once.
        return [plain[a:b] for a, b in token_spans(text)]
    return pattern.findall(plain)


def _find_spans(text: str) -> list[tuple[int, int]]:
    pattern, plain = _token_pattern(text)
    if cjk.is_chinese(plain):
        return cjk.spans(plain, pattern)
    return [m.span() for m in pattern.finditer(plain)]


def _token_pattern(text: str) -> tuple[re.Pattern[str], str]:
    """The token pattern for `text`, and the text to match it on (a typographic apostrophe
    read as "'")."""
    if text.isascii():
        return _ASCII_TOKEN, text
    return _TOKEN, text.replace("\u2019", "'")


# Every boundary starts at a space or before a capital: the lookahead skips other positions
# without trying each alternative there.
_SENTENCE = re.compile(
    r"(?=[\sA-Z])(?:(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n+|(?<=[a-z]{2}[.!?])(?=[A-Z][a-z])|"
    r"(?<=:)\s+(?=\d{1,2}[.)]\s))"
)
_ABBREVIATION = re.compile(r"(?:\b(?:[A-Z]|Mr|Mrs|Ms|Dr|St|Jr|Sr|vs|etc|e\.g|i\.e|No|Inc|Co)\.)$")
STOPWORDS = frozenset(
    """a an the and or but if then so of to in on at by for with from as is are was were be been
    being it its this that these those there here he she they them his her their we you your i me
    my our not no do does did done have has had having will would can could should may might must
    shall which who whom whose what when where why how than also very just into over under about
    more most some any all each other such only own same too s t don up out off again further once
    both few nor""".split()
)
# Words that talk about the answer or its sources rather than make a claim, and connective
# filler; a response may use them freely without the context containing them.
DISCOURSE = frozenset(
    """passage passages based given provided provide provides answer answers question questions
    information info context document documents source sources text article according mention
    mentions mentioned mentioning states stated state says said note noted therefore additionally
    however here's it's there's that's sure while overall summary summarize summarized brief
    briefly specific specifically various several following follows also well including include
    includes like let us finally firstly secondly lastly thus hence generally typically usually
    often may might can could would unable able details detail explain explained explains
    yes yeah okay ok seem seems seemed appears believe think far tell""".split()
)
# Words after which a number is a pointer into the sources or the answer's own layout.
REFERENCES = frozenset(
    "passage passages document documents doc docs source sources step steps section page "
    "chapter item option table figure fig note paragraph reference ref result results "
    "article articles context snippet".split()
)
# Words that flip a claim; an answer and its evidence should agree on them.
NEGATIONS = frozenset(
    "not no never none nobody nothing neither nor cannot can't don't doesn't didn't isn't "
    "aren't wasn't weren't won't wouldn't shouldn't couldn't hasn't haven't hadn't".split()
    # Chinese negators as the segmenter cuts them (Simplified and Traditional).
    + "不 没 沒 没有 沒有 未 无 無 非 别 別 勿 不是 不能 不会 不會 不再 不要 不可 不可以 "
    "不得 不用 无法 無法 未曾 从未 從未 并非 並非 尚未 不曾 从不 從不 并不 並不 没能 沒能".split()
)


@recurring_cache(TOKEN_CACHE)
def is_negation(word: str) -> bool:
    """A folded word that negates: one of `NEGATIONS` or any "n't" contraction."""
    return word in NEGATIONS or word.endswith("n't")


# Words that carry a negation without a "not" ("impossible to", "unable to", "lacks").
NEGATIVE_POLARITY = frozenset(
    "impossible unable fail fails failed failure lack lacks lacking without absent hardly "
    "rarely seldom neither prevent prevents avoid avoids refuse refused difficult unlikely".split()
    # Their Chinese counterparts: "forbid", "forbidden to use", "decline", "refuse".
    + "禁止 禁用 谢绝 謝絕 拒绝 拒絕".split()
)
_NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
    "thirteen": "13", "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17",
    "eighteen": "18", "nineteen": "19", "twenty": "20", "thirty": "30", "forty": "40",
    "fifty": "50", "sixty": "60", "seventy": "70", "eighty": "80", "ninety": "90",
    "hundred": "100", "thousand": "1000", "million": "1000000", "billion": "1000000000",
    "first": "1", "second": "2", "third": "3", "fourth": "4", "fifth": "5", "sixth": "6",
    "seventh": "7", "eighth": "8", "ninth": "9", "tenth": "10", "half": "0.5", "dozen": "12",
    "once": "1", "twice": "2", "single": "1", "double": "2", "triple": "3",
}  # fmt: skip
# Unit spellings that mean the same thing, mapped to one form.
_UNITS = {
    "km": "kilometer", "kms": "kilometer", "kilometre": "kilometer", "kilometres": "kilometer",
    "kilometers": "kilometer", "m": "meter", "metre": "meter", "metres": "meter",
    "meters": "meter", "cm": "centimeter", "mm": "millimeter", "kg": "kilogram",
    "kgs": "kilogram", "kilograms": "kilogram", "g": "gram", "grams": "gram", "lb": "pound",
    "lbs": "pound", "pounds": "pound", "mi": "mile", "miles": "mile", "ft": "foot",
    "feet": "foot", "in": "in", "hr": "hour", "hrs": "hour", "hours": "hour", "h": "hour",
    "min": "minute", "mins": "minute", "minutes": "minute", "sec": "second", "secs": "second",
    "seconds": "second", "yr": "year", "yrs": "year", "years": "year", "mph": "mph",
    "l": "liter", "litre": "liter", "litres": "liter", "liters": "liter", "ml": "milliliter",
    "usd": "dollar", "dollars": "dollar", "bn": "billion", "mn": "million", "mln": "million",
    "percent": "percent", "pct": "percent", "celsius": "celsius", "fahrenheit": "fahrenheit",
}  # fmt: skip
UNIT_NAMES = frozenset(_UNITS.values())
_SUFFIXES = (
    "ational", "ization", "fulness", "ousness", "iveness", "ations", "ation", "ments", "ment",
    "ness", "ings", "ing", "ies", "ied", "ers", "er", "est", "ly", "ed", "es", "al", "s",
)  # fmt: skip


# Entries one kind of shared result may hold before it starts over: one record's texts fit
# many times over; a record of thousands of sentences does not keep them all.
_SHARED_LIMIT = 8192
# Entries kept between two evaluators of the same record: a very large record's (sentence
# vectors are 1 KiB each) are dropped when an evaluator is done with it.
_KEPT_BETWEEN = 1024


class _SharedWork(threading.local):
    """Per thread: the key of the record being scored and what was computed for it."""

    def __init__(self) -> None:
        self.key: object = None
        self.depth = 0
        self.results: defaultdict[str, dict[Hashable, Any]] = defaultdict(dict)
        # `results` inside `shared_work`, None outside: what `shared_results` reads.
        self.active: defaultdict[str, dict[Hashable, Any]] | None = None


_shared = _SharedWork()
T = TypeVar("T")


def _same(value: T) -> T:
    return value


def shared_work(key: object) -> AbstractContextManager[None]:
    """Within the block, the pure text functions (`tokens`, `token_spans`, `sentences`,
    sentence vectors, ...) compute each text once and hand out the same result again: the
    four local evaluators read the same query, context and response of a record. What is
    kept belongs to `key` (the record, by identity): entering with another key drops it, so
    no record is scored with anything another record computed."""
    return _Scope(key)


class _Scope(AbstractContextManager[None]):
    """A `shared_work` block (a class: a generator-based context manager costs several
    times as much, and every evaluator of every record enters one)."""

    __slots__ = ("key",)

    def __init__(self, key: object) -> None:
        self.key = key

    def __enter__(self) -> None:
        shared = _shared
        if shared.key is not self.key:
            shared.results = defaultdict(dict)
            shared.key = self.key
        shared.depth += 1
        shared.active = shared.results

    def __exit__(self, *exc: object) -> None:
        shared = _shared
        shared.depth -= 1
        if shared.depth:
            return
        shared.active = None
        if sum(map(len, shared.results.values())) > _KEPT_BETWEEN:
            shared.results = defaultdict(dict)
            shared.key = None


def _record_in_scope() -> object:
    """The record being scored (by identity), None outside `shared_work`."""
    return id(_shared.key) if _shared.active is not None else None


# A word read for several checks of one record is one sighting for the caches that admit
# what recurs: one record's new words do not enter them.
scoped_by(_record_in_scope)


def shared_results(kind: str) -> dict[Hashable, Any] | None:
    """The results of `kind` computed for the current record (text -> result) inside
    `shared_work`; None outside it (compute, keep nothing)."""
    active = _shared.active
    if active is None:
        return None
    results = active[kind]
    if len(results) >= _SHARED_LIMIT:
        results.clear()
    return results


def once_per_record(
    kind: str, key: Hashable, compute: Callable[[], T], copy: Callable[[T], T] = _same
) -> T:
    """`compute()`; inside `shared_work`, computed once per record for `key` and handed out
    as `copy` of it (a caller may change what it gets)."""
    shared = shared_results(kind)
    if shared is None:
        return compute()
    found: T | None = shared.get(key)
    if found is None:
        found = shared[key] = compute()
    return copy(found)


# Called on every token by every check: a cached word is looked up faster than folded.
@recurring_cache(TOKEN_CACHE)
def fold(text: str) -> str:
    """Lower-cases and strips accents so "Café" and "cafe" compare equal (and "燈塔" and
    "灯塔")."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    folded = "".join(c for c in decomposed if not unicodedata.combining(c)).lower()
    # Traditional Chinese folds to Simplified, as accents fold away.
    return cjk.simplified(folded) if cjk.is_chinese(folded) else folded


_DIGIT = re.compile(r"\d")


def past_numbers(cached: Any, text: str, items: Iterable[str]) -> list[str]:
    """`cached` (a per-token cache) of each of `items`, the words of `text`, those that start
    with a digit or "$" past the cache: for a text parsed once (a question, a sentence read
    into a cache of its own), whose numbers (ids, amounts) are mostly new and kept would
    grow the cache long after the words it holds. A text without a digit, most, costs what
    `list(map(cached, items))` does."""
    if _DIGIT.search(text) is None:
        return list(map(cached, items))
    uncached = cached.__wrapped__
    # A token starts with a letter, a digit or "$": at most "9", a number.
    return [cached(t) if t[0] > "9" else uncached(t) for t in items]


# `fold` of each of a text's tokens, its numbers past the cache.
fold_all: Callable[[str, list[str]], list[str]] = partial(past_numbers, fold)


def canonical(word: str) -> str:
    """The shared spelling of a unit ("kms", "kilometres" -> "kilometer"), else the word."""
    return _UNITS.get(word, word)


@recurring_cache(TOKEN_CACHE)
def stem(word: str) -> str:
    """A light suffix stripper: enough to match "paid"/"pays"/"paying" style variants."""
    if len(word) <= 4:
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


@recurring_cache(TOKEN_CACHE)
def root(word: str) -> str:
    """A stem without a verb or plural ending, cut to five letters: "owns", "owned" and
    "owner" are one root, as are "directed" and "director"."""
    for suffix in ("ing", "ed", "es", "er", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return undouble(word)[:5]


def undouble(word: str) -> str:
    """A word without the doubled consonant an ending left ("twinn", "swimm")."""
    if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "aeiouls":
        return word[:-1]
    return word


@recurring_cache(TOKEN_CACHE)
def number_value(token: str) -> str | None:
    """The canonical value of a numeric token ("$1,200.50" -> "1200.5"), or None."""
    if token[0].isalpha() and token.lower() not in _NUMBER_WORDS:
        if cjk.numeral_start(token):
            found = cjk.value(token)
            return None if found is None else canonical_number(found)
        return None
    raw = token.lower().replace("$", "").replace("percent", "").replace("%", "").strip()
    if raw[-2:] in ("st", "nd", "rd", "th") and raw[:-2].isdigit():
        raw = raw[:-2]
    if raw in _NUMBER_WORDS:
        return _NUMBER_WORDS[raw]
    if not raw or not raw[0].isdigit():
        return None
    if raw.count(",") and all(len(part) == 3 for part in raw.split(".")[0].split(",")[1:]):
        raw = raw.replace(",", "")
    raw = raw.replace(",", ".")
    try:
        value = float(raw)
    except ValueError:
        # An Arabic number with a Chinese scale ("3万", "1.5亿").
        mixed = cjk.value(raw) if cjk.has_han(raw) else None
        return raw if mixed is None else canonical_number(mixed)
    return canonical_number(value)


def canonical_number(value: float) -> str:
    if value.is_integer() and abs(value) < 1e18:
        return str(int(value))
    return repr(value)


def tokens(text: str) -> list[str]:
    """Word and number tokens in their original case (numbers keep their $ and %)."""
    shared = shared_results("tokens")
    if shared is None:
        return _find_tokens(text)
    found: list[str] | None = shared.get(text)
    if found is None:
        found = _tokens_of_sentences(text, shared)
        if found is None:
            found = _find_tokens(text)
        shared[text] = found
    return list(found)


def _tokens_of_sentences(text: str, shared: dict[Hashable, Any]) -> list[str] | None:
    """A whole text's tokens from those of its sentences, when the record has split it and
    tokenised each sentence already (a document, the response); None otherwise.

    Without a line break they are the same tokens: a boundary is white space after `.!?`
    or `:` (no token ends there) before a letter, digit, quote or parenthesis (no number's
    " %" or " percent" starts there), or no character between `.!?` and a capital; sentences
    merged after an abbreviation are joined by a space after a `.`. A line break is a boundary
    anywhere, and a number's " %" may start with one.
    """
    if "\n" in text:
        return None
    split = shared_results("sentences")
    parts = split.get(text) if split is not None else None
    if parts is None:
        return None
    found: list[str] = []
    for part in parts:
        words = shared.get(part)
        if words is None:
            return None
        found += words
    return found


def token_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) offsets in `text` of each of `tokens(text)`."""

    return once_per_record("token_spans", text, lambda: _find_spans(text), list)


_LIST_MARKER = re.compile(r"^\s*(?:\(?\d{1,2}[.):]|[-*\u2022])(?:\s+|$)")


def strip_list_marker(sentence: str) -> str:
    """Drops a leading "1." / "2)" / "-" enumeration marker, which is layout, not a claim."""
    marker = _LIST_MARKER.match(sentence)
    return sentence[marker.end() :] if marker else sentence


def sentences(text: str) -> list[str]:
    """Sentence split that keeps abbreviations ("Dr.", "U.S.") attached to their sentence."""
    return once_per_record("sentences", text, lambda: _split(text), list)


def _split(text: str) -> list[str]:
    if cjk.is_chinese(text):
        return [s for piece in cjk.split_sentences(text) for s in _split_latin(piece)]
    return _split_latin(text)


def _split_latin(text: str) -> list[str]:
    parts = [s for s in map(str.strip, _SENTENCE.split(text)) if s]
    # The parts of each sentence, joined once at the end (joining each part as it comes
    # copies the sentence again for each: "Mr. Mr. Mr. ..." would cost its square), and
    # the last characters of the sentence so far.
    merged: list[list[str]] = []
    tail = ""
    for part in parts:
        # An abbreviation ends the text (4 characters at most, and the one before it for
        # its word boundary), so only the text's end is searched.
        if merged and _ABBREVIATION.search(tail):
            merged[-1].append(part)
            tail = f"{tail} {part[-6:]}"[-6:]
        else:
            merged.append([part])
            tail = part[-6:]
    return [" ".join(pieces) for pieces in merged]
