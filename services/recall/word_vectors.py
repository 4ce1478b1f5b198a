"""Recall's vectors of single words (the related-words component,
services/core/domain/related_words.py): embedded by the query embedder on
first use and kept, least recently used first, up to a bound. A recall
embeds at most `new_per_recall` words it has not seen (the rest wait for a
later recall), so a cold process pays a bounded cost; a failing or missing
embedder leaves the component at 0 and recall answers as without it."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable

import numpy as np
from prometheus_client import Counter

from services.core.ports.models import Embedder

log = logging.getLogger(__name__)

WORDS_EMBEDDED = Counter("memgrid_recall_words_embedded_total", "Single words embedded for the related-words component")


class WordVectors:
    """Unit vectors of words, cached."""

    def __init__(self, embedder: Embedder | None, *, max_words: int, new_per_recall: int):
        self._embedder = embedder
        self._max_words = max_words
        self._new_per_recall = new_per_recall
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

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
        missing = [w for w in wanted if w not in self._vectors][: self._new_per_recall]
        if missing:
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
        found: dict[str, np.ndarray] = {}
        for word in wanted:
            known = self._vectors.get(word)
            if known is not None:
                self._vectors.move_to_end(word)
                found[word] = known
        while len(self._vectors) > self._max_words:
            self._vectors.popitem(last=False)
        return found
