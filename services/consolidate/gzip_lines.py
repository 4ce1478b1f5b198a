"""The lines of a gzip file, inflated by zlib in C, a bounded piece at a time.

Not gzip.GzipFile: it parses each member's header in Python, a byte per
call, so a header whose name field runs for a gigabyte without its closing
NUL keeps a core busy for minutes before the first line; zlib's gzip
wrapper (wbits 31) reads headers, data and trailers (CRC and size checked)
at C speed. Nothing here holds more than one line and one inflated piece.
"""

from __future__ import annotations

import zlib
from typing import BinaryIO

#: Compressed bytes read per call ...
_READ = 1 << 16
#: ... and inflated bytes produced at most per step (the rest stays in zlib's unconsumed tail).
_INFLATE = 1 << 20
#: Gzip's wrapper, for zlib.
_GZIP = 31


class GzipLines:
    """readline(limit) over a gzip file (several members, as gzip allows, one after another).
    Raises zlib.error for data that is not gzip (or fails its CRC), EOFError for a stream cut short."""

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self._inflate = zlib.decompressobj(_GZIP)
        self._buffer = b""
        self._pos = 0
        self._started = False

    def _more(self) -> bool:
        """Inflate the next piece into the buffer; False at the clean end of the file."""
        while True:
            data = self._inflate.unconsumed_tail
            if not data:
                if self._inflate.eof:
                    data = self._inflate.unused_data or self._raw.read(_READ)
                    if not data:
                        return False
                    self._inflate = zlib.decompressobj(_GZIP)  # the next member
                else:
                    data = self._raw.read(_READ)
                    if not data:
                        if self._started:
                            raise EOFError("the gzip stream ends before its end")
                        return False  # an empty file
            self._started = True
            out = self._inflate.decompress(data, _INFLATE)
            if out:
                self._buffer = self._buffer[self._pos :] + out
                self._pos = 0
                return True

    def readline(self, limit: int) -> bytes:
        """The next line with its newline, or its first `limit` bytes when it is longer; b"" at the end."""
        scan = self._pos
        while True:
            end = self._buffer.find(b"\n", scan, self._pos + limit)
            if end >= 0:
                line = self._buffer[self._pos : end + 1]
                self._pos = end + 1
                return line
            if len(self._buffer) - self._pos >= limit:
                line = self._buffer[self._pos : self._pos + limit]
                self._pos += limit
                return line
            scan = len(self._buffer)
            before = self._pos
            if not self._more():
                line = self._buffer[self._pos :]
                self._buffer, self._pos = b"", 0
                return line
            scan -= before  # the buffer now starts at the old position
