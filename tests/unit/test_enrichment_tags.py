"""Enrichment's entity tags stop at the write limit on tags, so a memory it
enriched can be sent back whole in a PATCH."""

from __future__ import annotations

from datetime import UTC, datetime

from services.core.domain.enrichment import Enrichment, enrich
from services.core.domain.entities import empty_entities
from services.core.domain.factuality import Factuality
from tests.factories import memory_at

NOW = datetime(2026, 4, 1, tzinfo=UTC)


def _enrichment(tools: list[str]) -> Enrichment:
    entities = empty_entities()
    entities["tools"] = tools
    return Enrichment(
        content="x", embedding=None, embedding_model=None, entities=entities,
        factuality=Factuality("UNVERIFIED", 0.5, "no evidence"),
    )  # fmt: skip


def test_entity_tags_are_added_up_to_the_limit_after_the_clients_own():
    memory = memory_at("m", NOW, tags=["a", "b", "c"])
    enriched = enrich(memory, _enrichment(["pytest", "docker", "redis"]), forced=False, now=NOW, max_tags=5)
    assert enriched.tags[:3] == ["a", "b", "c"]
    assert len(enriched.tags) == 5
    assert all(t.startswith("entity:tools:") for t in enriched.tags[3:])
    assert set(enriched.tag_prefixes) >= {"a", "entity", "entity:tools"}


def test_without_a_limit_every_entity_tag_is_added_and_a_full_memory_keeps_its_own():
    memory = memory_at("m", NOW, tags=["a", "b"])
    assert len(enrich(memory, _enrichment(["pytest", "docker"]), forced=False, now=NOW).tags) == 4
    full = memory_at("m", NOW, tags=["a", "b", "c"])
    assert enrich(full, _enrichment(["pytest"]), forced=False, now=NOW, max_tags=2).tags == ["a", "b", "c"]


def test_a_re_enrichment_replaces_the_entity_tags_of_the_old_text():
    memory = memory_at("m", NOW, tags=["mine"])
    first = enrich(memory, _enrichment(["docker"]), forced=False, now=NOW)
    assert first.tags == ["mine", "entity:tools:docker"]
    again = enrich(first, _enrichment(["redis"]), forced=False, now=NOW)
    assert again.tags == ["mine", "entity:tools:redis"]
    assert "entity:tools:docker" not in again.tag_prefixes
