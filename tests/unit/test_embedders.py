"""The placeholder embedder and the choice of embedder from settings: no
network, no model (the local model is built lazily and never run here)."""

from __future__ import annotations

import math

import pytest

from services.core.adapters.embedders import (
    LocalMiniLMEmbedder,
    OpenAIEmbedder,
    PlaceholderEmbedder,
    embedder_from,
)
from services.core.ports.models import Embedder
from services.core.settings import Settings


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def norm(vector: list[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


async def test_placeholder_is_deterministic_across_instances_and_calls():
    texts = ["Chose PostgreSQL over MongoDB", "café ☕ déjà vu", ""]
    first = await PlaceholderEmbedder(64).embed(texts)
    again = await PlaceholderEmbedder(64).embed(texts)
    assert first == again
    assert await PlaceholderEmbedder(64).embed([texts[1]]) == [first[1]]


@pytest.mark.parametrize("dimension", [1, 8, 384, 1536])
async def test_placeholder_vectors_have_the_dimension_and_unit_length(dimension):
    vectors = await PlaceholderEmbedder(dimension).embed(["one two three", "", "!!!", "x " * 500])
    assert len(vectors) == 4
    for vector in vectors:
        assert len(vector) == dimension
        assert all(isinstance(value, float) for value in vector)
        assert norm(vector) == pytest.approx(1.0)


async def test_placeholder_texts_sharing_words_are_closer_than_unrelated_ones():
    base, similar, unrelated = await PlaceholderEmbedder(384).embed(
        [
            "We chose PostgreSQL for ACID transactions",
            "PostgreSQL gives us ACID transactions",
            "Quarterly revenue grew by ten percent",
        ]
    )
    assert cosine(base, similar) > cosine(base, unrelated)
    assert cosine(base, similar) > 0.5


async def test_placeholder_ignores_case_and_punctuation():
    a, b = await PlaceholderEmbedder(32).embed(["Hello, World!", "hello world"])
    assert a == b


async def test_placeholder_empty_text_is_one_fixed_unit_vector():
    embedder = PlaceholderEmbedder(16)
    empty, blank, symbols = await embedder.embed(["", "   ", "?!"])
    assert empty == blank == symbols
    assert norm(empty) == pytest.approx(1.0)
    # The caller may mutate what it got without changing the next answer.
    empty[0] = 99.0
    assert (await embedder.embed([""]))[0] == blank


async def test_placeholder_embeds_an_empty_list_to_an_empty_list():
    assert await PlaceholderEmbedder(8).embed([]) == []


def test_placeholder_rejects_a_dimension_below_one():
    with pytest.raises(ValueError, match="dimension"):
        PlaceholderEmbedder(0)


def embedder_of(**values) -> Embedder:
    """The embedder of settings with these values (no .env)."""
    settings = Settings(_env_file=None, **values)
    return embedder_from(settings.models, settings.vectors.vector_size)


async def test_auto_without_an_api_key_is_the_local_model():
    embedder = embedder_of(embedding_provider="auto", openai_api_key=None, embedding_batch_size=7)
    assert isinstance(embedder, LocalMiniLMEmbedder)
    assert embedder.dimension == 384
    assert embedder.name == "local:all-MiniLM-L6-v2"


async def test_auto_with_an_api_key_is_openai_with_the_configured_dimension():
    embedder = embedder_of(openai_api_key="sk-test", embedding_model="text-embedding-3-large", vector_size=1024)
    try:
        assert isinstance(embedder, OpenAIEmbedder)
        assert embedder.dimension == 1024
        assert embedder.name == "openai:text-embedding-3-large"
    finally:
        await embedder.close()


async def test_the_provider_name_is_case_insensitive():
    assert isinstance(embedder_of(embedding_provider=" Local "), LocalMiniLMEmbedder)


async def test_local_is_chosen_explicitly_even_with_an_api_key():
    assert isinstance(embedder_of(embedding_provider="local", openai_api_key="sk-test"), LocalMiniLMEmbedder)


async def test_placeholder_uses_the_vector_size():
    embedder = embedder_of(embedding_provider="placeholder", vector_size=96)
    assert isinstance(embedder, PlaceholderEmbedder)
    assert embedder.dimension == 96
    assert embedder.name == "placeholder"
    assert len((await embedder.embed(["x"]))[0]) == 96


async def test_openai_needs_an_api_key():
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        embedder_of(embedding_provider="openai", openai_api_key=None)


@pytest.mark.parametrize("provider", ["local", "auto"])
def test_local_refuses_a_vector_size_other_than_384(provider):
    with pytest.raises(ValueError, match=r"VECTOR_SIZE=1536.*384") as raised:
        embedder_of(embedding_provider=provider, vector_size=1536)
    assert "never truncated or padded" in str(raised.value)


@pytest.mark.parametrize("provider", ["sentence-transformers", "", "ollama"])
def test_an_unknown_provider_is_refused_naming_the_setting(provider):
    with pytest.raises(ValueError, match="EMBEDDING_PROVIDER") as raised:
        embedder_of(embedding_provider=provider)
    assert "auto, local, openai, placeholder" in str(raised.value)


@pytest.mark.parametrize("batch_size", [0, -1])
def test_batch_size_below_one_is_refused(batch_size):
    with pytest.raises(ValueError, match="batch_size"):
        LocalMiniLMEmbedder(batch_size=batch_size)
    with pytest.raises(ValueError, match="batch_size"):
        OpenAIEmbedder("sk-test", None, "m", dimension=8, batch_size=batch_size, timeout_seconds=1.0)
