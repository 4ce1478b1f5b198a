"""In-memory fakes of the narrow ports, for the fast handler tier
(tests/unit). Each keeps the rules of the FalkorDB adapter it stands in
for; tests/integration/test_fake_congruence.py runs the same cases on both.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from services.core.adapters.falkor.reads import EntityBounds
from services.core.domain.entity_expansion import rarest_entities
from services.core.domain.idempotency import IdempotencyClaim
from services.core.domain.model import (
    SUPERSESSION_RELATIONS,
    ComponentStatus,
    Memory,
    MemoryEvent,
    Relation,
    relation_rank,
)
from services.core.domain.outbox import OutboxEntry
from services.core.domain.recall_request import Scope, in_scope
from services.core.domain.state import State, Successor, window_state
from services.core.domain.times import to_micros
from services.core.domain.tombstones import TombstoneGuard

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _from_us(value: int) -> datetime:
    return EPOCH + timedelta(microseconds=value)


#: list_memories' orders (the adapter's ORDERS in rows.py), as sort keys.
_ORDERS = {
    "importance": lambda m: (-m.importance, -to_micros(m.timestamp), m.id),
    "time_desc": lambda m: (-to_micros(m.timestamp), m.id),
    "time_asc": lambda m: (to_micros(m.timestamp), m.id),
    "updated_desc": lambda m: (-to_micros(m.updated_at), m.id),
    "updated_asc": lambda m: (to_micros(m.updated_at), m.id),
}


def _read(memory: Memory) -> Memory:
    """A copy as the adapter's listing reads return it: without the embedding (RETURN_FIELDS)."""
    return replace(memory, embedding=None)


def _scope_state(memory: Memory, scope: Scope) -> bool:
    """The state part of the adapter's scope_where, from the domain's window
    state: unless in history mode, valid at `at` and not expired, except that
    an expired memory superseded by then stays a candidate (the pass decides)."""
    if scope.history:
        return True
    state = window_state(replace(memory, archived=False), scope.at)
    superseded = memory.superseded_at is not None and memory.superseded_at <= scope.at
    return state is State.CURRENT or (state is State.EXPIRED and superseded)


@dataclass(slots=True)
class _Key:
    owner: str
    request_hash: str
    memory_ids: list[str]
    expires_us: int


#: Later than any event a test records: every event in an outbox is older.
_END_OF_TIME_US = 2**62


async def outbox_size(outbox) -> int:
    """The events recorded and not yet acknowledged, read as the relay reads
    them (the Outbox port has no count of its own: only tests asked for one)."""
    return len(await outbox.pending_outbox(_END_OF_TIME_US, 1_000_000))


async def nearest(index, query, *, with_payload: bool = False) -> list:
    """One query's hits from a vector index, through search_many (the only
    search the port has: its callers search in batches)."""
    [hits] = await index.search_many([query], with_payload=with_payload)
    return hits


@dataclass(slots=True)
class InMemoryGraph:
    """MemoryLookup, MemoryWriter, Outbox and MemoryReader over dictionaries:
    records by (tenant, id), edges by (tenant, source, type, target), the
    outbox in write order, idempotency keys by (tenant, key), and the
    entities each memory mentions by (tenant, id) (the MENTIONS edges
    enrichment writes: fill them with `mention`)."""

    memories: dict[tuple[str, str], Memory] = field(default_factory=dict)
    edges: dict[tuple[str, str, str, str], Relation] = field(default_factory=dict)
    outbox: list[tuple[int, MemoryEvent]] = field(default_factory=list)
    keys: dict[tuple[str, str], _Key] = field(default_factory=dict)
    mentions: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    entity_bounds: EntityBounds = field(default_factory=EntityBounds)

    # GraphLifecycle --------------------------------------------------------------------------------

    async def ensure_schema(self) -> None:
        return None

    async def status(self) -> ComponentStatus:
        return ComponentStatus("falkordb", "connected", "in memory", {"memories": float(len(self.memories))})

    async def close(self) -> None:
        return None

    # MemoryLookup ----------------------------------------------------------------------------------

    async def get_memory(self, tenant: str, memory_id: str) -> Memory | None:
        return (await self.get_memories(tenant, [memory_id])).get(memory_id)

    async def get_memories(self, tenant: str, memory_ids: list[str]) -> dict[str, Memory]:
        return {i: replace(self.memories[(tenant, i)]) for i in memory_ids if (tenant, i) in self.memories}

    async def count_memories(self, tenant: str | None = None) -> int:
        return sum(1 for t, _ in self.memories if tenant is None or t == tenant)

    # MemoryWriter ----------------------------------------------------------------------------------

    def _claim(self, claim: IdempotencyClaim, memory_ids: list[str], now_us: int) -> bool:
        """The adapter's MERGE on the key: an expired key is taken over; the
        write goes ahead only for the key's owner."""
        held = self.keys.get((claim.tenant, claim.key))
        if held is None or held.expires_us < now_us:
            held = self.keys[(claim.tenant, claim.key)] = _Key(
                claim.owner, claim.request_hash, list(memory_ids), claim.expires_us
            )
        return held.owner == claim.owner

    def _record(self, events: list[MemoryEvent], now_us: int) -> None:
        # A list, as the graph holds one Outbox node per write of an event
        # (a repeated edge's event has the same id each time).
        self.outbox.extend((now_us, event) for event in events)

    async def create_memories(
        self,
        memories: list[Memory],
        events: list[MemoryEvent],
        *,
        now_us: int,
        claim: IdempotencyClaim | None = None,
        guard: TombstoneGuard | None = None,
    ) -> bool:
        # No trust store here, so no tombstone ever holds: a guard never refuses.
        if claim is not None and not self._claim(claim, [m.id for m in memories], now_us):
            return False
        # Keyed by id, as the FalkorDB write is: one already stored is kept, with no second event.
        fresh = [(m, e) for m, e in zip(memories, events, strict=True) if (m.tenant, m.id) not in self.memories]
        for memory, _ in fresh:
            self.memories[(memory.tenant, memory.id)] = replace(memory)
        self._record([e for _, e in fresh], now_us)
        return True

    async def get_idempotency(self, tenant: str, key: str, now_us: int) -> tuple[str, list[str]] | None:
        held = self.keys.get((tenant, key))
        if held is None or held.expires_us < now_us:
            return None
        return held.request_hash, list(held.memory_ids)

    async def get_idempotency_many(self, tenant: str, keys: list[str], now_us: int) -> dict[str, tuple[str, list[str]]]:
        found = {key: await self.get_idempotency(tenant, key, now_us) for key in keys}
        return {key: held for key, held in found.items() if held is not None}

    async def claim_idempotency(self, claims: list[tuple[IdempotencyClaim, list[str]]], now_us: int) -> set[str]:
        return {claim.key for claim, ids in claims if not self._claim(claim, ids, now_us)}

    async def update_memory(
        self, memory: Memory, expected_version: int, event: MemoryEvent, *, now_us: int, before: Memory | None = None
    ) -> bool:
        current = self.memories.get((memory.tenant, memory.id))
        if current is None or current.version != expected_version:
            return False
        self.memories[(memory.tenant, memory.id)] = replace(memory)
        self._record([event], now_us)
        return True

    async def delete_memories(self, tenant: str, events: list[MemoryEvent], *, now_us: int) -> list[str]:
        deleted = []
        for event in events:
            if self.memories.pop((tenant, event.memory_id), None) is None:
                continue
            deleted.append(event.memory_id)
            self.mentions.pop((tenant, event.memory_id), None)
            self._record([event], now_us)
            for key in [k for k in self.edges if k[0] == tenant and event.memory_id in (k[1], k[3])]:
                del self.edges[key]
        return deleted

    async def find_ids_by_tags(self, tenant: str, tags_lower: list[str], limit: int) -> list[str]:
        wanted = set(tags_lower)
        found = [i for (t, i), m in self.memories.items() if t == tenant and {x.lower() for x in m.tags} & wanted]
        return found[:limit]

    async def create_relations(
        self, tenant: str, relations: list[Relation], events: list[MemoryEvent], *, now_us: int
    ) -> list[int]:
        written = []
        for index, (relation, event) in enumerate(zip(relations, events, strict=True)):
            source = self.memories.get((tenant, relation.source_id))
            if source is None or (tenant, relation.target_id) not in self.memories:
                continue
            key = (tenant, relation.source_id, relation.type, relation.target_id)
            earlier = self.edges.get(key)
            # A repeat refreshes strength and properties (MERGE, then SET +=).
            properties = {**(earlier.properties if earlier else {}), **relation.properties}
            self.edges[key] = replace(relation, properties=properties)
            if relation.type in SUPERSESSION_RELATIONS and source.superseded_at is None:
                self.memories[(tenant, source.id)] = replace(source, superseded_at=_from_us(now_us))
            self._record([event], now_us)
            written.append(index)
        return written

    async def supersede(
        self,
        old: Memory,
        expected_version: int,
        replacement: Memory,
        relation: Relation,
        events: list[MemoryEvent],
        *,
        now_us: int,
        claim: IdempotencyClaim | None = None,
        before: Memory | None = None,
        guard: TombstoneGuard | None = None,
    ) -> bool:
        # The adapter claims the key first, in the same query, so a claim
        # stands even when the old memory has changed meanwhile.
        if claim is not None and not self._claim(claim, [replacement.id], now_us):
            return False
        current = self.memories.get((old.tenant, old.id))
        if current is None or current.version != expected_version:
            return False
        self.memories[(old.tenant, old.id)] = replace(old)
        self.memories[(replacement.tenant, replacement.id)] = replace(replacement)
        self.edges[(old.tenant, old.id, relation.type, replacement.id)] = replace(relation)
        self._record(events, now_us)
        return True

    # Outbox ----------------------------------------------------------------------------------------

    async def pending_outbox(self, older_than_us: int, limit: int) -> list[OutboxEntry]:
        entries = sorted(self.outbox, key=lambda entry: entry[0])
        return [OutboxEntry(e.event_id, e) for at, e in entries if at < older_than_us][:limit]

    async def delete_outbox(self, event_ids: list[str], tenants: list[str] | None = None) -> None:
        gone = set(event_ids)
        self.outbox = [(at, e) for at, e in self.outbox if e.event_id not in gone]

    async def purge_idempotency(self, now_us: int) -> int:
        expired = [k for k, held in self.keys.items() if held.expires_us < now_us]
        for key in expired:
            del self.keys[key]
        return len(expired)

    # MemoryReader ----------------------------------------------------------------------------------

    def _edges_of(self, tenant: str, memory_id: str) -> list[Relation]:
        """The memory's edges, both directions, by kind (relation_rank) and
        then strongest first (ties in write order: the engine's order, which
        no caller relies on)."""
        found = [r for k, r in self.edges.items() if k[0] == tenant and memory_id in (k[1], k[3])]
        return sorted((replace(r) for r in found), key=lambda r: (relation_rank(r.type), -r.strength))

    async def read_memory(
        self, tenant: str, memory_id: str, *, accessed_us: int, relation_limit: int
    ) -> tuple[Memory, list[Relation]] | None:
        memory = self.memories.get((tenant, memory_id))
        if memory is None:
            return None
        # The adapter sets the access time as it reads (no "never backwards" here).
        memory.last_accessed = _from_us(accessed_us)
        return replace(memory), self._edges_of(tenant, memory_id)[: max(relation_limit, 0)]

    async def read_candidates(self, tenant: str, ids: list[str]) -> dict[str, tuple[Memory, list[Successor]]]:
        records = {i: _read(m) for i in ids if (m := self.memories.get((tenant, i))) is not None}
        superseded = [i for i, m in records.items() if m.superseded_at is not None]
        edges = await self.successors(tenant, superseded)
        return {i: (m, edges.get(i, [])) for i, m in records.items()}

    async def successors(self, tenant: str, ids: list[str]) -> dict[str, list[Successor]]:
        found: dict[str, list[Successor]] = {i: [] for i in ids}
        for (t, source, kind, target), relation in self.edges.items():
            if t == tenant and source in found and kind in SUPERSESSION_RELATIONS:
                found[source].append(Successor(target, kind, relation.created_at))
        return found

    async def relations_of(self, tenant: str, ids: list[str], limit: int) -> dict[str, list[Relation]]:
        return {i: self._edges_of(tenant, i)[: max(limit, 0)] if (tenant, i) in self.memories else [] for i in ids}

    async def neighbours(
        self,
        tenant: str,
        ids: list[str],
        *,
        types: list[str] | None,
        per_memory: int,
        min_strength: float,
        min_importance: float,
    ) -> list[tuple[Relation, Memory]]:
        found = []
        for memory_id in ids:
            if (tenant, memory_id) not in self.memories:
                continue
            near = []
            for relation in self._edges_of(tenant, memory_id):
                other = relation.target_id if relation.source_id == memory_id else relation.source_id
                record = self.memories[(tenant, other)]
                wanted = not types or relation.type in types
                if wanted and relation.strength >= min_strength and record.importance >= min_importance:
                    near.append((relation, _read(record)))
            found.extend(near[: max(per_memory, 0)])
        return found

    def mention(self, tenant: str, memory_id: str, *entity_tags: str) -> None:
        """MENTIONS edges from a memory of the tenant to these entities (as enrichment links them)."""
        if (tenant, memory_id) in self.memories:
            self.mentions.setdefault((tenant, memory_id), set()).update(entity_tags)

    async def entity_neighbours(
        self,
        tenant: str,
        ids: list[str],
        limit: int,
        *,
        per_seed: int | None = None,
        max_mentions: int | None = None,
        max_reads: int | None = None,
    ) -> list[tuple[str, int]]:
        bounds = self.entity_bounds
        per_seed = bounds.per_seed if per_seed is None else per_seed
        most = bounds.max_mentions if max_mentions is None else max_mentions
        max_reads = bounds.max_reads if max_reads is None else max_reads
        holders: dict[str, list[str]] = {}
        for (t, memory_id), tags in sorted(self.mentions.items()):
            for tag in tags if t == tenant else ():
                holders.setdefault(tag, []).append(memory_id)
        # Each seed's rarest entities (by mentions, then tag), none mentioned
        # by one memory alone or by more than `most`: the domain's rule.
        seeds_entities = [(seed, tag) for seed in ids for tag in sorted(self.mentions.get((tenant, seed), ()))]
        counts = {tag: len(holders[tag]) for _, tag in seeds_entities}
        chosen = rarest_entities(seeds_entities, counts, per_seed=per_seed, over=most + 1)
        # The (entity, memory) pairs read, the rarest entities' first, at most
        # max_reads (which of one entity's, when the bound cuts, is the engine's order).
        pairs = [(tag, b) for tag in chosen for b in holders[tag] if b not in ids][: max(max_reads, 0)]
        shared = Counter(b for _, b in pairs)
        return sorted(shared.items(), key=lambda item: (-item[1], item[0]))[: max(limit, 0)]

    async def list_memories(
        self, scope: Scope, order_by: str, limit: int, offset: int = 0, *, with_archived: bool = False
    ) -> list[Memory]:
        # The domain's in_scope holds the tag, window and as_of rules; it
        # always leaves archived memories out, so with_archived asks it about
        # the memory as if unarchived.
        found = [
            m
            for (t, _), m in self.memories.items()
            if t == scope.tenant
            and (with_archived or not m.archived)
            and in_scope(replace(m, archived=False), scope)
            and _scope_state(m, scope)
        ]
        found.sort(key=_ORDERS[order_by])
        return [_read(m) for m in found[offset : offset + limit]]

    async def touch_memories(self, tenant: str, ids: list[str], accessed_us: int) -> None:
        at = _from_us(accessed_us)
        for memory_id in ids:
            memory = self.memories.get((tenant, memory_id))
            if memory is not None and (memory.last_accessed is None or memory.last_accessed < at):
                memory.last_accessed = at

    # What the tests read -----------------------------------------------------------------------------

    def relations(self, tenant: str) -> list[Relation]:
        """The tenant's edges, in a fixed order."""
        return [r for k, r in sorted(self.edges.items()) if k[0] == tenant]


@dataclass(slots=True)
class RecordingPublisher:
    """An EventPublisher that keeps what it was given; `connected` false
    makes every publish fail, as a bus that is down does."""

    connected: bool = True
    published: list[MemoryEvent] = field(default_factory=list)

    async def publish_many(self, events: list[MemoryEvent]) -> list[bool]:
        if not self.connected:
            return [False] * len(events)
        self.published.extend(events)
        return [True] * len(events)

    async def status(self) -> ComponentStatus:
        return ComponentStatus("nats", "connected" if self.connected else "unavailable")

    async def close(self) -> None:
        return None
