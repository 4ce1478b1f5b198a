"""The ingest service with a language model: the real openai client against
a local stub server, through the real write path."""

from __future__ import annotations

import json

import grpc
import pytest

from memgrid.v1 import ingest_service_pb2, ingest_service_pb2_grpc, memory_pb2
from services.core.grpc.server import start
from services.ingest.bootstrap import build_app
from tests.conftest import make_settings, plane_of, signed
from tests.integration.test_openai_llm import completion, stub  # noqa: F401 (fixture)

pytestmark = pytest.mark.integration


@pytest.fixture
def llm_settings(falkordb_server, nats_server, tmp_path, stub):  # noqa: F811
    return make_settings(
        falkordb_server.port,
        nats_server.port,
        tmp_path / "data",
        openai_api_key="sk-test",
        openai_base_url=stub.base_url,
    )


@pytest.fixture
async def ingest(llm_settings):
    service = await start(
        "ingest", build_app(llm_settings), host="127.0.0.1", port=0, grace_seconds=1.0, plane=plane_of(llm_settings)
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{service.port}")
    yield ingest_service_pb2_grpc.IngestServiceStub(channel)
    await channel.close()
    await service.stop()


async def create(ingest, **fields) -> ingest_service_pb2.CreateMemoryResponse:
    request = ingest_service_pb2.CreateMemoryRequest(memory=memory_pb2.MemoryDraft(**fields))
    return await ingest.CreateMemory(request, metadata=signed("default"))


async def test_the_llm_classifies_what_no_pattern_matches(ingest, stub):  # noqa: F811
    stub.reply((200, completion('{"type": "analysis", "confidence": 0.8}')))
    reply = await create(ingest, content="Embedding batches cut the bill by forty percent.")
    assert (reply.memory.type, reply.memory.confidence) == ("Insight", pytest.approx(0.8))
    assert len(stub.requests) == 1
    assert stub.requests[0]["messages"][-1]["content"] == "Embedding batches cut the bill by forty percent."


async def test_no_llm_call_when_a_pattern_matches_or_a_type_is_sent(ingest, stub):  # noqa: F811
    assert (await create(ingest, content="We decided to use NATS")).memory.type == "Decision"
    assert (await create(ingest, content="Anything at all", type="Style")).memory.confidence == pytest.approx(0.9)
    assert stub.requests == []


async def test_a_failing_llm_falls_back_to_memory(ingest, stub):  # noqa: F811
    stub.reply((500, {"error": {"message": "boom"}}))
    reply = await create(ingest, content="Nothing to match here.")
    assert (reply.memory.type, reply.memory.confidence) == ("Memory", pytest.approx(0.3))


async def test_long_content_is_summarised_and_the_original_kept(ingest, stub):  # noqa: F811
    original = "We decided to move the ingest path to batched graph writes. " * 12
    stub.reply((200, completion("We decided to batch graph writes.")))
    reply = await create(ingest, content=original, metadata_json='{"source": "notes"}')
    assert reply.summarized
    assert (reply.original_length, reply.summarized_length) == (len(original), len("We decided to batch graph writes."))
    assert reply.memory.content == "We decided to batch graph writes."
    assert json.loads(reply.memory.metadata_json) == {"source": "notes", "original_content": original}
    assert len(stub.requests) == 1  # the summary matched "decided to": no classification call


async def test_short_content_is_not_summarised(ingest, stub):  # noqa: F811
    reply = await create(ingest, content="We decided to keep it short.", type="Decision")
    assert not reply.summarized and stub.requests == []


async def test_auto_summarize_off_keeps_long_content(falkordb_server, nats_server, tmp_path, stub):  # noqa: F811
    settings = make_settings(
        falkordb_server.port,
        nats_server.port,
        tmp_path / "data",
        openai_api_key="sk-test",
        openai_base_url=stub.base_url,
        memory_auto_summarize=False,
    )
    service = await start(
        "ingest", build_app(settings), host="127.0.0.1", port=0, grace_seconds=1.0, plane=plane_of(settings)
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
            content = "x " * 400
            reply = await create(ingest_service_pb2_grpc.IngestServiceStub(channel), content=content, type="Context")
        assert not reply.summarized and reply.memory.content == content and stub.requests == []
    finally:
        await service.stop()


async def test_enrichment_asks_the_model_for_factuality(llm_settings, stub, tmp_path):  # noqa: F811
    from tests.integration.enrich_stack import EnrichStack

    stub.reply((200, completion('{"label": "FICTION", "confidence": 0.9, "rationale": "a bedtime story"}')))
    stack = EnrichStack(llm_settings)
    try:
        await stack.start()
        memory_id = await stack.create("Once upon a time a dragon ran our CI.", type="Context")
        memory = (await stack.wait_enriched([memory_id]))[memory_id]
        assert "factuality" not in memory.metadata
        assert memory.factuality == {
            "label": "FICTION",
            "confidence": 0.9,
            "rationale": "model: a bedtime story",
        }
    finally:
        await stack.close()
