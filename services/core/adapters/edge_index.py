"""EdgeVectorIndex: Qdrant's engine in-process (qdrant-edge-py), the
embedded default for recall's vector projection."""

from __future__ import annotations

import asyncio
from pathlib import Path

from qdrant_edge import CountRequest, Distance, EdgeConfig, EdgeShard, EdgeVectorParams

from services.core.domain.model import ComponentStatus


class EdgeVectorIndex:
    """A single-process shard under <data_dir>/vectors/<collection>."""

    def __init__(self, *, path: Path, collection: str, vector_size: int):
        self._path = path
        self._collection = collection
        self._size = vector_size
        self._shard: EdgeShard | None = None

    def open(self) -> None:
        """Load the shard when it exists, else create it."""
        if self._shard is not None:
            return
        self._path.mkdir(parents=True, exist_ok=True)
        config = EdgeConfig(vectors=EdgeVectorParams(size=self._size, distance=Distance.Cosine))
        if any(self._path.iterdir()):
            self._shard = EdgeShard.load(str(self._path), config)
        else:
            self._shard = EdgeShard.create(str(self._path), config)

    async def count(self) -> int:
        if self._shard is None:
            return 0
        return await asyncio.to_thread(lambda: self._shard.count(CountRequest(exact=True)))

    async def status(self) -> ComponentStatus:
        if self._shard is None:
            return ComponentStatus("vector_index", "unavailable", "not open")
        try:
            points = await self.count()
        except Exception as exc:
            return ComponentStatus("vector_index", "unavailable", str(exc))
        return ComponentStatus(
            "vector_index",
            "connected",
            f"qdrant-edge collection {self._collection}",
            {"points": float(points), "dimension": float(self._size)},
        )

    async def close(self) -> None:
        if self._shard is not None:
            shard, self._shard = self._shard, None
            await asyncio.to_thread(shard.close)
