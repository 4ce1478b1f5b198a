"""A key is claimed by the write itself, not looked up first: a repeat that
would now be refused before its claim (the tenant's limit, a rule) is
answered as a lookup first answered it, by the key's first result or
IDEMPOTENCY_KEY_REUSED."""

from __future__ import annotations

import pytest

from services.core.domain.drafts import Draft
from services.core.domain.errors import AlreadyExists, InvalidArgument, ResourceExhausted
from tests.unit.test_ingest_handlers import Rig


async def test_a_repeat_at_the_tenants_limit_is_answered_by_its_first_result():
    rig = Rig()
    first = await rig.handlers.create_memory(
        "acme", Draft(content="the last place"), idempotency_key="k", request_hash="h", memory_limit=1
    )
    again = await rig.handlers.create_memory(
        "acme", Draft(content="the last place"), idempotency_key="k", request_hash="h", memory_limit=1
    )
    assert again.replayed
    assert again.memory.id == first.memory.id
    assert await rig.graph.count_memories("acme") == 1


async def test_a_batch_repeat_at_the_tenants_limit_is_answered_by_its_first_result():
    rig = Rig()
    drafts = [Draft(content="a"), Draft(content="b")]
    first = await rig.handlers.batch_create("acme", drafts, idempotency_key="b", request_hash="h", memory_limit=2)
    again = await rig.handlers.batch_create("acme", drafts, idempotency_key="b", request_hash="h", memory_limit=2)
    assert again.replayed
    assert [m.id for m in again.memories] == [m.id for m in first.memories]


async def test_a_refusal_with_an_unused_key_is_the_refusal():
    rig = Rig()
    await rig.handlers.create_memory("acme", Draft(content="first"), memory_limit=1)
    with pytest.raises(ResourceExhausted) as refused:
        await rig.handlers.create_memory(
            "acme", Draft(content="second"), idempotency_key="new", request_hash="h", memory_limit=1
        )
    assert refused.value.reason == "MEMORY_LIMIT_EXCEEDED"


async def test_a_key_reused_with_a_body_a_rule_refuses_is_reported_as_reused():
    rig = Rig()
    await rig.handlers.create_memory("acme", Draft(content="original"), idempotency_key="k", request_hash="h1")
    with pytest.raises(AlreadyExists) as refused:
        await rig.handlers.create_memory("acme", Draft(content=""), idempotency_key="k", request_hash="h2")
    assert refused.value.reason == "IDEMPOTENCY_KEY_REUSED"


async def test_a_rule_refuses_an_unkeyed_write_as_before():
    rig = Rig()
    with pytest.raises(InvalidArgument):
        await rig.handlers.create_memory("acme", Draft(content=""))
