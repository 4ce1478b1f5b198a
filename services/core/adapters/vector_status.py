"""The /health report of a vector index, shared by both engines' adapters."""

from __future__ import annotations

from services.core.domain.model import ComponentStatus


async def vector_index_status(index, *, is_open: bool, detail: str) -> ComponentStatus:
    """dimension_mismatch (with both figures), unavailable, or connected with
    points, dimension and vectors refused. `index` is a VectorIndex with a
    `mismatch` attribute: (configured, found) or None."""
    if index.mismatch is not None:
        configured, found = index.mismatch
        return ComponentStatus(
            "vector_index",
            "dimension_mismatch",
            f"VECTOR_SIZE is {configured} but the index holds {found}-dimensional vectors; "
            "set VECTOR_SIZE to match, enable autodetection, or rebuild the index",
            {"dimension": float(found), "configured_dimension": float(configured)},
        )
    if not is_open:
        return ComponentStatus("vector_index", "unavailable", "not open")
    try:
        points = await index.count()
    except Exception as exc:  # a health probe reports, never raises
        return ComponentStatus("vector_index", "unavailable", str(exc))
    return ComponentStatus(
        "vector_index",
        "connected",
        detail,
        {"points": float(points), "dimension": float(index.dimension), "refused": float(index.refused)},
    )
