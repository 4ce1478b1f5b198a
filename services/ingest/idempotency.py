"""Idempotency keys: a request's key answers a repeat with its first result;
a batch item's key stores its item once, whatever batch it comes in."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime, timedelta

from services.core.domain.batch import held_item_id
from services.core.domain.errors import AlreadyExists
from services.core.domain.model import Memory
from services.core.domain.times import to_micros
from services.core.ports import IdempotencyClaim, MemoryWriter


class Idempotency:
    """Claims and replays of Idempotency-Keys, remembered for `ttl_seconds`."""

    def __init__(self, writer: MemoryWriter, ttl_seconds: float):
        self._writer = writer
        self._ttl = timedelta(seconds=ttl_seconds)

    def claim(self, tenant: str, key: str, request_hash: str, now: datetime) -> IdempotencyClaim | None:
        """The claim a write records with itself for `key`; None without a key."""
        if not key:
            return None
        return IdempotencyClaim(tenant, key, str(uuid.uuid4()), request_hash, to_micros(now + self._ttl))

    async def replay(self, tenant: str, key: str, request_hash: str, now: datetime) -> list[Memory] | None:
        """The memories the first request with this key stored, or None when
        there is no key or it is unused. The key sent with another request is
        IDEMPOTENCY_KEY_REUSED; its memories deleted since, IDEMPOTENT_RESULT_GONE."""
        if not key:
            return None
        prior = await self._writer.get_idempotency(tenant, key, to_micros(now))
        if prior is None:
            return None
        prior_hash, ids = prior
        if prior_hash != request_hash:
            raise AlreadyExists(
                "IDEMPOTENCY_KEY_REUSED",
                "this Idempotency-Key was used for a different request",
                field="idempotency_key",
            )
        found = await self._writer.get_memories(tenant, ids)
        if len(found) != len(ids):
            raise AlreadyExists(
                "IDEMPOTENT_RESULT_GONE",
                "this Idempotency-Key's request already ran, and its memories were deleted since",
                field="idempotency_key",
            )
        return [found[i] for i in ids]

    async def claim_items(
        self, tenant: str, memories: list[Memory], keyed: dict[str, tuple[int, str]], now: datetime
    ) -> tuple[list[Memory], dict[int, Memory]]:
        """Claim the items' keys for their new memories. A key held already
        (by an earlier request, or one running now) lends its memory id to
        the item; where that memory exists the item is answered by it (the
        second result), else (the earlier request stopped between its claim
        and its write) it is written now under that id, which the store
        keeps unique. The same key with another item is ALREADY_EXISTS."""
        now_us = to_micros(now)
        held = await self._writer.get_idempotency_many(tenant, list(keyed), now_us)
        owner = str(uuid.uuid4())
        expires = to_micros(now + self._ttl)
        claims = [
            (IdempotencyClaim(tenant, key, owner, item_hash, expires), [memories[index].id])
            for key, (index, item_hash) in keyed.items()
            if key not in held
        ]
        if lost := await self._writer.claim_idempotency(claims, now_us):
            held.update(await self._writer.get_idempotency_many(tenant, sorted(lost), now_us))
        memories = list(memories)
        for key, (index, item_hash) in keyed.items():
            if key in held:
                memories[index] = replace(memories[index], id=held_item_id(index, item_hash, held[key]))
        held_ids = [memories[index].id for key, (index, _) in keyed.items() if key in held]
        found = await self._writer.get_memories(tenant, held_ids) if held_ids else {}
        seen = {
            index: found[memories[index].id]
            for key, (index, _) in keyed.items()
            if key in held and memories[index].id in found
        }
        return memories, seen
