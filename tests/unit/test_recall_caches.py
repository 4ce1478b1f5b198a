"""Recall's bounded caches (services/recall/cache_gauges.py,
services/core/domain/recall_text.py): the stem caches hold at most their
settings' bounds, and each cache's fill reaches /metrics as the soak reads
it (benchmarks/soak_caches.py)."""

from __future__ import annotations

from prometheus_client import REGISTRY, generate_latest

from benchmarks.soak_caches import CAPPED, followed, stack_bounds
from services.core.domain import recall_text
from services.core.settings import Settings
from services.recall.cache_gauges import watch_caches


def test_the_stem_caches_hold_at_most_their_bounds():
    before = recall_text.stem.cache_info().maxsize, recall_text.text_stems.cache_info().maxsize
    try:
        recall_text.bound_stem_caches(50, 20)
        texts = [f"deploying caches {i:04x}word and {i}th rollbacks" for i in range(100)]
        scores = recall_text.bm25(["deploy", "rollback"], dict(enumerate(texts)), {"deploy": 3}, 100, k1=0.9, b=0.4)
        assert recall_text.stem.cache_info().currsize == 50
        assert recall_text.text_stems.cache_info().currsize == 20
        # The stems are the same as with the default bounds: only what is kept changed.
        assert recall_text.stem("rollbacks") == "rollback" and recall_text.stem("memories") == "memory"
        assert len(scores) == 100 and all(score > 0 for score in scores.values())
    finally:
        recall_text.bound_stem_caches(*before)


def test_each_caches_fill_reaches_metrics_as_the_soak_reads_it():
    held = {"word_vectors": [3], "text_stems": [5]}
    watch_caches({name: (lambda name=name: held[name][0]) for name in held}, reopens=lambda: 2)
    held["word_vectors"][0] = 7  # read when scraped, not when registered
    figures = followed(generate_latest(REGISTRY).decode())
    assert figures["cache:word_vectors"] == 7
    assert figures["cache:text_stems"] == 5
    assert figures["index-reopens"] == 2


def test_the_soak_bounds_the_caches_and_the_index_unless_told_not_to():
    assert stack_bounds(4000, 2000) == {**dict.fromkeys(CAPPED, "4000"), "VECTOR_REOPEN_EVERY": "2000"}
    assert stack_bounds(0, 0) == {}
    settings = Settings()
    fields = {f.upper() for group in (settings.recall, settings.vectors) for f in type(group).model_fields}
    assert {*CAPPED, "VECTOR_REOPEN_EVERY"} <= fields
