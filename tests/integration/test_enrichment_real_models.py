"""The pipeline with the real models the embedded stack runs: the local
all-MiniLM-L6-v2 (ONNX) and spaCy's en_core_web_sm (a few memories only)."""

from __future__ import annotations

import pytest

from services.core.adapters.embedders import LocalMiniLMEmbedder
from tests.integration.enrich_stack import EnrichStack
from tests.integration.test_enrichment import enrich_settings

pytestmark = pytest.mark.integration


async def test_real_embeddings_and_entities(falkordb_server, nats_server, tmp_path):
    settings = enrich_settings(
        falkordb_server.port,
        nats_server.port,
        tmp_path / "data",
        embedding_provider="local",
        enrichment_spacy_blank=False,
        enrichment_similarity_threshold=0.5,
    )
    stack = EnrichStack(settings)
    try:
        await stack.start()
        first = await stack.create("Sarah Chen chose PostgreSQL over MongoDB for the billing project at Acme Corp.")
        await stack.wait_searchable(first, within=60)
        second = await stack.create("Sarah Chen picked Postgres instead of Mongo for billing at Acme.")
        memories = await stack.wait_enriched([first, second], within=60)
        one = memories[first]
        assert len(one.embedding) == 384 and one.metadata["enrichment"]["embedding_model"] == "local:all-MiniLM-L6-v2"
        entities = one.metadata["entities"]
        assert "Sarah Chen" in entities["people"]
        assert {"PostgreSQL", "MongoDB"} <= set(entities["tools"])
        assert "entity:people:sarah-chen" in one.tags
        [vector] = await LocalMiniLMEmbedder().embed([one.content])
        cosine = sum(a * b for a, b in zip(vector, one.embedding, strict=True))
        assert cosine > 0.999  # stored as float32, computed the same way
        assert (second, first) in set(await stack.edges("SIMILAR_TO"))
    finally:
        await stack.close()
