"""Reads by id: one memory with its strongest relations, flagged by the current-state pass."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from services.core.domain.errors import NotFound
from services.core.domain.ids import validate_memory_id
from services.core.domain.model import Memory, Relation
from services.core.domain.state import State, resolve_state_mode
from services.core.domain.times import to_micros
from services.core.ports.reads import RecordRead
from services.recall.current_state import CurrentStatePass


@dataclass(frozen=True, slots=True)
class MemoryRead:
    memory: Memory
    relations: list[Relation]
    state: State
    replaced_by: str | None


class MemoryReads:
    """GET /memory/{id}."""

    def __init__(
        self,
        *,
        reader: RecordRead,
        state: CurrentStatePass,
        relation_limit: int,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self._reader = reader
        self._state = state
        self._relation_limit = relation_limit
        self._clock = clock

    async def get_memory(self, tenant: str, memory_id: str, state_mode: str = "") -> MemoryRead:
        """One memory of the caller's tenant with its strongest relations; an
        access bumps last_accessed. The memory comes back in every mode,
        flagged with its state and, when superseded, its current head."""
        resolve_state_mode(state_mode)
        memory_id = validate_memory_id(memory_id)
        now = self._clock()
        found = await self._reader.read_memory(
            tenant, memory_id, accessed_us=to_micros(now), relation_limit=self._relation_limit
        )
        if found is None:
            raise NotFound("MEMORY_NOT_FOUND", f"memory {memory_id} not found", field="id", id=memory_id)
        memory, relations = found
        verdict = (await self._state.verdicts(tenant, [memory], now))[memory.id]
        return MemoryRead(memory, relations, verdict.state, verdict.head.id if verdict.head else None)
