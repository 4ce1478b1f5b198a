"""The vector arm searches a query as asked and without its names
(services/recall/vector_arm.py, services/core/domain/query_names.py; its
framing words go too, domain/query_focus.py): with
the real local model and the real in-process index, a memory about what the
question asks outranks one that only names its person, and the hits' scores
are the mean of the two cosines. And equal scores make the arm's cut in id
order, whatever order the index returns them in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.core.adapters.edge_index import EdgeVectorIndex
from services.core.adapters.embedders import LocalMiniLMEmbedder
from services.core.domain.projection import VectorHit, vector_payload
from services.core.domain.query_focus import focus_text
from services.core.domain.recall_request import build_request
from services.core.domain.timewindow import Window
from services.recall.vector_arm import TIE_MARGIN, QueryVector, VectorArm
from tests.factories import memory_at
from tests.unit.test_recall_domain import policy

pytestmark = pytest.mark.integration

QUERY = "What did Melanie paint recently?"
GREETING = "Hi Melanie, what have you been up to recently?"  # names her, says nothing of painting
ANSWER = "My kids and I just finished another canvas like our last one."  # the answer, her name nowhere


@pytest.fixture(scope="module")
def model() -> LocalMiniLMEmbedder:
    return LocalMiniLMEmbedder(batch_size=8)


async def _ranked(model, tmp_path, share: float) -> tuple[list[str], dict[str, float]]:
    index = EdgeVectorIndex(path=tmp_path / f"vectors-{share}", collection="memories", vector_size=384)
    index.open()
    try:
        at = datetime.now(UTC) - timedelta(days=1)
        memories = []
        for memory_id, content in (("greeting", GREETING), ("answer", ANSWER)):
            memories.append(memory_at(memory_id, at, content=content))
        vectors = await model.embed([m.content for m in memories])
        await index.upsert([(m.id, v, vector_payload(m)) for m, v in zip(memories, vectors, strict=True)])
        arm = VectorArm(vectors=index, embedder=model)
        now = datetime.now(UTC)
        request = build_request(
            policy(), tenant="default", now=now, history=False, as_of=None, window=Window(), query=QUERY
        )
        found = await arm.search(await arm.query_vectors(request, {}, share), request.scope, 10)
        return [h.id for h in found[0]], {h.id: h.score for h in found[0]}
    finally:
        await index.close()


async def test_the_answer_outranks_a_memory_that_only_names_the_person(model, tmp_path):
    asked, _ = await _ranked(model, tmp_path, 0.0)
    assert asked == ["greeting", "answer"]  # the name pulls the query as asked to the greeting
    mixed, scores = await _ranked(model, tmp_path, 0.5)
    assert mixed == ["answer", "greeting"]
    # Each score is the mean of the memory's cosines with the two queries.
    query, nameless, greeting, answer = np.array(await model.embed([QUERY, focus_text(QUERY), GREETING, ANSWER]))
    assert scores["answer"] == pytest.approx((answer @ query + answer @ nameless) / 2, abs=1e-3)
    assert scores["greeting"] == pytest.approx((greeting @ query + greeting @ nameless) / 2, abs=1e-3)


class _TiedIndex:
    """An index whose equally scored hits come back in an order of its own
    (as a rebuilt or re-upserted one may): the arm, not the index, decides the cut."""

    dimension = 2

    def __init__(self):
        self.asked: list[int] = []

    async def search_many(self, queries):
        self.asked += [q.limit for q in queries]
        tied = [VectorHit(f"m{i}", 0.5) for i in (5, 2, 4, 0, 3, 1)]
        return [[VectorHit("best", 0.9), *tied][: q.limit] for q in queries]


async def test_equal_scores_make_the_cut_in_id_order_whatever_the_index_returns():
    index = _TiedIndex()
    arm = VectorArm(vectors=index)
    request = build_request(
        policy(), tenant="default", now=datetime.now(UTC), history=False, as_of=None, window=Window(), query="q"
    )
    [found] = await arm.search([QueryVector([1.0, 0.0])], request.scope, 4)
    assert [h.id for h in found] == ["best", "m0", "m1", "m2"]
    assert index.asked == [4 + TIE_MARGIN]  # asked for more than the cut, so the tied ones are all seen
