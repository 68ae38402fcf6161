"""The detector's bounded caches keep what comes back, not what one request brings: under
steady traffic of new requests they stop growing once the recurring texts are in them."""

from __future__ import annotations

from monitor.detector import text
from monitor.shared.admitted import admitted, next_record


def test_a_key_is_kept_when_it_comes_back_and_the_bound_holds() -> None:
    calls: list[str] = []

    @admitted(8)
    def upper(word: str) -> str:
        calls.append(word)
        return word.upper()

    assert upper("a") == "A" and upper.cache_info().currsize == 0
    assert upper("a") == "A" and upper.cache_info().currsize == 1
    assert upper("a") == "A" and calls == ["a", "a"]
    for n in range(100):
        upper(f"w{n}")
        upper(f"w{n}")
    assert upper.cache_info().currsize <= 8
    upper.cache_clear()
    assert upper.cache_info() == (0, 0, 8, 0)


def test_a_per_token_cache_keeps_only_what_comes_back_in_a_later_record() -> None:
    """A record's own number recurs within it (the question is read by every evaluator):
    kept, one per request, it would fill the cache over an hour."""

    @admitted(8, later_record=True)
    def lower(word: str) -> str:
        return word.lower()

    next_record()
    for _ in range(5):
        lower("1234")
    assert lower.cache_info().currsize == 0
    next_record()
    lower("1234")
    assert lower.cache_info().currsize == 1


def test_new_requests_leave_the_token_caches_as_the_recurring_words_filled_them() -> None:
    def score(n: int) -> None:
        with text.shared_work(object()):
            for word in f"the refund takes 14 days ticket {n}".split():
                text.stem(text.fold(word))

    for n in range(3):
        score(n)
    held = text.fold.cache_info().currsize
    for n in range(3, 200):
        score(n)
    assert text.fold.cache_info().currsize == held
