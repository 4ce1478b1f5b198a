"""Counts read from the graph and trusted for a while: the text arms'
document frequencies (fulltext.py) and expansion's entity mention counts
(reads.py). A count may have been stopped at a cap (the engine counts
lazily, or the count is bounded on purpose): it then answers a request
counting to that cap or less, or any once it fell under its cap."""

from __future__ import annotations

from collections.abc import Hashable

#: How many counts a cache keeps (each a few hundred bytes).
COUNT_CACHE_SIZE = 50_000


class CountCache:
    """Counts by key, each trusted for `seconds`, at most `size` of them (the oldest go first)."""

    def __init__(self, *, seconds: float, size: int = COUNT_CACHE_SIZE):
        self.seconds = seconds
        self._size = size
        #: key -> (count, when counted (monotonic), the cap it was counted to or None: exact).
        self._counts: dict[Hashable, tuple[int, float, int | None]] = {}

    def __len__(self) -> int:
        return len(self._counts)

    def snapshot(self) -> dict[Hashable, tuple[int, int | None]]:
        """What is cached, fresh or not: each key's count and the cap it was counted to."""
        return {key: (count, cap) for key, (count, _, cap) in self._counts.items()}

    def get(self, key: Hashable, *, now: float, cap: int | None) -> int | None:
        """The cached count, when fresh and counted far enough for `cap` (None: exactly)."""
        cached = self._counts.get(key)
        if cached is None or now - cached[1] >= self.seconds:
            return None
        count, _, counted_to = cached
        if counted_to is None or count < counted_to or (cap is not None and counted_to >= cap):
            return count
        return None

    def put(self, key: Hashable, count: int, *, now: float, cap: int | None) -> None:
        self._counts.pop(key, None)  # a recount moves to the back: the oldest go first
        self._counts[key] = (count, now, cap)
        while len(self._counts) > self._size:
            self._counts.pop(next(iter(self._counts)))
