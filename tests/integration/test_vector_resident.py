"""VECTOR_RESIDENT_MB on a real qdrant-edge shard: what it maps is locked in
memory (the kernel says so), within the budget, through optimisations,
reopens and clears; a refused lock is reported, and the index works on."""

from __future__ import annotations

import ctypes
import re
import uuid
from pathlib import Path

import numpy as np
import pytest

from services.core.adapters.edge_index import EdgeVectorIndex
from services.core.adapters.edge_resident import shard_ranges
from services.core.domain.projection import VectorQuery

pytestmark = pytest.mark.integration

DIM = 64


def smaps() -> str:
    return Path("/proc/self/smaps").read_text()


def kernel_locked_kib(root: Path) -> int:
    """What /proc/self/smaps says is locked of the mappings of the shard's
    files: the size of each one flagged "lo" (its Locked: line is
    proportional, halved for a page qdrant-edge maps twice)."""
    locked, size = 0, 0
    for line in smaps().splitlines():
        head = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
        if head:
            inside = str(root) + "/" in line and "/wal/" not in line
            size = int(head.group(2), 16) - int(head.group(1), 16) if inside else 0
        elif size and line.startswith("VmFlags:") and "lo" in line.split():
            locked += size // 1024
    return locked


def writable_locked(root: Path) -> list[str]:
    """The writable mappings of the shard's files that are locked."""
    found, current = [], None
    for line in smaps().splitlines():
        head = re.match(r"^[0-9a-f]+-[0-9a-f]+ (\S{4}) \S+ \S+ \d+\s+(.*)$", line)
        if head:
            current = head.group(2) if head.group(1)[1] == "w" and str(root) + "/" in head.group(2) else None
        elif current and line.startswith("VmFlags:") and "lo" in line.split():
            found.append(current)
    return found


async def load(index: EdgeVectorIndex, count: int, seed: int = 1) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    await index.upsert([(str(uuid.uuid4()), v.tolist(), {"tenant": "a", "lifecycle": "active"}) for v in vectors])
    return vectors


def shard(tmp_path: Path, resident_mb: int, **options) -> EdgeVectorIndex:
    index = EdgeVectorIndex(
        path=tmp_path / "memories", collection="memories", vector_size=DIM, resident_mb=resident_mb, **options
    )
    index.open()
    return index


async def test_the_shards_mapped_files_are_locked_and_stay_so_through_its_changes(tmp_path):
    index = shard(tmp_path, resident_mb=64, optimize_every=100_000, flush_seconds=0.001)
    try:
        vectors = await load(index, 3000)
        await index.optimize()
        index.resident.wait()
        root = tmp_path / "memories"
        locked = index.resident.locked_bytes
        # The vectors (3000 x 64 float32) at least, and not the sparse files' holes (over 100 MiB mapped).
        assert 3000 * DIM * 4 <= locked < 32 << 20 and index.resident.refused_bytes == 0
        assert kernel_locked_kib(root) * 1024 == locked
        mapped = shard_ranges(smaps(), root)
        assert any(r.locked and "vector_storage" in r.path for r in mapped)
        assert not writable_locked(root)  # qdrant-edge writes through those: never locked
        status = await index.status()
        assert status.figures["resident_bytes"] == locked and status.figures["resident_refused_bytes"] == 0
        hits = await index.search_many([VectorQuery(vector=vectors[7].tolist(), tenant="a", limit=3)])
        assert len(hits[0]) == 3
        # A clear replaces the shard: the old ranges are forgotten, the new ones locked.
        await index.clear()
        index.resident.wait()
        assert index.resident.locked_bytes == kernel_locked_kib(root) * 1024
        await load(index, 500, seed=2)
        await index.optimize()
        index.resident.wait()
        assert 0 < index.resident.locked_bytes == kernel_locked_kib(root) * 1024
        assert not writable_locked(root) and index.flushes > 0
    finally:
        await index.close()


async def test_past_the_budget_the_rest_is_left_mapped_and_reported(tmp_path):
    index = shard(tmp_path, resident_mb=1, optimize_every=100_000)
    try:
        await load(index, 6000)  # 1.5 MiB of vectors alone
        await index.optimize()
        index.resident.wait()
        assert index.resident.locked_bytes == 1 << 20 == kernel_locked_kib(tmp_path / "memories") * 1024
        assert index.resident.refused_bytes > 0 and "VECTOR_RESIDENT_MB" in index.resident.refused_because
        status = await index.status()
        assert status.ok and "partly kept in memory" in status.detail
    finally:
        await index.close()


async def test_a_lock_the_kernel_refuses_is_reported_and_the_index_works_on(tmp_path, monkeypatch):
    index = shard(tmp_path, resident_mb=64, optimize_every=100_000)
    try:
        index.resident.wait()

        def refuse(address, size):
            ctypes.set_errno(1)  # EPERM, as without CAP_IPC_LOCK past RLIMIT_MEMLOCK
            return -1

        monkeypatch.setattr(index.resident._libc, "mlock", refuse)
        vectors = await load(index, 1000)
        await index.optimize()
        index.resident.wait()
        assert index.resident.refused_bytes > 0 and "mlock" in index.resident.refused_because
        hits = await index.search_many([VectorQuery(vector=vectors[3].tolist(), tenant="a", limit=1)])
        assert len(hits[0]) == 1
    finally:
        await index.close()


async def test_off_by_default_in_the_adapter_and_zero_locks_nothing(tmp_path):
    index = shard(tmp_path, resident_mb=0)
    try:
        await load(index, 500)
        await index.optimize()
        index.resident.wait()
        assert index.resident.locked_bytes == 0 and kernel_locked_kib(tmp_path / "memories") == 0
        assert "resident_bytes" not in (await index.status()).figures
    finally:
        await index.close()
