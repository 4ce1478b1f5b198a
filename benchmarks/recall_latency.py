"""Recall latency through REST at 10k and 100k memories on the embedded stack.

Memories are written straight into the graph (embedding included, enriched,
no events: seeding 100k through the API and the embedder would take most of
an hour), then recall's RebuildIndex projects them into the vector index,
which also measures the rebuild. Stored vectors are seeded random unit
vectors (dense, the hard case for HNSW); every query is embedded by the local
MiniLM inside recall, and queries are distinct so the query cache never
answers. Content and queries are drawn from a Zipf-weighted vocabulary, so
the full-text arms see realistic posting lists: by default LoCoMo's words
ranked by frequency in its turns (English: a query of 3-6 words is about 7
MiniLM tokens, as real queries are), or random letter strings
(--recall-words synthetic: MiniLM splits each into about 3 pieces, 19 tokens
a query, which makes the query embedding about 4 ms dearer).

The loader also writes what enrichment would (the bench stack runs none):
1-3 entities a memory, drawn Zipf-weighted from ENTITIES names (so a few are
mentioned by thousands of memories, the entities' stopwords), as entity tags
with MENTIONS edges to Entity nodes, and 0-2 edges a memory to earlier ones
(SIMILAR_TO or an authored relation, LINKS); so recall with expand_entities=true and expand_relations=true
is measured next to the same recall without, as a ratio of p95s.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from datetime import UTC, datetime, timedelta

import grpc
import numpy as np

from benchmarks import recall_context_cost
from benchmarks.quality import DEFAULT_DATA, load
from benchmarks.report import line, p95, percentiles, progress
from benchmarks.stack import TOKEN, BenchStack, KeepAlive
from memgrid.v1 import recall_service_pb2, recall_service_pb2_grpc
from services.core.adapters.falkor import FalkorGraph, memory_to_row
from services.core.domain.model import Memory
from services.core.domain.tags import tag_prefixes

VOCABULARY_SIZE = 5000
PROJECTS = [f"project-{i}" for i in range(50)]
SEED_BATCH = 2000
#: Entity names, drawn Zipf-weighted (exponent 1.3: the commonest is in about a third of the memories).
ENTITIES = 2000
ENTITY_CATEGORIES = ("tool", "person", "project", "place")
#: The relations the loader draws (0-2 a memory, to earlier ones): enrichment's
#: SIMILAR_TO and authored ones (expand_relations follows the authored).
LINKS = ("SIMILAR_TO", "RELATES_TO", "LEADS_TO", "OCCURRED_BEFORE")


WORDS = ("locomo", "synthetic")


def vocabulary(rng: np.random.Generator, words: str = "locomo") -> list[str]:
    """At most VOCABULARY_SIZE words, most frequent first (the Zipf draws' ranks)."""
    if words == "locomo":
        conversations, _ = load(DEFAULT_DATA)
        counts: dict[str, int] = {}
        for turn in (t for c in conversations for t in c.turns):
            for word in re.findall(r"[a-z0-9]+", turn.content.lower()):
                counts[word] = counts.get(word, 0) + 1
        return sorted(counts, key=lambda w: (-counts[w], w))[:VOCABULARY_SIZE]
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = set()
    while len(words) < VOCABULARY_SIZE:
        words.add("".join(rng.choice(letters, size=int(rng.integers(4, 10)))))
    return sorted(words)


def zipf_words(rng: np.random.Generator, words: list[str], count: int) -> list[str]:
    ranks = np.minimum(rng.zipf(1.3, size=count), len(words)) - 1
    return [words[r] for r in ranks]


def entity_tags(rng: np.random.Generator, words: list[str]) -> list[str]:
    """1-3 entity tags (entity:<category>:<name>), the names Zipf-weighted over
    ENTITIES of the vocabulary's words (the category follows the rank)."""
    ranks = np.minimum(rng.zipf(1.3, size=int(rng.integers(1, 4))), ENTITIES) - 1
    named = {int(r): f"{words[r % len(words)]}{r}" for r in ranks}
    return [f"entity:{ENTITY_CATEGORIES[r % len(ENTITY_CATEGORIES)]}:{name}" for r, name in named.items()]


def memories(rng: np.random.Generator, words: list[str], start: int, count: int, dimension: int) -> list[Memory]:
    now = datetime.now(UTC)
    vectors = rng.standard_normal((count, dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    out = []
    for i in range(count):
        stamp = now - timedelta(days=float(rng.uniform(0, 365)))
        tags = [PROJECTS[int(rng.integers(0, len(PROJECTS)))], *entity_tags(rng, words)]
        out.append(
            Memory(
                id=str(uuid.UUID(int=int(rng.integers(0, 2**63)) << 64 | (start + i))),
                tenant="default",
                content=" ".join(zipf_words(rng, words, int(rng.integers(10, 25)))),
                type="Context",
                confidence=0.9,
                importance=float(rng.uniform(0.3, 0.9)),
                timestamp=stamp,
                t_valid=stamp,
                updated_at=stamp,
                last_accessed=stamp,
                recorded_at=stamp,
                enriched_at=now,
                tags=tags,
                tag_prefixes=tag_prefixes(tags),
                embedding=vectors[i].tolist(),
            )
        )
    return out


async def seed(graph: FalkorGraph, rng, words, start: int, count: int, dimension: int, ids: list[str]) -> None:
    """Memories, their entities (MENTIONS) and SIMILAR_TO edges, straight into
    the graph: no events, nothing to enrich. `ids` holds the memories so far."""
    for offset in range(0, count, SEED_BATCH):
        batch = memories(rng, words, start + offset, min(SEED_BATCH, count - offset), dimension)
        await graph.connection.query(
            "UNWIND $rows AS r CREATE (m:Memory) SET m = r", {"rows": [memory_to_row(m) for m in batch]}
        )
        mentions = [{"id": m.id, "tag": t} for m in batch for t in m.tags if t.startswith("entity:")]
        await graph.connection.query(
            "UNWIND $rows AS r MATCH (m:Memory {id: r.id}) MERGE (e:Entity {tenant: 'default', tag: r.tag}) "
            "CREATE (m)-[:MENTIONS {created_at: 0}]->(e)",
            {"rows": mentions},
        )
        links: dict[str, list[dict]] = {kind: [] for kind in LINKS}
        for m in batch:
            if ids:
                for _ in range(int(rng.integers(0, 3))):
                    kind = LINKS[int(rng.integers(0, len(LINKS)))]
                    other = ids[int(rng.integers(0, len(ids)))]
                    links[kind].append({"a": m.id, "b": other, "s": float(rng.uniform(0.3, 1))})
            ids.append(m.id)
        for kind, rows in links.items():
            await graph.connection.query(
                "UNWIND $rows AS r MATCH (a:Memory {id: r.a}), (b:Memory {id: r.b}) "
                f"CREATE (a)-[:{kind} {{strength: r.s, created_at: 0}}]->(b)",
                {"rows": rows},
            )
        progress(f"seeded {start + offset + len(batch)}")


async def reindex(stack: BenchStack) -> None:
    started = time.perf_counter()
    async with grpc.aio.insecure_channel(stack.grpc_target("recall")) as channel:
        stub = recall_service_pb2_grpc.RecallServiceStub(channel)
        last = None
        async for last in stub.RebuildIndex(
            recall_service_pb2.RebuildIndexRequest(every_tenant=True), metadata=stack.claim(None), timeout=3600
        ):
            if last.indexed and last.indexed % 20_000 < 1000:
                progress(f"reindexed {last.indexed}/{last.total}")
    elapsed = time.perf_counter() - started
    line(f"RebuildIndex {last.indexed} points", f"{last.indexed / elapsed:9.0f} points/s  ({elapsed:.1f} s)")


def distinct_queries(rng: np.random.Generator, words: list[str], count: int) -> list[str]:
    """`count` different queries of 3-6 words (a repeated one would be answered
    by recall's query-embedding cache)."""
    texts: dict[str, None] = {}
    while len(texts) < count:
        texts[" ".join(zipf_words(rng, words, int(rng.integers(3, 7))))] = None
    return list(texts)


def measure(
    client: KeepAlive, label: str, queries: list[str], tags: list[str] | None = None, **extra: str
) -> list[float]:
    """Each query once (with a tag of `tags` in turn, and the extra
    parameters); prints and returns the latencies (and, for an expansion,
    how many memories it added a query, so the figure is seen to expand)."""
    samples, expanded = [], 0
    for i, query in enumerate(queries):
        params = {"query": query, "limit": 10, **extra}
        if tags:
            params["tags"] = tags[i % len(tags)]
        started = time.perf_counter()
        reply = client.request("GET", "/recall", params=params)  # raises on an error status
        samples.append(time.perf_counter() - started)
        for key in ("expansion", "entity_expansion"):
            expanded += (reply.get(key) or {}).get("expanded_count", 0)
    added = f"  {expanded / len(queries):.1f} expanded/query" if extra else ""
    line(label, percentiles(samples) + added)
    return samples


def run(
    sizes: tuple[int, ...] = (10_000, 100_000),
    queries: int = 200,
    words_from: str = "locomo",
    baselines: tuple[str, ...] = ("before",),
) -> None:
    rng = np.random.default_rng(7)
    words = vocabulary(rng, words_from)
    env = {"ENRICHMENT_ENABLED": "false", "EMBEDDING_PROVIDER": "local"}
    with BenchStack(**env) as stack:
        print(
            f"\nrecall latency: REST GET /recall, limit 10, {queries} distinct queries per figure, one client, "
            f"{len(words)} {words_from} words"
        )
        seeded = 0
        ids: list[str] = []

        async def grow(start: int, size: int) -> None:
            graph = FalkorGraph(host="127.0.0.1", port=int(stack.env["FALKORDB_PORT"]), graph="memories")
            try:
                await seed(graph, rng, words, start, size - start, 384, ids)
            finally:
                await graph.lifecycle.close()
            await reindex(stack)

        for size in sizes:
            asyncio.run(grow(seeded, size))
            seeded = size
            progress(f"stack quiet after {stack.settle():.0f} s")
            client = KeepAlive(stack.url, TOKEN)  # a new connection: the last one idled out while seeding
            for warm in range(20):
                client.request("GET", "/recall", params={"query": f"warm up {warm}"})
            texts = distinct_queries(rng, words, 4 * queries)
            label = f"{size // 1000}k memories"
            plain = measure(client, f"{label}, query", texts[:queries])
            measure(client, f"{label}, query + tag", texts[queries : 2 * queries], PROJECTS)
            # Distinct queries again (the query-embedding cache would answer a repeat).
            entities = measure(
                client, f"{label}, expand_entities", texts[2 * queries : 3 * queries], expand_entities="true"
            )
            relations = measure(client, f"{label}, expand_relations", texts[3 * queries :], expand_relations="true")
            ratios = (p95(entities) / p95(plain), p95(relations) / p95(plain))
            line(f"{label}, p95 ratio to plain", "expand_entities {:5.2f}x  expand_relations {:5.2f}x".format(*ratios))
            client.close()
            if size == max(sizes):
                # Queries neither recall has embedded (the served one's query cache holds the ones above).
                more = [q for q in distinct_queries(rng, words, 8 * queries) if q not in set(texts)][: 3 * queries]
                for baseline in baselines:
                    recall_context_cost.run(stack, more[queries:], more[:queries], label, baseline)
