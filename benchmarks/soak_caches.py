"""The soak's view of recall's bounded caches (services/recall/cache_gauges.py).

Recall keeps caches that fill with the corpus's new words and texts until
their bounds (settings): the related-words component's word vectors,
BM25's stems of words and of texts, the query embeddings, the counted
document frequencies. Each soak write brings a new word (its content's
uuid), so at the defaults these fill for hours (50,000 word vectors at
about 1.9 KiB: four hours at 15 operations a second) and their filling is
what a leak looks like over one hour's second half. The soak therefore
bounds the three that fill with new words (`--cache-cap`, 4,000 each: above
the working set of the live cap's 3,000 memories, full within about a
quarter of an hour, 17 minutes on a saturated machine; the index reopened
every --reopen-every changes, 2,000) so that they are full, and evicting, before the second
half: what still grows then is not a cache filling, and the caps are seen
to hold. `--cache-cap 0` runs them at the service's defaults. Each cache's
entries, the embedded index's reopens, the words embedded and the open
watches are read from recall's /metrics with every sample and reported."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.soak_rule import late_change

#: The settings --cache-cap sets (the caches that fill with every new word or text).
CAPPED = ("RECALL_RELATED_CACHE_WORDS", "RECALL_STEM_CACHE_WORDS", "RECALL_STEM_CACHE_TEXTS")
#: recall's metrics the soak follows: name (and label) -> the sample's key.
FOLLOWED = {
    "memgrid_recall_cache_entries": "cache",
    "memgrid_vector_index_reopens": "index-reopens",
    "memgrid_recall_words_embedded": "words-embedded",
    "memgrid_event_watches": "watches",
}


def stack_bounds(cache_cap: int, reopen_every: int) -> dict[str, str]:
    """The stack's settings for --cache-cap and --reopen-every (none for 0: the service's defaults)."""
    bounds = {name: str(cache_cap) for name in CAPPED} if cache_cap > 0 else {}
    return bounds | ({"VECTOR_REOPEN_EVERY": str(reopen_every)} if reopen_every > 0 else {})


def recall_figures(port: int | None) -> dict[str, float]:
    """recall's followed metrics now, by sample key ("cache:word_vectors",
    "index-reopens", ...); empty when the port does not answer."""
    if port is None:
        return {}
    try:
        return followed(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
    except httpx.HTTPError:
        return {}


def followed(text: str) -> dict[str, float]:
    """The followed metrics of a /metrics page, by sample key."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        key = FOLLOWED.get(family.name)
        if key is None:
            continue
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                found[f"cache:{sample.labels['cache']}" if key == "cache" else key] = sample.value
    return found


def cache_figures(samples: list, warmup: float) -> dict[str, dict]:
    """Each followed figure after the warm-up: at the baseline, the end, its
    most, and its change over the second half (the verdict's windows)."""
    warm = [s for t, s in samples if t >= warmup] or [samples[-1][1]]
    keys = sorted({k for s in warm for k in s if k.startswith("cache:") or k in FOLLOWED.values()})
    figures = {}
    for key in keys:
        series = [float(s[key]) for s in warm if s.get(key) is not None]
        if series:
            figures[key] = {
                "baseline": series[0],
                "end": series[-1],
                "max": max(series),
                "late_change": late_change(series),
                "series": [[round(t, 1), s.get(key)] for t, s in samples],
            }
    return figures


def cache_notes(figures: dict[str, dict]) -> list[str]:
    """One line of recall's caches and index for the report."""
    if not figures:
        return []
    parts = [
        f"{key.removeprefix('cache:')} {f['baseline']:.0f} -> {f['end']:.0f} (2nd half {f['late_change']:+.0f})"
        for key, f in figures.items()
    ]
    return ["recall's caches and index (entries; reopens, words embedded, watches): " + "; ".join(parts)]
