"""Which FalkorDB graph holds a tenant (FALKORDB_GRAPH_LAYOUT), pure.

A tenant's records, its outbox events and its idempotency keys live in one
graph, so a write and the events it causes still commit in one query. The
layouts:

- `shared`: every tenant in one graph named FALKORDB_GRAPH (the default,
  and the single-node layout of every release before this one);
- `bucket`: the tenant's id hashed (SHA-1, stable across processes and
  releases) into FALKORDB_GRAPH_BUCKETS graphs named `<graph>:b<n>`.

A graph per tenant was measured and not offered: each graph carries the
whole schema (about 1.8 MB of FalkorDB's used_memory, docs/scaling.md) and
cross-tenant work would visit every one of them. On a Redis Cluster a graph
is one key, so each graph lives whole on the shard owning its key's slot and
the buckets spread over the shards.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

Mode = Literal["shared", "bucket"]
MODES: tuple[Mode, ...] = ("shared", "bucket")


def bucket_of(tenant: str, buckets: int) -> int:
    """The bucket a tenant hashes into, 0 <= n < buckets, the same in every process."""
    digest = hashlib.sha1(tenant.encode(), usedforsecurity=False).digest()
    return int.from_bytes(digest[:8], "big") % buckets


@dataclass(frozen=True)
class GraphLayout:
    """The graph names of one deployment: `base` is FALKORDB_GRAPH."""

    base: str = "memories"
    mode: Mode = "shared"
    buckets: int = 1

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"graph layout {self.mode!r} is none of {MODES}")
        if self.mode == "bucket" and self.buckets < 1:
            raise ValueError(f"a bucket layout needs at least one bucket, not {self.buckets}")

    def graph_for(self, tenant: str) -> str:
        """The graph holding `tenant`'s records and events."""
        if self.mode == "shared":
            return self.base
        return f"{self.base}:b{bucket_of(tenant, self.buckets)}"

    def graphs(self) -> tuple[str, ...]:
        """Every graph of the layout, in a fixed order: what cross-tenant work visits."""
        if self.mode == "shared":
            return (self.base,)
        return tuple(f"{self.base}:b{n}" for n in range(self.buckets))

    def describe(self) -> str:
        return f"bucket x{self.buckets}" if self.mode == "bucket" else self.mode
