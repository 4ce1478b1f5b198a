"""Adapters built from settings, shared by the services' composition roots."""

from __future__ import annotations

from services.core.adapters.edge_index import EdgeVectorIndex
from services.core.adapters.falkor import FalkorGraphStore
from services.core.adapters.nats_bus import NatsEventBus
from services.core.adapters.openai_llm import OpenAILanguageModel, language_model_from
from services.core.settings import Settings


def graph_store(settings: Settings) -> FalkorGraphStore:
    return FalkorGraphStore(
        host=settings.falkordb_host,
        port=settings.falkordb_port,
        password=settings.falkordb_password,
        graph=settings.falkordb_graph,
        wait_seconds=settings.dependency_wait_seconds,
        retry_initial_seconds=settings.retry_initial_seconds,
        retry_max_seconds=settings.retry_max_seconds,
    )


def event_bus(settings: Settings) -> NatsEventBus:
    return NatsEventBus(
        url=settings.nats_url,
        stream=settings.nats_stream,
        subject_prefix=settings.nats_subject_prefix,
        wait_seconds=settings.dependency_wait_seconds,
        retry_initial_seconds=settings.retry_initial_seconds,
        retry_max_seconds=settings.retry_max_seconds,
    )


def vector_index(settings: Settings) -> EdgeVectorIndex:
    return EdgeVectorIndex(
        path=settings.memgrid_data_dir / "vectors" / settings.qdrant_collection,
        collection=settings.qdrant_collection,
        vector_size=settings.vector_size,
    )


def language_model(settings: Settings) -> OpenAILanguageModel | None:
    """The LLM for classification and summaries, or None without a key."""
    return language_model_from(settings)
