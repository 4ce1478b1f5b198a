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

#: Payload fields with an index (filters on them stay fast at scale): exactly the
#: fields the vector filter matches or bounds (domain/vector_filter.py; its test holds
#: the two sets equal), save `superseded_at`, read only for the few expired points. A
#: field no filter names is carried unindexed (`type`): an index costs every upsert and
#: a pass over every payload in each HNSW build.
INDEXED_FIELDS = {
    "tenant": PayloadSchemaType.Keyword,
    "tags": PayloadSchemaType.Keyword,
    "tag_prefixes": PayloadSchemaType.Keyword,
    "lifecycle": PayloadSchemaType.Keyword,
    "t_valid": PayloadSchemaType.Float,
    "t_invalid": PayloadSchemaType.Float,
    "recorded_at": PayloadSchemaType.Float,
    "timestamp": PayloadSchemaType.Float,  # recall's time window
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
