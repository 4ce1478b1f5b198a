"""Recall's vectors of single words (the related-words component,
services/core/domain/related_words.py): embedded by the query embedder on
first use and kept, least recently used first, up to a bound. A recall
waits only for the question's own words (a few, `lookup`); the shortlist's
words it has not seen are queued (at most `new_per_recall` waiting) and
embedded in the background (`known`), LEARN_CHUNK at a time so that a
query's own embedding never waits long behind them, and count from a
later recall on. So a new or rare word never holds a recall up for a batch
of embeddings (the tail of the component's cost), a cold process ranks with
what it has, and a failing or missing embedder leaves the component at 0
and recall answers as without it."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Iterable

import numpy as np
from prometheus_client import Counter

from services.core.ports.models import Embedder

log = logging.getLogger(__name__)

#: Words embedded in one background call: the embedder runs one call at a
#: time, so a query waits behind at most this many single words.
LEARN_CHUNK = 32

WORDS_EMBEDDED = Counter("memgrid_recall_words_embedded_total", "Single words embedded for the related-words component")


class WordVectors:
    """Unit vectors of words, cached."""

    def __init__(self, embedder: Embedder | None, *, max_words: int, new_per_recall: int):
        self._embedder = embedder
        self._max_words = max_words
        self._new_per_recall = new_per_recall
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._queued: dict[str, None] = {}  # words to learn, in the order they were seen
        self._learning: asyncio.Task[None] | None = None

    @property
    def enabled(self) -> bool:
        return self._embedder is not None and self._max_words > 0

    def __len__(self) -> int:
        return len(self._vectors)

    async def lookup(self, words: Iterable[str]) -> dict[str, np.ndarray]:
        """The vectors of `words` known now, after embedding up to
        new_per_recall of the unknown ones (the earliest given first)."""
        wanted = list(dict.fromkeys(words))
        if not self.enabled or not wanted:
            return {}
        await self._embed([w for w in wanted if w not in self._vectors][: self._new_per_recall])
        return self._known(wanted)

    def known(self, words: Iterable[str]) -> dict[str, np.ndarray]:
        """The vectors of `words` known now; the unknown ones are queued
        (while fewer than new_per_recall wait) and learnt in the background."""
        wanted = list(dict.fromkeys(words))
        if not self.enabled or not wanted:
            return {}
        for word in wanted:
            if len(self._queued) >= self._new_per_recall:
                break
            if word not in self._vectors:
                self._queued[word] = None
        if self._queued and (self._learning is None or self._learning.done()):
            self._learning = asyncio.get_running_loop().create_task(self._learn())
        return self._known(wanted)

    async def settled(self) -> None:
        """Until the queued words are learnt (tests)."""
        while self._learning is not None and not self._learning.done():
            await asyncio.shield(self._learning)

    async def _learn(self) -> None:
        while self._queued:
            chunk = list(self._queued)[:LEARN_CHUNK]
            for word in chunk:
                del self._queued[word]
            await self._embed([w for w in chunk if w not in self._vectors])

    async def _embed(self, missing: list[str]) -> None:
        if not missing:
            return
        assert self._embedder is not None  # noqa: S101  narrows the type: enabled means an embedder
        try:
            embedded = await self._embedder.embed(missing)
        except Exception:  # noqa: BLE001  any embedder failure: the component is 0 for what is not cached
            log.warning("related words: embedding %d words failed", len(missing), exc_info=True)
            embedded = []
        for word, vector in zip(missing, embedded, strict=False):
            array = np.asarray(vector, dtype=np.float32)
            norm = float(np.linalg.norm(array))
            self._vectors[word] = array / norm if norm > 0 else array
        WORDS_EMBEDDED.inc(len(embedded))
        while len(self._vectors) > self._max_words:
            self._vectors.popitem(last=False)

    def _known(self, wanted: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for word in wanted:
            vector = self._vectors.get(word)
            if vector is not None:
                self._vectors.move_to_end(word)
                found[word] = vector
        return found
