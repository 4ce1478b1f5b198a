"""What enrichment embeds, for both of its embedders (the embedding stage
and a forced enrichment run): each memory's content and, with a context
window, the content of the memories just before and (optionally) just after
it (domain/embedding_text.py), read in one query per direction for the batch."""

from __future__ import annotations

from dataclasses import dataclass

from services.core.domain.embedding_text import Neighbours, contextual_text, preceding_query
from services.core.domain.model import Memory
from services.core.domain.times import to_micros
from services.core.ports.enrichment import PrecedingContents


@dataclass(frozen=True, slots=True)
class EmbeddingContext:
    """EMBEDDING_CONTEXT_SECONDS, EMBEDDING_CONTEXT_CHARS and
    EMBEDDING_CONTEXT_FOLLOWING: 0 seconds embeds the content alone."""

    seconds: float = 0.0
    chars: int = 0
    following: bool = False

    async def neighbours(
        self, store: PrecedingContents, memories: list[Memory], *, after: bool = False
    ) -> dict[str, Neighbours]:
        """The neighbours each memory's text reads (all of one tenant), and
        with `after` the memory just after each even when texts do not read
        it (its own text reads this one: the embedding stage refreshes it)."""
        if not memories or self.seconds <= 0:
            return {}
        queries = [preceding_query(m, to_micros(m.timestamp), to_micros(m.recorded_at)) for m in memories]
        window_us = int(self.seconds * 1_000_000)
        return await store.neighbours(memories[0].tenant, queries, window_us, following=after or self.following)

    def text(self, memory: Memory, neighbours: Neighbours | None) -> str:
        """The text to embed for a memory with these neighbours."""
        if neighbours is None:
            return memory.content
        before, after = neighbours.before, neighbours.after
        following = after.content if after is not None and self.following else None
        return contextual_text(memory.content, before.content if before is not None else None, self.chars, following)

    async def texts(self, store: PrecedingContents, memories: list[Memory]) -> list[str]:
        """The text to embed for each memory (all of one tenant), in order."""
        found = await self.neighbours(store, memories)
        return [self.text(m, found.get(m.id)) for m in memories]
