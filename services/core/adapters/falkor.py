"""FalkorGraphStore: the graph, source of truth, on FalkorDB.

Times are stored as epoch microseconds (exact and sortable), metadata as JSON
text (FalkorDB refuses map properties), the embedding as base64 float32 so the
vector index can be rebuilt from the graph without re-embedding.
"""

from __future__ import annotations

import asyncio
import base64
import json
from array import array
from typing import Any

import redis.exceptions as redis_errors
from falkordb.asyncio import FalkorDB

from services.core.adapters.retry import with_backoff
from services.core.domain.errors import Unavailable
from services.core.domain.model import ComponentStatus, Memory
from services.core.domain.times import from_micros, to_micros

_TIME_FIELDS = ("timestamp", "t_valid", "t_invalid", "updated_at", "last_accessed", "recorded_at", "enriched_at")
_INDEXED_PROPERTIES = ("id", "tenant")


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, (redis_errors.ConnectionError, redis_errors.TimeoutError, redis_errors.BusyLoadingError)):
        return True
    return isinstance(exc, redis_errors.ResponseError) and str(exc).startswith("LOADING")


def encode_embedding(values: list[float] | None) -> str | None:
    """float32 little-endian, base64: about 2 KB for 384 dimensions."""
    if values is None:
        return None
    packed = array("f", values)
    if packed.itemsize != 4:  # pragma: no cover - every supported platform has 4-byte floats
        raise RuntimeError("float is not 32-bit here")
    return base64.b64encode(packed.tobytes()).decode("ascii")


def decode_embedding(text: str | None) -> list[float] | None:
    if not text:
        return None
    packed = array("f")
    packed.frombytes(base64.b64decode(text))
    return packed.tolist()


def memory_to_row(memory: Memory, *, event_pending: bool = False) -> dict[str, Any]:
    """The node's properties; None values are left out (FalkorDB drops them)."""
    row: dict[str, Any] = {
        "id": memory.id,
        "tenant": memory.tenant,
        "content": memory.content,
        "type": memory.type,
        "confidence": float(memory.confidence),
        "importance": float(memory.importance),
        "tags": list(memory.tags),
        "tag_prefixes": list(memory.tag_prefixes),
        "metadata": json.dumps(memory.metadata, ensure_ascii=False),
        "embedding": encode_embedding(memory.embedding),
        "summary": memory.summary,
        "archived": bool(memory.archived),
        "relevance_score": memory.relevance_score,
        "version": int(memory.version),
        "event_pending": event_pending,
    }
    for name in _TIME_FIELDS:
        row[name] = to_micros(getattr(memory, name))
    return {k: v for k, v in row.items() if v is not None}


def row_to_memory(row: dict[str, Any]) -> Memory:
    """The inverse of memory_to_row."""
    times = {name: from_micros(row.get(name)) for name in _TIME_FIELDS}
    return Memory(
        id=row["id"],
        tenant=row["tenant"],
        content=row["content"],
        type=row["type"],
        confidence=float(row["confidence"]),
        importance=float(row["importance"]),
        tags=list(row.get("tags") or []),
        tag_prefixes=list(row.get("tag_prefixes") or []),
        metadata=json.loads(row.get("metadata") or "{}"),
        embedding=decode_embedding(row.get("embedding")),
        summary=row.get("summary") or "",
        archived=bool(row.get("archived", False)),
        relevance_score=row.get("relevance_score"),
        version=int(row.get("version", 1)),
        **times,
    )


class FalkorGraphStore:
    """GraphStore on FalkorDB; every query filters on the tenant."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        graph: str,
        password: str | None = None,
        wait_seconds: float = 120.0,
        retry_initial_seconds: float = 0.1,
        retry_max_seconds: float = 2.0,
        request_retry_seconds: float = 3.0,
    ):
        self._connect_args = {"host": host, "port": port, "password": password}
        self._graph_name = graph
        self._db: FalkorDB | None = None
        self._graph = None
        self._where = f"{host}:{port}/{graph}"
        self._wait = wait_seconds
        self._initial = retry_initial_seconds
        self._max = retry_max_seconds
        self._request_retry = request_retry_seconds

    async def _attempt(self, cypher: str, params: dict[str, Any] | None):
        if self._graph is None:
            # The client probes the server synchronously when built: keep that off the loop.
            self._db = await asyncio.to_thread(FalkorDB, **self._connect_args)
            self._graph = self._db.select_graph(self._graph_name)
        return await self._graph.query(cypher, params)

    async def _query(self, cypher: str, params: dict[str, Any] | None = None, *, deadline: float | None = None):
        try:
            return await with_backoff(
                "falkordb",
                lambda: self._attempt(cypher, params),
                retryable=_retryable,
                deadline_seconds=self._request_retry if deadline is None else deadline,
                initial_seconds=self._initial,
                max_seconds=self._max,
            )
        except Exception as exc:
            if _retryable(exc):
                raise Unavailable("FALKORDB_UNAVAILABLE", f"FalkorDB is unavailable: {exc}") from exc
            raise

    async def ensure_schema(self) -> None:
        """Wait for FalkorDB (it answers LOADING after a restart), then create indexes."""
        await self._query("RETURN 1", deadline=self._wait)
        for prop in _INDEXED_PROPERTIES:
            try:
                await self._query(f"CREATE INDEX FOR (m:Memory) ON (m.{prop})")
            except redis_errors.ResponseError as exc:
                if "already indexed" not in str(exc):
                    raise

    async def create_memories(self, memories: list[Memory], *, event_pending: bool) -> None:
        rows = [memory_to_row(m, event_pending=event_pending) for m in memories]
        await self._query("UNWIND $rows AS r CREATE (m:Memory) SET m = r", {"rows": rows})

    async def get_memory(self, tenant: str, memory_id: str) -> Memory | None:
        result = await self._query(
            "MATCH (m:Memory {id: $id}) WHERE m.tenant = $tenant RETURN properties(m)",
            {"id": memory_id, "tenant": tenant},
        )
        if not result.result_set:
            return None
        return row_to_memory(dict(result.result_set[0][0]))

    async def touch_memory(self, tenant: str, memory_id: str, last_accessed_us: int) -> None:
        await self._query(
            "MATCH (m:Memory {id: $id}) WHERE m.tenant = $tenant SET m.last_accessed = $at",
            {"id": memory_id, "tenant": tenant, "at": last_accessed_us},
        )

    async def clear_event_pending(self, tenant: str, memory_ids: list[str]) -> None:
        await self._query(
            "UNWIND $ids AS id MATCH (m:Memory {id: id}) WHERE m.tenant = $tenant SET m.event_pending = false",
            {"ids": memory_ids, "tenant": tenant},
        )

    async def count_memories(self, tenant: str | None = None) -> int:
        if tenant is None:
            result = await self._query("MATCH (m:Memory) RETURN count(m)")
        else:
            result = await self._query("MATCH (m:Memory) WHERE m.tenant = $tenant RETURN count(m)", {"tenant": tenant})
        return int(result.result_set[0][0])

    async def status(self) -> ComponentStatus:
        try:
            count = await self.count_memories()
        except Exception as exc:  # a health probe reports, never raises
            return ComponentStatus("falkordb", "unavailable", str(exc))
        return ComponentStatus("falkordb", "connected", self._where, {"memories": float(count)})

    async def close(self) -> None:
        if self._db is not None:
            await self._db.aclose()
            self._db = self._graph = None
