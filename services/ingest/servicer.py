"""IngestService: protobuf in, domain handlers, protobuf out."""

from __future__ import annotations

import hashlib
import json

from google.protobuf import json_format, struct_pb2

from memgrid.v1 import ingest_service_pb2 as pb
from memgrid.v1 import ingest_service_pb2_grpc as pb_grpc
from services.core.codec import draft_from_pb, memory_to_pb, ts_to_pb
from services.core.grpc.tenant import memory_limit_of, tenant_of
from services.ingest.associate import AssociationDraft
from services.ingest.create import Created
from services.ingest.use_cases import IngestHandlers

QUEUED = "queued"


def request_hash(request) -> str:
    """A fingerprint of what was asked (the idempotency key aside)."""
    copy = type(request)()
    copy.CopyFrom(request)
    copy.ClearField("idempotency_key")
    return hashlib.sha256(copy.SerializeToString(deterministic=True)).hexdigest()


def _item_hash(draft) -> str:
    """A batch item's fingerprint, which its idempotency key is held to."""
    return hashlib.sha256(draft.SerializeToString(deterministic=True)).hexdigest()


def _batch_item_keys(request: pb.BatchCreateMemoriesRequest) -> list[tuple[str, str]] | None:
    """(key, item fingerprint) per item; None without item keys (a count that
    differs from the items' is the handler's to refuse)."""
    keys, drafts = list(request.item_idempotency_keys), request.memories
    if not keys:
        return None
    return [(key, _item_hash(drafts[i]) if i < len(drafts) else "") for i, key in enumerate(keys)]


def _statuses(created_memory, published: bool) -> dict:
    """What the REST surface reports as queued: the vector comes through the
    projection, enrichment through the event (pending until the bus has it).
    embedding_status is AutoMem's word for a vector the caller sent (provided)
    or one to generate (queued)."""
    return {
        "qdrant": QUEUED,
        "embedding_status": "provided" if created_memory.embedding is not None else QUEUED,
        "enrichment": QUEUED if published else "pending",
    }


def _association_draft(a: pb.Association) -> AssociationDraft:
    return AssociationDraft(
        memory1_id=a.memory1_id,
        memory2_id=a.memory2_id,
        type=a.type,
        strength=json_format.MessageToDict(a.strength) if a.HasField("strength") else None,
        properties=json.loads(a.properties_json or "{}"),
    )


def _association_pb(relation) -> pb.Association:
    return pb.Association(
        memory1_id=relation.source_id,
        memory2_id=relation.target_id,
        type=relation.type,
        strength=struct_pb2.Value(number_value=relation.strength),
        properties_json=json.dumps(relation.properties, ensure_ascii=False),
    )


class IngestServicer(pb_grpc.IngestServiceServicer):
    def __init__(self, handlers: IngestHandlers):
        self._handlers = handlers

    @staticmethod
    def _create_response(created: Created) -> pb.CreateMemoryResponse:
        memory = created.memory
        summary = created.summaries[0] if created.summaries else None
        return pb.CreateMemoryResponse(
            memory=memory_to_pb(memory),
            replayed=created.replayed,
            summarized=summary is not None,
            original_length=summary.original_length if summary else 0,
            summarized_length=summary.summarized_length if summary else 0,
            **_statuses(memory, created.published),
        )

    async def CreateMemory(self, request: pb.CreateMemoryRequest, context) -> pb.CreateMemoryResponse:
        created = await self._handlers.create_memory(
            tenant_of(context),
            draft_from_pb(request.memory),
            idempotency_key=request.idempotency_key,
            request_hash=request_hash(request),
            memory_limit=memory_limit_of(context),
            force=request.force,
        )
        return self._create_response(created)

    async def BatchCreateMemories(self, request: pb.BatchCreateMemoriesRequest, context):
        created = await self._handlers.batch_create(
            tenant_of(context),
            [draft_from_pb(d) for d in request.memories],
            idempotency_key=request.idempotency_key,
            request_hash=request_hash(request),
            memory_limit=memory_limit_of(context),
            force=request.force,
            item_keys=_batch_item_keys(request),
        )
        # A batch key's replay answers for every item; else the items their own keys answered.
        replayed = created.replayed_items or (len(created.memories) if created.replayed else 0)
        return pb.BatchCreateMemoriesResponse(
            memory_ids=[m.id for m in created.memories],
            replayed=created.replayed,
            replayed_count=replayed,
            qdrant=f"{QUEUED} ({len(created.memories)})",
            enrichment=QUEUED if created.published else "pending",
        )

    async def UpdateMemory(self, request: pb.UpdateMemoryRequest, context) -> pb.UpdateMemoryResponse:
        fields = {"metadata" if p == "metadata_json" else p for p in request.update_mask.paths}
        memory, changed = await self._handlers.update_memory(
            tenant_of(context), request.id, draft_from_pb(request.memory), fields
        )
        return pb.UpdateMemoryResponse(memory=memory_to_pb(memory), content_changed=changed)

    async def DeleteMemory(self, request: pb.DeleteMemoryRequest, context) -> pb.DeleteMemoryResponse:
        deleted, tombstone_id = await self._handlers.delete_memory(
            tenant_of(context), request.id, reason=request.reason, tombstone=request.tombstone
        )
        return pb.DeleteMemoryResponse(id=deleted, tombstone_id=tombstone_id)

    async def DeleteMemoriesByTag(self, request: pb.DeleteMemoriesByTagRequest, context):
        count = await self._handlers.delete_by_tags(tenant_of(context), list(request.tags))
        return pb.DeleteMemoriesByTagResponse(tags=request.tags, deleted_count=count)

    async def CreateAssociation(self, request: pb.CreateAssociationRequest, context):
        outcome = await self._handlers.associate(
            tenant_of(context), [_association_draft(request.association)], single=True
        )
        relation = outcome.created[0][1]
        return pb.CreateAssociationResponse(
            association=_association_pb(relation), created_at=ts_to_pb(relation.created_at)
        )

    async def BatchCreateAssociations(self, request: pb.BatchCreateAssociationsRequest, context):
        outcome = await self._handlers.associate(
            tenant_of(context), [_association_draft(a) for a in request.associations], single=False
        )
        return pb.BatchCreateAssociationsResponse(
            succeeded=[_association_pb(r) for _, r in outcome.created],
            failed=[pb.AssociationFailure(index=i, reason=reason) for i, reason in outcome.failed],
        )

    async def SupersedeMemory(self, request: pb.SupersedeMemoryRequest, context) -> pb.SupersedeMemoryResponse:
        done = await self._handlers.supersede(
            tenant_of(context),
            request.old_memory_id,
            draft_from_pb(request.replacement),
            relation=request.relation or None,
            reason=request.reason,
            idempotency_key=request.idempotency_key,
            request_hash=request_hash(request),
            memory_limit=memory_limit_of(context),
            force=request.force,
        )
        summary = done.summary
        return pb.SupersedeMemoryResponse(
            replacement=memory_to_pb(done.replacement),
            superseded=memory_to_pb(done.superseded),
            relation=done.relation,
            summarized=summary is not None,
            original_length=summary.original_length if summary else 0,
            summarized_length=summary.summarized_length if summary else 0,
            replayed=done.replayed,
            **_statuses(done.replacement, done.published),
        )

    async def ReviewMemory(self, request: pb.ReviewMemoryRequest, context) -> pb.ReviewMemoryResponse:
        memory, tombstone_id = await self._handlers.review(
            tenant_of(context), request.id, approve=request.approve, note=request.note
        )
        return pb.ReviewMemoryResponse(memory=memory_to_pb(memory, with_embedding=False), tombstone_id=tombstone_id)

    async def RemoveTombstone(self, request: pb.RemoveTombstoneRequest, context) -> pb.RemoveTombstoneResponse:
        return pb.RemoveTombstoneResponse(id=await self._handlers.remove_tombstone(tenant_of(context), request.id))
