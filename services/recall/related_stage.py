"""Ranked recall's related-words stage (docs/recall.md, "Related words"):
the question's words' vectors asked for beside the arms, then each
hydrated candidate's related component, over the process's word cache."""

from __future__ import annotations

import asyncio

import numpy as np

from services.core.domain import related_words
from services.core.domain.recall_ranking import Candidate
from services.core.domain.recall_request import RecallPolicy, RecallRequest
from services.recall.word_vectors import WordVectors


class RelatedStage:
    """The related-words component of a recall's candidates (0 without a
    query, a weight, or word vectors)."""

    def __init__(self, words: WordVectors | None, policy: RecallPolicy):
        self._words = words
        self._policy = policy

    def _on(self, request: RecallRequest, weights: dict[str, float]) -> bool:
        words = self._words
        return weights.get("related", 0.0) > 0 and request.has_query and words is not None and words.enabled

    def question_vectors(
        self, request: RecallRequest, weights: dict[str, float]
    ) -> asyncio.Future[dict[str, np.ndarray]] | None:
        """The question's words' vectors, embedded beside the arms (None when
        the component is off)."""
        asked = related_words.question_words(request.queries) if self._on(request, weights) else []
        if not asked or self._words is None:
            return None
        return asyncio.ensure_future(self._words.lookup(asked))

    async def score(
        self,
        request: RecallRequest,
        candidates: list[Candidate],
        weights: dict[str, float],
        question: asyncio.Future[dict[str, np.ndarray]] | None = None,
    ) -> None:
        """Set each hydrated candidate's related component. `question`: the
        question's words' vectors, asked for earlier (question_vectors)."""
        if not self._on(request, weights) or self._words is None:
            return
        asked = related_words.question_words(request.queries)
        texts = {c.id: c.memory.content for c in candidates if c.memory is not None}
        if not asked or not texts:
            return
        vocabulary = related_words.vocabulary(texts.values(), asked)
        # The question's words are waited for; the shortlist's unseen words are learnt in the background.
        asked_vectors = await question if question is not None else await self._words.lookup(asked)
        vectors = {**asked_vectors, **self._words.known(vocabulary)}
        policy = self._policy
        terms = related_words.related_terms(
            asked, vocabulary, vectors, threshold=policy.related_threshold, per_word=policy.related_per_word
        )
        scores = related_words.related_scores(terms, texts, k1=policy.bm25_k1, b=policy.bm25_b)
        for candidate in candidates:
            candidate.related = scores.get(candidate.id, 0.0)
