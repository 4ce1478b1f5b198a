"""`make soak`'s memory rule (benchmarks/soak.py): each process's figures
from the samples, judged on what the kernel cannot take back (RssAnon +
RssShmem), FalkorDB's beyond its data, nats-server's at the same fill of
its newest message block; and the samples back from a saved run's figures
(--reanalyse). docs/reliability.md (make soak) says why."""

from __future__ import annotations

import statistics

#: The name benchmarks.stack gives FalkorDB's process (redis-server with the module).
FALKORDB = "redis-server"
#: What a process holds by design and may grow with, taken out of its growth: FalkorDB's data
#: (its used_memory). nats-server's newest message block is not taken out but matched (block_matched).
DATA_OF = {FALKORDB: "falkordb-data"}
#: nats-server's series beside its memory: the newest message block's size, which saws.
NATS_BLOCK = "nats-block"
#: nats-server's live heap (KiB), read every few minutes from its profiler (benchmarks/soak_nats_heap.py).
NATS_LIVE_HEAP = "nats-live-heap"


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def late_change(values: list[float]) -> float:
    """The change over the second half of a series: the median of its last
    tenth (at least three samples) against that of the tenth after its half.
    One sample is a garbage collection's moment or a batch's working memory;
    a leak moves the median."""
    half, width = len(values) // 2, max(3, len(values) // 10)
    return _median(values[-width:]) - _median(values[half : half + width])


def late_beyond(values: list[float], data: list[float]) -> float:
    """late_change of a series beyond its data: each sample less its own
    data, then the change. Two medians of series that both climb, taken apart
    and subtracted, differ by the jitter of each (1.3 MiB, where FalkorDB's
    memory beyond its data moved 0.1 MiB in the hour of 2026-12-05)."""
    return late_change([v - d for v, d in zip(values, data, strict=True)])


def blocks_of(fill: list[float]) -> list[int]:
    """Which of the stream's blocks each sample was taken in, counted from 0:
    the newest block's size only grows, so a drop is the next block beginning."""
    block, out = 0, []
    for i, size in enumerate(fill):
        if i and size < fill[i - 1] / 2:
            block += 1
        out.append(block)
    return out


def block_matched(held: list[float], fill: list[float], tolerance: float = 0.03) -> tuple[float | None, str]:
    """nats-server's growth over the second half at the same point of its
    block cycle. JetStream keeps the block it writes in memory while the
    consumers read it (up to 8 MiB) and Go's heap takes up to as much again
    before a collection, so its memory saws with the block: two windows at
    different fills differ by megabytes without anything leaking. Each sample
    of the last tenth is set against the samples of an earlier block whose
    fill was within `tolerance` of the block's size of its own, in the second
    half (else anywhere in the window, said so); the change is the median of
    those differences. None where no earlier block reached that fill (a run
    shorter than one block)."""
    block, size = blocks_of(fill), max(fill, default=0.0)
    half, width = len(held) // 2, max(3, len(held) // 10)
    for scope, start in (("second half, same block fill", half), ("window, same block fill", 0)):
        differences = []
        for i in range(len(held) - width, len(held)):
            matched = [
                held[j]
                for j in range(start, len(held) - width)
                if block[j] < block[i] and abs(fill[j] - fill[i]) <= tolerance * size
            ]
            if matched:
                differences.append(held[i] - _median(matched))
        if size and len(differences) * 2 >= width:  # at least half of the late window matched
            return _median(differences), scope
    return None, "no earlier block at the same fill"


def analyse(samples: list, names: list[str], warmup: float) -> dict:
    """Each process's figures from the samples (seconds, sizes) after the warm-up.

    The verdict's measure is the memory the kernel cannot take back (RssAnon +
    RssShmem, held_kib): VmRSS also counts mapped file pages, page cache that
    grows and shrinks with the files a process reads (recall's vector index:
    its segments and WAL), shown beside it with the index's own pages and its
    size on disk. FalkorDB's is taken beyond its data; nats-server's is
    matched on its newest block's fill (block_matched)."""
    warm = [s for t, s in samples if t >= warmup] or [samples[-1][1]]
    processes = {}
    for name in names:
        rows = [s for s in warm if s.get(name)]
        if not rows:
            continue
        series = [float(s[name]) for s in rows]
        held = [float(s.get(f"{name}:held") or s.get(f"{name}:anon") or 0) for s in rows]
        anon = [float(s.get(f"{name}:anon") or 0) for s in rows]
        data_key = DATA_OF.get(name)
        data = [float(s.get(data_key) or 0) for s in rows] if data_key else [0.0] * len(rows)
        baseline, held_baseline = series[0], held[0] or 1.0
        late_data = late_change(data)

        figures = {
            "baseline_kib": series[0],
            "end_kib": series[-1],
            "max_kib": max(series),
            "data_growth_kib": data[-1] - data[0],
            "late_data_growth_kib": late_data,
            "growth": (series[-1] - baseline - (data[-1] - data[0])) / baseline,
            # VmRSS over the second half, beyond the data: shown, not the verdict.
            "late_growth": late_beyond(series, data) / baseline,
            "late_anon_growth": late_beyond(anon, data) / baseline,
            "held_baseline_kib": held_baseline,
            "held_end_kib": held[-1],
            "late_held_growth": late_beyond(held, data) / held_baseline,
            "measure": "RssAnon+RssShmem" + (", beyond its data" if data_key else ""),
            "series_kib": [[round(t, 1), s.get(name)] for t, s in samples],
            "anon_series_kib": [[round(t, 1), s.get(f"{name}:anon")] for t, s in samples],
            "held_series_kib": [[round(t, 1), s.get(f"{name}:held")] for t, s in samples],
            "file_series_kib": [[round(t, 1), s.get(f"{name}:file")] for t, s in samples],
            **({"data_series_kib": [[round(t, 1), s.get(data_key)] for t, s in samples]} if data_key else {}),
        }
        if name == "nats-server":
            fill = [float(s.get(NATS_BLOCK) or 0) for s in rows]
            matched, scope = block_matched(held, fill)
            figures["block_series_kib"] = [[round(t, 1), s.get(NATS_BLOCK)] for t, s in samples]
            figures["blocks_begun"] = blocks_of(fill)[-1]
            figures |= live_heap_figures(samples, warmup)
            if matched is not None:
                figures["late_held_growth"] = matched / held_baseline
                figures["measure"] = f"RssAnon+RssShmem, {scope}"
            else:  # shorter than a block: beyond the newest block's bytes, as before
                figures["late_held_growth"] = (late_change(held) - late_change(fill)) / held_baseline
                figures["measure"] = f"RssAnon+RssShmem beyond the newest block ({scope})"
        if name.startswith("recall"):
            mapped = [float(s.get("index-mapped") or 0) for s in rows]
            disk = [float(s.get("index-disk") or 0) for s in rows]
            figures |= {
                "index_mapped_kib": [mapped[0], mapped[-1], max(mapped)],
                "late_index_mapped_kib": late_change(mapped),
                "index_disk_kib": [disk[0], disk[-1], max(disk)],
                "late_index_disk_kib": late_change(disk),
            }
        processes[name] = figures
    return processes


def live_heap_figures(samples: list, warmup: float) -> dict:
    """nats-server's live heap after the warm-up, shown beside its verdict
    (not judged: the rule is its resident memory): its series with the
    newest block's size, and its change over the second half beyond that
    block (the live heap holds the block's write buffer), as late_change."""
    readings = [
        (t, float(s[NATS_LIVE_HEAP]), float(s.get(NATS_BLOCK) or 0))
        for t, s in samples
        if t >= warmup and s.get(NATS_LIVE_HEAP) is not None
    ]
    if not readings:
        return {}
    return {
        "live_heap_series_kib": [[round(t, 1), heap, fill] for t, heap, fill in readings],
        "late_live_heap_beyond_block_kib": late_change([heap - fill for _, heap, fill in readings]),
    }


def samples_of(result: dict) -> list:
    """The samples (seconds, sizes) back from a result's series, so that
    --reanalyse judges an earlier run's figures by today's rule."""
    sizes: dict[float, dict] = {}
    suffixes = {
        "series_kib": "",
        "anon_series_kib": ":anon",
        "held_series_kib": ":held",
        "file_series_kib": ":file",
    }
    for name, p in result["processes"].items():
        for key, suffix in suffixes.items():
            for t, value in p.get(key, []):
                sizes.setdefault(t, {})[f"{name}{suffix}"] = value
        for key, series in (("data_series_kib", DATA_OF.get(name)), ("block_series_kib", NATS_BLOCK)):
            for t, value in p.get(key, []) if series else []:
                sizes.setdefault(t, {})[series] = value
        for t, heap, _ in p.get("live_heap_series_kib", []):
            sizes.setdefault(t, {})[NATS_LIVE_HEAP] = heap
        if name == "nats-server" and "block_series_kib" not in p:  # before the rule matched blocks
            for t, value in p.get("data_series_kib", []):
                sizes.setdefault(t, {})[NATS_BLOCK] = value
    return sorted(sizes.items())
