"""The evaluation workers' caches of sender text admit what recurs: under a new word in every
request each stays within its bound, a word that recurs stays cached while one-off words pass,
and the detector's results are the same with the caches as without them. Counts only."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from monitor.detector import score_groundedness, score_relevance, score_retrieval, topics
from monitor.detector.embedding import shared_embedder
from monitor.detector.text import fold, shared_work
from monitor.shared.recurring import RecurringCache, recurring_cache

ENGLISH = (
    (
        "When did the Golden Gate Bridge open?",
        [
            "The Golden Gate Bridge opened to traffic on May 27, 1937. Its main span is 1,280 "
            "meters long, and the chief engineer was Joseph Strauss."
        ],
        "It opened in 1937; the main span is 2,150 meters long.",
    ),
    (
        "Who designed the lighthouse?",
        ["The lighthouse was designed by Ada Pemberton and lit in 1874."],
        "Ada Pemberton designed it, and it was first lit in 1874.",
    ),
)
CHINESE = (
    (
        "北风面包店是谁创立的？",
        ["北风面包店由伊万·拉斯克于一九三一年在哈尔滨创立。店里的面包七欧元。"],
        "它由伊万·拉斯克于1931年在哈尔滨创立，面包九欧元。",
    ),
    (
        "灯塔什么时候建成？",
        ["灯塔建于一八七四年，高三十米，周一不营业。"],
        "灯塔建于1874年：高30米，周一不营业。",
    ),
)
# A word in another script (Greek) beside the new words of each request.
GREEK = "Ο φάρος χτίστηκε το 1874"


def _new_word(n: int) -> str:
    """A word nobody sent before: letters only (a digit would keep it out of the caches)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    word = ""
    n += 26**3
    while n:
        n, r = divmod(n, 26)
        word += letters[r]
    return "zq" + word


def _caches() -> Iterator[tuple[str, RecurringCache[Any, Any]]]:
    """Every cache of sender text in the detector's modules, by name."""
    for name, module in list(sys.modules.items()):
        if name.startswith("monitor.detector"):
            for attr, value in vars(module).items():
                if isinstance(getattr(value, "cache", None), RecurringCache):
                    yield f"{name}.{attr}", value.cache
                elif isinstance(value, RecurringCache):
                    yield f"{name}.{attr}", value
    yield "embedding words", shared_embedder()._words


def _clear() -> None:
    for _, cache in _caches():
        cache.clear()


def _score(query: str, contexts: list[str], answer: str) -> tuple[str, ...]:
    return (
        repr(score_groundedness(query, contexts, answer)),
        repr(score_relevance(query, answer)),
        repr(score_retrieval(query, contexts)),
        topics.question_topic(query),
    )


def test_a_cache_admits_a_key_on_its_second_sighting_only() -> None:
    cache: RecurringCache[str | int, int] = RecurringCache(maxsize=4, seen=8)
    assert not cache.offer("北风", 1) and "北风" not in cache.entries
    assert cache.offer("北风", 1) and cache.entries["北风"] == 1
    # Integers are their own hashes: which of them the filter mistakes is the same each run.
    for n in range(1000, 1100):
        cache.offer(n, n)
    assert len(cache) == 1 and cache.info().seen <= 8
    for n in range(100):
        cache.offer(n, n)
        cache.offer(n, n)
    assert len(cache) == 4 and 99 in cache.entries and "北风" not in cache.entries
    assert cache.info().misses == 302


def test_a_cached_function_keeps_none_and_computes_each_key_until_it_recurs() -> None:
    calls: list[str] = []

    @recurring_cache(16)
    def nothing(word: str) -> None:
        calls.append(word)

    for _ in range(5):
        nothing("φάρος")
    assert calls == ["φάρος", "φάρος"]
    assert nothing.cache_info().misses == 2 and nothing.cache_info().currsize == 1
    assert nothing.__wrapped__("x") is None and calls[-1] == "x"


def test_every_cache_stays_within_its_bound_under_new_words_in_every_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each request brings new words, each sent twice within it (in the question and the
    answer), so they are admitted: the caches stop at their bounds (made small here, so
    that a few hundred requests fill them)."""
    _clear()
    found = dict(_caches())
    assert len(found) >= 15, sorted(found)
    for cache in found.values():
        monkeypatch.setattr(cache, "maxsize", 32)
        monkeypatch.setattr(cache, "seen_size", 32)
    for n in range(200):
        new = f"{_new_word(2 * n)} {_new_word(2 * n + 1)}"
        score_groundedness(
            f"What is {new}?", [f"The {new} is a bridge. {GREEK}。"], f"{new} is a bridge."
        )
        score_relevance(f"Is {new} old？", f"{new}：灯塔建于一八七四年。")
    sizes = {name: len(cache) for name, cache in _caches()}
    assert all(len(cache) <= 32 for _, cache in _caches()), sizes
    assert all(cache.info().seen <= 32 for _, cache in _caches())
    # The test sent enough new words to fill the word caches.
    assert sizes["monitor.detector.text.fold"] == 32, sizes
    assert sizes["embedding words"] == 32, sizes
    _clear()


def test_one_off_words_do_not_enter_the_word_caches() -> None:
    """A word sent once is computed and marked, not kept: a stream of them leaves every
    word cache about as it was (an LRU cache would hold its bound of them)."""
    _clear()
    recurring = ["bridge", "lighthouse", "北风", "面包店", "φάρος"]
    for word in recurring * 2:
        fold(word)
        topics.question_topic(f"Where is the {word}?")
    before = {name: len(cache) for name, cache in _caches()}
    sent = fold.cache.seen_size * 3
    for n in range(sent):
        word = _new_word(n)
        fold(word)
        # Its topic scores read its vector: the one sighting of the word by the embedder.
        topics.question_topic(f"Where is the {word}?")
    after = {name: len(cache) for name, cache in _caches()}
    # The filter mistakes a few new words in a thousand for seen ones (hashes of text
    # change with each process): at most 1% of the one-off words enter.
    for name in (
        "monitor.detector.text.fold",
        "monitor.detector.topics._scores",
        "embedding words",
    ):
        assert before[name] <= after[name] <= before[name] + sent // 100, (name, before, after)
    _clear()


def test_recurring_words_stay_cached_while_one_off_words_pass() -> None:
    """Two recurring words every hundred one-off ones: after their second sighting, every
    lookup of a recurring word is a hit, though the one-offs outnumber the cache's bound."""
    _clear()
    recurring = ["bridge", "灯塔", "φάρος", "Strauss"]
    hits = lookups = 0
    for n in range(fold.cache.maxsize * 3):  # one-off words, three times the bound
        fold(_new_word(n))
        if n % 50 == 0:
            for word in recurring:
                before = fold.cache_info().misses
                fold(word)
                hits += fold.cache_info().misses == before
                lookups += 1
    # Every lookup after the two first sightings of each recurring word hits.
    assert hits == lookups - 2 * len(recurring)
    # The rest of the cache: the few one-off words the filter mistook for seen ones.
    assert (
        len(recurring) <= fold.cache_info().currsize <= len(recurring) + fold.cache.maxsize // 100
    )
    _clear()


@pytest.mark.parametrize("record", [*ENGLISH, *CHINESE])
def test_results_are_the_same_with_and_without_the_caches(
    record: tuple[str, list[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    query, contexts, answer = record
    _clear()
    cached = [_score(query, contexts, answer) for _ in range(3)]
    assert any(len(cache) for _, cache in _caches())
    _clear()
    with monkeypatch.context() as patched:
        patched.setattr(RecurringCache, "offer", lambda self, key, value: False)
        uncached = _score(query, contexts, answer)
        assert not any(len(cache) for _, cache in _caches())
    assert cached == [uncached] * 3


def test_a_word_recurring_within_one_record_is_one_sighting() -> None:
    """A new name in the question and the answer of one record, read by every check, does
    not enter the caches; the same name in the next record does."""
    _clear()
    name = _new_word(99_999)
    query, contexts, answer = (
        f"Who is {name}？",
        [f"{name}：灯塔建于一八七四年。"],
        f"{name} built it.",
    )
    with shared_work(object()):
        _score(query, contexts, answer)
    assert name not in fold.cache.entries and name not in shared_embedder()._words.entries
    with shared_work(object()):
        _score(query, contexts, answer)
    assert name in fold.cache.entries and name in shared_embedder()._words.entries
    _clear()
