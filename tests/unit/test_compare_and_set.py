"""The one compare-and-set retry loop (services/ingest/compare_and_set.py),
alone and in the use cases that run through it."""

from __future__ import annotations

import pytest

from services.core.domain.drafts import Draft
from services.core.domain.errors import Aborted, NotFound
from services.ingest.compare_and_set import compare_and_set
from tests.unit.test_ingest_handlers import RacingGraph, Rig


def attempts_answering(*answers):
    """An attempt that answers these in turn, counting its calls."""
    calls = []

    async def attempt():
        calls.append(len(calls))
        return answers[len(calls) - 1]

    return attempt, calls


def gave_up() -> Aborted:
    return Aborted("CONCURRENT_UPDATE", "kept changing; retry", field="id")


async def test_a_lost_race_is_tried_again_until_the_write_goes_through():
    attempt, calls = attempts_answering(None, None, "written")
    assert await compare_and_set(attempt, retries=3, gave_up=gave_up) == "written"
    assert len(calls) == 3


async def test_a_falsy_answer_other_than_none_is_an_answer():
    attempt, calls = attempts_answering(False)
    assert await compare_and_set(attempt, retries=3, gave_up=gave_up) is False
    assert len(calls) == 1


@pytest.mark.parametrize("retries", [0, 1, 3])
async def test_it_gives_up_after_one_try_and_retries_more_with_the_callers_error(retries):
    attempt, calls = attempts_answering(*[None] * (retries + 1), "too late")
    with pytest.raises(Aborted) as aborted:
        await compare_and_set(attempt, retries=retries, gave_up=gave_up)
    assert len(calls) == 1 + retries
    assert (aborted.value.reason, aborted.value.message, aborted.value.field) == (
        "CONCURRENT_UPDATE",
        "kept changing; retry",
        "id",
    )


async def test_an_error_of_the_attempt_ends_the_loop_at_once():
    calls = []

    async def attempt():
        calls.append(1)
        raise NotFound("MEMORY_NOT_FOUND", "gone", field="id")

    with pytest.raises(NotFound):
        await compare_and_set(attempt, retries=3, gave_up=gave_up)
    assert len(calls) == 1


class CountingRace(RacingGraph):
    """A racing store that counts the updates tried, and lets the update
    through once `wins_at` tries were made (0: never)."""

    tries: int = 0
    wins_at: int = 0

    async def update_memory(self, memory, expected_version, event, *, now_us, before=None):
        self.tries += 1
        self.racing = self.tries != self.wins_at
        return await super().update_memory(memory, expected_version, event, now_us=now_us, before=before)


async def test_an_update_that_keeps_losing_is_tried_once_and_retried_the_settings_times_then_409():
    graph = CountingRace()
    rig = Rig(graph=graph, conflict_retries=2)
    memory = (await rig.handlers.create_memory("acme", Draft(content="v1"))).memory
    with pytest.raises(Aborted) as aborted:
        await rig.handlers.update_memory("acme", memory.id, Draft(content="v2"), {"content"})
    assert graph.tries == 3
    assert (aborted.value.reason, aborted.value.field) == ("CONCURRENT_UPDATE", "id")
    assert aborted.value.message == f"memory {memory.id} kept changing; retry the update"
    assert (await rig.graph.get_memory("acme", memory.id)).content == "v1"


async def test_an_update_that_wins_on_its_last_retry_is_written_once():
    graph = CountingRace()
    rig = Rig(graph=graph, conflict_retries=2)
    memory = (await rig.handlers.create_memory("acme", Draft(content="v1"))).memory
    graph.wins_at = 3
    updated, changed = await rig.handlers.update_memory("acme", memory.id, Draft(content="v2"), {"content"})
    stored = await rig.graph.get_memory("acme", memory.id)
    assert changed and graph.tries == 3
    assert stored.content == "v2" and stored == updated
