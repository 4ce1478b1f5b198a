"""Document frequencies of the corpus's commonest words, counted ahead."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.recall_text import df_count_cap
from services.recall.df_warmer import FrequencyWarmer
from services.recall.text_arms import TextArms
from tests.factories import memory_at
from tests.integration import recall_parts

T0 = datetime(2025, 3, 1, tzinfo=UTC)


def handlers_on(graph, settings) -> TextArms:
    return recall_parts.text_arms(graph, settings.recall.policy(settings.limits))


async def put(graph, contents: list[str], start: int = 0) -> None:
    memories = [memory_at(f"w-{start + i}", T0, content=text) for i, text in enumerate(contents)]
    events = [MemoryEvent.for_memory(EventKind.CREATED, m, m.timestamp) for m in memories]
    await graph.writer.create_memories(memories, events, now_us=1)


async def test_the_commonest_words_of_a_sample_are_counted_ahead_and_recounted(graph, settings):
    await put(graph, [f"harbour lighthouse note{i}" for i in range(8)] + ["lighthouse alone", "unique words here"])
    assert sorted(await graph.text.sample_texts("default", "content", 100))[0] == "harbour lighthouse note0"
    assert len(await graph.text.sample_texts("default", "content", 3)) == 3

    handlers = handlers_on(graph, settings)
    assert (
        await handlers.warm_document_frequencies(sample=100, words=5, chunk=25, tenants=["default"]) == 2
    )  # in two texts or more
    cap = df_count_cap(await handlers.max_df("default"))
    assert {w: graph.text._df_cache.snapshot()[("default", "content", w)] for w in ("lighthouse", "harbour")} == {
        "lighthouse": (9, cap),
        "harbour": (8, cap),
    }
    assert (
        "default",
        "content",
        "unique",
    ) not in graph.text._df_cache.snapshot()  # in one text: cheap to count when asked

    # A cached count answers until a warming pass counts again.
    await put(graph, ["lighthouse again"], start=100)
    assert (await graph.text.document_frequencies("default", "content", ["lighthouse"], cap=cap))["lighthouse"] == 9
    await handlers.warm_document_frequencies(sample=100, words=5, chunk=25, tenants=["default"])
    assert (await graph.text.document_frequencies("default", "content", ["lighthouse"], cap=cap))["lighthouse"] == 10


async def test_a_pass_counts_a_chunk_of_words_a_query_with_pauses_between(graph, settings):
    await put(graph, [f"alpha beta gamma delta note{i}" for i in range(4)])
    handlers = handlers_on(graph, settings)
    queries: list[float] = []
    count = graph.text.document_frequencies

    async def timed(*args, **options):
        queries.append(asyncio.get_running_loop().time())
        return await count(*args, **options)

    graph.text.document_frequencies = timed
    assert (
        await handlers.warm_document_frequencies(sample=10, words=4, chunk=2, pause_seconds=0.2, tenants=["default"])
        == 4
    )
    assert len(queries) == 2 and queries[1] - queries[0] >= 0.2


async def test_the_warmer_runs_every_interval_and_outlives_a_failure():
    calls = []

    async def warm() -> int:
        calls.append(len(calls))
        if len(calls) == 1:
            raise ConnectionError("graph down")
        return 3

    warmer = FrequencyWarmer(warm, interval_seconds=0.01, first_after_seconds=0)
    warmer.start()
    for _ in range(200):
        if warmer.passes >= 2:
            break
        await asyncio.sleep(0.01)
    await warmer.stop()
    assert warmer.passes >= 2 and len(calls) >= 3  # the first call failed, the loop went on

    never = FrequencyWarmer(warm, interval_seconds=0)
    never.start()
    await never.stop()
    assert never.passes == 0


async def test_a_pass_warms_each_recently_recalling_tenant_from_its_own_memories(graph, settings):
    await put(graph, [f"harbour lighthouse note{i}" for i in range(4)])
    others = [memory_at(f"o-{i}", T0, tenant="other", content=f"glacier crevasse note{i}") for i in range(4)]
    await graph.writer.create_memories(
        others, [MemoryEvent.for_memory(EventKind.CREATED, m, T0) for m in others], now_us=1
    )
    quiet = [memory_at(f"q-{i}", T0, tenant="quiet", content=f"meadow orchard note{i}") for i in range(4)]
    await graph.writer.create_memories(
        quiet, [MemoryEvent.for_memory(EventKind.CREATED, m, T0) for m in quiet], now_us=1
    )
    handlers = handlers_on(graph, settings)
    assert await handlers.warm_document_frequencies(sample=100, words=5, chunk=25) == 0  # nobody recalled yet
    for tenant in ("default", "other"):
        await handlers.max_df(tenant)  # what every text search asks first
    assert await handlers.warm_document_frequencies(sample=100, words=5, chunk=25) == 4
    cached = set(graph.text._df_cache.snapshot())
    assert {("default", "content", "lighthouse"), ("other", "content", "glacier")} <= cached
    assert ("default", "content", "glacier") not in cached  # another tenant's word, not sampled for this one
    assert not any(tenant == "quiet" for tenant, _, _ in cached)  # no recent recall: not warmed
    assert graph.text._df_cache.snapshot()[("other", "content", "glacier")][0] == 4
    # A tenant that stops recalling drops out: warming it does not count as a recall.
    handlers._df_recent_seconds = 0.2
    await asyncio.sleep(0.3)
    assert await handlers.warm_document_frequencies(sample=100, words=5, chunk=25) == 0
