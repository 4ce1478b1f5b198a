"""When the gap watch asks the stream for its state (docs/operations.md,
Retention): before a fetch, unless the last look still answers for every
event the consumer has left to read (services.core.domain.retention,
look_lasts). A fake stream here; tests/integration/test_gap_watch.py runs
the same on NATS."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from nats.js.api import RetentionPolicy, StreamConfig

from services.core.adapters.nats_gap_watch import GapWatch, stream_limits
from services.core.domain.retention import (
    BURST_BYTES,
    BURST_MESSAGES,
    LOOK_SECONDS,
    StreamLimits,
    look_lasts,
)


@pytest.mark.parametrize(
    "limits, lasts",
    [
        (StreamLimits(), LOOK_SECONDS),  # nothing removes events
        (StreamLimits(max_age_seconds=7 * 86400.0, max_bytes=2 * 1024**3), LOOK_SECONDS),  # the defaults
        (StreamLimits(max_age_seconds=2 * LOOK_SECONDS), LOOK_SECONDS),
        (StreamLimits(max_age_seconds=1.5 * LOOK_SECONDS), 0.0),  # an event stored after a look may be gone
        (StreamLimits(max_msgs=BURST_MESSAGES), LOOK_SECONDS),
        (StreamLimits(max_msgs=BURST_MESSAGES - 1), 0.0),
        (StreamLimits(max_msgs_per_subject=100), 0.0),
        (StreamLimits(max_bytes=BURST_BYTES - 1), 0.0),
        (StreamLimits(by_limits_only=False), 0.0),  # interest or work-queue retention, a message's own TTL
    ],
)
def test_a_look_lasts_while_no_limit_can_remove_an_event_stored_after_it(limits, lasts):
    assert look_lasts(limits) == lasts


@pytest.mark.parametrize(
    "config, by_limits_only",
    [
        (StreamConfig(), True),
        (StreamConfig(retention=RetentionPolicy.LIMITS, max_msgs=-1, max_bytes=-1), True),
        (StreamConfig(retention=RetentionPolicy.INTEREST), False),
        (StreamConfig(retention=RetentionPolicy.WORK_QUEUE), False),
        (StreamConfig(allow_msg_ttl=True), False),
        (StreamConfig(allow_rollup_hdrs=True), False),
    ],
)
def test_the_stream_config_says_what_can_remove_events(config, by_limits_only):
    assert stream_limits(config).by_limits_only is by_limits_only
    unlimited = stream_limits(StreamConfig(max_msgs=-1, max_bytes=-1, max_msgs_per_subject=-1))
    assert look_lasts(unlimited) == LOOK_SECONDS


class Stream:
    """A JetStream stream as the watch sees it: its first and last sequence, its config."""

    def __init__(self, config: StreamConfig | None = None):
        self.first, self.last = 1, 0
        self.config = config or StreamConfig(max_age=7 * 86400.0, max_bytes=2 * 1024**3)
        self.delivered = 0
        self.recorded: list[dict] = []

    def store(self, count: int = 1) -> None:
        self.last += count

    def expire(self, through: int) -> None:
        self.first = through + 1

    async def stream_info(self, stream: str):
        return SimpleNamespace(state=SimpleNamespace(first_seq=self.first, last_seq=self.last), config=self.config)

    async def consumer_info(self, stream: str, durable: str):
        return SimpleNamespace(
            num_pending=max(0, self.last - self.delivered),
            delivered=SimpleNamespace(stream_seq=self.delivered),
            config=SimpleNamespace(metadata=None, evolve=lambda **changes: changes),
        )

    async def add_consumer(self, stream: str, config) -> None:
        self.recorded.append(config)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def watch(stream: Stream, clock: Clock) -> GapWatch:
    return GapWatch(SimpleNamespace(jetstream=stream), "EVENTS", "recall", [0.1], None, clock=clock)


def deliver(watch: GapWatch, stream: Stream, sequence: int) -> None:
    stream.delivered = sequence
    watch.delivered([sequence])


async def test_a_consumer_that_read_all_there_was_asks_again_only_once_the_look_is_old():
    stream, clock = Stream(), Clock()
    gaps = watch(stream, clock)
    stream.store(3)
    await gaps.check(look=True)  # subscribing: the stream ends at 3, the consumer has read nothing
    await gaps.check()
    assert gaps.looks == 2  # events stored before the look are still to read: asked before each fetch
    for sequence in (1, 2, 3):
        deliver(gaps, stream, sequence)
    await gaps.check()
    assert gaps.looks == 2  # read up to where the stream ended at the last look: what is left came after it
    for sequence in (4, 5, 6):  # each stored after that look, then fetched
        stream.store()
        clock.now += LOOK_SECONDS / 4
        deliver(gaps, stream, sequence)
        await gaps.check()
    assert gaps.looks == 2
    clock.now += LOOK_SECONDS / 4
    await gaps.check()
    assert gaps.looks == 3  # the look is LOOK_SECONDS old: asked again
    stream.store()
    await gaps.check()
    assert gaps.looks == 3  # 7 is stored after the new look


async def test_a_look_on_subscribing_is_asked_whatever_the_last_look_said():
    stream, clock = Stream(), Clock()
    gaps = watch(stream, clock)
    await gaps.check(look=True)
    await gaps.check()
    await gaps.check(look=True)
    assert gaps.looks == 2


async def test_limits_a_burst_can_reach_make_the_watch_ask_before_every_fetch():
    stream, clock = Stream(StreamConfig(max_msgs=1000)), Clock()
    gaps = watch(stream, clock)
    await gaps.check(look=True)
    for sequence in (1, 2, 3):
        stream.store()
        deliver(gaps, stream, sequence)
        await gaps.check()
    assert gaps.looks == 4


async def test_a_gap_retention_opened_since_the_look_is_found_once_the_look_is_old():
    stream, clock = Stream(StreamConfig(max_age=2 * LOOK_SECONDS)), Clock()
    gaps = watch(stream, clock)
    stream.store()
    await gaps.check(look=True)
    deliver(gaps, stream, 1)
    await gaps.check()
    assert (gaps.looks, gaps.gaps) == (1, 0)
    # The consumer is busy with 1 while 2 to 4 are stored and age out.
    stream.store(3)
    clock.now += 2 * LOOK_SECONDS
    stream.expire(through=4)
    await gaps.check()
    assert (gaps.looks, gaps.gaps) == (2, 1)
    [record] = stream.recorded
    assert '"next_sequence":2' in record["metadata"]["memgrid_gap"]
    assert '"first_sequence":5' in record["metadata"]["memgrid_gap"]
