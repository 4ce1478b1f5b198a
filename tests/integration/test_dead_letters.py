"""No message is lost silently: a consumer dead-letters what it could not
handle (keeping it when the dead-letter publish fails), heartbeats through a
long batch, JetStream's max-deliveries advisory dead-letters what the
consumer never could, and the replay re-drives dead letters. Real NATS."""

from __future__ import annotations

import asyncio

import pytest
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import NotFoundError

from memgrid.v1 import events_pb2
from services.core.adapters.dead_letters import dead_letters, replay
from services.core.adapters.nats_consumer import JetStreamConsumer
from services.core.codec import event_to_pb
from services.core.domain.delivery import Outcome
from services.core.replica import stream_durables
from services.core.wiring import consumer_spec, event_bus
from tests.integration.test_nats_bus import sample_event

pytestmark = pytest.mark.integration


async def read_dead(settings, durable: str | None = None) -> list[events_pb2.MemoryEvent]:
    """The events dead-lettered (by one consumer when named), oldest first."""
    bus = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    await bus.connect()
    try:
        letters = await dead_letters(bus, consumer=durable)
    finally:
        await bus.close()
    return [events_pb2.MemoryEvent.FromString(letter.data) for letter in letters]


async def wait_for(check, within: float) -> None:
    """Poll a plain predicate (the consumer's counters, the handler's record) until it holds."""
    for _ in range(int(within / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


class Handler:
    """Fails (asks for a retry, or raises) until told to succeed; counts what it saw."""

    def __init__(self, *, raises: bool = False, sleep: float = 0.0):
        self.seen: list[str] = []
        self.failing = True
        self.raises = raises
        self.sleep = sleep

    async def __call__(self, deliveries):
        self.seen += [d.event.memory_id for d in deliveries]
        if self.sleep:
            await asyncio.sleep(self.sleep)
        if not self.failing:
            return [Outcome.DONE] * len(deliveries)
        if self.raises:
            raise RuntimeError("the embedder is down\nsecond line")
        return [Outcome.RETRY] * len(deliveries)


def spec(settings, durable: str = "worker", **changes):
    made = consumer_spec(
        settings.consumers, settings.bus, durable, [f"{settings.bus.nats_subject_prefix}.*.created"], 10
    )
    # JetStream takes the first backoff for the ack wait: long enough that a loaded machine acks in time.
    values = {"backoff_seconds": [0.3], "ack_wait_seconds": 5.0, **changes}
    return type(made)(**{**{f: getattr(made, f) for f in made.__dataclass_fields__}, **values})


@pytest.fixture
async def bus(settings):
    made = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    await made.connect()
    yield made
    await made.close()


async def running(bus, settings, handler, **changes) -> JetStreamConsumer:
    consumer = JetStreamConsumer(bus, settings.bus.nats_stream, spec(settings, **changes), handler)
    await consumer.start()
    return consumer


async def settled(bus, settings, durable: str = "worker") -> bool:
    info = await bus.jetstream.consumer_info(settings.bus.nats_stream, durable)
    return info.num_pending == 0 and info.num_ack_pending == 0


async def test_a_message_that_exhausts_its_attempts_is_dead_lettered_with_its_reason_and_origin(bus, settings):
    handler = Handler(raises=True)
    consumer = await running(bus, settings, handler)
    try:
        event = sample_event("m1")
        await bus.publish(event)
        await wait_for(lambda: consumer.dead_lettered == 1, within=15)
        assert handler.seen == ["m1"] * settings.consumers.enrichment_max_attempts
        [letter] = await dead_letters(bus, consumer="worker")
        assert letter.subject == f"{settings.bus.nats_subject_prefix}.acme.created"
        assert letter.reason == "RuntimeError: the embedder is down second line"  # one line: a header
        assert letter.deliveries == settings.consumers.enrichment_max_attempts
        assert letter.headers["Memgrid-Original-Msg-Id"] == event.event_id
        assert events_pb2.MemoryEvent.FromString(letter.data).memory_id == "m1"
        assert await settled(bus, settings)
    finally:
        await consumer.stop()


async def test_a_failed_dead_letter_publish_keeps_the_message_until_it_succeeds(bus, settings):
    handler = Handler()
    consumer = await running(bus, settings, handler)
    try:
        # No dead-letter stream: the publish finds no stream to take it.
        await bus.jetstream.delete_stream(bus.dead_letter_stream)
        await bus.publish(sample_event("m2"))
        await wait_for(lambda: len(handler.seen) == settings.consumers.enrichment_max_attempts, within=15)
        await asyncio.sleep(0.5)
        assert not await settled(bus, settings)  # kept, not acknowledged away
        assert consumer.dead_lettered == 0
        await bus.ensure_stream()  # the dead-letter stream is back
        await wait_for(lambda: consumer.dead_lettered == 1, within=15)
        # Dead-lettered on a later delivery, without being handled again.
        assert handler.seen == ["m2"] * settings.consumers.enrichment_max_attempts
        assert [e.memory_id for e in await read_dead(settings, "worker")] == ["m2"]
        assert await settled(bus, settings)
    finally:
        await consumer.stop()


async def test_a_long_batch_heartbeats_and_is_not_redelivered(bus, settings):
    handler = Handler(sleep=2.5)
    handler.failing = False
    # JetStream's ack wait is its first backoff when one is set: 0.5 s here, far below the batch's 2.5 s.
    consumer = await running(bus, settings, handler, ack_wait_seconds=0.5, backoff_seconds=[0.5], heartbeat_seconds=0.1)
    try:
        await bus.publish(sample_event("m3"))
        await wait_for(lambda: handler.seen, within=10)
        await wait_for(lambda: consumer.inflight == 0, within=10)
        await asyncio.sleep(1.0)
        assert handler.seen == ["m3"]
        assert await settled(bus, settings)
    finally:
        await consumer.stop()


async def test_what_jetstream_gives_up_on_is_dead_lettered_from_its_advisory(bus, settings):
    handler = Handler()
    consumer = JetStreamConsumer(
        bus,
        settings.bus.nats_stream,
        spec(settings, max_attempts=1, dead_letter_attempts=1, backoff_seconds=[], ack_wait_seconds=0.5),
        handler,
    )
    await consumer._subscribe()  # subscribed (and watching advisories) but never acknowledging: a dying process
    try:
        await bus.publish(sample_event("m4"))
        for _ in range(2):  # both deliveries JetStream makes, neither acknowledged
            [msg] = await consumer._sub.fetch(1, timeout=5)
            assert msg.metadata.num_delivered == _ + 1
        await asyncio.sleep(0.7)  # the last ack wait runs out
        # JetStream notices at the next pull (the consumer's loop pulls all the time) and gives up.
        with pytest.raises((NatsTimeout, TimeoutError)):
            await consumer._sub.fetch(1, timeout=1)
        await wait_for(lambda: consumer.dead_lettered == 1, within=10)
        [letter] = await dead_letters(bus, consumer="worker")
        assert letter.reason == "JetStream stopped after 2 deliveries"
        assert events_pb2.MemoryEvent.FromString(letter.data).memory_id == "m4"
    finally:
        await consumer.stop()


async def test_replay_re_drives_dead_letters_and_removes_them(bus, settings):
    handler = Handler()
    consumer = await running(bus, settings, handler)
    try:
        await bus.publish(sample_event("m5"))
        await wait_for(lambda: consumer.dead_lettered == 1, within=15)
        handler.failing = False  # the cause is fixed
        report = await replay(bus, consumer="someone-else")
        assert report.replayed == [] and len(await dead_letters(bus)) == 1
        report = await replay(bus, consumer="worker")
        assert len(report.replayed) == 1 and not report.failed
        await wait_for(lambda: handler.seen.count("m5") == settings.consumers.enrichment_max_attempts + 1, within=10)
        await wait_for(lambda: consumer.inflight == 0, within=5)
        assert await dead_letters(bus) == []
        with pytest.raises(NotFoundError):
            await bus.jetstream.get_msg(bus.dead_letter_stream, report.replayed[0])
    finally:
        await consumer.stop()


async def test_an_existing_consumer_is_updated_to_leave_the_last_attempt_to_memgrid(bus, settings):
    from nats.js.api import AckPolicy, ConsumerConfig

    # As an older release made it: JetStream drops the message at memgrid's last attempt.
    await bus.jetstream.add_consumer(
        settings.bus.nats_stream,
        ConsumerConfig(
            durable_name="worker",
            filter_subjects=[f"{settings.bus.nats_subject_prefix}.*.created"],
            ack_policy=AckPolicy.EXPLICIT,
            max_deliver=settings.consumers.enrichment_max_attempts,
        ),
    )
    consumer = await running(bus, settings, Handler())
    try:
        info = await bus.jetstream.consumer_info(settings.bus.nats_stream, "worker")
        assert (
            info.config.max_deliver
            == settings.consumers.enrichment_max_attempts + settings.consumers.consumer_dead_letter_attempts
        )
    finally:
        await consumer.stop()


async def test_the_command_lists_and_replays_dead_letters(bus, settings):
    import json
    import os
    import sys

    consumer = await running(bus, settings, Handler())
    try:
        await bus.publish(sample_event("m6"))
        await wait_for(lambda: consumer.dead_lettered == 1, within=15)
    finally:
        await consumer.stop()
    env = {
        **os.environ,
        "NATS_URL": settings.bus.nats_url,
        "NATS_STREAM": settings.bus.nats_stream,
        "NATS_SUBJECT_PREFIX": settings.bus.nats_subject_prefix,
    }

    async def run(*args: str) -> tuple[int, str]:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "services.core.dlq", *args, env=env, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await process.communicate()
        return process.returncode, out.decode()

    code, out = await run("list", "--consumer", "worker")
    [line] = [json.loads(text) for text in out.splitlines() if text.startswith("{")]
    assert code == 0 and line["consumer"] == "worker" and line["reason"] == "handler asked for a retry"
    code, out = await run("replay", "--consumer", "worker")
    assert code == 0 and json.loads(out.splitlines()[-1])["replayed"] == 1
    assert await dead_letters(bus) == []


async def test_replay_re_drives_the_dead_letters_an_earlier_release_left_in_the_events_stream(bus, settings):
    handler = Handler()
    handler.failing = False
    consumer = await running(bus, settings, handler)
    try:
        # As releases before the dead-letter stream wrote them.
        event = sample_event("m7")
        await bus.jetstream.publish(
            f"{settings.bus.nats_subject_prefix}.dlq.worker.failed",
            event_to_pb(event).SerializeToString(),
            headers={"Memgrid-Reason": "old", "Memgrid-Subject": f"{settings.bus.nats_subject_prefix}.acme.created"},
        )
        [letter] = await dead_letters(bus, legacy=True)
        assert letter.consumer == "worker" and letter.stream == settings.bus.nats_stream
        assert await dead_letters(bus) == []  # not in the dead-letter stream
        report = await replay(bus, consumer="worker", legacy=True)
        assert len(report.replayed) == 1
        await wait_for(lambda: handler.seen == ["m7"], within=10)
        assert await dead_letters(bus, legacy=True) == []
    finally:
        await consumer.stop()
