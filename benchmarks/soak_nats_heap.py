"""nats-server's live heap, read beside its resident memory in `make soak`.

What a Go process holds follows its collector's pacing (NATS_GOGC,
NATS_MEMORY_LIMIT_MB) as much as its data: at NATS_GOGC=off it is about
the whole limit, flat whether or not something inside it leaks. What it
still holds after a collection, its live heap, is what a leak would grow.
The soak reads it from nats-server's Go profiler (NATS_PROFILE_PORT) every
few minutes: the heap profile's `gc=1` runs one collection first and its
`debug=1` text ends with Go's MemStats, whose HeapAlloc is then the live
heap. The live heap includes the newest message block's write buffer (up
to 8 MiB, with the block's fill), so it is shown beside the block's size.
A read's collection is one of many at the default NATS_GOGC (25);
at NATS_GOGC=off it makes Go give memory back, which the resident rule
then reads as a saw (docs/reliability.md, make soak): run such a soak with
--nats-heap-every 0."""

from __future__ import annotations

import re

import httpx

_HEAP_ALLOC = re.compile(r"^# HeapAlloc = (\d+)$", re.MULTILINE)


def heap_alloc_kib(profile_text: str) -> int | None:
    """HeapAlloc from a `debug=1` heap profile's MemStats, in KiB (None: not there)."""
    found = _HEAP_ALLOC.search(profile_text)
    return int(found.group(1)) // 1024 if found else None


async def live_heap_kib(port: int) -> int | None:
    """nats-server's heap after a collection, in KiB; None when its profiler does not answer."""
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            answer = await client.get(f"http://127.0.0.1:{port}/debug/pprof/heap", params={"debug": 1, "gc": 1})
    except httpx.HTTPError:
        return None
    return heap_alloc_kib(answer.text) if answer.status_code == 200 else None
