"""Giving a process's freed memory back to the system after a large piece
of work (an embedding batch, a consolidation pass).

CPython frees a big pass's objects, but glibc keeps the pages of its heaps
for the next allocation, and a heap whose top is pinned by one live block
never shrinks by itself: the process's RSS stays at the largest pass's high
water mark, a little higher after each pass that fragments it further.
`malloc_trim(0)` returns every free page, the heap's middle included.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable


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
