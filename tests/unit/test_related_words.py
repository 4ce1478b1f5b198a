"""The related-words component of ranked recall: the pure rules
(services/core/domain/related_words.py), recall's word-vector cache
(services/recall/word_vectors.py), and the component in a recall's ranking,
with a fallback when the embedder fails."""

from __future__ import annotations

import numpy as np
import pytest

from services.core.domain.recall_ranking import score
from services.core.domain.related_words import question_words, related_scores, related_terms, vocabulary
from services.recall.related_stage import RelatedStage
from services.recall.word_vectors import LEARN_CHUNK, WordVectors
from tests.unit.test_recall_domain import cand, mem, policy, req

#: Hand-made word vectors: "family" is near "kids" and "husband"; every other
#: word has an axis of its own (given on first use), so it is near no other.
AXES = {"family": 0, "kids": 0, "husband": 0, "fam": 0, "pottery": 1, "class": 2, "activities": 3, "museum": 4}
NEAR = {"kids": 0.9, "husband": 0.7, "fam": 0.6}
DIMENSION = 256
SHARED = 6  # the axis the NEAR words lean off their own


def vector_of(word: str) -> np.ndarray:
    v = np.zeros(DIMENSION, dtype=np.float32)
    axis = AXES.get(word)
    if axis is None:
        axis = AXES[word] = len(AXES) + SHARED
        v[axis] = 1.0
    elif word in NEAR:
        v[axis] = NEAR[word]
        v[SHARED] = float(np.sqrt(1 - NEAR[word] ** 2))
    else:
        v[axis] = 1.0
    return v


class TableEmbedder:
    """Embeds single words by the table above; counts the words asked; can fail."""

    dimension = DIMENSION
    name = "test:table"

    def __init__(self, fail: bool = False):
        self.fail = fail
        self.asked: list[str] = []
        self.calls: list[int] = []  # the size of each call

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if self.fail:
            raise RuntimeError("the embedder is down")
        self.asked.extend(texts)
        self.calls.append(len(texts))
        return [vector_of(t).tolist() for t in texts]


VECTORS = {w: vector_of(w) for w in [*AXES, "swimming", "went"]}


def test_question_words_leave_out_names_and_stopwords():
    assert question_words(["What activities has Melanie done with her family?"]) == ["activities", "done", "family"]


def test_vocabulary_is_the_texts_distinct_words_less_the_question_words():
    assert vocabulary(["I took the kids swimming", "the kids and the family"], ["family"]) == [
        "took", "kids", "swimming",
    ]  # fmt: skip


def test_related_terms_are_the_nearest_within_the_threshold():
    found = related_terms(["family"], ["kids", "husband", "fam", "pottery"], VECTORS, threshold=0.65, per_word=8)
    assert found == pytest.approx({"kids": 0.9, "husband": 0.7})
    assert related_terms(["family"], ["kids", "husband", "fam"], VECTORS, threshold=0.5, per_word=1) == (
        pytest.approx({"kids": 0.9})
    )
    assert related_terms(["unknown"], ["kids"], {"kids": VECTORS["kids"]}, threshold=0.1, per_word=8) == {}


def test_related_scores_weigh_each_word_by_its_cosine_and_scale_to_the_best():
    texts = {"a": "I took the kids swimming", "b": "my husband cooked", "c": "pottery class"}
    scores = related_scores({"kids": 0.9, "husband": 0.7}, texts, k1=0.9, b=0.4)
    assert scores["a"] == 1.0
    assert 0 < scores["b"] < 1.0
    assert scores["c"] == 0.0
    assert related_scores({}, texts, k1=0.9, b=0.4) == {"a": 0.0, "b": 0.0, "c": 0.0}


async def test_word_vectors_cache_bound_and_new_words_per_recall():
    embedder = TableEmbedder()
    words = WordVectors(embedder, max_words=3, new_per_recall=2)
    first = await words.lookup(["kids", "family", "pottery"])
    assert set(first) == {"kids", "family"}  # at most two new words a recall
    assert np.linalg.norm(first["kids"]) == pytest.approx(1.0)
    second = await words.lookup(["kids", "family", "pottery"])
    assert set(second) == {"kids", "family", "pottery"}
    assert embedder.asked == ["kids", "family", "pottery"]  # the cached ones are not embedded again
    await words.lookup(["museum"])
    assert len(words) == 3  # the least recently used word went


async def test_the_shortlists_words_are_learnt_in_the_background():
    embedder = TableEmbedder()
    words = WordVectors(embedder, max_words=10, new_per_recall=2)
    assert words.known(["kids", "family", "pottery"]) == {}  # nothing waited for
    assert words.known(["museum"]) == {}  # two words wait already: not queued
    await words.settled()
    assert set(words.known(["kids", "family", "pottery"])) == {"kids", "family"}
    await words.settled()
    assert set(words.known(["kids", "family", "pottery"])) == {"kids", "family", "pottery"}
    assert embedder.asked == ["kids", "family", "pottery"]


async def test_background_learning_embeds_a_chunk_at_a_time():
    embedder = TableEmbedder()
    words = WordVectors(embedder, max_words=1000, new_per_recall=500)
    many = [f"w{i}" for i in range(LEARN_CHUNK * 2 + 5)]
    words.known(many)
    await words.settled()
    assert set(words.known(many)) == set(many)
    assert embedder.calls == [LEARN_CHUNK, LEARN_CHUNK, 5]


async def test_a_failing_embedder_leaves_no_vectors():
    words = WordVectors(TableEmbedder(fail=True), max_words=10, new_per_recall=10)
    assert await words.lookup(["kids"]) == {}
    assert words.known(["kids"]) == {}
    await words.settled()  # the background batch failed, quietly
    assert words.known(["kids"]) == {}
    assert not WordVectors(None, max_words=10, new_per_recall=10).enabled


def stage(embedder) -> RelatedStage:
    """Ranked recall's related-words stage over its own word vectors."""
    return RelatedStage(
        WordVectors(embedder, max_words=100, new_per_recall=100), policy(related_threshold=0.5, related_per_word=8)
    )


async def test_the_component_ranks_a_memory_by_the_words_it_does_use():
    request = req(query="What activities has Melanie done with her family?")
    swim = cand(mem("swim", "Melanie: I'm off to go swimming with the kids"))
    pottery = cand(mem("pottery", "Melanie: I signed up for a pottery class"))
    weights = {"related": 1.0}
    words = WordVectors(TableEmbedder(), max_words=100, new_per_recall=100)
    related = RelatedStage(words, policy(related_threshold=0.5, related_per_word=8))
    await related.score(request, [swim, pottery], weights)
    assert swim.related == 0.0  # a cold cache: the shortlist's words are being learnt, not waited for
    await words.settled()
    await related.score(request, [swim, pottery], weights)
    for c in (swim, pottery):
        score(c, request, policy(), weights)
    assert swim.components["related"] == 1.0
    assert pottery.components["related"] == 0.0
    assert swim.final > pottery.final


async def test_without_a_weight_or_with_a_failing_embedder_the_component_stays_0():
    request = req(query="What activities has Melanie done with her family?")
    swim = cand(mem("swim", "Melanie: I'm off to go swimming with the kids"))
    await stage(TableEmbedder()).score(request, [swim], {"related": 0.0})
    assert swim.related == 0.0
    await stage(TableEmbedder(fail=True)).score(request, [swim], {"related": 1.0})
    assert swim.related == 0.0


def test_words_are_embedded_here_even_when_the_query_embedder_is_remote():
    from services.core.adapters.embedders import LocalMiniLMEmbedder, OpenAIEmbedder, PlaceholderEmbedder
    from services.core.settings.models import ModelSettings
    from services.core.wiring import word_embedder

    models = ModelSettings(embedding_provider="openai", openai_api_key="k", embedding_local_quantized=True)
    local, placeholder = LocalMiniLMEmbedder(), PlaceholderEmbedder(384)
    assert word_embedder(local, models) is local
    assert word_embedder(placeholder, models) is placeholder
    remote = OpenAIEmbedder(
        api_key="k", base_url="http://127.0.0.1:9", model="m", dimension=384, batch_size=8, timeout_seconds=1
    )
    words = word_embedder(remote, models)
    assert isinstance(words, LocalMiniLMEmbedder)
    assert words.name.endswith(":dynamic-int8")  # built as the EMBEDDING_* settings say
