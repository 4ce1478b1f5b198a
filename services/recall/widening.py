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

from services.core.domain import recall_ranking as ranking
from services.core.domain.recall_ranking import Candidate
from services.core.domain.recall_request import RecallRequest
from services.recall.text_arms import TEXT_ARMS, TextArms
from services.recall.vector_arm import QueryVector, VectorArm


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
        """Add to `pool` what the sub-queries find that it lacks, scored by
        the question's `vectors` (none without them); debug["widened"] counts
        the sub-queries, what they found and what joined."""
        scope = request.scope
        scratch: dict = {"timings_ms": {}}
        sub_vectors = await self._vector.text_vectors(request.widening, debug)
        by_vector, by_text = await asyncio.gather(
            self._vector.search(sub_vectors, scope, fetch),
            self._text.search(scope, request.widening, fetch, max_df, scratch, dict.fromkeys(TEXT_ARMS, 0)),
        )
        found = {h.id for hits in by_vector for h in hits} | {m.id for _, _, hits in by_text for m in hits}
        new = sorted(found - pool.keys())
        added: set[str] = set()
        for index, hits in enumerate(await self._vector.score_ids(vectors, scope, new)):
            ranking.merge(pool, "vector", ((h.id, h.score) for h in hits), query=index)
            added.update(h.id for h in hits)
        debug["widened"] = {"queries": len(request.widening), "found": len(found), "added": len(added)}
