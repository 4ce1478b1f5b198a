"""Fixtures the integration tests share."""

from __future__ import annotations

import pytest

from services.core.wiring import graph_store


@pytest.fixture
async def graph(settings):
    """The graph store on the test's FalkorDB, schema made."""
    store = graph_store(settings)
    await store.ensure_schema()
    yield store
    await store.close()


@pytest.fixture
def store(graph):
    """The same graph store, by the name the store tests use."""
    return graph
