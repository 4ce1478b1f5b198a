"""POST /associate and its batch: edges between stored memories; a new
CONTRADICTS edge disputes the older of its two memories (services/core/disputes.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from services.core.disputes import Disputes
from services.core.domain.associations import build_relation
from services.core.domain.drafts import validate_batch_size
from services.core.domain.errors import DomainError, NotFound
from services.core.domain.limits import Limits
from services.core.domain.model import MemoryEvent, Relation
from services.core.domain.times import to_micros
from services.core.ports import MemoryWriter
from services.core.relay import OutboxRelay


@dataclass(frozen=True, slots=True)
class AssociationDraft:
    memory1_id: object
    memory2_id: object
    type: object
    strength: object = None
    properties: dict = field(default_factory=dict)


@dataclass(slots=True)
class AssociationOutcome:
    created: list[tuple[int, Relation]]
    failed: list[tuple[int, str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Associations:
    writer: MemoryWriter
    relay: OutboxRelay
    limits: Limits
    #: None without a trust store (unit tests of other rules): a contradiction disputes nothing.
    disputes: Disputes | None
    clock: Callable[[], datetime]

    async def associate(self, tenant: str, drafts: list[AssociationDraft], *, single: bool) -> AssociationOutcome:
        """POST /associate. A single association raises on any problem; a
        batch reports each failure by index."""
        validate_batch_size(len(drafts), self.limits, field="associations")
        now = self.clock()
        valid: list[tuple[int, Relation]] = []
        failed: list[tuple[int, str]] = []
        for index, d in enumerate(drafts):
            try:
                valid.append(
                    (index, build_relation(d.memory1_id, d.memory2_id, d.type, d.strength, d.properties, now=now))
                )
            except DomainError as error:
                if single:
                    raise
                failed.append((index, error.message))
        relations = [r for _, r in valid]
        events = [MemoryEvent.associated(tenant, r) for r in relations]
        written = (
            set(await self.writer.create_relations(tenant, relations, events, now_us=to_micros(now)))
            if valid
            else set()
        )
        created = [(index, r) for k, (index, r) in enumerate(valid) if k in written]
        missing = [(index, r) for k, (index, r) in enumerate(valid) if k not in written]
        if missing:
            found = await self.writer.get_memories(tenant, [i for _, r in missing for i in (r.source_id, r.target_id)])
            for index, r in missing:
                name = "memory1_id" if r.source_id not in found else "memory2_id"
                gone = r.source_id if name == "memory1_id" else r.target_id
                if single:
                    raise NotFound("MEMORY_NOT_FOUND", f"'{name}' {gone} not found", field=name, id=gone)
                failed.append((index, f"'{name}' {gone} not found"))
        await self.relay.submit([e for k, e in enumerate(events) if k in written])
        contradictions = [(r.source_id, r.target_id) for _, r in created if r.type == "CONTRADICTS"]
        if contradictions and self.disputes is not None:
            await self.disputes.contradicted(tenant, contradictions)
        return AssociationOutcome(created, sorted(failed))
