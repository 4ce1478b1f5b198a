"""Fixtures shared by the unit tests: memories with every field set, or only
the required ones. Pure data, no I/O."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

import pytest

from services.core.domain.model import Memory


def _f32(value: float) -> float:
    """The nearest float32, as a Python float (what a float32 store gives back)."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


@pytest.fixture
def full_memory() -> Memory:
    """A memory with every optional field populated, with distinct values."""
    return Memory(
        id="5b0c7e1e-8f9a-4c55-9d0e-3f2a1b4c5d6e",
        tenant="acme",
        content="Chose PostgreSQL over MongoDB for ACID compliance — café ☕",
        type="Decision",
        confidence=0.87,
        importance=0.35,
        timestamp=datetime(2024, 1, 15, 10, 30, 0, 123456, tzinfo=UTC),
        t_valid=datetime(2024, 1, 16, 0, 0, 0, 1, tzinfo=UTC),
        t_invalid=datetime(2030, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        updated_at=datetime(2024, 2, 1, 8, 0, 0, 500000, tzinfo=UTC),
        last_accessed=datetime(2024, 3, 2, 9, 15, 30, 42, tzinfo=UTC),
        recorded_at=datetime(2024, 1, 15, 10, 30, 1, 654321, tzinfo=UTC),
        enriched_at=datetime(2024, 1, 15, 10, 31, 0, 7, tzinfo=UTC),
        tags=["Project:AutoMem:API", "decision", ""],
        tag_prefixes=["project", "project:automem", "project:automem:api", "decision"],
        metadata={
            "entities": {"tools": ["pytest", "docker"], "people": []},
            "count": 3,
            "big": 9007199254740993,
            "ratio": 0.25,
            "flag": True,
            "nothing": None,
            "nested": {"deep": {"level": 2, "items": [1, "two", {"three": 3}]}},
        },
        embedding=[_f32(0.1), _f32(-0.3), 0.5, 2.0],
        summary="Chose PostgreSQL over MongoDB.",
        archived=True,
        relevance_score=0.42,
        version=7,
        factuality={"label": "FACT", "confidence": 0.8, "rationale": "corroborated"},
    )


@pytest.fixture
def minimal_memory() -> Memory:
    """A memory with only the required fields; optional ones at their defaults."""
    at = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    return Memory(
        id="00000000-0000-4000-8000-000000000001",
        tenant="default",
        content="x",
        type="Memory",
        confidence=0.3,
        importance=0.5,
        timestamp=at,
        t_valid=at,
        updated_at=at,
        last_accessed=at,
        recorded_at=at,
    )
