"""EdgeVectorIndex (qdrant-edge in-process): current-state filters, tenant
scope, the dimension rules, clear, and the projector's payload. The same
cases against qdrant-client: test_vector_congruence.py."""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.core.adapters.edge_index import INDEXED_FIELDS, EdgeVectorIndex
from services.core.domain.model import Memory
from services.core.domain.projection import VectorQuery, vector_payload
from tests.fakes import nearest

pytestmark = pytest.mark.integration

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def memory(tenant: str = "a", **fields) -> Memory:
    values = dict(
        id=str(uuid.uuid4()), tenant=tenant, content="x", type="Context", confidence=0.5, importance=0.5,
        timestamp=NOW - timedelta(days=1), t_valid=NOW - timedelta(days=1), updated_at=NOW, last_accessed=NOW,
        recorded_at=NOW, embedding=[1.0, 0.0, 0.0, 0.0],
    )  # fmt: skip
    values.update(fields)
    return Memory(**values)


async def put(index, memories):
    await index.upsert([(m.id, m.embedding, vector_payload(m)) for m in memories])


async def test_current_state_filter_withholds_expired_future_and_archived(index):
    current = memory()
    expired = memory(t_invalid=NOW - timedelta(hours=1))
    future = memory(t_valid=NOW + timedelta(days=1))
    archived = memory(archived=True)
    other_tenant = memory(tenant="b")
    await put(index, [current, expired, future, archived, other_tenant])
    query = VectorQuery(vector=[1.0, 0.0, 0.0, 0.0], tenant="a", limit=10, current_at=NOW)
    assert [h.id for h in await nearest(index, query)] == [current.id]
    # Without current_at: the history, but archived points are never candidates.
    history = VectorQuery(vector=[1.0, 0.0, 0.0, 0.0], tenant="a", limit=10)
    assert {h.id for h in await nearest(index, history)} == {current.id, expired.id, future.id}
    # Once its window closes, the same memory is withheld: no stale payload.
    later = VectorQuery(vector=[1.0, 0.0, 0.0, 0.0], tenant="a", limit=10, current_at=NOW + timedelta(days=400))
    expiring = memory(t_invalid=NOW + timedelta(days=30))
    await put(index, [expiring])
    assert expiring.id not in {h.id for h in await nearest(index, later)}


async def test_exclusions_scores_and_deletes(index):
    near, far = memory(), memory(embedding=[0.0, 1.0, 0.0, 0.0])
    await put(index, [near, far])
    query = VectorQuery(vector=[1.0, 0.0, 0.0, 0.0], tenant="a", limit=10, min_score=0.5)
    assert [h.id for h in await nearest(index, query)] == [near.id]
    excluded = VectorQuery(vector=[1.0, 0.0, 0.0, 0.0], tenant="a", limit=10, exclude_ids=(near.id,))
    assert near.id not in {h.id for h in await nearest(index, excluded)}
    await index.delete([near.id], tenant="a")
    assert await index.count() == 1


async def test_an_existing_index_keeps_its_dimension(tmp_path):
    path = tmp_path / "vectors" / "memories"
    first = EdgeVectorIndex(path=path, collection="memories", vector_size=4)
    first.open()
    await put(first, [memory()])
    await first.close()

    adopted = EdgeVectorIndex(path=path, collection="memories", vector_size=8)
    adopted.open()
    assert adopted.dimension == 4 and (await adopted.status()).status == "connected"
    with pytest.raises(ValueError):
        await adopted.upsert([(str(uuid.uuid4()), [0.0] * 8, {})])
    assert adopted.refused == 1
    await adopted.close()

    strict = EdgeVectorIndex(path=path, collection="memories", vector_size=8, autodetect=False)
    strict.open()
    status = await strict.status()
    assert status.status == "dimension_mismatch" and "8" in status.detail and "4" in status.detail
    await strict.close()


async def test_clear_replaces_the_shard_with_an_empty_usable_one(tmp_path):
    path = tmp_path / "vectors" / "memories"
    # optimize_every=1: an optimisation is running (without the search lock) when clear() starts.
    index = EdgeVectorIndex(path=path, collection="memories", vector_size=4, optimize_every=1)
    index.open()
    await put(index, [memory() for _ in range(50)])
    await index.clear()
    assert await index.count() == 0
    assert not path.with_name("memories.cleared").exists()

    kept = memory(tags=["Ops"], tag_prefixes=["ops"])
    await put(index, [kept])
    query = VectorQuery(vector=[1.0, 0.0, 0.0, 0.0], tenant="a", limit=10, current_at=NOW, tags=("ops",))
    assert [h.id for h in await nearest(index, query)] == [kept.id]
    await index.close()

    # A clear the process did not finish (the old shard moved aside) is cleaned up on open.
    path.with_name("memories.cleared").mkdir()
    reopened = EdgeVectorIndex(path=path, collection="memories", vector_size=4)
    reopened.open()
    assert await reopened.count() == 1 and not path.with_name("memories.cleared").exists()
    info = await reopened._run(lambda shard: shard.info())
    assert set(info.payload_schema) == set(INDEXED_FIELDS)
    await reopened.close()


async def _segment_count(path, tmp_path) -> int:
    """The points a copy of the shard holds without its WAL: what its segments hold."""
    copy = tmp_path / "copy" / "memories"
    shutil.rmtree(copy.parent, ignore_errors=True)
    shutil.copytree(path, copy)
    for wal in (copy / "wal").iterdir():
        wal.unlink()
    index = EdgeVectorIndex(path=copy, collection="memories", vector_size=4)
    index.open()
    try:
        return await index.count()
    finally:
        await index.close()


async def test_writes_reach_the_segments_within_flush_seconds(tmp_path):
    """qdrant-edge flushes only when told: an index never flushed keeps every
    change in RAM and in a WAL it cannot truncate (recall's RSS grew with
    every write in the soak). A write flush_seconds after the last flush
    flushes the shard, so the segments hold what was written before it."""
    path = tmp_path / "vectors" / "memories"
    index = EdgeVectorIndex(path=path, collection="memories", vector_size=4, flush_seconds=0.5)
    index.open()
    written = [memory() for _ in range(6)]
    await put(index, written[:5])
    assert index.flushes == 0 and await _segment_count(path, tmp_path) == 0  # within flush_seconds: the WAL only
    await asyncio.sleep(0.55)
    await put(index, written[5:])
    await index.delete([written[0].id], tenant="a")
    assert index.flushes == 1  # the delete came right after the flush: it waits for the next one
    assert await _segment_count(path, tmp_path) == 6
    await index.close()


async def test_the_shard_is_reopened_every_reopen_every_changes_and_keeps_its_points(tmp_path):
    """An open shard keeps native memory for every change it has seen (recall's
    RSS grew through the soak); reopen_every changes (upserts and deletes)
    close it and load it again, which gives it back, and loses nothing."""
    path = tmp_path / "vectors" / "memories"
    index = EdgeVectorIndex(path=path, collection="memories", vector_size=4, reopen_every=5)
    index.open()
    written = [memory() for _ in range(4)]
    await put(index, written)
    assert index.reopens == 0
    await index.delete([written[0].id], tenant="a")  # the fifth change
    assert index.reopens == 1
    query = VectorQuery(vector=[1.0, 0.0, 0.0, 0.0], tenant="a", limit=10, current_at=NOW)
    assert {h.id for h in await nearest(index, query)} == {m.id for m in written[1:]}
    async with index.bulk_load():  # a rebuild's upserts never reopen the shard under it
        await put(index, [memory() for _ in range(6)])
    assert index.reopens == 1
    await put(index, [memory()])  # the count went on meanwhile: the next change reopens
    assert index.reopens == 2 and await index.count() == 10
    await index.close()


async def test_calls_during_a_reopen_wait_for_it(tmp_path):
    """A search that arrives while the shard is being reopened waits for it
    (the soak's recalls failed with "the vector index is not open")."""
    index = EdgeVectorIndex(path=tmp_path / "vectors" / "memories", collection="memories", vector_size=4,
                            reopen_every=2)  # fmt: skip
    index.open()
    written = [memory() for _ in range(3)]
    await put(index, written)
    query = VectorQuery(vector=[1.0, 0.0, 0.0, 0.0], tenant="a", limit=10, current_at=NOW)

    async def search_meanwhile() -> list[set[str]]:
        found = []
        while index.reopens < 6:
            found.append({h.id for h in await nearest(index, query)})
        return found

    searches = asyncio.create_task(search_meanwhile())
    for _ in range(6):
        await index.upsert([])  # nothing: no change counted
        await put(index, [written[0]])
        await put(index, [written[1]])  # every second change reopens
    found = await asyncio.wait_for(searches, 30)
    assert index.reopens >= 6 and found and all(f == {m.id for m in written} for f in found)
    await index.close()


async def test_a_bulk_load_optimises_once_at_its_end(tmp_path, monkeypatch):
    """A rebuild's upserts start no optimisation while they go in (each would
    merge ever larger segments and build their HNSW graphs anew); one at the
    end indexes them all, when they were optimize_every or more."""
    index = EdgeVectorIndex(path=tmp_path / "vectors" / "memories", collection="memories", vector_size=4,
                            optimize_every=3)  # fmt: skip
    index.open()
    optimised = []
    real = index._optimize

    async def counted() -> None:
        optimised.append(True)
        await real()

    monkeypatch.setattr(index, "_optimize", counted)
    async with index.bulk_load():
        for _ in range(4):
            await put(index, [memory(), memory()])
        assert optimised == []
    assert optimised == [True]
    async with index.bulk_load():
        await put(index, [memory()])  # fewer than optimize_every: left to the periodic optimisation
    assert optimised == [True]
    await put(index, [memory(), memory()])  # outside a bulk load, the periodic one starts again
    await asyncio.sleep(0)
    assert len(optimised) == 2 and await index.count() == 11
    await index.close()


def _quantization(path) -> dict | None:
    """The quantisation the shard's stored configuration names."""
    return json.loads((path / "edge_config.json").read_text()).get("quantization_config")


async def test_int8_quantisation_returns_the_float32_results_and_reaches_older_shards(tmp_path):
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(300, 16))
    memories = [memory(embedding=[float(x) for x in v]) for v in vectors]
    queries = [
        VectorQuery(vector=[float(x) for x in q], tenant="a", limit=10, current_at=NOW)
        for q in rng.normal(size=(20, 16))
    ]

    found = {}
    for setting in ("none", "int8"):
        path = tmp_path / setting / "memories"
        index = EdgeVectorIndex(path=path, collection="memories", vector_size=16, quantization=setting)
        index.open()
        await put(index, memories)
        await index.optimize()
        found[setting] = [[(h.id, round(h.score, 5)) for h in await nearest(index, q)] for q in queries]
        await index.close()
        assert (_quantization(path) is None) == (setting == "none")
    # The int8 copies choose the candidates; the float32 vectors score them.
    assert found["int8"] == found["none"]

    # A shard made without quantisation gets it when it is opened with int8.
    older = tmp_path / "none" / "memories"
    upgraded = EdgeVectorIndex(path=older, collection="memories", vector_size=16, quantization="int8")
    upgraded.open()
    await upgraded.optimize()
    assert _quantization(older) == {"scalar": {"type": "int8", "always_ram": True}}
    assert [[(h.id, round(h.score, 5)) for h in await nearest(upgraded, q)] for q in queries] == found["none"]
    await upgraded.close()

    with pytest.raises(ValueError, match="quantization"):
        EdgeVectorIndex(path=tmp_path / "x", collection="memories", vector_size=16, quantization="int4")


def _linked(index) -> set[str]:
    """The payload indexes whose blocks get HNSW links of their own (enable_hnsw not turned off)."""
    schema = index._shard.info().payload_schema
    return {name for name, info in schema.items() if getattr(info.params, "enable_hnsw", None) is not False}


async def test_payload_links_choose_the_linked_fields_and_leave_the_results_alone(tmp_path):
    rng = np.random.default_rng(9)
    memories = [
        memory(
            tenant=("a", "b")[i % 2],
            embedding=[float(x) for x in rng.normal(size=16)],
            tags=[f"project:{i % 3}"],
            tag_prefixes=["project", f"project:{i % 3}"],
            timestamp=NOW - timedelta(days=i % 40),
            archived=i % 7 == 0,
        )
        for i in range(400)
    ]
    queries = [
        VectorQuery(vector=[float(x) for x in q], tenant="a", limit=10, current_at=NOW, **extra)
        for q in rng.normal(size=(10, 16))
        for extra in (
            {},
            {"tags": ("project:1",)},
            {"tags": ("project:2",), "tag_match": "exact"},
            {"window_start": NOW - timedelta(days=10)},
        )
    ]
    expected = {
        "all": set(INDEXED_FIELDS),
        "selective": {"tenant", "tag_prefixes", "timestamp"},
        "window": {"tenant", "timestamp"},
        "tenant": {"tenant"},
        "none": set(),
    }
    found = {}
    for setting, linked in expected.items():
        index = EdgeVectorIndex(
            path=tmp_path / setting / "memories", collection="memories", vector_size=16, payload_links=setting
        )
        index.open()
        assert _linked(index) == linked
        await put(index, memories)
        await index.optimize()
        found[setting] = [[(h.id, round(h.score, 5)) for h in await nearest(index, q)] for q in queries]
        await index.close()
    # ACORN's searches (VECTOR_SEARCH_ACORN) go through the same filters.
    acorn = EdgeVectorIndex(
        path=tmp_path / "acorn" / "memories", collection="memories", vector_size=16, payload_links="none", acorn=True
    )
    acorn.open()
    await put(acorn, memories)
    await acorn.optimize()
    found["acorn"] = [[(h.id, round(h.score, 5)) for h in await nearest(acorn, q)] for q in queries]
    await acorn.close()
    # Links change how a large index is searched, never which points a filter lets through.
    assert all(found[s] == found["all"] for s in found)
    assert all(found["all"])

    with pytest.raises(ValueError, match="payload_links"):
        EdgeVectorIndex(path=tmp_path / "x", collection="memories", vector_size=16, payload_links="some")


async def test_acorn_searches_a_shard_made_without_links_for_tags_and_windows_only(tmp_path):
    """VECTOR_SEARCH_ACORN is decided by the links the shard was made with:
    on where a tag or window search has no links, off where it has them (there
    it would only cost), and anew when clear() makes the shard again."""
    path = tmp_path / "memories"

    def made(links: str, acorn: bool = True) -> EdgeVectorIndex:
        index = EdgeVectorIndex(path=path, collection="memories", vector_size=4, payload_links=links, acorn=acorn)
        index.open()
        return index

    index = made("selective")
    assert not index.searches_with_acorn  # tag_prefixes and timestamp have links
    await put(index, [memory(tags=["p"], tag_prefixes=["p"])])
    await index.close()
    # The setting changes, the shard keeps its links, so no ACORN yet.
    index = made("tenant")
    assert not index.searches_with_acorn
    await index.clear()  # a rebuild makes the shard with today's links
    assert index.searches_with_acorn
    await put(index, [found := memory(tags=["p"], tag_prefixes=["p"]), memory(tags=["q"], tag_prefixes=["q"])])
    query = VectorQuery(vector=[1.0, 0.0, 0.0, 0.0], tenant="a", limit=10, current_at=NOW, tags=("p",))
    assert [h.id for h in await nearest(index, query)] == [found.id]  # the same filter, searched with ACORN
    await index.close()
    index = made("tenant")
    assert index.searches_with_acorn  # loaded again: still a shard without those links
    await index.close()
    index = made("tenant", acorn=False)
    assert not index.searches_with_acorn  # the setting off: never
    await index.close()


def test_payloads_carry_what_every_filter_needs():
    m = memory(tags=["Project:X"], tag_prefixes=["project", "project:x"], archived=True, metadata={"source": "slack"})
    payload = vector_payload(m)
    assert (
        payload["tenant"] == "a"
        and payload["tags"] == ["project:x"]
        and payload["tag_prefixes"] == ["project", "project:x"]
    )
    assert payload["t_valid"] == m.t_valid.timestamp() and payload["t_invalid"] is None
    assert payload["archived"] is True and payload["lifecycle"] == "archived" and payload["source"] == "slack"
