"""One process owns an embedded shard: a lock file beside it, held while the
index is open, so a second process on the same directory refuses to start
with VectorIndexInUse instead of failing deep in qdrant-edge's WAL."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class VectorIndexInUse(RuntimeError):
    """Another process holds the embedded index: qdrant-edge's shard belongs
    to one process, so several recall replicas need a Qdrant server."""


class ShardLock:
    """`path` (<collection>.lock), the lock of the shard at `shard`."""

    def __init__(self, path: Path, shard: Path):
        self._path = path
        self._shard = shard
        self._fd: int | None = None

    def take(self) -> None:
        """Hold the lock for the life of the open index (flock: the kernel
        drops it when the process dies, so a crash leaves no stale lock)."""
        if self._fd is not None:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise VectorIndexInUse(
                f"the embedded vector index {self._shard} is in use by another process (pid {holder}): "
                "it belongs to one recall process; run one recall replica, or set QDRANT_URL so replicas share "
                "a Qdrant server"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
