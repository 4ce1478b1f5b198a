"""`make soak`'s memory rule (benchmarks/soak.py) on made-up samples: what
the kernel cannot take back is judged, mapped file pages are shown beside
it, and nats-server's saw is compared at the same fill of its block."""

from __future__ import annotations

import asyncio
import os

import httpx

from benchmarks import soak
from benchmarks.soak_caches import cache_figures, cache_notes
from benchmarks.soak_nats_heap import heap_alloc_kib

MIB = 1024


def _samples(n: int, each) -> list:
    return [(float(i * 5), each(i)) for i in range(n)]


def test_mapped_file_pages_are_shown_but_not_judged():
    # recall: its heaps flat, its mapped index pages growing (page cache within the files on disk)
    def sizes(i):
        anon, file = 300 * MIB, 150 * MIB + i * 200
        return {"recall": anon + file, "recall:anon": anon, "recall:held": anon, "recall:file": file}

    p = soak.analyse(_samples(200, sizes), ["recall"], warmup=0)["recall"]
    assert p["late_growth"] > 0.02  # VmRSS grew, and the figure says so
    assert abs(p["late_held_growth"]) < 0.001  # what the kernel cannot take back did not


def test_a_growing_heap_fails_the_rule():
    def sizes(i):
        anon = 300 * MIB + i * 100
        return {"recall": anon + 150 * MIB, "recall:anon": anon, "recall:held": anon}

    assert soak.analyse(_samples(200, sizes), ["recall"], warmup=0)["recall"]["late_held_growth"] > 0.02


def _nats(leak_per_sample: float):
    # a block of 8 MiB filled in 150 samples; the heap follows it and Go's headroom doubles it
    def sizes(i):
        fill = (i % 150) / 150 * 8 * MIB
        held = 10 * MIB + 2 * fill + leak_per_sample * i
        return {"nats-server": held + 16 * MIB, "nats-server:anon": held, "nats-server:held": held, "nats-block": fill}

    return sizes


def test_the_nats_saw_is_compared_at_the_same_block_fill():
    p = soak.analyse(_samples(400, _nats(0)), ["nats-server"], warmup=0)["nats-server"]
    assert p["blocks_begun"] == 2
    assert "same block fill" in p["measure"]
    assert abs(p["late_held_growth"]) < 0.005  # the saw alone is not growth
    assert abs(p["late_growth"]) > 0.02  # though two windows of VmRSS at different fills differ


def test_a_nats_leak_shows_through_the_saw():
    p = soak.analyse(_samples(400, _nats(20)), ["nats-server"], warmup=0)["nats-server"]
    assert p["late_held_growth"] > 0.02


def test_a_run_shorter_than_a_block_takes_the_block_out():
    p = soak.analyse(_samples(100, _nats(0)), ["nats-server"], warmup=0)["nats-server"]
    assert p["blocks_begun"] == 0 and "beyond the newest block" in p["measure"]


def test_an_earlier_runs_figures_are_judged_again(tmp_path):
    def sizes(i):
        return {**_nats(0)(i), "redis-server": 40 * MIB + i, "redis-server:anon": 30 * MIB + i, "falkordb-data": i}

    names = ["nats-server", "redis-server"]
    result = {"processes": soak.analyse(_samples(400, sizes), names, warmup=0)}
    again = soak.analyse(soak.samples_of(result), names, warmup=0)
    for name in names:
        assert abs(again[name]["late_held_growth"] - result["processes"][name]["late_held_growth"]) < 1e-9
    assert abs(again["redis-server"]["late_held_growth"]) < 1e-9  # its growth was all data


def _nats_heap(leak_per_read: float):
    # a fixed resident budget (GOGC=off), and a live heap read every 20th sample: the block's buffer and a leak
    def sizes(i):
        row = {**_nats(0)(i), "nats-server:held": 60 * MIB, "nats-server:anon": 60 * MIB}
        if i % 20 == 0:
            row["nats-live-heap"] = 9 * MIB + row["nats-block"] + leak_per_read * (i // 20)
        return row

    return sizes


def test_the_nats_live_heap_is_shown_beyond_its_block_and_read_back():
    flat = soak.analyse(_samples(400, _nats_heap(0)), ["nats-server"], warmup=50)["nats-server"]
    assert abs(flat["late_held_growth"]) < 1e-9  # the resident budget is flat ...
    assert len(flat["live_heap_series_kib"]) == 19  # the reads after the warm-up, with the block's fill
    assert abs(flat["late_live_heap_beyond_block_kib"]) < 1e-9  # ... and so is the heap beyond its block
    leaking = soak.analyse(_samples(400, _nats_heap(100)), ["nats-server"], warmup=50)["nats-server"]
    assert abs(leaking["late_held_growth"]) < 1e-9  # the budget hides a leak ...
    assert leaking["late_live_heap_beyond_block_kib"] >= 500  # ... the live heap shows it (100 KiB a read)
    again = soak.analyse(soak.samples_of({"processes": {"nats-server": leaking}}), ["nats-server"], warmup=50)
    assert again["nats-server"]["live_heap_series_kib"] == leaking["live_heap_series_kib"]


def test_the_live_heap_is_read_from_the_profiles_memstats():
    text = "heap profile: 2: 2528 [2: 2529] @ heap/1048576\n...\n# runtime.MemStats\n# HeapAlloc = 652096\n# Sys = 1\n"
    assert heap_alloc_kib(text) == 636
    assert heap_alloc_kib("heap profile: 2: 2528 [2: 2529] @ heap/1048576\n") is None


def _falkordb(overhead_per_sample: float):
    # FalkorDB's data flat, then climbing at the end; its RSS is the data, a steady
    # overhead, and a sampling jitter that is not the data's (the two are read apart)
    def sizes(i):
        data = 20 * MIB + max(0, i - 500) * 60
        jitter = (3 * MIB) if i % 3 == 0 else 0
        held = data + 12 * MIB + overhead_per_sample * i + jitter
        return {"redis-server": held + 18 * MIB, "redis-server:held": held, "falkordb-data": data}

    return sizes


def test_falkordbs_overhead_is_taken_sample_by_sample():
    steady = soak.analyse(_samples(600, _falkordb(0)), ["redis-server"], warmup=0)["redis-server"]
    assert abs(steady["late_held_growth"]) < 0.005
    leaking = soak.analyse(_samples(600, _falkordb(8)), ["redis-server"], warmup=0)["redis-server"]
    assert leaking["late_held_growth"] > 0.02


async def test_a_delete_leaves_a_memory_being_patched_alone():
    release, seen = asyncio.Event(), []

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path))
        if request.method == "PATCH":
            await release.wait()
        return httpx.Response(200, json={})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler), base_url="http://soak") as client:
        load = soak.Load(client, {"patch": 1.0})
        load.live = ["a"]
        patch = asyncio.create_task(load.one("patch"))
        await asyncio.sleep(0.01)
        load.live.append("b")
        await load.one("delete")  # "a" is being patched: "b" goes
        release.set()
        await patch
    assert ("DELETE", "/memory/b") in seen and load.live == ["a"] and not load.patching
    assert not any(load.errors.values())


def test_recalls_caches_are_reported_with_their_change_over_the_second_half():
    # one cache filling to its bound of 4,000 in the first third, one still filling at the end
    samples = _samples(200, lambda i: {"cache:word_vectors": min(4000, i * 60), "cache:stems": i * 10})
    figures = cache_figures(samples, 10.0)
    assert figures["cache:word_vectors"]["late_change"] == 0 and figures["cache:word_vectors"]["max"] == 4000
    assert figures["cache:stems"]["late_change"] > 0
    assert "word_vectors" in cache_notes(figures)[0]


def test_the_index_size_skips_a_directory_removed_while_it_is_read(tmp_path, monkeypatch):
    (tmp_path / "segments").mkdir()
    (tmp_path / "segments" / "a.dat").write_bytes(b"x" * 4096)
    (tmp_path / "wal").mkdir()
    (tmp_path / "wal" / "log").write_bytes(b"x" * 2048)
    gone = tmp_path / "wal"
    scandir = os.scandir

    def vanishing(path):
        if os.fspath(path) == os.fspath(gone):
            raise FileNotFoundError(path)  # as qdrant-edge's atomic-write temporary did mid-soak
        return scandir(path)

    monkeypatch.setattr(os, "scandir", vanishing)
    assert soak.tree_kib(tmp_path) == 4
