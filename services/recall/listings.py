"""The listings: by tag, the start of a session, and the memories related
to one; each through the current-state pass (history mode aside)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from services.core.domain.errors import InvalidArgument, NotFound
from services.core.domain.ids import validate_memory_id
from services.core.domain.model import AUTHORABLE_RELATIONS, SYSTEM_RELATIONS, Memory, Relation
from services.core.domain.recall_ranking import Candidate
from services.core.domain.recall_request import RecallPolicy, Scope, clamp_limit, clean_tags
from services.core.domain.state import State, resolve_state_mode
from services.core.domain.tags import require_tags
from services.core.domain.trust import parse_trust_states
from services.core.ports.reads import ListingReads
from services.recall.access import AccessRecorder
from services.recall.current_state import CurrentStatePass


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """Page sizes of the listing reads, from settings."""

    by_tag_default: int
    by_tag_max: int
    startup_default: int
    related_default: int


@dataclass(frozen=True, slots=True)
class StartupRules:
    """What /startup-recall gathers besides its listing (AutoMem's
    critical_lessons and system_rules), from settings."""

    lesson_tags: tuple[str, ...] = ("critical", "lesson", "ai-assistant")
    lesson_limit: int = 10
    system_tags: tuple[str, ...] = ("system", "memory-recall")
    system_limit: int = 5
    critical_importance: float = 0.9


@dataclass(frozen=True, slots=True)
class StartupRecall:
    """The listing (the most important current memories, within the tags),
    the current lessons and system rules, and whether a lesson is critical."""

    results: list[Candidate]
    lessons: list[Candidate]
    system_rules: list[Candidate]
    has_critical: bool


@dataclass(frozen=True, slots=True)
class TaggedMemory:
    """One memory of a by-tag listing, flagged with its state and, when
    superseded, the current head of its chain."""

    candidate: Candidate
    state: State
    replaced_by: str | None


class Listings:
    """/by-tag, /startup-recall and /memories/{id}/related."""

    def __init__(
        self,
        *,
        reader: ListingReads,
        state: CurrentStatePass,
        policy: RecallPolicy,
        limits: ReadLimits,
        startup: StartupRules | None = None,
        access: AccessRecorder | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self._reader = reader
        self._state = state
        self._policy = policy
        self._limits = limits
        self._startup = startup or StartupRules()
        self._access = access
        self._clock = clock

    async def list_by_tag(
        self,
        tenant: str,
        tags: list[str],
        *,
        limit: int,
        offset: int,
        state_mode: str = "",
        trust_states: list[str] | None = None,
    ) -> tuple[list[TaggedMemory], bool, int, int]:
        """Memories with any of the tags (exact, case-insensitive), ordered
        importance desc, timestamp desc, id asc; has_more says whether
        another page exists.

        By default (and with state_mode=history) every memory with the tag is
        listed, archived ones too, each flagged with its state and, when
        superseded, its current head: a client lists a tag before deleting
        by it, and the delete removes all of them. state_mode=current
        withholds what is not current (a superseded one replaced by its head)."""
        history = resolve_state_mode(state_mode, default_history=True)
        wanted = clean_tags(tags)
        require_tags(wanted)
        if offset < 0:
            raise InvalidArgument("INVALID_ARGUMENT", "offset must be 0 or more", field="offset")
        limit = clamp_limit(limit, self._limits.by_tag_default, self._limits.by_tag_max)
        now = self._clock()
        scope = Scope(
            tenant=tenant,
            at=now,
            history=history,
            tags=wanted,
            tag_match="exact",
            trust_states=parse_trust_states(trust_states or ()),
        )
        found = await self._reader.list_memories(scope, "importance", limit + 1, offset, with_archived=history)
        if not history:
            page = await self._state.page(tenant, found[:limit], scope, "tag")
            return [TaggedMemory(c, State.CURRENT, None) for c in page], len(found) > limit, limit, offset
        verdicts = await self._state.verdicts(tenant, found[:limit], now)
        flagged = []
        for memory in found[:limit]:
            verdict = verdicts[memory.id]
            head = verdict.head.id if verdict.head else None
            flagged.append(TaggedMemory(Candidate(memory.id, memory=memory, via="tag"), verdict.state, head))
        return flagged, len(found) > limit, limit, offset

    async def startup(self, tenant: str, tags: list[str], *, limit: int, state_mode: str = "") -> StartupRecall:
        """What an agent should know at the start of a session: the most
        important current memories (within the tags, when given), and, as
        AutoMem answers, the current lessons (memories tagged critical,
        lesson or ai-assistant, most important first) and system rules
        (tagged system or memory-recall); all through the state pass. What
        it returns counts as accessed."""
        history = resolve_state_mode(state_mode)
        limit = clamp_limit(limit, self._limits.startup_default, self._policy.max_limit)
        now, rules = self._clock(), self._startup

        async def listing(wanted: tuple[str, ...], size: int, exact: bool) -> list[Candidate]:
            scope = Scope(tenant=tenant, at=now, history=history, tags=wanted, tag_match="exact" if exact else "prefix")
            found = await self._reader.list_memories(scope, "importance", size)
            return (await self._state.page(tenant, found, scope, "startup"))[:size]

        results, lessons, system_rules = await asyncio.gather(
            listing(clean_tags(tags), limit, False),
            listing(clean_tags(rules.lesson_tags), rules.lesson_limit, True),
            listing(clean_tags(rules.system_tags), rules.system_limit, True),
        )
        if self._access is not None:
            self._access.record(tenant, (c.id for c in (*results, *lessons, *system_rules)))
        critical = any(c.hydrated.importance >= rules.critical_importance for c in lessons)
        return StartupRecall(results, lessons, system_rules, critical)

    async def related(
        self,
        tenant: str,
        memory_id: str,
        *,
        relation_types: list[str],
        limit: int,
        min_strength: float | None,
        state_mode: str = "",
        max_depth: int = 0,
    ) -> list[tuple[Relation, Memory, str | None]]:
        """The memories one edge away, strongest first, then (max_depth, 1 to
        RECALL_RELATED_MAX_DEPTH) those one edge further, and so on; a
        superseded neighbour is replaced by its head (its id in the third place)."""
        history = resolve_state_mode(state_mode)
        memory_id = validate_memory_id(memory_id)
        types = [t.strip().upper() for t in relation_types if t.strip()]
        known_types = set(AUTHORABLE_RELATIONS) | set(SYSTEM_RELATIONS) | {"MENTIONS"}
        for t in types:
            if t not in known_types:
                raise InvalidArgument("INVALID_RELATION_TYPE", f"unknown relation type {t!r}", field="relation_types")
        if min_strength is not None and not 0.0 <= min_strength <= 1.0:
            raise InvalidArgument("INVALID_ARGUMENT", "min_strength must be between 0 and 1", field="min_strength")
        if await self._reader.get_memory(tenant, memory_id) is None:
            raise NotFound("MEMORY_NOT_FOUND", f"memory {memory_id} not found", field="id", id=memory_id)
        limit = clamp_limit(limit, self._limits.related_default, self._policy.max_limit)
        depth = min(max(max_depth, 1), self._policy.related_max_depth)
        edges: list[tuple[Relation, Memory]] = []
        reached, frontier = {memory_id}, [memory_id]
        for _ in range(depth):
            found = await self._reader.neighbours(
                tenant, frontier, types=types or None, per_memory=limit, min_strength=min_strength or 0.0,
                min_importance=0.0,
            )  # fmt: skip
            frontier = []
            trusted = {m.id for m in self._state.trusted_memories([m for _, m in found])}
            for relation, memory in found:
                if memory.id not in trusted:  # under review, rejected or deprecated: not walked through either
                    continue
                if memory.id not in reached and len(edges) < limit:
                    reached.add(memory.id)
                    frontier.append(memory.id)
                    edges.append((relation, memory))
            if not frontier or len(edges) >= limit:
                break
        if history:
            return [(relation, memory, None) for relation, memory in edges]
        now = self._clock()
        verdicts = await self._state.verdicts(tenant, [m for _, m in edges], now)
        related: list[tuple[Relation, Memory, str | None]] = []
        seen = {memory_id}
        for relation, memory in edges:
            verdict = verdicts[memory.id]
            shown = verdict.head if verdict.replaced else (memory if verdict.kept else None)
            if shown is None or shown.id in seen:
                continue
            seen.add(shown.id)
            related.append((relation, shown, memory.id if verdict.replaced else None))
        return related
