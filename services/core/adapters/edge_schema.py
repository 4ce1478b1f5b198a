"""The in-process vector index's shard schema (services/core/adapters/
edge_index.py): which payload fields are indexed, which of those also get
HNSW links of their own (VECTOR_PAYLOAD_LINKS), and the quantisations
(VECTOR_QUANTIZATION)."""

from __future__ import annotations

from qdrant_edge import (
    FloatIndexParams,
    KeywordIndexParams,
    PayloadSchemaType,
    ScalarQuantizationConfig,
    ScalarType,
)

from services.core.domain.vector_filter import INDEXED_PAYLOAD

#: Payload fields with an index, in qdrant-edge's kinds (the rule: domain/vector_filter.py, INDEXED_PAYLOAD).
INDEXED_FIELDS = {
    name: {"keyword": PayloadSchemaType.Keyword, "float": PayloadSchemaType.Float}[kind]
    for name, kind in INDEXED_PAYLOAD.items()
}


#: VECTOR_PAYLOAD_LINKS: which payload indexes also get HNSW links of their own
#: (Qdrant's payload-aware HNSW: each block of points sharing a value, or a
#: slice of a float's range, larger than the full-scan threshold and smaller
#: than the percolation bound, gets a small graph of its own, merged into the
#: main one, so that a search filtered to it stays connected). "all": every
#: indexed field (Qdrant's default). "selective": the fields a search narrows
#: to, once each: tenant, tag_prefixes (every tag is its own prefix, so the
#: links of a tag's block are built there and serve an exact-tag filter too;
#: `tags` would build the same graphs again) and timestamp (the time window);
#: not the fields only ever excluded (lifecycle, t_valid, t_invalid,
#: recorded_at: the points they drop are few). "window" (the default): tenant
#: and timestamp, so that a time window's walk stays among its own points,
#: while a tag (a keyword block per value, several a point) is scanned or
#: walked with ACORN. "tenant"; "none"
#: (a filtered search then loses its neighbours: docs/performance.md, issue 27).
PAYLOAD_LINKS: dict[str, frozenset[str] | None] = {
    "all": None,
    "selective": frozenset({"tenant", "tag_prefixes", "timestamp"}),
    "window": frozenset({"tenant", "timestamp"}),
    "tenant": frozenset({"tenant"}),
    "none": frozenset(),
}


#: The fields a search narrows to within its tenant (a tag, a time window):
#: when a shard has no links for one of them, its filtered searches need
#: ACORN to stay connected (VECTOR_SEARCH_ACORN).
NARROWING_FIELDS = ("tag_prefixes", "timestamp")


def unlinked(schema: dict) -> set[str]:
    """The indexed fields of a shard's payload schema (EdgeShard.info().payload_schema)
    made without links of their own; a bare type keeps Qdrant's default (linked)."""
    return {name for name, info in schema.items() if getattr(info.params, "enable_hnsw", None) is False}


def field_schema(name: str, kind: PayloadSchemaType, payload_links: str):
    """A payload index's schema: the bare type (Qdrant's defaults) unless its links are turned off."""
    linked = PAYLOAD_LINKS[payload_links]
    if linked is None or name in linked:
        return kind
    if kind == PayloadSchemaType.Keyword:
        return KeywordIndexParams(enable_hnsw=False)
    return FloatIndexParams(enable_hnsw=False)


#: VECTOR_QUANTIZATION: int8 copies of the vectors in RAM (searched first,
#: the best rescored with the float32 vectors), or none.
QUANTIZATIONS = {"int8": ScalarQuantizationConfig(type=ScalarType.Int8, always_ram=True), "none": None}
