"""``BoundedCache``: what the gateway learns as it goes (a post's group, a conversation's member) is kept up to
a bound, the least recently used dropped first, so a worker running for months does not grow without end."""

from __future__ import annotations

from adapters.platform.bounded_cache import BoundedCache


def test_the_least_recently_used_entry_goes_first_and_reading_one_keeps_it() -> None:
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recently used
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)


def test_writing_an_entry_again_makes_it_the_most_recent() -> None:
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (10, None, 3)


def test_many_at_once_keep_the_bound_and_the_order() -> None:
    cache: BoundedCache[int, int] = BoundedCache(3)
    cache.put(0, 0)
    cache.put_many((n, n * 10) for n in range(1, 5))
    assert [cache.get(n) for n in range(5)] == [None, None, 20, 30, 40]
    cache.put_many([(2, 200), (5, 50)])  # 2 written again: 3 is now the oldest
    assert [cache.get(n) for n in (2, 3, 4, 5)] == [200, None, 40, 50]


def test_a_popped_entry_is_gone_and_popping_a_missing_one_is_nothing() -> None:
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.pop("a")
    cache.pop("never")
    assert cache.get("a") is None
