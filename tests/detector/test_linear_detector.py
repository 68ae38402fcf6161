"""A record's cost is bounded by its own size (issue 104): the groundedness check on
answers and contexts shaped to make it super-linear (one Chinese sentence with no stop,
hundreds of sentences, numbers, names or clauses on both sides) runs lines of Python, at
four times the size, about four times as many, not sixteen.

Counted as `tests/extraction/test_linear_extraction.py` counts a prompt's split
(`sys.settrace`'s line events), so that the test never depends on the machine's speed. Both
sizes are past the caps that bound a claim's comparison with the context
(`features.MAX_COMPARED_CLAIMS`, `contradiction.MAX_CLAIM_SLOTS`,
`polarity.MAX_CLAIM_CLAUSES`): between them, a check that compared every claim with every
context sentence, or every slot of a sentence with every other, costs sixteen times.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import numpy as np
import pytest

from monitor.detector import (
    cjk,
    contradiction,
    features,
    polarity,
    roles,
    score_groundedness,
    slots,
)
from monitor.detector import text as detector_text
from monitor.detector.contradiction import MAX_CLAIM_SLOTS
from monitor.detector.embedding import Embedder, shared_embedder
from monitor.detector.features import (
    MAX_COMPARED_CHARS,
    MAX_COMPARED_CLAIMS,
    MAX_EVIDENCE_CHARS,
    analyse,
)
from monitor.detector.polarity import MAX_CLAIM_CLAUSES
from monitor.detector.sentences import Sentence
from monitor.detector.slots import Parsed, Slot
from tests.extraction.test_linear_extraction import line_events

SIZE = 1_500  # characters; the larger size is four times this
# Four times the size may cost up to this many times the lines (a constant part, a last
# unit cut differently); a quadratic check costs about sixteen.
LINEAR = 4 * 1.5

QUESTION = "商店的退货政策是什么？"
CONTEXT = "商店接受三十天内的退货。商品必须未使用并保留包装。"
QUESTION_EN = "What is the return policy for the store?"
CONTEXT_EN = "The store accepts returns within thirty days. Items must be unused."


def _repeat(unit: str, size: int) -> str:
    return unit * max(1, size // len(unit))


# Each shape: a size → (question, contexts, response).
Shape = Callable[[int], tuple[str, list[str], str]]
SHAPES: dict[str, Shape] = {
    # One Chinese "sentence" of thousands of words the context lacks: its names were
    # tagged again for each of them.
    "chinese_without_stops": lambda n: (
        QUESTION,
        [CONTEXT],
        _repeat("我们今天去商店买东西然后回家吃饭", n),
    ),
    # Hundreds of sentences on both sides: each claim is compared with every context one.
    "many_sentences": lambda n: (
        QUESTION_EN,
        [_repeat("The cat sat. ", n)],
        _repeat("The cat sat. ", n),
    ),
    # One sentence of hundreds of quantities on both sides: each slot against every slot.
    "many_quantities": lambda n: (
        QUESTION_EN,
        [_repeat("5 percent ", n)],
        _repeat("5 percent ", n),
    ),
    # Hundreds of Chinese clauses on both sides: each against every context clause.
    "many_chinese_clauses": lambda n: (QUESTION, [_repeat("不好，", n)], _repeat("不好，", n)),
    # Numerals of dates and weekdays in one Chinese sentence on both sides.
    "chinese_numerals": lambda n: (QUESTION, [_repeat("周二至周日", n)], _repeat("周二至周日", n)),
}


def _score(case: tuple[str, list[str], str]) -> Callable[[], object]:
    question, contexts, response = case
    return lambda: score_groundedness(question, contexts, response)


@pytest.fixture(scope="module", autouse=True)
def _loaded() -> None:
    """The word vectors and the segmenter load before anything is counted."""
    score_groundedness(QUESTION, [CONTEXT], "三十天内可以退货。")
    score_groundedness(QUESTION_EN, [CONTEXT_EN], "Returns within thirty days.")


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_groundedness_check_costs_in_proportion_to_the_record(shape: str) -> None:
    build = SHAPES[shape]
    small = line_events(lambda _: _score(build(SIZE))(), "")
    large = line_events(lambda _: _score(build(4 * SIZE))(), "")
    assert small > 0
    assert large <= LINEAR * small, f"{shape}: {small} lines, then {large} at 4x"


def test_the_frames_of_a_sentence_of_names_cost_in_proportion_to_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A name's frame is the rest of its sentence (a set built in C, which line events do
    not count): the words the frames of a sentence of hundreds of names copy grow with the
    sentence, not with it times its names."""
    copied = 0
    frame_of = roles.frame_of

    def counted(claim: Parsed, slot: Slot) -> set[str]:
        nonlocal copied
        copied += len(claim.stems)
        return frame_of(claim, slot)

    monkeypatch.setattr(roles, "frame_of", counted)
    monkeypatch.setattr(contradiction, "frame_of", counted)
    counts = []
    for size in (SIZE, 4 * SIZE):
        copied = 0
        score_groundedness(QUESTION_EN, [CONTEXT_EN], _repeat("Mr. ", size))
        counts.append(copied)
    assert 0 < counts[0] and counts[1] <= LINEAR * counts[0], counts


def test_the_paraphrase_check_compares_words_in_proportion_to_the_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each missing word is compared with the context's whole vocabulary (one matrix
    product): an answer and a context of thousands of distinct words multiply in proportion
    to the context, not to it times the answer, and never hold the whole product."""
    embedder = shared_embedder()
    products = []
    nearest = type(embedder).nearest_similarity

    def counted(self: object, words: list[str], vocabulary: list[str]) -> object:
        products.append(len(words) * len(vocabulary))
        return nearest(embedder, words, vocabulary)

    monkeypatch.setattr(type(embedder), "nearest_similarity", counted)
    rng = random.Random(104)
    letters = "abcdefghijklmnopqrstuvwxyzабвгдежзиклмнопрст"

    def text(size: int) -> str:
        return " ".join("".join(rng.choice(letters) for _ in range(7)) for _ in range(size // 8))

    for size in (4 * SIZE, 16 * SIZE):
        score_groundedness(QUESTION_EN, [text(size)], text(size))
    assert 0 < products[0] and products[1] <= LINEAR * products[0], products
    # Block by block, the product gives what one product gives (to the last bits of the
    # floats, which the matrix library sums in another order for another shape).
    words, vocabulary = text(4_000).split(), text(4_000).split()
    vectors = embedder.word_vectors([*words, *vocabulary])
    whole = (vectors[: len(words)] @ vectors[len(words) :].T).max(axis=1)
    assert len(words) > 256
    assert np.allclose(nearest(embedder, words, vocabulary), whole, rtol=0, atol=1e-6)


def test_a_context_of_one_sentence_without_a_stop_is_not_read_once_per_claim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each claim's negation is read against its closest context sentence: one of hundreds
    of thousands of characters would be read whole again for each claim."""
    read = 0
    contradicts = polarity.contradicts

    def counted(
        claim: Sentence, negated: frozenset[str], evidence: Sentence, embedder: Embedder
    ) -> frozenset[str]:
        nonlocal read
        read += len(evidence.text)
        return contradicts(claim, negated, evidence, embedder)

    monkeypatch.setattr(features, "contradicts", counted)
    context = _repeat("商店不接受退货但是可以换货", 8 * MAX_EVIDENCE_CHARS)
    response = _repeat("商店不接受退货。", 400)
    score_groundedness(QUESTION, [context], response)
    assert read <= MAX_COMPARED_CLAIMS * MAX_EVIDENCE_CHARS
    # A context of sentences is read as before.
    score_groundedness(QUESTION, ["商店接受退货。"], "商店不接受退货。")
    assert read > 0


def test_a_long_chinese_sentence_is_tagged_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The characters handed to the segmenter: a few passes over the record, not one pass
    over the sentence per word of it."""
    tagged = 0
    tag = cjk._tagged._function

    def counted(run: str) -> list[tuple[str, str]]:
        nonlocal tagged
        tagged += len(run)
        return tag(run)

    monkeypatch.setattr(cjk._tagged, "_function", counted)
    cjk._tagged.cache_clear()
    response = _repeat("我们今天去商店买东西然后回家吃饭", 4 * SIZE)
    score_groundedness(QUESTION, [CONTEXT], response)
    assert 0 < tagged <= 8 * len(response)


def test_the_caps_are_past_what_an_answer_of_facts_holds() -> None:
    """An answer of twenty sentences of a few facts each is compared whole."""
    assert MAX_COMPARED_CLAIMS >= 20 and MAX_COMPARED_CHARS >= 20 * 200
    assert MAX_CLAIM_SLOTS >= 8 and MAX_CLAIM_CLAUSES >= 8


def test_a_contradiction_within_the_caps_is_still_found() -> None:
    """A contradicted number in the last sentence an answer's cap reads is found; the same
    sentence past it is not compared, and the rest of the answer is read as before."""
    context = "The bridge is 900 metres long. It opened in 1932."
    filler = "The bridge is long. "
    within = filler * (MAX_COMPARED_CLAIMS - 1) + "The bridge is 1,300 metres long."
    past = filler * MAX_COMPARED_CLAIMS + "The bridge is 1,300 metres long."
    found = analyse("How long is the bridge?", [context], within, shared_embedder())
    assert [c.said for c in found.contradictions if c.kind == "number"] == ["1,300 metres"]
    beyond = analyse("How long is the bridge?", [context], past, shared_embedder())
    assert not [c for c in beyond.contradictions if c.kind == "number"]
    assert "1,300" in beyond.sentences[-1].unsupported_numbers


def _split_joining_each_part(text: str) -> list[str]:
    """The sentence split as it joined each part to its sentence as it came."""
    parts = [s for s in map(str.strip, detector_text._SENTENCE.split(text)) if s]
    merged: list[str] = []
    for part in parts:
        if merged and detector_text._ABBREVIATION.search(merged[-1][-6:]):
            merged[-1] = f"{merged[-1]} {part}"
        else:
            merged.append(part)
    return merged


def test_the_sentence_split_keeps_abbreviations_as_it_did() -> None:
    rng = random.Random(104)
    pieces = [
        "Mr. ",
        "Dr. ",
        "e.g. ",
        "A. ",
        "It rained. ",
        "U.S. ",
        "No. 5 ",
        "Tom sat.\n",
        "x",
        " ",
        ". ",
    ]
    for _ in range(2_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        assert detector_text._split_latin(text) == _split_joining_each_part(text), repr(text)


def _cpu(split: Callable[[str], object], text: str) -> float:
    """The least thread CPU time of three splits (the least is the least disturbed)."""
    times = []
    for _ in range(3):
        start = time.thread_time()
        split(text)
        times.append(time.thread_time() - start)
    return min(times)


def test_a_sentence_of_a_hundred_thousand_abbreviations_splits_in_linear_time() -> None:
    """Joined part by part, "Mr. Mr. Mr. ..." copies its sentence once per part (in C,
    which line events do not count): the thread's CPU time, four times the text, grows far
    less than sixteen times (a generous bound, not a speed)."""
    small, large = _repeat("Mr. ", 200_000), _repeat("Mr. ", 800_000)
    ratio = _cpu(detector_text._split_latin, large) / max(
        _cpu(detector_text._split_latin, small), 1e-6
    )
    assert ratio < 9, ratio


def test_a_sentence_of_thousands_of_amounts_is_read_in_linear_time() -> None:
    """An amount in two units (1小时35分钟) is one: "十小时九分钟十小时九分钟…" was one
    amount grown by each (its text copied and searched again for each, in C); now an
    amount has at most four units, and the thread's CPU time at four times the sentence
    grows about four times, where it grew eight to ten (a bound on a ratio, not a
    speed)."""
    (amount,) = [s for s in slots.parse("他跑了1小时35分钟。").slots if s.kind == "number"]
    assert (amount.value, amount.text) == (95.0, "1小时35分钟")
    (amount,) = [s for s in slots.parse("合同期两年三个月。").slots if s.kind == "number"]
    assert amount.text == "两年三个月"
    many = [s for s in slots.parse("我们" + "十小时九分钟" * 40 + "。").slots if s.kind == "number"]
    assert len(many) == 20
    small, large = (
        "我们" + _repeat("十小时九分钟", 15_000),
        "我们" + _repeat("十小时九分钟", 60_000),
    )
    ratio = _cpu(slots.parse, large) / max(_cpu(slots.parse, small), 1e-6)
    assert ratio < 7, ratio
