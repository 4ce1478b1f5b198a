"""The vector arm's second text is the question's focus (no names, no
framing words; services/core/domain/query_focus.py): with the real local
model and the real in-process index, a memory about what a hypothetical
question asks outranks one that is only phrased like a guess, which the
nameless question alone ranked first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.core.adapters.edge_index import EdgeVectorIndex
from services.core.adapters.embedders import LocalMiniLMEmbedder
from services.core.domain.projection import vector_payload
from services.core.domain.query_focus import focus_text
from services.core.domain.query_names import without_names
from services.core.domain.recall_request import build_request
from services.core.domain.timewindow import Window
from services.recall.vector_arm import VectorArm
from tests.factories import memory_at
from tests.unit.test_recall_domain import policy

pytestmark = pytest.mark.integration

QUERY = "Would Caroline likely pursue writing as a career option?"
GUESS = "Caroline: What do you think, would it be likely? Who knows, it could be."  # framing, no subject
ANSWER = "Caroline: Books guide me, and I have been writing short stories every night."


async def test_the_subject_outranks_a_memory_phrased_like_the_question(tmp_path):
    model = LocalMiniLMEmbedder(batch_size=8)
    index = EdgeVectorIndex(path=tmp_path / "vectors", collection="memories", vector_size=384)
    index.open()
    try:
        at = datetime.now(UTC) - timedelta(days=1)
        memories = [memory_at("guess", at, content=GUESS), memory_at("answer", at, content=ANSWER)]
        vectors = await model.embed([m.content for m in memories])
        await index.upsert([(m.id, v, vector_payload(m)) for m, v in zip(memories, vectors, strict=True)])
        arm = VectorArm(vectors=index, embedder=model)
        request = build_request(
            policy(), tenant="default", now=datetime.now(UTC), history=False, as_of=None, window=Window(), query=QUERY
        )
        found = await arm.search(await arm.query_vectors(request, {}, 0.5), request.scope, 10)
        assert [h.id for h in found[0]] == ["answer", "guess"]
        scores = {h.id: h.score for h in found[0]}
        query, focus, nameless, guess, answer = np.array(
            await model.embed([QUERY, focus_text(QUERY), without_names(QUERY), GUESS, ANSWER])
        )
        # Each score is the mean of the memory's cosines with the question and its focus ...
        assert scores["answer"] == pytest.approx((answer @ query + answer @ focus) / 2, abs=1e-3)
        # ... where the question with its names alone left out ranked the guess first.
        assert (guess @ query + guess @ nameless) > (answer @ query + answer @ nameless)
    finally:
        await index.close()
