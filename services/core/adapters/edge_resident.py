"""Keeps the embedded vector index's mapped files in memory (VECTOR_RESIDENT_MB).

qdrant-edge maps a shard's segments (the float32 vectors a search rescores
with, the HNSW graph, the payload and its indexes) from files and leaves
them to the page cache; it keeps only the int8 copies in the process's own
memory, and it offers no way to pin the rest (its `Memory.Pinned` is taken
as `Cached` for vectors). The kernel may then take those pages back whenever
they sit idle: on the machine the 1M benchmark ran on, proactive reclaim
(DAMON) drops any page untouched for a minute, and the next search reads
it from disk again (docs/performance.md, issue 27). A shard opened or
rebuilt is cold the same way until searches have read it.

`ResidentFiles.refresh()` finds, in /proc/self/smaps, the ranges this
process maps from files under the shard (not its write-ahead log) and
mlock()s the parts of them that hold data (the files are large and mostly
sparse), the most searched first (graph, vectors, payload indexes, then
the rest), up to a budget: locking reads them in (the warm-up) and keeps
them in (nothing reclaims a locked page). It locks qdrant-edge's own
mappings, making none of its own, so resident memory is not counted twice.
A range qdrant-edge unmaps (an optimisation's old segment, a closed shard)
takes its lock with it, and a refresh locks what replaced it; the kernel
marks what is locked (VmFlags "lo"), so a refresh only adds. What cannot be locked (the budget, or
RLIMIT_MEMLOCK without CAP_IPC_LOCK) stays as it was, mapped and cached,
and is reported: nothing fails for it.

A writable mapping is never locked: qdrant-edge writes its payload indexes
through them, and once one was locked their flushes failed with EFAULT
("Gridstore IO error: Bad address", after some 50k upserts into a locked
shard). The files it writes that way are mapped read-only too (the same
pages in the page cache), and those mappings are locked; a private
writable mapping would also be copied by a lock.
Refreshes run one at a time on a thread of their own, never holding the
index's lock: locking a large shard reads it from disk.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import resource
import threading
from dataclasses import dataclass, replace
from pathlib import Path

import structlog

from services.core.domain.model import ComponentStatus

log = structlog.get_logger()

#: What a segment's files hold, most searched first: what is locked first.
_ORDER = ("vector_index", "vector_storage", "payload_index", "id_tracker", "payload_storage")

_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) ([0-9a-f]+) \S+ (\d+)\s+(.*)$")
_PAGE = resource.getpagesize()


@dataclass(frozen=True, slots=True)
class MappedRange:
    """One mapping (a VMA) of a shard's file: addresses, the file offset it starts at, and whether it is locked."""

    start: int
    end: int
    offset: int
    path: str
    locked: bool

    @property
    def size(self) -> int:
        return self.end - self.start


def shard_ranges(smaps: str, root: Path) -> list[MappedRange]:
    """The lockable mappings in /proc/self/smaps' text of files under `root`,
    most searched first: read-only ones (see the module's note on writable
    ones), not the WAL, not a deleted file. The kernel splits a
    mapping where a lock starts or ends, so each piece says for itself
    whether it is locked (VmFlags "lo")."""
    prefix = str(root).rstrip("/") + "/"
    found: list[MappedRange] = []
    current: dict | None = None
    for line in smaps.splitlines():
        header = _HEADER.match(line)
        if header:
            start, end, perms, offset, _, path = header.groups()
            lockable = (
                path.startswith(prefix)
                and not path.endswith(" (deleted)")
                and perms[1] != "w"
                and "wal" not in Path(path[len(prefix) :]).parts
            )
            current = None
            if lockable:
                current = dict(start=int(start, 16), end=int(end, 16), offset=int(offset, 16), path=path)
        elif current is not None and line.startswith("VmFlags:"):
            found.append(MappedRange(**current, locked="lo" in line.split()[1:]))
            current = None
    return sorted(found, key=lambda r: (_rank(r.path), r.path, r.start))


def _rank(path: str) -> int:
    parts = Path(path).parts
    return next((i for i, part in enumerate(_ORDER) if part in parts), len(_ORDER))


def data_extents(path: str, offset: int, length: int) -> list[tuple[int, int]]:
    """The parts of the file's [offset, offset + length) that hold data, as
    page-aligned file offsets: qdrant-edge makes its files large and sparse
    (a segment's pages of 32 MiB, a few KiB of them written), and locking a
    hole would fill it with pages of zeros."""
    extents = []
    end = offset + length
    fd = os.open(path, os.O_RDONLY)
    try:
        position = offset
        while position < end:
            try:
                data = os.lseek(fd, position, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no data past position
                    break
                raise
            if data >= end:
                break
            hole = os.lseek(fd, data, os.SEEK_HOLE)
            first, last = max(offset, data - data % _PAGE), min(end, -(-hole // _PAGE) * _PAGE)
            extents.append((first, last))
            position = last
    finally:
        os.close(fd)
    return extents


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mlock.restype = ctypes.c_int
    return libc


def raise_memlock_limit() -> None:
    """Lift this process's soft RLIMIT_MEMLOCK to its hard limit (what it may
    lock without CAP_IPC_LOCK)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (hard, hard))
        except (ValueError, OSError) as exc:
            log.debug("RLIMIT_MEMLOCK not raised", error=str(exc))


class ResidentFiles:
    """Locks the ranges mapped from a shard's files, up to `budget_bytes` (0: off)."""

    def __init__(self, root: Path, budget_bytes: int, *, smaps_path: Path = Path("/proc/self/smaps")):
        self._root = root
        self.budget = budget_bytes
        self._smaps_path = smaps_path
        #: Bytes of the shard's mappings locked, as the last refresh found them.
        self.locked_bytes = 0
        #: Bytes mapped from the shard that the last refresh could not lock.
        self.refused_bytes = 0
        #: Why (the budget, or the kernel's error), for /health.
        self.refused_because = ""
        self._guard = threading.Lock()  # one refresh at a time
        self._starting = threading.Lock()  # the refresh thread's start and end
        self._wanted = False
        self._thread: threading.Thread | None = None
        self._libc = _libc() if budget_bytes else None
        if budget_bytes:
            raise_memlock_limit()

    def refresh(self) -> None:
        """Lock the data of what the shard maps now and is not locked yet,
        within the budget. What the shard no longer maps was unlocked with it."""
        if not self.budget or self._libc is None:
            return
        with self._guard:
            ranges = shard_ranges(self._smaps_path.read_text(), self._root)
            used = sum(r.size for r in ranges if r.locked)
            refused, because = 0, ""
            for r in ranges:
                if r.locked:
                    continue
                try:
                    extents = data_extents(r.path, r.offset, r.size)
                except FileNotFoundError:
                    continue  # dropped meanwhile (an optimisation's old segment)
                for first, last in extents:
                    size = min(last - first, self.budget - used)  # up to the budget
                    if size < last - first:
                        refused += last - first - size
                        because = f"VECTOR_RESIDENT_MB ({self.budget >> 20} MiB) is reached"
                    if size <= 0:
                        continue
                    address = r.start + (first - r.offset)
                    if self._libc.mlock(ctypes.c_void_p(address), ctypes.c_size_t(size)) != 0:
                        code = ctypes.get_errno()
                        if code == errno.ENOMEM and not self._still_mapped(r):
                            break  # unmapped meanwhile
                        refused += size
                        because = f"mlock: {os.strerror(code)} (RLIMIT_MEMLOCK or CAP_IPC_LOCK)"
                        continue
                    used += size
            if refused and (refused, because) != (self.refused_bytes, self.refused_because):
                log.warning(
                    "vector index only partly kept in memory",
                    locked_mib=used >> 20,
                    refused_mib=refused >> 20,
                    because=because,
                )
            self.locked_bytes, self.refused_bytes, self.refused_because = used, refused, because

    def reported(self, status: ComponentStatus) -> ComponentStatus:
        """The index's /health status with what is locked and refused (and why), when locking is on."""
        if not (self.budget and status.ok):
            return status
        figures = {
            **status.figures,
            "resident_bytes": float(self.locked_bytes),
            "resident_refused_bytes": float(self.refused_bytes),
        }
        because = f"; partly kept in memory: {self.refused_because}" if self.refused_because else ""
        return replace(status, detail=status.detail + because, figures=figures)

    def _still_mapped(self, r: MappedRange) -> bool:
        ranges = shard_ranges(self._smaps_path.read_text(), self._root)
        return any(m.start <= r.start < m.end and m.path == r.path for m in ranges)

    def refresh_soon(self) -> None:
        """refresh() on a thread of its own (never blocking the caller); a
        request while one runs makes it run once more."""
        if not self.budget:
            return
        with self._starting:
            self._wanted = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="vector-resident", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            with self._starting:
                if not self._wanted:
                    self._thread = None
                    return
                self._wanted = False
            try:
                self.refresh()
            except Exception as exc:  # a refresh is an optimisation: it never takes the index down
                log.warning("keeping the vector index in memory failed", error=str(exc))

    def wait(self, timeout: float | None = None) -> None:
        """Until the refreshes asked for are done (for the tests and the benchmarks)."""
        while (thread := self._thread) is not None:
            thread.join(timeout)
            if timeout is not None:
                return
