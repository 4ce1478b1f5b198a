"""services/core/heap.py: the garbage collector's pauses timed, and a started service's objects frozen."""

from __future__ import annotations

import gc

from prometheus_client import REGISTRY

from services.core.heap import freeze_startup_objects, time_collections


def _collections(generation: str) -> float:
    return REGISTRY.get_sample_value("memgrid_gc_pause_seconds_count", {"generation": generation}) or 0.0


def test_time_collections_times_each_generation_once_however_often_it_is_called():
    time_collections()
    time_collections()
    try:
        before = _collections("2")
        gc.collect()
        assert _collections("2") == before + 1
    finally:
        gc.callbacks[:] = [c for c in gc.callbacks if type(c).__name__ != "_PauseTimer"]


def test_freeze_startup_objects_leaves_what_was_held_out_of_collections():
    held = [[i] for i in range(1000)]
    try:
        freeze_startup_objects()
        assert gc.get_freeze_count() >= len(held)
        assert not any(len(gc.get_objects(generation)) >= len(held) for generation in (0, 1, 2))
    finally:
        gc.unfreeze()
