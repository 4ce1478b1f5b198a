"""The fill of recall's in-process caches, for Prometheus and the soak.

Each cache is bounded by a setting (docs/configuration.md gives each
entry's cost), and fills with the corpus's new words, texts and queries
until the bound: memory that grows for hours without leaking. The gauge
shows how far each one is, so that growth can be told from a leak."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import Gauge

CACHE_ENTRIES = Gauge("memgrid_recall_cache_entries", "Entries held by recall's in-process caches", ["cache"])
INDEX_REOPENS = Gauge("memgrid_vector_index_reopens", "Times this process closed and reloaded its embedded index")
RESIDENT = Gauge(
    "memgrid_vector_index_resident_bytes",
    "The embedded index's mapped files: locked in memory, or left to the page cache (VECTOR_RESIDENT_MB)",
    ["state"],
)


def watch_caches(
    sizes: Mapping[str, Callable[[], int]],
    reopens: Callable[[], int] | None = None,
    resident: Any = None,
) -> None:
    """Report each cache's entries (read when scraped) and, for an embedded
    index, its reopens (VECTOR_REOPEN_EVERY) and its bytes locked in memory
    and refused (VECTOR_RESIDENT_MB; `resident` is its edge_resident.ResidentFiles)."""
    for name, size in sizes.items():
        CACHE_ENTRIES.labels(name).set_function(size)
    if reopens is not None:
        INDEX_REOPENS.set_function(reopens)
    if resident is not None:
        RESIDENT.labels("locked").set_function(lambda: resident.locked_bytes)
        RESIDENT.labels("refused").set_function(lambda: resident.refused_bytes)
