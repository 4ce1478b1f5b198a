"""Polling for tests that wait on background work (enrichment, projection, streams)."""

from __future__ import annotations

import asyncio


async def wait_for(predicate, within: float = 20.0, every: float = 0.1):
    """Await `predicate()` until it returns something truthy (returned), or fail after `within` seconds."""
    for _ in range(max(1, int(within / every))):
        if result := await predicate():
            return result
        await asyncio.sleep(every)
    raise AssertionError("condition not met in time")
