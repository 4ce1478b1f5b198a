"""Giving a process's freed memory back to the system after a large piece
of work (an embedding batch, a consolidation pass).

CPython frees a big pass's objects, but glibc keeps the pages of its heaps
for the next allocation, and a heap whose top is pinned by one live block
never shrinks by itself: the process's RSS stays at the largest pass's high
water mark, a little higher after each pass that fragments it further.
`malloc_trim(0)` returns every free page, the heap's middle included.

And the cyclic garbage collector's pauses: timed (GC_PAUSES), and made
short by freezing what a service holds once it has started.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import time
from collections.abc import Callable

from prometheus_client import Histogram


def malloc_trim() -> Callable[[], None]:
    """glibc's malloc_trim(0), which returns the heaps' free pages to the
    system; a no-op where the C library has none (musl, macOS)."""
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: trim(0)


_TRIM = malloc_trim()


def release_freed_memory() -> None:
    """Collect the cycles a pass left, then return the free pages (see the module)."""
    gc.collect()
    _TRIM()


#: CPython's cyclic collections, by generation: a full one (2) walks every
#: tracked object of the process, and stops every coroutine while it does.
GC_PAUSES = Histogram(
    "memgrid_gc_pause_seconds",
    "Time CPython's garbage collector held the process, by generation",
    ["generation"],
    buckets=(0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
)


class _PauseTimer:
    """A gc callback timing each collection into GC_PAUSES."""

    def __init__(self) -> None:
        self._started = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            GC_PAUSES.labels(str(info.get("generation", "?"))).observe(time.perf_counter() - self._started)


def time_collections() -> None:
    """Time every collection of this process (GC_PAUSES); once per process."""
    if not any(isinstance(callback, _PauseTimer) for callback in gc.callbacks):
        gc.callbacks.append(_PauseTimer())


def freeze_startup_objects() -> None:
    """Move what the process holds after it started (its modules, settings,
    clients, models) out of the collector's reach (gc.freeze): a full
    collection then walks only what was made since, not the hundreds of
    thousands of objects a service starts with (a full collection of a
    recall process took 0.4-0.5 s on the loaded benchmark machine, and a
    request that allocates many objects, such as pooling a recall's
    candidates, is where one runs). Objects frozen are still freed when
    their count drops to zero; only cycles among them would stay."""
    gc.collect()
    gc.freeze()
