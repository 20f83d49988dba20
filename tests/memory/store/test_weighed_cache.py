"""The bounded LRU the write path's and the time axis' caches share."""

from __future__ import annotations

from mnemoray.weighed_cache import WeighedCache


def test_drops_the_least_recently_used_by_weight() -> None:
    cache: WeighedCache[str, str] = WeighedCache(6, weigh=len)
    cache.put("a", "xx")
    cache.put("b", "xx")
    assert cache.get("a") == "xx"  # a is now the most recent
    cache.put("c", "xxx")  # 7 > 6: b goes, not a
    assert list(cache) == ["a", "c"] and cache.total == 5 and cache.get("b") is None


def test_the_newest_stays_even_over_budget_and_a_replacement_counts_once() -> None:
    cache: WeighedCache[str, str] = WeighedCache(3, weigh=len)
    cache.put("a", "x")
    cache.put("big", "xxxxx")
    assert list(cache) == ["big"] and cache.total == 5
    cache.put("big", "xx")
    assert cache.total == 2 and len(cache) == 1


def test_a_value_over_max_item_is_not_kept() -> None:
    cache: WeighedCache[str, str] = WeighedCache(100, weigh=len, max_item=3)
    assert cache.put("long", "xxxx") == "xxxx"
    assert cache.get("long") is None and cache.total == 0
