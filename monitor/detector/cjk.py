"""Chinese text for the detector: word boundaries, numerals as values, names and sentences.

A run of Han characters has no spaces: its words come from a dictionary segmenter (`rjieba`,
jieba's dictionary and HMM, Simplified and Traditional), its numerals from a scanner of this
module, so that the detector's word, number and name checks read Chinese as they read
English. Text without a Han character never reaches this module.

Numerals: simple (一二三…十百千万亿), financial (壹贰叁…拾佰仟), 〇/零, 两, digit by digit
(一九三一), mixed with Arabic or full-width digits (3万, 1.5亿, １２), decimals (三点五),
percentages (百分之十二) and ordinals (第三). A lone 一 is no number (一些, 一起, "a" as
much as "one"), nor are the numerals of an idiom that is no quantity (`_NOT_QUANTITIES`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any, Generic, TypeVar

from monitor.shared.recurring import CacheInfo, RecurringCache, recurring_cache

T = TypeVar("T")
_MISSING: Any = object()


@lru_cache(maxsize=1)
def segmenter() -> Any:
    """The dictionary segmenter, imported when the first Han text is read: its dictionary
    takes tens of MB in every process that imports it, which a service that never sends
    Chinese should not pay."""
    import rjieba

    return rjieba


# Han ideographs (the unified blocks, extension A, the compatibility block) and 〇.
_HAN_CLASS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3007"
_HAN = re.compile(f"[{_HAN_CLASS}]")
# A run of Han characters, or one of anything else: linear, no backtracking.
_HAN_RUN = re.compile(f"[{_HAN_CLASS}]+")

_DIGITS = {
    "〇": 0, "零": 0, "一": 1, "壹": 1, "二": 2, "贰": 2, "貳": 2, "两": 2, "兩": 2, "三": 3,
    "叁": 3, "參": 3, "四": 4, "肆": 4, "五": 5, "伍": 5, "六": 6, "陆": 6, "陸": 6, "七": 7,
    "柒": 7, "八": 8, "捌": 8, "九": 9, "玖": 9,
}  # fmt: skip
_UNITS = {"十": 10, "拾": 10, "百": 100, "佰": 100, "千": 1000, "仟": 1000}
_SCALES = {"万": 10_000, "萬": 10_000, "亿": 100_000_000, "億": 100_000_000}
_POINTS = frozenset("点點")
# The unit below each unit or scale: what a last digit written straight after it counts.
_NEXT_LOWER = {
    "百": 10,
    "佰": 10,
    "千": 100,
    "仟": 100,
    "万": 1000,
    "萬": 1000,
    "亿": 10**7,
    "億": 10**7,
}
# Tenths of a whole (六成: 60 per cent; 七折: 70 per cent of the price), after a numeral
# the segmenter reads as one numeral word with them.
_TENTHS = frozenset("成折")
# 半 "half": after a numeral and a measure word (一个半: 1.5), after an hour (六点半:
# half past six), or starting a word (半年: half a year).
_HALF = "半"
# Measure words of time, length and weight, each with the next smaller one and how many
# of it it holds: a context's 两周 supports a claim's 14天, its 半年 a claim's 6个月, its
# 六千八百米 a claim's 6.8公里.
_UNIT_STEPS = (
    ("周", "天", 7), ("星期", "天", 7), ("礼拜", "天", 7), ("年", "月", 12), ("小时", "分", 60),
    ("公里", "米", 1000), ("公斤", "克", 1000), ("千克", "克", 1000), ("吨", "公斤", 1000),
)  # fmt: skip
# The first characters of those measure words (and of 个 before one), to pass over a
# numeral followed by none at once.
_STEP_STARTS = frozenset(u[0] for step in _UNIT_STEPS for u in step[:2])
_UNIT_STARTS = _STEP_STARTS | {"个"}
# The week's day written 日 or 天 (Sunday: 周日, 星期天, 礼拜天) after the week's words.
_SUNDAY = frozenset("日天")
_WEEK_ENDS = frozenset("周期拜")
# Range marks (至, 到: "to") and the widest range of days.
_RANGE_MARKS = frozenset("至到")
_RANGE_SPAN = 6
_ZERO = frozenset("零〇")
_NUMERAL = frozenset(_DIGITS) | frozenset(_UNITS) | frozenset(_SCALES)
_ORDINAL = "第"
# The other ordinal prefix, of "first" only (首次, 首批: 第一次, 第一批).
_FIRST = "首"
# The last character of 下午 "afternoon" and the first of 晚上 "evening", before an hour.
_AFTERNOON = frozenset("午晚")
_PERCENT = "百分之"
# After an hour and its minutes (四点四十五分), or a count of quarters (八点一刻), the
# numeral with 点 between is a time of the clock, not a decimal (4.45).
_MINUTE = "分"
_QUARTER = "刻"
# Words written with numerals that state no quantity ("very", "by all means", "in case").
_NOT_QUANTITIES = frozenset("十分 千万 万一 一一 万万 千千万万".split())
# Segmenter tags of a numeral or a time word: only there is a numeral prefix a number.
_NUMERAL_TAGS = frozenset("m mq q t".split())
# Segmenter tags of a person, a place, an organisation, another proper noun (nz: a given
# name the segmenter cut from its surname, 罗 / 振华).
_NAME_TAGS = frozenset("nr nrt nrfg ns nt nz".split())
# Sentence ends of Chinese and Japanese text (full-width).
_STOPS = frozenset("。！？!?")
_CLOSERS = frozenset("”’」』）)")


# Traditional to Simplified, character by character: OpenCC's conversion of each character
# (`training/build_traditional_table.py` writes the table; pairs of characters, one line).
_TABLE = Path(__file__).with_name("traditional.txt").read_text(encoding="utf-8").strip()
_TO_SIMPLIFIED = {ord(_TABLE[i]): _TABLE[i + 1] for i in range(0, len(_TABLE), 2)}


# Texts longer than this are not kept in a cache: its entries are bounded in number, so a
# record of very long runs would otherwise hold megabytes in them.
_CACHED_CHARS = 256


class _CachedShort(Generic[T]):
    """`function` with a cache that admits what recurs (`RecurringCache`) for a first
    argument of at most `_CACHED_CHARS` characters; a longer one is computed each time."""

    def __init__(self, function: Callable[..., T]) -> None:
        self._function = function
        self.cache: RecurringCache[Any, T] = RecurringCache(4096)

    def __call__(self, text: str, *rest: Any) -> T:
        if len(text) > _CACHED_CHARS:
            return self._function(text, *rest)
        key = (text, *rest) if rest else text
        value: T = self.cache.entries.get(key, _MISSING)  # typed so, not by a `cast` call
        if value is _MISSING:
            value = self._function(text, *rest)
            self.cache.offer(key, value)
        return value

    def cache_clear(self) -> None:
        self.cache.clear()

    def cache_info(self) -> CacheInfo:
        return self.cache.info()


@_CachedShort
def simplified(text: str) -> str:
    """`text` in Simplified characters: Traditional and Simplified words compare equal and
    the segmenter (whose dictionary is Simplified) cuts both alike. One character for one,
    so positions in one are positions in the other."""
    return text.translate(_TO_SIMPLIFIED)


# Hiragana, katakana and half-width katakana: Japanese, whose words the Chinese
# dictionary does not cut.
_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")


def has_han(text: str) -> bool:
    """Whether `text` holds a Han character."""
    return not text.isascii() and _HAN.search(text) is not None


def is_chinese(text: str) -> bool:
    """Whether `text` is read as Chinese: Han characters and no kana (Japanese text keeps
    the detector's general path, as measured before this module)."""
    return has_han(text) and _KANA.search(text) is None


def is_han(char: str) -> bool:
    return _HAN.match(char) is not None


def numeral_start(token: str) -> bool:
    """Whether a token starts as a Chinese number does (a numeral, 第 or 百分之)."""
    first = token[0]
    return first > "\u2fff" and (first in _NUMERAL or first == _ORDINAL or first == "百")


def is_pair_word(token: str) -> bool:
    """Whether a numeral token is a lone 两 ("both", "a couple" as much as "two")."""
    return token in _PAIR


_PAIR = frozenset("两兩")


def _arabic(text: str) -> float | None:
    """An Arabic (ASCII or full-width) decimal number, else None."""
    try:
        return float(text)
    except ValueError:
        return None


def _whole(text: str) -> float | None:
    """The value of an integer numeral: digit by digit (一九三一) when it has no unit or
    scale character, else by units and scales (三千零五十, 1.5亿, 3万)."""
    if not text:
        return None
    if not any(c in _UNITS or c in _SCALES for c in text):
        if all(c in _DIGITS or c.isdigit() for c in text):
            digits = "".join(str(_DIGITS[c]) if c in _DIGITS else c for c in text)
            return float(digits) if digits.isdigit() else None
        return _arabic(text)
    total = 0.0
    section = 0.0
    current: float | None = None
    i = 0
    n = len(text)
    last = text[-1]
    if n > 2 and last in _DIGITS and _DIGITS[last] and text[-2] in _NEXT_LOWER:
        # A last digit straight after a unit counts in the unit below it (二百五 is 250,
        # 三千二 3200, 一万二 12000); after 零 it is a digit of its own (三千零二: 3002).
        head = _whole(text[:-1])
        return None if head is None else head + _DIGITS[last] * _NEXT_LOWER[text[-2]]
    while i < n:
        c = text[i]
        if c.isdigit() or c == ".":
            j = i
            while j < n and (text[j].isdigit() or text[j] == "."):
                j += 1
            current = _arabic(text[i:j])
            if current is None:
                return None
            i = j
            continue
        if c in _DIGITS:
            if _DIGITS[c]:
                current = float(_DIGITS[c])
        elif c in _UNITS:
            section += (1.0 if current is None else current) * _UNITS[c]
            current = None
        elif c in _SCALES:
            scale = _SCALES[c]
            if scale > 10_000:
                total = (total + section + (current or 0.0)) * scale
            else:
                total += (section + (current or 0.0)) * scale
            section, current = 0.0, None
        else:
            return None
        i += 1
    return total + section + (current or 0.0)


@recurring_cache(4096)
def value(token: str) -> float | None:
    """The value of a Chinese numeral token ("十五" -> 15, "一九三一" -> 1931, "1.5亿" ->
    150000000, "百分之十二" -> 12, "第三" -> 3, "三点五" -> 3.5), else None: a lone 一 and
    the idioms of `_NOT_QUANTITIES` are words."""
    if token in _NOT_QUANTITIES or token == "一":
        return None
    if len(token) > 1 and token[-1] in _TENTHS:
        # 六成 (60 per cent), 七折 (70 per cent of the price), 七五折 (75).
        tenths = _whole(token[:-1])
        if tenths is None:
            return None
        return tenths * 10 if len(token) == 2 else tenths
    text = token.removeprefix(_ORDINAL).removeprefix(_PERCENT)
    for point in _POINTS:
        if point in text:
            whole, _, fraction = text.partition(point)
            base = _whole(whole)
            scale = 1.0
            while fraction and fraction[-1] in _SCALES:
                # 一点五亿: the scale after the fraction multiplies the whole number.
                scale *= _SCALES[fraction[-1]]
                fraction = fraction[:-1]
            digits = "".join(str(_DIGITS[c]) if c in _DIGITS else c for c in fraction)
            if base is None or not digits.isdigit():
                return None
            return (base + float("0." + digits)) * scale
    return _whole(text)


def _numerals(run: str) -> list[tuple[int, int]]:
    """The spans of `run` written as numerals: a run of numeral characters, with a decimal
    point between two of them, after 第 or 百分之."""
    found: list[tuple[int, int]] = []
    n = len(run)
    i = 0
    while i < n:
        if run.startswith(_PERCENT, i) and i + 3 < n and run[i + 3] in _NUMERAL:
            start, j = i, i + 3
        elif run[i] == _ORDINAL and i + 1 < n and run[i + 1] in _NUMERAL:
            start, j = i, i + 1
        elif run[i] in _NUMERAL:
            start, j = i, i
        else:
            i += 1
            continue
        first = j
        while j < n and (
            run[j] in _NUMERAL
            or (run[j] in _POINTS and j > first and j + 1 < n and run[j + 1] in _NUMERAL)
        ):
            j += 1
        found.append((start, j))
        i = j
    return found


@_CachedShort
def _tagged(run: str) -> list[tuple[str, str]]:
    """A run of Han characters cut into words, each with its tag, in Simplified
    characters (what the spans, names, nouns and grammar words of a text read)."""
    return list(segmenter().tag(simplified(run)))


@_CachedShort
def _run_spans(run: str, after_digit: bool) -> tuple[tuple[int, int], ...]:
    """The token spans of a run of Han characters: the segmenter's words, less the numbers,
    which are tokens of their own. A numeral is a number when the segmenter's word holding
    it is a numeral or a time word (七 in 七欧元, 十分钟), lies inside it, starts a word that
    is no name (六人), or when it has several numeral characters (三亿人) or follows an
    Arabic digit (3万人); not a lone 一 nor an idiom of `_NOT_QUANTITIES` (十分重要), nor a
    numeral that starts a name (四川, 三明治) or stands inside a word (统一)."""
    words = _tagged(run)
    starts: list[int] = []
    at = 0
    for word, _ in words:
        starts.append(at)
        at += len(word)
    owner = [0] * len(run)
    for k, (word, _) in enumerate(words):
        for c in range(starts[k], starts[k] + len(word)):
            owner[c] = k
    number_end: dict[int, int] = {}
    in_number: set[int] = set()
    for a, b in _numerals(run):
        last = owner[b - 1]
        if a < starts[last] and b < starts[last] + len(words[last][0]) and words[last][1] == "q":
            # The numeral's last characters start a measure word (七十五 / 千瓦时).
            b = starts[last]
        k = owner[a]
        word, tag = words[k]
        if (
            b < len(run)
            and run[b] in _TENTHS
            and starts[last] == a
            and starts[last] + len(words[last][0]) == b + 1
        ):
            # The segmenter reads 六成 / 七折 as one numeral word: tenths of a whole.
            b += 1
        numeral = run[a:b]
        inside = a <= starts[k] and starts[k] + len(word) <= b
        # After an Arabic digit a numeral is its scale whatever else it may spell (1.5千万:
        # fifteen million, not 千万 "by all means").
        scale_of_digit = after_digit and a == 0 and _whole(numeral) is not None
        numeric = (
            scale_of_digit
            or tag in _NUMERAL_TAGS
            or inside
            or len(numeral.removeprefix(_ORDINAL)) > 1
            or (after_digit and a == 0)
            # A word that starts with the numeral and names nothing: a count of what
            # follows (六人, 两国), cut as one word or not (六个人).
            or (a == starts[k] and tag not in _NAME_TAGS)
        )
        # After a digit a numeral is its scale (3万人), unless it starts a longer measure
        # word (75千瓦时, 3千米: kilowatt hours, kilometres).
        unit_word = after_digit and a == 0 and tag == "q" and len(word) > b - a
        quantity = scale_of_digit or (word not in _NOT_QUANTITIES and value(numeral) is not None)
        if numeral in _ZERO and b < len(run) and run[b] in _RANGE_MARKS:
            # 零到一百: where a range starts, no amount of the answer's own.
            quantity = False
        if numeric and not unit_word and quantity:
            number_end[a] = b
            in_number.update(range(a, b))
    out: list[tuple[int, int]] = []
    i = 0
    n = len(run)
    while i < n:
        if i in number_end:
            end = number_end[i]
            out.append((i, end))
            i = end
            continue
        # Up to the end of the segmenter's word or the next number, whichever is first.
        k = owner[i]
        end = starts[k] + len(words[k][0])
        j = i + 1
        while j < end and j not in in_number:
            j += 1
        out.append((i, j))
        i = j
    return tuple(out)


def spans(text: str, other: re.Pattern[str]) -> list[tuple[int, int]]:
    """Token spans of a text with Han characters: each Han run by the segmenter (numbers
    as single tokens), the rest by `other`, the detector's token pattern. An Arabic number
    just before a numeral scale (3万, 1.5亿) is one number with it."""
    found: list[tuple[int, int]] = []
    at = 0
    for run in _HAN_RUN.finditer(text):
        found.extend(m.span() for m in other.finditer(text, at, run.start()))
        base = run.start()
        after_digit = base > 0 and text[base - 1].isdigit()
        words = _run_spans(run.group(), after_digit)
        if after_digit and words:
            start, end = words[0][0] + base, words[0][1] + base
            if (
                start == base
                and found
                and found[-1][1] == start
                and text[found[-1][0]].isdigit()
                and (text[start] in _SCALES or text[start] in _UNITS)
                and all(c in _NUMERAL for c in text[start:end])
            ):
                start = found.pop()[0]
                if (
                    found
                    and found[-1][1] == start
                    and text[found[-1][0]].isdigit()
                    and text[found[-1][1] - 1] in _UNITS
                ):
                    # 3千2百: the thousands and the hundreds of one number.
                    start = found.pop()[0]
            found.append((start, end))
            words = words[1:]
        found.extend([(a + base, b + base) for a, b in words])
        at = run.end()
    found.extend(m.span() for m in other.finditer(text, at))
    return found


def written_values(text: str) -> list[float]:
    """The values of every numeral written in `text`, inside words too (周三, 晚十点: the
    segmenter keeps them in a word), 1 for a lone 一 before a word (一枚: "a" and "one")
    and for the ordinal prefix 首 ("first": 首批, 首次, as 第一), 7 for the week's day 日/天
    (周日, 星期天), an hour of the clock also as the afternoon's (六点: 18 o'clock), the
    days inside a range of the week's days (周二至周日), and an amount in the next unit of
    its measure (`_UNIT_STEPS`): what a context supports, read generously, since a claim's
    number is checked against it."""
    out: list[float] = []
    folded = simplified(text)
    for run in _HAN_RUN.finditer(folded):
        chunk = run.group()
        if _FIRST in chunk[:-1]:
            out.append(1.0)
        halves = set(_positions(chunk, _HALF))
        found: list[tuple[int, int, float]] = []
        digits = _digits_before(folded, run.start())
        if digits is not None:
            # 6800米, 3个半小时: the run's measure word follows a number in digits.
            found.append((0, 0, digits))
        for a, b in _numerals(chunk):
            numeral = chunk[a:b]
            out.extend(_clock(chunk, a, b))
            amount = value(numeral)
            if amount is None and numeral == "一" and (b < len(chunk) or _weekday(chunk, a)):
                amount = 1.0  # 一枚, 周一
            if amount is not None:
                found.append((a, b, amount))
        found.extend(
            (i, i + 1, 7.0)
            for day in _SUNDAY
            for i in _positions(chunk, day)
            if i > 0 and chunk[i - 1] in _WEEK_ENDS
        )
        found.sort()
        for k, (a, b, amount) in enumerate(found):
            out.append(amount)
            after = chunk[b : b + 3]
            if after[:1] in _POINTS and 0 < amount <= 12 and _afternoon(chunk, a):
                out.append(amount + 12)
            if after[:1] in _POINTS and after[1:2] == _HALF:
                out.append(30.0)  # 六点半: half past six, 6点30分
                halves.discard(b + 1)
            elif after[:1] in _TENTHS and b - a == 1:
                out.append(amount * 10)  # 三成: 30 per cent
            # A measure word may stand between a numeral and 半 or a unit (一个半, 两个星期).
            skip = 1 if after[:1] == "个" else 0
            if after[skip : skip + 1] == _HALF:
                halves.discard(b + skip)
                amount += 0.5
                out.append(amount)  # 一个半小时: 1.5 hours
                skip += 1
            out.extend(_in_next_units(amount, chunk[b + skip : b + skip + 2]))
            if k + 1 < len(found) and _weekday(chunk, a) and _weekday(chunk, found[k + 1][0]):
                out.extend(_inside_range(amount, chunk[b : found[k + 1][0]], found[k + 1][2]))
        for i in halves:
            # 半 starting a word: half of what follows (半年: 6 months, 半小时: 30 minutes).
            out.append(0.5)
            out.extend(_in_next_units(0.5, chunk[i + 1 : i + 3]))
    return out


def _afternoon(chunk: str, a: int) -> bool:
    """Whether the hour at `a` follows the afternoon's or the evening's word in its run
    (下午六点; 下午三点至五点半: the range's end as well)."""
    before = chunk[:a]
    return any(c in before for c in _AFTERNOON)


def _clock(chunk: str, a: int, b: int) -> list[float]:
    """The hour (on twelve hours and, after 午 or 晚, on twenty-four) and the minutes of a
    time written hour 点 minutes 分 or hour 点 quarters 刻 (下午四点四十五分: 4, 16 and 45;
    八点一刻: 8 and 15), which an answer may write 16:45 or 8:15; else nothing."""
    mark = chunk[b : b + 1]
    if mark != _MINUTE and mark != _QUARTER:
        return []
    numeral = chunk[a:b]
    point = next((i for i, c in enumerate(numeral) if c in _POINTS), -1)
    if point <= 0:
        return []
    hour, minutes = _whole(numeral[:point]), _whole(numeral[point + 1 :])
    if hour is None or minutes is None or not 0 <= hour <= 24:
        return []
    if mark == _QUARTER:
        minutes *= 15
    if not 0 <= minutes < 60:
        return []
    out = [hour, minutes]
    if 0 < hour <= 12 and _afternoon(chunk, a):
        out.append(hour + 12)
    return out


def _positions(text: str, char: str) -> list[int]:
    """Where `char` stands in `text` (the string's own search, not a loop over characters)."""
    out = []
    at = text.find(char)
    while at >= 0:
        out.append(at)
        at = text.find(char, at + 1)
    return out


def _digits_before(text: str, end: int) -> float | None:
    """The number written in digits (and a decimal point) just before `end`, else None."""
    start = end
    while start > 0 and (text[start - 1].isdigit() or text[start - 1] == "."):
        start -= 1
    return _arabic(text[start:end]) if start < end else None


def weekday(word: str) -> float | None:
    """The day a word of the week names (星期一: 1, 周日: 7), else None."""
    if len(word) < 2 or (word[-1] not in _DIGITS and word[-1] not in _SUNDAY):
        return None
    folded = simplified(word)
    if folded[-2] not in _WEEK_ENDS:
        return None
    if folded[-1] in _SUNDAY:
        return 7.0
    return float(_DIGITS[folded[-1]]) if folded[-1] in _DIGITS else None


def _weekday(chunk: str, at: int) -> bool:
    """Whether the numeral at `at` names a day of the week (周二, 星期六, 礼拜天)."""
    return at > 0 and chunk[at - 1] in _WEEK_ENDS


def _inside_range(low: float, between: str, high: float) -> list[float]:
    """The whole numbers strictly between two days of the week joined as a range (周二至周日,
    星期一到星期五: a range mark and at most the week's word between them): each day of it
    is open, closed or served as the range says."""
    if len(between) > 3 or not any(c in _RANGE_MARKS for c in between):
        return []
    if low != int(low) or high != int(high) or not 0 < high - low <= _RANGE_SPAN:
        return []
    return [float(v) for v in range(int(low) + 1, int(high))]


# The general measure word, which stands between a numeral and what it counts (六个月).
_MEASURE = "个"


def measured(words: list[str], amount: float) -> tuple[str, float, int]:
    """A Chinese number's unit read from the words after it, its amount in the smaller unit
    of its measure (`_UNIT_STEPS`: 一年 and 十二个月 are both 12 月, 两个半小时 and 2.5个小时
    both 150 分), and how many of the words the unit took; ("", amount, 0) when the first word
    is no Han word. The measure word 个 is passed over and 半 after it adds a half (一个半)."""
    taken = 0
    word = words[0] if words else ""
    if word == _MEASURE and len(words) > 1:
        taken, word = 1, words[1]
    elif word.startswith(_MEASURE):
        word = word[1:]
    if word.startswith(_HALF):
        amount += 0.5
        word = word[1:]
    if not word or not is_han(word[0]):
        return "", amount, 0
    if word[0] not in _STEP_STARTS:
        return word, amount, taken + 1
    for larger, smaller, factor in _UNIT_STEPS:
        if word.startswith(smaller):
            return smaller, amount, taken + 1
        if word.startswith(larger):
            # A year, not a count of years, is no amount of months (一九三一年).
            if amount < 1000:
                return smaller, amount * factor, taken + 1
            return larger, amount, taken + 1
    return word, amount, taken + 1


def is_step_unit(word: str) -> bool:
    """Whether a word starts with a measure of `_UNIT_STEPS` (一小时, 一年: a lone 一 before
    one is a count of it)."""
    word = word.removeprefix(_MEASURE)
    if word[:1] not in _STEP_STARTS:
        return False
    return any(word.startswith(u) for step in _UNIT_STEPS for u in step[:2])


def _in_next_units(amount: float, after: str) -> list[float]:
    """`amount` of the unit `after` starts with, in the next smaller unit of its measure
    (两周: 14 days, 6.8公里: 6800 metres), and in the larger one (14天: 2 weeks, 6800米:
    6.8 kilometres) where that is a number one writes (two decimals at most)."""
    out: list[float] = []
    if after[:1] not in _UNIT_STARTS:
        return out
    for larger, smaller, factor in _UNIT_STEPS:
        if after.startswith(larger):
            if amount < 1000:
                out.append(amount * factor)
        elif after.startswith(smaller) or after.startswith("个" + smaller):
            bigger = amount / factor
            if bigger >= 0.5 and round(bigger, 2) == bigger:
                out.append(bigger)
    return out


# Segmenter tags of words that carry grammar, not content: conjunctions,
# prepositions, particles, modal particles, interjections (而且, 按照, 的, 吧, 啊).
_GRAMMAR_TAGS = frozenset("c p u uj ul uz ug uv ud y e".split())
# Segmenter tags of nouns: common, place, direction and proper ones (n, nr, ns, nt, nz,
# ng, nrt, nrfg; s a place word, f a direction word).
_NOUN_TAGS = ("n", "s", "f")


@_CachedShort
def word_kinds(text: str) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The words of `text` the segmenter reads there (a tag depends on the words around
    it) as names, as nouns and as grammar, in Simplified characters: one tagging of the
    text for the three."""
    found: tuple[list[str], list[str], list[str]] = ([], [], [])
    tagged = (pair for run in _HAN_RUN.finditer(text) for pair in _tagged(run.group()))
    for w, tag in tagged:
        if tag in _GRAMMAR_TAGS:
            found[2].append(w)
        elif len(w) > 1 and tag.startswith(_NOUN_TAGS):
            found[1].append(w)
            if tag in _NAME_TAGS:
                found[0].append(w)
    return frozenset(found[0]), frozenset(found[1]), frozenset(found[2])


def names(text: str) -> frozenset[str]:
    """The words of `text` the segmenter reads as a person's, a place's or an
    organisation's name there."""
    return word_kinds(text)[0]


def nouns(text: str) -> frozenset[str]:
    """The words of `text` the segmenter reads as nouns there."""
    return word_kinds(text)[1]


def function_words(text: str) -> frozenset[str]:
    """The words of `text` the segmenter reads as grammar there (`_GRAMMAR_TAGS`)."""
    return word_kinds(text)[2]


# Dictionary frequencies (jieba's counts) at which a word is as common as a function word
# (specificity 0) and as rare as a name (1); in between, by the logarithm.
_COMMON = 5_000
_RARE_COUNT = 20
_LOG_SPAN = math.log(_COMMON / _RARE_COUNT)
# Below this count a dictionary word weighs as its rarest part where that is commoner.
_COMPOUND_COUNT = 100


@recurring_cache(4096)
def specificity(word: str) -> float:
    """How specific a Han word is, 0 (most frequent words) to 1, from the segmenter
    dictionary's frequency: the counterpart of the word vectors' vocabulary rank, whose
    vocabulary has few Chinese words. A word the dictionary lacks weighs as its rarest
    character (这座 as 座, 合唱节 as a whole when every part is rare)."""
    if segmenter().has_word(word):
        count = segmenter().suggest_freq(word)
    else:
        count = min(segmenter().suggest_freq(c) for c in word)
    own = _by_count(count)
    if len(word) > 1 and count < _COMPOUND_COUNT:
        # A rare entry of the dictionary is often a compound of common words (每天晚上,
        # 开瓶, 男子单打): as specific as its rarest part, not as a name.
        return min(own, _by_parts(word))
    return own


def _by_count(count: int) -> float:
    return min(1.0, max(0.0, math.log(_COMMON / max(count, 1)) / _LOG_SPAN))


def _by_parts(word: str) -> float:
    """The specificity of a word's rarest part: the dictionary words inside it (the
    segmenter's search cut: 每天 and 晚上 of 每天晚上) and the characters none covers."""
    parts = [p for p in segmenter().cut_for_search(word, True) if len(p) < len(word)]
    covered: set[int] = set()
    for part in parts:
        at = word.find(part)
        covered.update(range(at, at + len(part)))
    parts += [c for i, c in enumerate(word) if i not in covered]
    return max(_by_count(segmenter().suggest_freq(p)) for p in parts)


# A character the dictionary counts this often is a function morpheme (之, 以, 的, 了, 在):
# words that differ only in such characters are one word written two ways.
_FUNCTION_COUNT = 100_000


def function_morphemes(word: str, other: str) -> bool:
    """Whether two words of one length differ only where both write a function morpheme
    (之前 and 以前 both "before"; 南部 and 西部 differ in content)."""
    return all(
        a == b
        or (
            segmenter().suggest_freq(a) >= _FUNCTION_COUNT
            and segmenter().suggest_freq(b) >= _FUNCTION_COUNT
        )
        for a, b in zip(word, other, strict=True)
    )


def pairs(text: str) -> set[str]:
    """The pairs of Han characters next to each other in `text`: a word whose every pair is
    there is written in the text, however the segmenter cut either side."""
    out: set[str] = set()
    for run in _HAN_RUN.finditer(simplified(text)):
        chunk = run.group()
        out.update(chunk[i : i + 2] for i in range(len(chunk) - 1))
    return out


def word_pairs(word: str) -> list[str]:
    return [word[i : i + 2] for i in range(len(word) - 1)]


def split_sentences(text: str) -> list[str]:
    """`text` cut after each full-width sentence end (。！？, with the closing quotes after
    it); the pieces keep their ends."""
    out: list[str] = []
    start = 0
    i = 0
    n = len(text)
    while i < n:
        if text[i] in _STOPS and ((text[i] != "!" and text[i] != "?") or _han_before(text, i)):
            j = i + 1
            while j < n and (text[j] in _STOPS or text[j] in _CLOSERS):
                j += 1
            out.append(text[start:j])
            start = i = j
            continue
        i += 1
    out.append(text[start:])
    return [p for p in out if p.strip()]


def _han_before(text: str, i: int) -> bool:
    return i > 0 and is_han(text[i - 1])
