"""GzipLines (services/consolidate/gzip_lines.py): gzip's lines, inflated by zlib, bounded."""

from __future__ import annotations

import gzip
import io
import zlib

import pytest

from services.consolidate.gzip_lines import GzipLines


def lines_of(data: bytes, limit: int = 1 << 20) -> list[bytes]:
    reader = GzipLines(io.BytesIO(data))
    out = []
    while line := reader.readline(limit):
        out.append(line)
    return out


def test_lines_across_pieces_and_members_come_back_whole():
    text = b"".join(b"%d %s\n" % (i, b"x" * (i * 997 % 5000)) for i in range(3000)) + b"last, no newline"
    assert lines_of(gzip.compress(text)) == text.splitlines(keepends=True)
    two = gzip.compress(b"one\ntw") + gzip.compress(b"o\nthree\n")  # gzip allows members one after another
    assert lines_of(two) == [b"one\n", b"two\n", b"three\n"]
    assert lines_of(b"") == []


def test_a_long_line_comes_back_cut_at_the_limit():
    assert lines_of(gzip.compress(b"a" * 100 + b"\nb\n"), limit=10)[:2] == [b"a" * 10, b"a" * 10]


def test_a_cut_or_damaged_stream_is_refused():
    data = gzip.compress(b"line\n" * 10_000)
    with pytest.raises(EOFError):
        lines_of(data[: len(data) // 2])
    with pytest.raises(zlib.error):
        lines_of(b"not gzip at all")
    damaged = bytearray(data)
    damaged[-8] ^= 0xFF  # the CRC
    with pytest.raises(zlib.error):
        lines_of(bytes(damaged))
