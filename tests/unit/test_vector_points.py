"""vector_points: the one rule for which memories become index points."""

from datetime import UTC, datetime

from services.core.domain.projection import vector_payload, vector_points
from tests.factories import memory_at

AT = datetime(2026, 1, 1, tzinfo=UTC)


def test_only_vectors_of_the_index_dimension_become_points():
    fits = memory_at("a", AT, embedding=[0.1, 0.2, 0.3])
    other = memory_at("b", AT, embedding=[0.1, 0.2])
    unembedded = memory_at("c", AT)
    points, other_dimension = vector_points([fits, other, unembedded], 3)
    assert points == [("a", [0.1, 0.2, 0.3], vector_payload(fits))]
    assert other_dimension == 1  # a memory not embedded yet is not counted as refused
