"""Which mapped ranges of a shard are locked, in what order, and only where
its sparse files hold data (edge_resident)."""

import os
from pathlib import Path

from services.core.adapters.edge_resident import data_extents, shard_ranges

ROOT = Path("/data/vectors/memories")
SEG = "/data/vectors/memories/segments/s1"
FLAGS = "VmFlags: rd sh mr mw me ms sd"
SMAPS = f"""\
7f0000000000-7f0000100000 r--s 00000000 fd:01 11 {SEG}/payload_storage/page_0.dat
Rss:                   4 kB
{FLAGS}
7f0000100000-7f0000200000 rw-s 00000000 fd:01 12 {SEG}/vector_storage/matrix.dat
{FLAGS}
7f0000200000-7f0000210000 r--s 00010000 fd:01 13 {SEG}/vector_index/links.bin
VmFlags: rd sh mr mw me ms lo sd
7f0000210000-7f0000220000 rw-p 00000000 fd:01 14 {SEG}/payload_index/x/page_0.dat
{FLAGS}
7f0000220000-7f0000230000 r--p 00000000 fd:01 15 {SEG}/payload_index/y/page_0.dat
{FLAGS}
7f0000230000-7f0000240000 rw-s 00000000 fd:01 16 /data/vectors/memories/wal/open-1
{FLAGS}
7f0000240000-7f0000250000 r--s 00000000 fd:01 17 /data/vectors/memories-other/segments/s/vector_index/links.bin
{FLAGS}
7f0000250000-7f0000260000 r--s 00000000 fd:01 18 /data/vectors/memories/segments/s0/vector_index/links.bin (deleted)
{FLAGS}
7f0000260000-7f0000270000 rw-p 00000000 00:00 0
{FLAGS}
7f0000270000-7f0000280000 r-xp 00000000 fd:01 19 /usr/lib/libc.so.6
{FLAGS}
7f0000280000-7f0000290000 r--s 00000000 fd:01 20 {SEG}/id_tracker/ids.dat
{FLAGS}
"""


def test_the_shards_ranges_come_most_searched_first_each_saying_whether_it_is_locked():
    ranges = shard_ranges(SMAPS, ROOT)
    assert [Path(r.path).name for r in ranges] == ["links.bin", "page_0.dat", "ids.dat", "page_0.dat"]
    assert Path(ranges[1].path).parent.name == "y"  # the read-only private index, not the writable one
    assert ranges[0].locked and not any(r.locked for r in ranges[1:])
    assert (ranges[0].size, ranges[0].offset) == (0x10000, 0x10000)
    assert ranges[-1].path.endswith("payload_storage/page_0.dat")


def test_the_wal_other_shards_deleted_files_and_writable_maps_are_left_alone():
    paths = {r.path for r in shard_ranges(SMAPS, ROOT)}
    assert not any("wal" in p or "memories-other" in p or "deleted" in p or "/x/" in p for p in paths)
    # qdrant-edge writes through a shared writable mapping: locked, its flushes failed (EFAULT).
    assert not any(p.endswith("matrix.dat") for p in paths)
    assert shard_ranges(SMAPS, Path("/elsewhere")) == []


def test_only_the_parts_of_a_sparse_file_that_hold_data_are_locked(tmp_path):
    page = os.sysconf("SC_PAGE_SIZE")
    path = tmp_path / "page_0.dat"
    with open(path, "wb") as f:
        f.truncate(64 * page)  # a large sparse file, as qdrant-edge makes them
        f.seek(3 * page + 10)
        f.write(b"x" * 100)  # data inside the fourth page
        f.seek(40 * page)
        f.write(b"y" * (2 * page))
    assert data_extents(str(path), 0, 64 * page) == [(3 * page, 4 * page), (40 * page, 42 * page)]
    # Within a mapping that starts part way into the file.
    assert data_extents(str(path), 41 * page, 10 * page) == [(41 * page, 42 * page)]
    assert data_extents(str(path), 50 * page, 14 * page) == []
