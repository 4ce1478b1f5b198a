"""Backups (POST /backup): a JSON export of one tenant's graph, written under
MEMGRID_DATA_DIR/backups/<tenant>-<time>.json.

The file holds every memory with every field (validity window, system times,
version, metadata as an object, the embedding in its stored form), every edge
leaving a memory (to memories, and MENTIONS / EXEMPLIFIES to Entity and
Pattern nodes), and those nodes: enough to rebuild the graph with its
supersession chains, and the vector index from it (a restore from
the vector payloads loses validity and edges). It is written to a .partial
file and renamed when complete, so a file under its final name is whole.

The graph is read a page at a time, not in one transaction: a memory written
while the backup runs may be missing, and an edge may name a memory that was
deleted after its page was read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import structlog

from services.core.domain.embedding_codec import encode_embedding
from services.core.domain.model import Memory
from services.core.domain.times import format_iso, from_micros
from services.core.ports import ExportedEdge, GraphExport

log = structlog.get_logger()

FORMAT = "memgrid-backup"
VERSION = 1
EMBEDDING_ENCODING = "base64 of little-endian float32"
#: Node properties held as epoch microseconds, written as ISO 8601.
_NODE_TIMES = ("updated_at", "created_at")


@dataclass(frozen=True, slots=True)
class BackupResult:
    path: Path
    memories: int
    relations: int
    entities: int
    patterns: int


def memory_record(memory: Memory) -> dict[str, Any]:
    """Every field of the memory: times as ISO 8601, the embedding encoded."""
    record: dict[str, Any] = {}
    for item in dataclasses.fields(memory):
        value = getattr(memory, item.name)
        if item.name == "embedding":
            record["embedding"] = encode_embedding(value)
            record["embedding_dimension"] = len(value) if value is not None else None
        elif isinstance(value, datetime):
            record[item.name] = format_iso(value)
        else:
            record[item.name] = value
    return record


def edge_record(edge: ExportedEdge) -> dict[str, Any]:
    return {
        "source_id": edge.source_id,
        "type": edge.type,
        "target_label": edge.target_label,
        "target": edge.target_key,
        "strength": edge.strength,
        "created_at": format_iso(edge.created_at),
        "properties": edge.properties,
    }


def node_record(properties: dict[str, Any]) -> dict[str, Any]:
    """An Entity or Pattern node's properties, times as ISO 8601 (the tenant is in the header)."""
    record = {k: v for k, v in properties.items() if k != "tenant"}
    for name in _NODE_TIMES:
        if isinstance(record.get(name), int):
            record[name] = format_iso(from_micros(record[name]))
    return record


def backup_name(tenant: str, at: datetime) -> str:
    """<tenant>-<UTC time>.json, the tenant reduced to characters safe in a file name."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in tenant) or "_"
    return f"{safe}-{at.astimezone(UTC):%Y%m%dT%H%M%S%fZ}.json"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


async def _write(out: TextIO, text: str) -> None:
    await asyncio.to_thread(out.write, text)


class BackupWriter:
    def __init__(
        self,
        *,
        export: GraphExport,
        directory: Path,
        page_size: int,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self._export = export
        self._directory = directory
        self._page_size = page_size
        self._clock = clock

    async def create(self, tenant: str) -> BackupResult:
        """Write the tenant's graph to a new backup file; returns its path and counts."""
        started = self._clock()
        await asyncio.to_thread(self._directory.mkdir, parents=True, exist_ok=True)
        path = (self._directory / backup_name(tenant, started)).resolve()
        partial = path.with_name(path.name + ".partial")
        edges_file = path.with_name(path.name + ".edges.partial")
        header = {
            "format": FORMAT,
            "version": VERSION,
            "tenant": tenant,
            "created_at": format_iso(started),
            "embedding_encoding": EMBEDDING_ENCODING,
        }
        log.info("backup started", tenant=tenant, path=str(path))
        memories = relations = 0
        try:
            with partial.open("w", encoding="utf-8") as out, edges_file.open("w+", encoding="utf-8") as edges_out:
                await _write(out, _json(header)[:-1] + ',"memories":[\n')
                after = ""
                while True:
                    page, edges = await self._export.export_page(tenant, after, self._page_size)
                    if not page:
                        break
                    after = page[-1].id
                    lead = ",\n" if memories else ""
                    await _write(out, lead + ",\n".join(_json(memory_record(m)) for m in page))
                    if edges:
                        lead = ",\n" if relations else ""
                        await _write(edges_out, lead + ",\n".join(_json(edge_record(e)) for e in edges))
                    memories += len(page)
                    relations += len(edges)
                    log.info("backup progress", tenant=tenant, memories=memories, relations=relations)
                await _write(out, '\n],"relations":[\n')
                await asyncio.to_thread(edges_out.seek, 0)
                while chunk := await asyncio.to_thread(edges_out.read, 1 << 20):
                    await _write(out, chunk)
                entities = [node_record(n) for n in await self._export.export_nodes(tenant, "Entity")]
                patterns = [node_record(n) for n in await self._export.export_nodes(tenant, "Pattern")]
                await _write(out, '\n],"entities":' + _json(entities) + ',"patterns":' + _json(patterns) + "}\n")
            await asyncio.to_thread(os.replace, partial, path)
        except BaseException:
            await asyncio.to_thread(partial.unlink, missing_ok=True)
            raise
        finally:
            await asyncio.to_thread(edges_file.unlink, missing_ok=True)
        log.info(
            "backup written",
            tenant=tenant,
            path=str(path),
            memories=memories,
            relations=relations,
            entities=len(entities),
            patterns=len(patterns),
        )
        return BackupResult(path, memories, relations, len(entities), len(patterns))
