"""Fixtures the integration tests share."""

from __future__ import annotations

import pytest

from services.core.adapters.edge_index import EdgeVectorIndex
from services.core.wiring import graph_store


@pytest.fixture
async def graph(settings):
    """The graph store on the test's FalkorDB, schema made."""
    store = graph_store(settings.graph, settings.process, recall=settings.recall, backup=settings.backup)
    await store.lifecycle.ensure_schema()
    yield store
    await store.lifecycle.close()


@pytest.fixture
def store(graph):
    """The same graph store, by the name the store tests use."""
    return graph


@pytest.fixture
async def index(tmp_path):
    """The in-process vector index (qdrant-edge), 4 dimensions, in the test's directory."""
    vectors = EdgeVectorIndex(path=tmp_path / "vectors" / "memories", collection="memories", vector_size=4)
    vectors.open()
    yield vectors
    await vectors.close()
