"""Reading an archive (a restore's two passes) and a file's bytes (a download).

Reading one is bounded: a line longer than RESTORE_MAX_LINE_BYTES, or more
unpacked bytes than RESTORE_MAX_UNPACKED_BYTES (or than the manifest file
declares), is refused after reading at most that much.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, BinaryIO

import structlog

from services.consolidate.gzip_lines import GzipLines
from services.core.domain.archive import ArchiveError
from services.core.domain.archive_decoder import ArchiveDecoder

log = structlog.get_logger()

#: Lines decoded per hop to a worker thread while an archive is read ...
_READ_BATCH = 1000
#: ... and at most this many unpacked bytes (a batch of long lines stays bounded).
_READ_BATCH_BYTES = 8 << 20

#: RESTORE_MAX_LINE_BYTES and RESTORE_MAX_UNPACKED_BYTES's defaults (services/core/settings/backup.py).
MAX_LINE_BYTES = 16 << 20
MAX_UNPACKED_BYTES = 16 << 30


class _BoundedLines:
    """Lines of an unpacked stream, each at most `max_line` bytes, at most `max_total` in all:
    past either bound the archive is refused, having read no more than the bound."""

    def __init__(self, stream: Any, max_line: int, max_total: int, total_setting: str):
        self._stream = stream
        self._max_line = max_line
        self._max_total = max_total
        self._total_setting = total_setting
        self.total = 0
        self.lines = 0

    def read(self, count: int, max_bytes: int) -> list[bytes]:
        lines: list[bytes] = []
        size = 0
        while len(lines) < count and size < max_bytes:
            line = self._stream.readline(self._max_line + 1)
            if not line:
                break
            self.lines += 1
            if len(line) > self._max_line:
                raise ArchiveError(
                    "ARCHIVE_LINE_TOO_LONG",
                    f"the archive is refused: line {self.lines} is longer than RESTORE_MAX_LINE_BYTES"
                    f" ({self._max_line} bytes)",
                    line=self.lines,
                    limit=self._max_line,
                )
            self.total += len(line)
            if self.total > self._max_total:
                raise ArchiveError(
                    "ARCHIVE_TOO_LARGE",
                    f"the archive is refused: it unpacks to more than {self._total_setting} ({self._max_total} bytes)"
                    f" by line {self.lines}",
                    line=self.lines,
                    limit=self._max_total,
                )
            lines.append(line)
            size += len(line)
        return lines


async def read_archive(
    path: Path | BinaryIO,
    decoder: ArchiveDecoder,
    batch: int = _READ_BATCH,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_unpacked_bytes: int = MAX_UNPACKED_BYTES,
    declared_bytes: int = 0,
) -> AsyncIterator[list[Any]]:
    """The archive's records, a batch at a time, each line checked by `decoder`
    (a damaged gzip stream is refused as ARCHIVE_CORRUPT, a cut one as
    ARCHIVE_TRUNCATED); decoder.finish() after the last batch checks the manifest.

    Bounded: a line longer than `max_line_bytes`, or more unpacked bytes than
    `max_unpacked_bytes` (or than `declared_bytes`, what the manifest file beside
    the archive declares, with the manifest line itself), is refused having
    read at most that much."""
    limit, setting = max_unpacked_bytes, "RESTORE_MAX_UNPACKED_BYTES"
    if declared_bytes and declared_bytes + max_line_bytes < limit:
        limit, setting = declared_bytes + max_line_bytes, "what its manifest declares"
    raw = await asyncio.to_thread(path.open, "rb") if isinstance(path, Path) else path
    reader = _BoundedLines(GzipLines(raw), max_line_bytes, limit, setting)
    try:
        while True:
            try:
                lines = await asyncio.to_thread(reader.read, batch, _READ_BATCH_BYTES)
            except EOFError:
                raise ArchiveError(
                    "ARCHIVE_TRUNCATED", "the archive is truncated: its gzip stream ends early"
                ) from None
            except (zlib.error, OSError) as exc:
                raise ArchiveError("ARCHIVE_CORRUPT", f"the archive is not a readable gzip file: {exc}") from None
            if not lines:
                break
            yield [decoder.feed(line) for line in lines]
        decoder.finish()
    finally:
        if raw is not path:
            await asyncio.to_thread(raw.close)


async def read_chunks(path: Path, size: int) -> AsyncIterator[bytes]:
    """A file's bytes, `size` at a time (a download)."""
    stream = await asyncio.to_thread(path.open, "rb")
    try:
        while chunk := await asyncio.to_thread(stream.read, size):
            yield chunk
    finally:
        await asyncio.to_thread(stream.close)
