"""One port, two engines proved equal: every case runs on EdgeVectorIndex
(qdrant-edge, a tmp directory) and on QdrantClientIndex (qdrant-client's
local mode) holding the same points, and both must return the same ids in
the same order, with the same scores, as the VectorQuery contract says.

Vectors are seeded random unit vectors, so no two scores tie (tie order is
engine-defined) and the expected order is plain numpy cosine.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from qdrant_client.http.exceptions import ResponseHandlingException

from devstack.servers import free_port
from services.core.adapters import edge_index, qdrant_index
from services.core.adapters.edge_index import EdgeVectorIndex
from services.core.adapters.qdrant_index import QdrantClientIndex
from services.core.domain.model import Memory
from services.core.domain.projection import VectorQuery, vector_payload
from services.core.domain.tags import tag_prefixes
from services.core.settings import ProcessSettings, VectorSettings
from services.core.wiring import vector_index
from tests.fakes import nearest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant"),
]

NOW = datetime(2026, 6, 1, tzinfo=UTC)
DIM = 8
TOLERANCE = 1e-4


def unit(rng: np.random.Generator) -> list[float]:
    v = rng.standard_normal(DIM)
    return (v / np.linalg.norm(v)).tolist()


def memory(tenant: str = "a", tags: tuple[str, ...] = (), **fields) -> Memory:
    values = dict(
        id=str(uuid.uuid4()), tenant=tenant, content="x", type="Context", confidence=0.5, importance=0.5,
        timestamp=NOW - timedelta(days=10), t_valid=NOW - timedelta(days=10), updated_at=NOW, last_accessed=NOW,
        recorded_at=NOW - timedelta(days=10), embedding=[1.0] + [0.0] * (DIM - 1),
        tags=list(tags), tag_prefixes=tag_prefixes(list(tags)),
    )  # fmt: skip
    values.update(fields)
    return Memory(**values)


def corpus() -> dict[str, Memory]:
    """Every case's points: current ones with tags, and one of each kind a
    filter must withhold; the same vectors on every run."""
    memories = {
        "alpha": memory(tags=("Project:Alpha",)),
        "beta_py": memory(tags=("project:beta", "Lang:Python")),
        "ops": memory(tags=("Ops",)),
        "plain": memory(),
        "plain2": memory(),
        "other_tenant": memory(tenant="b", tags=("Project:Alpha",)),
        "archived": memory(archived=True, tags=("Project:Alpha",)),
        "future": memory(t_valid=NOW + timedelta(days=1)),
        "expired": memory(t_invalid=NOW - timedelta(hours=1)),
        "superseded": memory(t_invalid=NOW - timedelta(hours=1), superseded_at=NOW - timedelta(hours=1)),
        "expiring": memory(t_invalid=NOW + timedelta(days=30)),
        "late": memory(recorded_at=NOW - timedelta(days=1)),
    }
    rng = np.random.default_rng(20260601)
    for m in memories.values():
        m.embedding = unit(rng)
    return memories


#: The names each broad case may return (tenant "a").
HISTORY = {"alpha", "beta_py", "ops", "plain", "plain2", "future", "expired", "superseded", "expiring", "late"}
CURRENT = {"alpha", "beta_py", "ops", "plain", "plain2", "expiring", "late"}


def points(memories) -> list[tuple[str, list[float], dict]]:
    return [(m.id, m.embedding, vector_payload(m)) for m in memories]


async def open_index(kind: str, tmp_path, vector_size: int = DIM, **options):
    """An open index of either engine; `tmp_path` keeps the data between opens."""
    if kind == "edge":
        index = EdgeVectorIndex(
            path=tmp_path / "vectors" / "memories", collection="memories", vector_size=vector_size, **options
        )
        index.open()
    else:
        location = options.pop("location", ":memory:")
        index = QdrantClientIndex(location=location, collection="memories", vector_size=vector_size, **options)
        await index.open()
    return index


class Engines:
    """Both engines loaded with the same corpus; `search` runs a query on both
    and asserts they agree before returning the names of the hits."""

    def __init__(self, edge: EdgeVectorIndex, client: QdrantClientIndex, memories: dict[str, Memory]):
        self.all = (edge, client)
        self.memories = memories
        self._names = {m.id: name for name, m in memories.items()}

    def ids(self, *names: str) -> tuple[str, ...]:
        return tuple(self.memories[n].id for n in names)

    def ranked(self, names, vector: list[float]) -> list[str]:
        """The names ordered by cosine to `vector` (all vectors are unit length)."""
        return sorted(names, key=lambda n: -float(np.dot(self.memories[n].embedding, vector)))

    def agree(self, edge_hits, client_hits) -> list[str]:
        assert [h.id for h in edge_hits] == [h.id for h in client_hits]
        for e, c in zip(edge_hits, client_hits, strict=True):
            assert abs(e.score - c.score) <= TOLERANCE
            expected = float(np.dot(self.memories[self._names[e.id]].embedding, self.query_vector))
            assert abs(e.score - expected) <= TOLERANCE
        return [self._names[h.id] for h in edge_hits]

    async def search(self, **fields) -> list[str]:
        fields.setdefault("tenant", "a")
        fields.setdefault("limit", 50)
        fields.setdefault("vector", unit(np.random.default_rng(7)))
        self.query_vector = fields["vector"]
        query = VectorQuery(**fields)
        edge, client = self.all
        return self.agree(await nearest(edge, query), await nearest(client, query))

    async def expect(self, names, **fields) -> None:
        vector = fields.setdefault("vector", unit(np.random.default_rng(7)))
        found = await self.search(**fields)
        assert found == self.ranked(names, vector)[: fields.get("limit", 50)]


async def load_engines(path):
    edge = await open_index("edge", path)
    client = await open_index("client", path)
    memories = corpus()
    for index in (edge, client):
        await index.upsert(points(memories.values()))
    return Engines(edge, client, memories)


@pytest.fixture(scope="module")
async def engines(tmp_path_factory):
    """Loaded once for the cases that only read."""
    loaded = await load_engines(tmp_path_factory.mktemp("congruence"))
    yield loaded
    for index in loaded.all:
        await index.close()


@pytest.fixture
async def fresh_engines(tmp_path):
    """Loaded for one case that writes."""
    loaded = await load_engines(tmp_path)
    yield loaded
    for index in loaded.all:
        await index.close()


def test_both_engines_index_the_same_payload_fields():
    def kinds(fields):
        return {name: str(kind).rsplit(".", 1)[-1].lower() for name, kind in fields.items()}

    assert kinds(edge_index.INDEXED_FIELDS) == kinds(qdrant_index.INDEXED_FIELDS)


async def test_tenant_isolation(engines):
    await engines.expect({"other_tenant"}, tenant="b")
    await engines.expect(set(), tenant="nobody")
    assert "other_tenant" not in await engines.search(tenant="a")


async def test_archived_is_never_a_candidate(engines):
    await engines.expect(HISTORY)  # no current_at: history, still without the archived point
    await engines.expect(CURRENT | {"superseded"}, current_at=NOW)
    assert "archived" not in await engines.search(tags=("project:alpha",), tag_match="exact")


async def test_not_yet_valid_and_expired_are_withheld(engines):
    found = await engines.search(current_at=NOW, keep_superseded=False)
    assert found == engines.ranked(CURRENT, engines.query_vector)
    assert not {"future", "expired", "superseded", "archived"} & set(found)
    # Once its window closes the same point is withheld; the future one is then valid.
    later = NOW + timedelta(days=400)
    await engines.expect((CURRENT - {"expiring"}) | {"future"}, current_at=later, keep_superseded=False)


async def test_expired_but_superseded_is_kept_only_with_keep_superseded(engines):
    kept = await engines.search(current_at=NOW, keep_superseded=True)
    assert "superseded" in kept and "expired" not in kept
    assert "superseded" not in await engines.search(current_at=NOW, keep_superseded=False)


async def test_recorded_before_drops_later_records(engines):
    await engines.expect(HISTORY - {"late"}, recorded_before=NOW - timedelta(days=2))
    await engines.expect(CURRENT | {"superseded"}, current_at=NOW, recorded_before=NOW)


@pytest.mark.parametrize(
    ("tags", "tag_mode", "tag_match", "names"),
    [
        (("project:alpha", "ops"), "any", "exact", {"alpha", "ops"}),
        (("project",), "any", "exact", set()),
        (("project:beta", "lang:python"), "all", "exact", {"beta_py"}),
        (("project:alpha", "lang:python"), "all", "exact", set()),
        (("project",), "any", "prefix", {"alpha", "beta_py"}),
        (("project:alpha", "ops"), "any", "prefix", {"alpha", "ops"}),
        (("project", "lang"), "all", "prefix", {"beta_py"}),
        (("project:alpha", "lang"), "all", "prefix", set()),
    ],
)
async def test_tags_any_all_exact_prefix(engines, tags, tag_mode, tag_match, names):
    await engines.expect(names, current_at=NOW, tags=tags, tag_mode=tag_mode, tag_match=tag_match)


async def test_exclude_tags_and_ids(engines):
    await engines.expect(
        CURRENT - {"ops"}, current_at=NOW, keep_superseded=False, exclude_tags=("ops",), tag_match="exact"
    )
    await engines.expect(CURRENT, current_at=NOW, keep_superseded=False, exclude_tags=("project",), tag_match="exact")
    await engines.expect(
        CURRENT - {"alpha", "beta_py"}, current_at=NOW, keep_superseded=False, exclude_tags=("project",)
    )
    await engines.expect({"alpha"}, current_at=NOW, tags=("project",), exclude_tags=("lang",), tag_match="prefix")
    await engines.expect(
        CURRENT - {"plain", "ops"}, current_at=NOW, keep_superseded=False, exclude_ids=engines.ids("plain", "ops")
    )
    await engines.expect({"plain", "ops"}, current_at=NOW, keep_superseded=False, only_ids=engines.ids("plain", "ops"))
    await engines.expect({"ops"}, only_ids=engines.ids("plain", "ops"), exclude_ids=engines.ids("plain"))


async def test_min_score_and_limit(engines):
    vector = unit(np.random.default_rng(11))
    ranked = engines.ranked(CURRENT, vector)
    scores = [float(np.dot(engines.memories[n].embedding, vector)) for n in ranked]
    threshold = (scores[2] + scores[3]) / 2  # between the third and the fourth
    found = await engines.search(vector=vector, current_at=NOW, keep_superseded=False, min_score=threshold)
    assert found == ranked[:3]
    await engines.expect(CURRENT, vector=vector, current_at=NOW, keep_superseded=False, limit=3)
    assert await engines.search(vector=vector, current_at=NOW, min_score=1.0) == []


async def test_min_score_equal_to_a_score_cuts_alike(fresh_engines):
    """Both engines keep scores above the threshold, compared as float32."""
    engines = fresh_engines
    axis = [1.0] + [0.0] * (DIM - 1)
    engines.memories["c_one"] = memory(tenant="c", embedding=axis)
    engines.memories["c_six"] = memory(tenant="c", embedding=[0.6, 0.8] + [0.0] * (DIM - 2))
    engines._names.update({m.id: n for n, m in engines.memories.items()})
    for index in engines.all:
        await index.upsert(points([engines.memories["c_one"], engines.memories["c_six"]]))
    assert await engines.search(tenant="c", vector=axis, min_score=0.6) == ["c_one"]
    assert await engines.search(tenant="c", vector=axis, min_score=0.5999) == ["c_one", "c_six"]
    assert await engines.search(tenant="c", vector=axis, min_score=1.0) == []


async def test_the_time_window_bounds_timestamps_half_open(fresh_engines):
    """[start, end) over `timestamp`, as the graph arms' scope_where: the
    start itself is in, the end itself is out, to the microsecond."""
    engines = fresh_engines
    start, end = datetime(2021, 1, 1, tzinfo=UTC), datetime(2022, 1, 1, tzinfo=UTC)
    rng = np.random.default_rng(2021)
    at = {
        "y2020": datetime(2020, 6, 1, tzinfo=UTC),
        "just_before": start - timedelta(microseconds=1),
        "at_start": start,
        "y2021": datetime(2021, 6, 1, tzinfo=UTC),
        "last_micro": end - timedelta(microseconds=1),
        "at_end": end,
        "y2022": datetime(2022, 6, 1, tzinfo=UTC),
    }
    for name, when in at.items():
        engines.memories[name] = memory(
            tenant="w", timestamp=when, t_valid=when, recorded_at=when, embedding=unit(rng), tags=("Team:Core",)
        )
    engines.memories["w_expired"] = memory(
        tenant="w", timestamp=at["y2021"], t_valid=at["y2021"], t_invalid=NOW - timedelta(days=1), embedding=unit(rng)
    )
    engines._names.update({m.id: n for n, m in engines.memories.items()})
    for index in engines.all:
        await index.upsert(points([engines.memories[n] for n in (*at, "w_expired")]))
    inside = {"at_start", "y2021", "last_micro"}
    await engines.expect(inside, tenant="w", current_at=NOW, window_start=start, window_end=end)
    await engines.expect(inside | {"w_expired"}, tenant="w", window_start=start, window_end=end)  # history
    await engines.expect(inside | {"at_end", "y2022"}, tenant="w", current_at=NOW, window_start=start)
    await engines.expect({"y2020", "just_before"} | inside, tenant="w", current_at=NOW, window_end=end)
    await engines.expect(
        inside, tenant="w", current_at=NOW, window_start=start, window_end=end, tags=("team",), tag_match="prefix"
    )
    await engines.expect(set(), tenant="w", window_start=end, window_end=end)


async def test_an_edge_shard_made_before_the_timestamp_field_index_gets_it(tmp_path, monkeypatch):
    """The in-process shard indexes fields at creation; a shard made before
    `timestamp` was indexed gets the index when loaded. (qdrant-client's index
    adds missing payload indexes on open too; its local mode keeps none.)"""
    older = {k: v for k, v in edge_index.INDEXED_FIELDS.items() if k != "timestamp"}
    with monkeypatch.context() as patched:
        patched.setattr(edge_index, "INDEXED_FIELDS", older)
        index = await open_index("edge", tmp_path)
        assert "timestamp" not in index._shard.info().payload_schema
        await index.close()
    index = await open_index("edge", tmp_path)
    try:
        assert set(index._shard.info().payload_schema) == set(edge_index.INDEXED_FIELDS)
    finally:
        await index.close()


async def test_payloads_are_returned_alike(engines):
    query = VectorQuery(vector=unit(np.random.default_rng(5)), tenant="a", limit=50, current_at=NOW)
    edge, client = engines.all
    edge_hits, client_hits = (
        await nearest(edge, query, with_payload=True),
        await nearest(client, query, with_payload=True),
    )
    assert [h.payload for h in edge_hits] == [h.payload for h in client_hits]
    assert client_hits[0].payload == vector_payload(engines.memories[engines._names[client_hits[0].id]])
    assert all(h.payload is None for h in await nearest(client, query) + await nearest(edge, query))


async def test_search_many_answers_in_query_order(engines):
    rng = np.random.default_rng(3)
    queries = [
        VectorQuery(vector=unit(rng), tenant="a", limit=4, current_at=NOW),
        VectorQuery(vector=unit(rng), tenant="b", limit=4),
        VectorQuery(vector=unit(rng), tenant="a", limit=2, tags=("project",)),
    ]
    edge, client = engines.all
    edge_results, client_results = await edge.search_many(queries), await client.search_many(queries)
    assert len(edge_results) == len(client_results) == 3
    for query, edge_hits, client_hits in zip(queries, edge_results, client_results, strict=True):
        assert [h.id for h in edge_hits] == [h.id for h in client_hits] == [h.id for h in await nearest(edge, query)]
        assert all(abs(e.score - c.score) <= TOLERANCE for e, c in zip(edge_hits, client_hits, strict=True))
    assert [h.id for h in edge_results[1]] == [engines.memories["other_tenant"].id]
    assert await edge.search_many([]) == await client.search_many([]) == []


async def test_delete_count_and_clear(fresh_engines):
    engines = fresh_engines
    total = len(engines.memories)
    for index in engines.all:
        assert await index.count() == total
        await index.delete(list(engines.ids("plain", "ops")), tenant="a")
        await index.delete([], tenant="a")
        assert await index.count() == total - 2
    await engines.expect(HISTORY - {"plain", "ops"})

    # One tenant's points go; the other tenant's stay searchable.
    for index in engines.all:
        await index.clear("a")
        assert await index.count() == 1
    await engines.expect(set())
    await engines.expect({"other_tenant"}, tenant="b")

    for index in engines.all:
        await index.clear()
        assert await index.count() == 0
    await engines.expect(set())
    # Still usable, with its dimension and filters, right after.
    for index in engines.all:
        await index.upsert(points([engines.memories["plain"], engines.memories["archived"]]))
        assert await index.count() == 2 and index.dimension == DIM
        status = await index.status()
        assert status.status == "connected" and status.figures["points"] == 2.0
    await engines.expect({"plain"}, current_at=NOW)


async def test_wrong_dimension_vectors_are_refused(fresh_engines):
    engines = fresh_engines
    for index in engines.all:
        with pytest.raises(ValueError, match="3 dimensions"):
            await index.upsert([(str(uuid.uuid4()), [1.0, 0.0, 0.0], {"tenant": "a"})])
        assert index.refused == 1
        assert await index.count() == len(engines.memories)
        status = await index.status()
        assert status.status == "connected"
        assert status.figures == {"points": float(len(engines.memories)), "dimension": float(DIM), "refused": 1.0}


@pytest.mark.parametrize("kind", ["edge", "client"])
async def test_an_existing_index_keeps_its_dimension(tmp_path, kind):
    options = {} if kind == "edge" else {"location": tmp_path / "qdrant"}
    first = await open_index(kind, tmp_path, vector_size=4, **options)
    await first.upsert([(str(uuid.uuid4()), [1.0, 0.0, 0.0, 0.0], vector_payload(memory()))])
    await first.close()

    adopted = await open_index(kind, tmp_path, vector_size=8, **options)
    assert adopted.dimension == 4 and (await adopted.status()).status == "connected"
    assert await adopted.count() == 1
    with pytest.raises(ValueError):
        await adopted.upsert([(str(uuid.uuid4()), [0.0] * 8, {})])
    assert adopted.refused == 1
    await adopted.close()

    strict = await open_index(kind, tmp_path, vector_size=8, autodetect=False, **options)
    status = await strict.status()
    assert status.status == "dimension_mismatch" and "8" in status.detail and "4" in status.detail
    assert status.figures == {"dimension": 4.0, "configured_dimension": 8.0}
    await strict.close()


def test_wiring_picks_the_server_client_when_a_url_is_set(tmp_path):
    process = ProcessSettings(memgrid_data_dir=tmp_path)
    embedded = vector_index(VectorSettings(), process)
    server = vector_index(VectorSettings(qdrant_url="http://qdrant:6333", qdrant_api_key="k"), process)
    assert isinstance(embedded, EdgeVectorIndex) and isinstance(server, QdrantClientIndex)


async def test_an_unreachable_server_is_retried_until_the_deadline():
    index = QdrantClientIndex(
        url=f"http://127.0.0.1:{free_port()}", collection="memories", vector_size=DIM,
        wait_seconds=0.5, retry_initial_seconds=0.05, retry_max_seconds=0.1,
    )  # fmt: skip
    with pytest.raises(ResponseHandlingException):
        await index.open()
    assert (await index.status()).status == "unavailable"
    await index.close()
