"""Recall's embedded vector index: are its mapped file pages memory the
process holds, or page cache the kernel can take back? (docs/reliability.md,
make soak: why the soak judges RssAnon + RssShmem and shows VmRSS beside it.)

Builds a shard of --points random 384-dimension points in a temporary
directory (the adapter recall uses, one optimisation), runs 200 searches,
then asks the kernel to page out the shard's mappings (madvise
MADV_PAGEOUT, what reclaim does under memory pressure; it leaves pages
mapped more than once, which reclaim takes through the reverse map) and
runs the same searches again. Prints VmRSS, RssAnon and RssFile, the
shard's resident mapped pages and whether they are clean, at each step.

    python -m benchmarks.soak_pageout --points 20000
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import random
import shutil
import tempfile
from pathlib import Path

from services.core.adapters.edge_index import EdgeVectorIndex
from services.core.domain.projection import VectorQuery

#: linux/mman.h
MADV_PAGEOUT = 21
PAGE_KINDS = ("Rss", "Shared_Clean", "Private_Clean", "Shared_Dirty", "Private_Dirty")


def status_mib() -> dict[str, float]:
    wanted = ("VmRSS:", "RssAnon:", "RssFile:")
    lines = Path("/proc/self/status").read_text().splitlines()
    return {line.split(":")[0]: round(int(line.split()[1]) / 1024, 1) for line in lines if line.startswith(wanted)}


def shard_pages(root: Path) -> tuple[dict[str, float], list[tuple[int, int]]]:
    """The shard's resident mapped pages by kind (Rss, Shared_Clean, Private_Dirty, ...), in MiB, and its mappings."""
    kinds: dict[str, float] = {}
    ranges, inside = [], False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and not head[0].endswith(":"):
            inside = len(head) > 5 and head[5].startswith(str(root))
            if inside:
                start, end = (int(x, 16) for x in head[0].split("-"))
                ranges.append((start, end))
        elif inside and head[0].rstrip(":") in (
            "Rss",
            "Shared_Clean",
            "Private_Clean",
            "Shared_Dirty",
            "Private_Dirty",
        ):
            kinds[head[0].rstrip(":")] = kinds.get(head[0].rstrip(":"), 0) + int(head[1]) / 1024
    return {k: round(v, 1) for k, v in kinds.items() if v}, ranges


async def main(points: int) -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    root = Path(tempfile.mkdtemp(prefix="memgrid-pageout-"))
    index = EdgeVectorIndex(path=root / "memories", collection="memories", vector_size=384, optimize_every=10**9)
    index.open()
    rnd = random.Random(1)  # noqa: S311  made-up vectors, not a secret

    def vector() -> list[float]:
        return [rnd.gauss(0, 1) for _ in range(384)]

    try:
        for start in range(0, points, 500):
            batch = range(start, min(points, start + 500))
            await index.upsert([(f"m{i}", vector(), {"tenant": "t", "memory_id": f"m{i}"}) for i in batch])
        await index.optimize()
        queries = [VectorQuery(vector=vector(), tenant="t", limit=10) for _ in range(200)]
        before = await index.search_many(queries)
        pages, ranges = shard_pages(root)
        print(f"built, 200 searches: {status_mib()}; the shard's mapped pages (MiB): {pages}")
        for start, end in ranges:
            libc.madvise(start, end - start, MADV_PAGEOUT)
        print(f"paged out: {status_mib()}; the shard's mapped pages (MiB): {shard_pages(root)[0]}")
        after = await index.search_many(queries)
        same = sum([h.id for h in x] == [h.id for h in y] for x, y in zip(before, after, strict=True))
        print(f"the same searches: {same}/200 identical; {status_mib()}; mapped (MiB): {shard_pages(root)[0]}")
    finally:
        await index.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=20000, help="points in the shard")
    asyncio.run(main(parser.parse_args().points))
