"""What a batch item may carry, and the rules of a batch's item idempotency keys."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from services.core.domain.classification import FALLBACK
from services.core.domain.drafts import Draft, build_memory
from services.core.domain.errors import AlreadyExists, DomainError, InvalidArgument
from services.core.domain.limits import Limits
from services.core.domain.model import Memory


def at_index(index: int, error: DomainError) -> DomainError:
    """The same error, its message naming the batch item (a missing content
    in the words the spec gives: "Memory at index 2 missing 'content'")."""
    details = {k: v for k, v in error.details.items() if k != "field"}
    if error.reason == "CONTENT_REQUIRED":
        message = f"Memory at index {index} missing '{error.field}'"
    else:
        message = f"Memory at index {index}: {error.message}"
    return type(error)(error.reason, message, field=error.field, index=index, **details)


def batch_item(draft: Draft) -> Draft:
    """A batch item takes no embedding or validity window: what it sends of them is dropped."""
    if draft.embedding is None and draft.t_valid is None and draft.t_invalid is None:
        return draft  # nothing to drop
    return replace(draft, embedding=None, t_valid=None, t_invalid=None)


def check_batch(drafts: list[Draft], *, tenant: str, now: datetime, limits: Limits) -> list[Draft]:
    """The batch's items as stored (batch_item), each checked against every
    rule of a new memory before any is prepared, so the lowest bad index is
    the one reported (its error names the index). The batch's size is
    validate_batch_size's, checked before this."""
    items = [batch_item(d) for d in drafts]
    for index, item in enumerate(items):
        try:
            build_memory(item, memory_id="-", tenant=tenant, now=now, limits=limits, classify=lambda _: FALLBACK)
        except DomainError as error:
            raise at_index(index, error) from None
    return items


def in_batch_order(memories: list[Memory]) -> list[Memory]:
    """Recorded in their order, a microsecond apart: items of one time keep
    the batch's order (the memory "just before" one, embedding_text.py).
    The batch's new records are moved in place, and the list returned (a
    copy of each, by dataclasses.replace, cost 8 µs a memory)."""
    for i, m in enumerate(memories):
        m.recorded_at += timedelta(microseconds=i)
    return memories


def keyed_items(keys: list[tuple[str, str]] | None, count: int) -> dict[str, tuple[int, str]]:
    """A batch's item keys by key: (index, item hash); none when no item has one.
    A key list of another length than the batch, or a key twice in one batch
    (naming the second index), is INVALID_ARGUMENT."""
    if not keys or not any(key for key, _ in keys):
        return {}
    if len(keys) != count:
        raise InvalidArgument(
            "INVALID_ARGUMENT", "item_idempotency_keys must give one key per memory", field="item_idempotency_keys"
        )
    keyed: dict[str, tuple[int, str]] = {}
    for index, (key, item_hash) in enumerate(keys):
        if not key:
            continue
        if key in keyed:
            raise InvalidArgument(
                "DUPLICATE_IDEMPOTENCY_KEY",
                f"Memory at index {index}: idempotency_key repeats the one at index {keyed[key][0]}",
                field="idempotency_key",
                index=index,
            )
        keyed[key] = (index, item_hash)
    return keyed


def held_item_id(index: int, item_hash: str, held: tuple[str, list[str]]) -> str:
    """The memory id an item's key already holds; the key held for another
    item (another hash, or a whole request's memories) is ALREADY_EXISTS."""
    prior_hash, ids = held
    if prior_hash != item_hash or len(ids) != 1:
        raise AlreadyExists(
            "IDEMPOTENCY_KEY_REUSED",
            f"Memory at index {index}: this idempotency_key was used for a different memory",
            field="idempotency_key",
            index=index,
        )
    return ids[0]
