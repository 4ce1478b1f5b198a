"""The neutral vector filter (domain/vector_filter.py) in qdrant-edge's types
(qdrant_index.to_qdrant translates the same conditions for qdrant-client)."""

from __future__ import annotations

import uuid

from qdrant_edge import FieldCondition, Filter, HasIdCondition, IsNullCondition, MatchValue, RangeFloat

from services.core.domain import vector_filter as vf


def _conditions(conditions: tuple[vf.Condition, ...]) -> list | None:
    return [to_edge(c) for c in conditions] or None


def to_edge(condition: vf.Condition):
    """A neutral condition (domain/vector_filter.py) as qdrant-edge's types
    (qdrant_index.to_qdrant translates the same ones for qdrant-client)."""
    match condition:
        case vf.Match(field, value):
            return FieldCondition(key=field, match=MatchValue(value))
        case vf.Range(field, gt, gte, lt, lte):
            return FieldCondition(key=field, range=RangeFloat(gt=gt, gte=gte, lt=lt, lte=lte))
        case vf.IsNull(field):
            return IsNullCondition(field)
        case vf.HasId(point_ids):
            return HasIdCondition({uuid.UUID(i) for i in point_ids})
        case vf.Filter(must, should, must_not):
            return Filter(must=_conditions(must), should=_conditions(should), must_not=_conditions(must_not))
    raise TypeError(f"not a vector filter condition: {condition!r}")
