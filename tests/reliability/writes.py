"""A steady write load through the gateway and the checks that follow a
fault: what the kill tests (test_crash_recovery, test_nats_cluster) share.

The load is an open loop: POST /memory at a fixed rate, each write with
content unique to it, so a stalled write does not slow the next. After the
fault, every write that got a 2xx must be in the graph exactly once,
enriched, and found by recall with its vector arm.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

import httpx

from tests.reliability.procstack import ProcessStack


@dataclass
class Outcome:
    content: str
    status: int  # 0: no reply (timeout or connection refused by the gateway)
    latency: float
    started: float
    memory_id: str | None = None
    message: str = ""
    code: int | None = None


async def write_load(client: httpx.AsyncClient, label: str, stop: asyncio.Event, rate: float) -> list[Outcome]:
    """POST /memory at `rate` a second until `stop`, each write with content unique to it."""

    async def one(n: int) -> Outcome:
        # A unique hex word: the keyword and vector arms both single it out.
        content = f"reliability {label} write {n} marker{uuid.uuid4().hex}"
        started = time.monotonic()
        try:
            reply = await client.post("/memory", json={"content": content, "tags": ["reliability", label]})
        except httpx.HTTPError as exc:
            return Outcome(content, 0, time.monotonic() - started, started, message=repr(exc))
        latency = time.monotonic() - started
        try:
            body = reply.json()
        except ValueError:
            body = {"message": reply.text}
        if reply.is_success:
            return Outcome(content, reply.status_code, latency, started, memory_id=body["memory_id"])
        message, code = str(body.get("message")), body.get("code")
        return Outcome(content, reply.status_code, latency, started, message=message, code=code)

    tasks: list[asyncio.Task] = []
    tick = time.monotonic()
    while not stop.is_set():
        tasks.append(asyncio.create_task(one(len(tasks))))
        tick += 1.0 / rate
        await asyncio.sleep(max(0.0, tick - time.monotonic()))
    return list(await asyncio.gather(*tasks))


def graph_rows(stack: ProcessStack) -> list[tuple[str, str, object]]:
    """(id, content, enriched_at) of every Memory node, read straight from FalkorDB (every graph of its layout)."""
    return [tuple(r) for r in stack.graph_query("MATCH (m:Memory) RETURN m.id, m.content, m.enriched_at")]


async def converged(stack: ProcessStack, acked: dict[str, str]):
    """Every acknowledged write is in the graph once and enriched, the index
    has one point per memory, and the stack is healthy: the rows, or None."""
    rows = await asyncio.to_thread(graph_rows, stack)
    enriched = {i for i, _, at in rows if at is not None}
    if not set(acked) <= enriched:
        return None
    status, health = await asyncio.to_thread(stack.health)
    if status != 200:
        return None
    points = health["components"]["vector_index"].get("points")
    return rows if points == len(rows) == health["memory_count"] else None


def duplicated_and_lost(rows: list[tuple[str, str, object]], acked: dict[str, str]) -> tuple[int, int]:
    """(memories stored more than once, by id or by content; acknowledged ids not in the graph)."""
    by_id: dict[str, int] = {}
    by_content: dict[str, int] = {}
    for memory_id, content, _ in rows:
        by_id[memory_id] = by_id.get(memory_id, 0) + 1
        by_content[content] = by_content.get(content, 0) + 1
    duplicated = sum(1 for n in by_content.values() if n > 1) + sum(1 for n in by_id.values() if n > 1)
    return duplicated, sum(1 for i in acked if by_id.get(i, 0) == 0)


async def recalled_by_vector(client: httpx.AsyncClient, memory_id: str, content: str) -> bool:
    reply = await client.get("/recall", params={"query": content, "limit": 3})
    if reply.status_code != 200:
        return False
    hit = next((r for r in reply.json()["results"] if r["id"] == memory_id), None)
    return hit is not None and hit["score_components"].get("vector", 0.0) > 0.5


async def found(client: httpx.AsyncClient, acked: dict[str, str]) -> int:
    """How many acknowledged writes read back (GET /memory/{id}) with their content and are recalled by vector."""
    count = 0
    for memory_id, content in acked.items():
        reply = await client.get(f"/memory/{memory_id}")
        if (
            reply.status_code == 200
            and reply.json()["memory"]["content"] == content
            and await recalled_by_vector(client, memory_id, content)
        ):
            count += 1
    return count
