"""The store's reply reader (services/core/adapters/falkor/reply.py) against falkordb-py's own parser,
on real FalkorDB replies: the same rows for every kind of value, the
library's parser for what the reader leaves to it, errors raised alike."""

from __future__ import annotations

import pytest
import redis.exceptions as redis_errors
from falkordb.asyncio import FalkorDB

from services.core.adapters.falkor.reply import Reply, params_header, read_reply

pytestmark = pytest.mark.integration

PLAIN = [
    "RETURN null, 'text', '', 'naïve \"quoted\" \\\\ back', 42, -7, 0, true, false, 1.5, -0.25, 1e300",
    "RETURN [1, 'a', null, [true, 2.5, []], []] AS nested",
    "UNWIND range(1, 50) AS i RETURN i, toString(i), i * 0.5, i % 2 = 0",
    "UNWIND [] AS i RETURN i",
    "CREATE (:Probe {id: 'p1', tags: ['a', 'b'], score: 0.75, n: 3})",
    "MATCH (p:Probe) RETURN p.id, p.tags, p.score, p.n, p.missing",
    "MATCH (p:Probe) RETURN p.id, properties(p)",
    "RETURN {a: 1, b: 'x', c: [{d: null}], e: {}}",
]
#: Values the reader hands to the library: nodes, edges, paths, points.
OTHERS = [
    "MATCH (p:Probe) RETURN p",
    "CREATE (a:Probe {id: 'p2'})-[r:LINK {w: 1}]->(b:Probe {id: 'p3'}) RETURN r",
    "MATCH path = (:Probe {id: 'p2'})-[:LINK]->(:Probe) RETURN path",
    "RETURN point({latitude: 1.5, longitude: 2.5})",
]


@pytest.fixture
async def graph(settings):
    db = FalkorDB(host=settings.graph.falkordb_host, port=settings.graph.falkordb_port)
    graph = db.select_graph(settings.graph.falkordb_graph)
    yield graph
    await graph.delete()
    await db.aclose()


def kind(value) -> type:
    """A value's type; a map is a dict (the library's are OrderedDicts)."""
    return dict if isinstance(value, dict) else type(value)


async def ours(graph, cypher: str, params: dict | None = None):
    response = await graph.execute_command("GRAPH.QUERY", graph.name, params_header(params) + cypher, "--compact")
    return await read_reply(graph, response)


async def test_plain_replies_read_as_the_library_reads_them(graph):
    for cypher in PLAIN:
        mine = await ours(graph, cypher)
        assert isinstance(mine, Reply), cypher
        theirs = await graph.query(cypher)
        assert mine.result_set == theirs.result_set, cypher
        for row_mine, row_theirs in zip(mine.result_set, theirs.result_set, strict=True):
            assert [kind(v) for v in row_mine] == [kind(v) for v in row_theirs], cypher


async def test_other_values_go_to_the_library_parser(graph):
    await graph.query("CREATE (:Probe {id: 'p1'})")
    for cypher in OTHERS:
        mine = await ours(graph, cypher)
        assert not isinstance(mine, Reply), cypher
        if not cypher.startswith("CREATE"):  # a second CREATE would make other ids
            assert mine.result_set == (await graph.query(cypher)).result_set, cypher


async def test_parameters_reach_the_query_as_the_library_sends_them(graph):
    params = {"s": 'a "b" \\ c', "n": 3, "f": 0.5, "l": ["x", 1, None], "b": True, "none": None}
    cypher = "RETURN $s, $n, $f, $l, $b, $none"
    assert (await ours(graph, cypher, params)).result_set == (await graph.query(cypher, params)).result_set
    assert params_header(None) == params_header({}) == ""


async def test_errors_raise_as_from_the_library(graph):
    for cypher in ("RETURN nosuchfunction(1)", "THIS IS NOT CYPHER", "UNWIND [1, 0] AS x RETURN 1 / x"):
        with pytest.raises(redis_errors.ResponseError) as mine:
            await ours(graph, cypher)
        with pytest.raises(redis_errors.ResponseError) as theirs:
            await graph.query(cypher)
        assert str(mine.value) == str(theirs.value), cypher
