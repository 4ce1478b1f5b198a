"""The scale benchmark's loader: memories written straight into the graph in
bulk, as enrichment would have left them, with their vectors (so nothing is
embedded and no event is published), their entities and their edges.

What a memory carries (the recall benchmark's loader, benchmarks/recall_latency.py,
with more of a real store's variety):

- content: 10-25 words drawn Zipf-weighted from LoCoMo's vocabulary (ranked
  by frequency in its turns), so full-text posting lists are as skewed as
  real ones; the memory type one of MEMORY_TYPES, weighted as agents write them;
- tags: one of PROJECTS, 0-2 of TOPICS, and 1-3 entity tags
  (entity:<category>:<name>), the names Zipf-weighted over ENTITIES, so a
  few entities are mentioned by a third of the store;
- a timestamp spread over the last DAYS days (time-windowed recall has a
  real window to cut), importance 0.3-0.9, enriched;
- a 384-dimension unit vector: with `TextVectors` (`--scale-vectors text`,
  benchmarks/scale_vectors.py) built from the MiniLM vectors of its words,
  shaped like a text embedding; without, a random one (dense: the hard case
  for HNSW, and nothing like what a memory store holds);
- MENTIONS edges to Entity nodes, and 0-2 edges to earlier memories
  (SIMILAR_TO or an authored relation: recall_latency.LINKS).

Seeding grows the store in place (`Seeder.grow(graph, size)`), so one run
measures at 100k and then at 1M without loading the first 100k twice.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np

from benchmarks.recall_latency import LINKS, PROJECTS, entity_tags, zipf_words
from benchmarks.report import progress
from benchmarks.scale_vectors import TextVectors
from services.core.adapters.falkor import FalkorGraph, memory_to_row
from services.core.domain.model import Memory
from services.core.domain.tags import tag_prefixes

#: Memories per write to the graph (one UNWIND each for nodes, mentions and each edge kind).
SEED_BATCH = 2000
#: The types agents write, and how often (AutoMem's: most are context and decisions).
MEMORY_TYPES = {"Context": 0.4, "Decision": 0.15, "Insight": 0.12, "Preference": 0.1, "Pattern": 0.1, "Habit": 0.06}
MEMORY_TYPES["Style"] = 1.0 - sum(MEMORY_TYPES.values())
TOPICS = ("deploy", "review", "incident", "design", "meeting", "customer", "budget", "hiring", "research", "ops")
DAYS = 365
DIMENSION = 384


class Seeder:
    """Grows the graph's store to a size, remembering the ids written (edges go to earlier memories)."""

    def __init__(
        self, words: list[str], seed: int = 11, dimension: int = DIMENSION, text_vectors: TextVectors | None = None
    ):
        self.rng = np.random.default_rng(seed)
        self.text_vectors = text_vectors
        self.link_rng = np.random.default_rng(seed + 1)
        self.words = words
        self.dimension = dimension
        self.ids: list[str] = []
        self.now = datetime.now(UTC)
        self._types = list(MEMORY_TYPES)
        self._type_weights = np.array([MEMORY_TYPES[t] for t in self._types])
        #: Seconds spent writing, and memories and edges written (the loader's own rate).
        self.seconds = 0.0
        self.edges = 0

    @property
    def count(self) -> int:
        return len(self.ids)

    def batch(self, count: int, start: int) -> list[Memory]:
        """`count` memories, the first the store's `start`-th (its id's low bits)."""
        rng = self.rng
        vectors = rng.standard_normal((count, self.dimension)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        kinds = rng.choice(len(self._types), size=count, p=self._type_weights)
        out = []
        for i in range(count):
            stamp = self.now - timedelta(days=float(rng.uniform(0, DAYS)))
            topics = [TOPICS[int(t)] for t in rng.choice(len(TOPICS), size=int(rng.integers(0, 3)), replace=False)]
            tags = [PROJECTS[int(rng.integers(0, len(PROJECTS)))], *topics, *entity_tags(rng, self.words)]
            out.append(
                Memory(
                    id=str(uuid.UUID(int=int(rng.integers(0, 2**63)) << 64 | (start + i))),
                    tenant="default",
                    content=" ".join(zipf_words(rng, self.words, int(rng.integers(10, 26)))),
                    type=self._types[int(kinds[i])],
                    confidence=0.9,
                    importance=float(rng.uniform(0.3, 0.9)),
                    timestamp=stamp,
                    t_valid=stamp,
                    updated_at=stamp,
                    last_accessed=stamp,
                    recorded_at=stamp,
                    enriched_at=self.now,
                    tags=tags,
                    tag_prefixes=tag_prefixes(tags),
                    embedding=vectors[i].tolist(),
                )
            )
        if self.text_vectors is not None:  # drawn after the rest, so the random vectors' store is unchanged
            for memory, vector in zip(out, self.text_vectors.of([m.content for m in out]), strict=True):
                memory.embedding = vector.tolist()
        return out

    async def grow(self, graph: FalkorGraph, size: int) -> None:
        """Write memories until the store holds `size` (of this seeder's). The
        next batch is drawn in a thread while FalkorDB writes this one."""

        def draw(start: int, count: int) -> tuple[list[Memory], list[dict]]:
            batch = self.batch(count, start)
            return batch, [memory_to_row(m) for m in batch]

        def next_draw(start: int):
            count = min(SEED_BATCH, size - start)
            return asyncio.create_task(asyncio.to_thread(draw, start, count)) if count > 0 else None

        pending = next_draw(self.count)
        while pending is not None:
            batch, rows = await pending
            pending = next_draw(self.count + len(batch))
            started = time.perf_counter()
            await graph.connection.query("UNWIND $rows AS r CREATE (m:Memory) SET m = r", {"rows": rows})
            mentions = [{"id": m.id, "tag": t} for m in batch for t in m.tags if t.startswith("entity:")]
            await graph.connection.query(
                "UNWIND $rows AS r MATCH (m:Memory {id: r.id}) MERGE (e:Entity {tenant: 'default', tag: r.tag}) "
                "CREATE (m)-[:MENTIONS {created_at: 0}]->(e)",
                {"rows": mentions},
            )
            links = self._links(batch)
            for kind, rows in links.items():
                if rows:
                    await graph.connection.query(
                        "UNWIND $rows AS r MATCH (a:Memory {id: r.a}), (b:Memory {id: r.b}) "
                        f"CREATE (a)-[:{kind} {{strength: r.s, created_at: 0}}]->(b)",
                        {"rows": rows},
                    )
            self.seconds += time.perf_counter() - started
            self.edges += len(mentions) + sum(len(r) for r in links.values())
            if self.count % 50_000 < SEED_BATCH:
                progress(f"seeded {self.count} ({self.count / self.seconds:.0f} memories/s)")

    def _links(self, batch: list[Memory]) -> dict[str, list[dict]]:
        """0-2 edges a memory to earlier ones (of every kind in LINKS); records the batch's ids."""
        rng = self.link_rng  # self.rng draws the next batch in another thread meanwhile
        links: dict[str, list[dict]] = {kind: [] for kind in LINKS}
        for m in batch:
            if self.ids:
                for _ in range(int(rng.integers(0, 3))):
                    kind = LINKS[int(rng.integers(0, len(LINKS)))]
                    other = self.ids[int(rng.integers(0, len(self.ids)))]
                    links[kind].append({"a": m.id, "b": other, "s": float(rng.uniform(0.3, 1))})
            self.ids.append(m.id)
        return links
