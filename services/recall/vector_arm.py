"""Ranked recall's vector arm: the queries embedded (cached), and the
vector index searched within the recall's scope.

Each query is searched with the mean of two vectors, weighted by
RECALL_NAMELESS_QUERY_SHARE: the query as asked and the query without its
names (services/core/domain/query_names.py), both embedded in one call and
cached. With unit vectors the cosine of a memory with that mean is the same
mean of its two cosines, so one index search scores both; the index
normalises what it is given, and the hits' scores are scaled back by the
mean's length."""

from __future__ import annotations

import math
from array import array
from collections import OrderedDict
from dataclasses import dataclass, replace

import structlog

from services.core.domain.projection import VectorHit, VectorQuery
from services.core.domain.query_focus import focus_text
from services.core.domain.recall_request import RecallRequest, Scope, check_dimension
from services.core.ports.models import Embedder
from services.core.ports.vector import VectorSearch

log = structlog.get_logger()


class QueryEmbeddings:
    """Query vectors by text, with a small LRU cache (agents repeat queries).

    The cache keeps each vector as packed float32 (the index's precision),
    not as a list of Python floats: a 384-dimensional list takes about
    12 KiB (a float object a value), the packed array 1.5 KiB, so a full
    cache of RECALL_QUERY_CACHE_SIZE queries is about 2 MiB, not 13 (the
    soak's steady RSS climb while the cache filled). Every vector, the
    first time too, is returned from the cache, so a query's vector does not
    depend on whether it was cached."""

    def __init__(self, embedder: Embedder | None, size: int):
        self._embedder = embedder
        self._size = size
        self._cache: OrderedDict[str, array] = OrderedDict()

    @property
    def available(self) -> bool:
        return self._embedder is not None

    def __len__(self) -> int:
        return len(self._cache)

    async def vectors(self, texts: tuple[str, ...]) -> list[list[float]]:
        """One vector per text, in order: the cached ones, and the others embedded in one call."""
        found: dict[str, array] = {text: self._cache[text] for text in texts if text in self._cache}
        missing = [text for text in dict.fromkeys(texts) if text not in found]
        if missing:
            assert self._embedder is not None  # noqa: S101  narrows the type: a vector arm with queries has an embedder
            for text, vector in zip(missing, await self._embedder.embed(missing), strict=True):
                found[text] = array("f", vector)
        # Set again after the await: a concurrent recall may have evicted one meanwhile.
        for text, stored in found.items():
            self._cache[text] = stored
            self._cache.move_to_end(text)
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return [found[text].tolist() for text in texts]


@dataclass(frozen=True)
class QueryVector:
    """One query's search vector, and what the index's cosine is multiplied
    by (a mean of unit vectors is shorter than one: its length)."""

    values: list[float]
    scale: float = 1.0


def mixed(asked: list[float], nameless: list[float], share: float) -> QueryVector:
    """The mean (1 - share) x asked + share x nameless, as a unit vector and its length."""
    mean = [(1.0 - share) * a + share * b for a, b in zip(asked, nameless, strict=True)]
    length = math.sqrt(sum(v * v for v in mean))
    if length == 0.0:
        return QueryVector(asked)
    return QueryVector([v / length for v in mean], length)


def vector_query(vector: list[float], scope: Scope, limit: int) -> VectorQuery:
    """The index search of one query vector within a recall's scope."""
    return VectorQuery(
        vector=vector,
        tenant=scope.tenant,
        limit=limit,
        current_at=scope.current_at,
        tags=scope.tags,
        tag_mode=scope.tag_mode,
        tag_match=scope.tag_match,
        exclude_tags=scope.exclude_tags,
        recorded_before=scope.as_of,
        window_start=scope.window.start,
        window_end=scope.window.end,
    )


class VectorArm:
    """The query vectors of a recall and their nearest points in the index."""

    def __init__(self, *, vectors: VectorSearch, embedder: Embedder | None = None, query_cache_size: int = 1024):
        self._vectors = vectors
        self._queries = QueryEmbeddings(embedder, query_cache_size)

    @property
    def cached_queries(self) -> int:
        """Query texts whose embeddings are cached."""
        return len(self._queries)

    @property
    def enabled(self) -> bool:
        """Whether queries can be embedded (a caller's embedding always can be searched)."""
        return self._queries.available

    def check(self, embedding: list[float]) -> None:
        """A caller's embedding has the index's dimension (INVALID_ARGUMENT otherwise)."""
        check_dimension(embedding, self._vectors.dimension)

    async def query_vectors(
        self, request: RecallRequest, debug: dict, nameless_share: float = 0.0
    ) -> list[QueryVector]:
        """The request's embedding as given, or each query's search vector
        (as asked and, with a nameless_share, mixed with its focus text:
        without its names and framing words, domain/query_focus.py; embedded
        and cached); none when the embedder is missing or failing (the other arms
        still answer)."""
        if request.embedding is not None:
            return [QueryVector(request.embedding)]
        if not request.queries:
            return []
        if not self._queries.available:
            debug.setdefault("degraded", []).append("vector: no embedder configured")
            return []
        share = nameless_share
        nameless = tuple(focus_text(q) if share > 0 else q for q in request.queries)
        found = await self._embedded(tuple(dict.fromkeys((*request.queries, *nameless))), debug, "the vector arm")
        if found is None:
            return []
        by_text = dict(zip(dict.fromkeys((*request.queries, *nameless)), found, strict=True))
        return [
            QueryVector(by_text[asked]) if other == asked else mixed(by_text[asked], by_text[other], share)
            for asked, other in zip(request.queries, nameless, strict=True)
        ]

    async def text_vectors(self, texts: tuple[str, ...], debug: dict) -> list[QueryVector]:
        """Plain search vectors of these texts (auto_decompose's queries);
        none without an embedder or when embedding fails."""
        if not texts or not self._queries.available:
            return []
        found = await self._embedded(texts, debug, "the widening queries")
        return [QueryVector(v) for v in found or ()]

    async def _embedded(self, texts: tuple[str, ...], debug: dict, without: str) -> list[list[float]] | None:
        """The texts' embeddings (cached); None when embedding fails, which
        debug's `degraded` reports (the recall goes on `without` them)."""
        try:
            return await self._queries.vectors(texts)
        except Exception as exc:
            log.warning(f"query embedding failed; recalling without {without}", error=str(exc))
            debug.setdefault("degraded", []).append(f"vector: {exc}")
            return None

    async def score_ids(self, vectors: list[QueryVector], scope: Scope, ids: list[str]) -> list[list[VectorHit]]:
        """Each vector's scores of these memories only (within the scope,
        with a positive score): what the vector arm would give them had its
        search reached that deep."""
        if not vectors or not ids:
            return [[] for _ in vectors]
        asked = [replace(vector_query(v.values, scope, len(ids)), only_ids=tuple(ids)) for v in vectors]
        hits = await self._vectors.search_many(asked)
        return [_best(v, found, len(ids)) for v, found in zip(vectors, hits, strict=True)]

    async def search(self, vectors: list[QueryVector], scope: Scope, fetch: int) -> list[list[VectorHit]]:
        """Each vector's best `fetch` hits within the scope with a positive
        score, best first; equal scores in id order. The index is asked for
        TIE_MARGIN more, so which of equally scored memories make the cut
        is decided here, the same way every time, and not by the
        index's internal order (which a rebuild or a re-upsert changes): the
        neighbourhood component reads the candidates' order in time, so one
        candidate more or less at the cut could move the top results."""
        if not vectors:
            return []
        hits = await self._vectors.search_many([vector_query(v.values, scope, fetch + TIE_MARGIN) for v in vectors])
        return [_best(v, found, fetch) for v, found in zip(vectors, hits, strict=True)]


#: How many hits more than asked for the vector index is asked for
#: (VectorArm.search): enough for the memories tied at the cut (copies of one
#: text score alike). Not a multiple: the index's search beam is at least the
#: hits asked for, and at 100k memories a search for 200 took 10.5 ms at the
#: median, for 116 6.4 ms (docs/performance.md).
TIE_MARGIN = 16


def _best(vector: QueryVector, found: list[VectorHit], fetch: int) -> list[VectorHit]:
    """The best `fetch` of the hits with a positive score, their scores
    scaled, by scaled score then id; a hit is rebuilt only for the ones kept
    (dataclasses.replace of every hit was a tenth of a millisecond a search)."""
    scale = vector.scale
    if scale == 1.0:
        return sorted((h for h in found if h.score > 0), key=lambda h: (-h.score, h.id))[:fetch]
    scaled = sorted(((h.score * scale, h) for h in found if h.score > 0), key=lambda p: (-p[0], p[1].id))
    return [replace(h, score=score) for score, h in scaled[:fetch]]
