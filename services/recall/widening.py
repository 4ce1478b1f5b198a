"""auto_decompose's queries widen a recall's candidates; the question alone ranks them.

A question's sub-queries (its names alone, each with a topic:
domain/decompose.py) find memories the question's own arms may not reach
("How many children does Melanie have?" against "my son got into an
accident"). Scored on their own they rank a name-only match as high as the
question's evidence, so here they only find: what they find and the
question's arms did not joins the pool with the question's own vector
score, read from the index for those memories alone. The question's text
arms already scored every memory that holds its words.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection

import structlog

from services.core.domain import recall_ranking as ranking
from services.core.domain.recall_ranking import Candidate
from services.core.domain.recall_request import RecallRequest
from services.recall.text_arms import TEXT_ARMS, TextArms
from services.recall.vector_arm import QueryVector, VectorArm

log = structlog.get_logger()


class Widening:
    """The pool of a recall with auto_decompose, widened by its sub-queries."""

    def __init__(self, *, vector: VectorArm, text: TextArms):
        self._vector = vector
        self._text = text

    async def widen(
        self,
        request: RecallRequest,
        pool: dict[str, Candidate],
        vectors: list[QueryVector],
        fetch: int,
        max_df: int,
        debug: dict,
    ) -> None:
        """Add to `pool` what the sub-queries find that it lacks (at most
        `fetch`, the nearest first), scored by the question's `vectors` (none
        without them); debug["widened"] counts the sub-queries, what they
        found and what joined. A failure leaves the pool as it was."""
        scope = request.scope
        scratch: dict = {"timings_ms": {}}
        try:
            sub_vectors = await self._vector.text_vectors(request.widening, debug)
            by_vector, by_text = await asyncio.gather(
                self._vector.search(sub_vectors, scope, fetch),
                self._text.search(scope, request.widening, fetch, max_df, scratch, dict.fromkeys(TEXT_ARMS, 0)),
            )
            lists = [[h.id for h in hits] for hits in by_vector] + [[m.id for m in hits] for _, _, hits in by_text]
            new = nearest_first(lists, exclude=pool.keys(), most=fetch)
            scored = await self._vector.score_ids(vectors, scope, new)
        except Exception as exc:  # the question's own candidates still answer
            log.warning("auto_decompose's widening failed; recalling without it", error=str(exc))
            debug.setdefault("degraded", []).append(f"widening: {exc}")
            return
        added: set[str] = set()
        for index, hits in enumerate(scored):
            ranking.merge(pool, "vector", ((h.id, h.score) for h in hits), query=index)
            added.update(h.id for h in hits)
        found = {i for ids in lists for i in ids}
        debug["widened"] = {"queries": len(request.widening), "found": len(found), "added": len(added)}


def nearest_first(lists: list[list[str]], *, exclude: Collection[str], most: int) -> list[str]:
    """The ids of these ranked lists that `exclude` lacks, by their best place
    in any list (then id), at most `most`: one arm's depth, whatever the
    number of sub-queries."""
    best: dict[str, int] = {}
    for ids in lists:
        for place, memory_id in enumerate(ids):
            if memory_id not in exclude and place < best.get(memory_id, place + 1):
                best[memory_id] = place
    return sorted(best, key=lambda i: (best[i], i))[:most]
