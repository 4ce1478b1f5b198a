"""nats-server's live heap, read beside its resident memory in `make soak`.

With NATS_GOGC=off (the devstack's default) nats-server's heap grows to
NATS_MEMORY_LIMIT_MB before Go collects, so its resident memory is that
budget and stays there: flat whether or not something inside it leaks.
What it still holds after a collection, its live heap, is what a leak
would grow. The soak reads it from nats-server's Go profiler
(NATS_PROFILE_PORT) every few minutes: the heap profile's `gc=1` runs one
collection first and its `debug=1` text ends with Go's MemStats, whose
HeapAlloc is then the live heap. The live heap includes the newest message
block's write buffer (up to 8 MiB, with the block's fill), so it is shown
beside the block's size and its growth is read at like fills, as the
resident memory's is (soak_rule.block_matched)."""

from __future__ import annotations

import re

import httpx

_HEAP_ALLOC = re.compile(r"^# HeapAlloc = (\d+)$", re.MULTILINE)


def heap_alloc_kib(profile_text: str) -> int | None:
    """HeapAlloc from a `debug=1` heap profile's MemStats, in KiB (None: not there)."""
    found = _HEAP_ALLOC.search(profile_text)
    return int(found.group(1)) // 1024 if found else None


async def live_heap_kib(client: httpx.AsyncClient, port: int) -> int | None:
    """nats-server's heap after a collection, in KiB; None when its profiler does not answer."""
    try:
        answer = await client.get(f"http://127.0.0.1:{port}/debug/pprof/heap", params={"debug": 1, "gc": 1})
    except httpx.HTTPError:
        return None
    return heap_alloc_kib(answer.text) if answer.status_code == 200 else None
