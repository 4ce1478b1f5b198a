"""Ingest's use cases over one set of ports, built together: every write,
validated by the domain rules.

Each write goes to the graph together with its events (one query), so an
acknowledged write is never lost; the relay then publishes the events, and
re-drives them later if the bus was down. One module per use case (create,
update, delete, associate, supersede, review), sharing the idempotency
keys, the quota locks and the tombstone guard built here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from services.core.disputes import Disputes
from services.core.domain.limits import Limits
from services.core.domain.review_policy import ReviewPolicy
from services.core.ports import LanguageModel, MemoryWriter, TrustStore
from services.core.relay import OutboxRelay
from services.ingest.associate import Associations
from services.ingest.create import Creation, NewMemoryWrites
from services.ingest.delete import Deletions
from services.ingest.idempotency import Idempotency
from services.ingest.prepare import MemoryPreparation
from services.ingest.quota import QuotaLocks
from services.ingest.review import Reviews
from services.ingest.supersede import Supersession
from services.ingest.tombstone_guard import GuardedWrites
from services.ingest.update import Updates


@dataclass(frozen=True, slots=True)
class WritePolicy:
    """The knobs of the write path, from settings."""

    auto_summarize: bool
    summary_target_length: int
    idempotency_ttl_seconds: float
    delete_page_size: int
    #: Retries of a compare-and-set that met a concurrent change (WRITE_CONFLICT_RETRIES): 1 + this many tries.
    conflict_retries: int


class IngestHandlers:
    """The use cases, by the names the servicer calls. Without a trust store
    (unit tests of other rules) no tombstone is checked or left and reviews
    are refused."""

    def __init__(
        self,
        *,
        writer: MemoryWriter,
        relay: OutboxRelay,
        limits: Limits,
        llm: LanguageModel | None = None,
        policy: WritePolicy,
        trust: TrustStore | None = None,
        review: ReviewPolicy | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ):
        review = review or ReviewPolicy()
        retries = policy.conflict_retries
        new = NewMemoryWrites(
            preparation=MemoryPreparation(
                limits=limits,
                llm=llm,
                auto_summarize=policy.auto_summarize,
                summary_target_length=policy.summary_target_length,
                review=review,
                new_id=new_id,
            ),
            idempotency=Idempotency(writer, policy.idempotency_ttl_seconds),
            # One lock per tenant for every write that adds a memory (create, batch, supersede).
            quota=QuotaLocks(writer.count_memories),
            guarded=GuardedWrites(checked=trust is not None, retries=retries),
        )
        creation = Creation(writer=writer, relay=relay, limits=limits, new=new, clock=clock)
        updates = Updates(writer=writer, relay=relay, limits=limits, retries=retries, clock=clock)
        deletions = Deletions(writer=writer, relay=relay, trust=trust, page_size=policy.delete_page_size, clock=clock)
        disputes = Disputes(trust, relay.submit, review, clock) if trust is not None else None
        associations = Associations(writer=writer, relay=relay, limits=limits, disputes=disputes, clock=clock)
        supersession = Supersession(writer=writer, relay=relay, trust=trust, new=new, retries=retries, clock=clock)
        reviews = Reviews(lookup=writer, trust=trust, relay=relay, retries=retries, clock=clock)
        self.create_memory = creation.create_memory
        self.batch_create = creation.batch_create
        self.update_memory = updates.update_memory
        self.delete_memory = deletions.delete_memory
        self.delete_by_tags = deletions.delete_by_tags
        self.associate = associations.associate
        self.supersede = supersession.supersede
        self.review = reviews.review
        self.remove_tombstone = reviews.remove_tombstone
