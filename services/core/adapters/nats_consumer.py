"""A durable JetStream pull consumer: fetch a batch, hand it to a handler,
ack, retry with backoff, or dead-letter after the last attempt.

Replicas that share the durable name share the work (each message goes to
one of them), which is how recall and enrich scale out.

No message is dropped silently. memgrid dead-letters itself: a message whose
last attempt failed is published to the dead-letter stream (with the reason
and the original subject and headers) and only then acknowledged; a failed
dead-letter publish keeps the message (a nak with delay) and JetStream
delivers it again, past max_attempts, when it is dead-lettered without being
handled again. JetStream stops after max_attempts + dead_letter_attempts
deliveries; its max-deliveries advisory then dead-letters the message from
the stream (services.core.adapters.nats_dead_letter). `python -m
services.core.dlq replay` re-drives dead letters.
While a batch is handled the consumer heartbeats (in-progress acks), so a
long batch is not redelivered under it.

Nor is an event skipped silently when the stream's retention removed it
before the consumer read it: before each fetch (the one that would step over
the hole) the consumer compares its position with the stream's first
sequence (services.core.domain.retention), counts and records the gap
(services.core.adapters.nats_retention) and runs its repair from the graph
(`on_gap`) beside the events that are still there
(services.core.adapters.nats_gap_watch).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from memgrid.v1 import events_pb2
from services.core.adapters.nats_dead_letter import CONSUMED, DeadLetters
from services.core.adapters.nats_gap_watch import GapRepair, GapWatch
from services.core.adapters.nats_retention import kept_metadata
from services.core.codec import event_from_pb
from services.core.domain.delivery import Delivery, Outcome

log = structlog.get_logger()

Handler = Callable[[list[Delivery]], Awaitable[list[Outcome]]]


@dataclass(frozen=True, slots=True)
class ConsumerSpec:
    durable: str
    filter_subjects: list[str]
    max_attempts: int
    backoff_seconds: list[float]
    ack_wait_seconds: float
    batch_size: int
    dead_letter_subject: str
    fetch_timeout_seconds: float = 1.0
    #: A durable whose existence means the stream's history was already handled
    #: (an older release's): this durable, made new beside it, starts with new
    #: messages instead of replaying all of them. None: it always starts at the beginning.
    fresh_start_if: str | None = None
    #: Deliveries past max_attempts JetStream still makes (each is dead-lettered without handling).
    dead_letter_attempts: int = 10
    #: How often a batch in hand is reported in progress (at most half the effective ack wait).
    heartbeat_seconds: float = 10.0
    #: JetStream removes the durable after this long with nobody reading it (None: never): a replica's own.
    inactive_seconds: float | None = None

    @property
    def max_deliver(self) -> int:
        """JetStream's max_deliver: memgrid's attempts, then its dead-letter attempts."""
        return self.max_attempts + self.dead_letter_attempts


class JetStreamConsumer:
    def __init__(
        self,
        bus,
        stream: str,
        spec: ConsumerSpec,
        handler: Handler,
        *,
        before_fetch: Callable[[], Awaitable[None]] | None = None,
        on_gap: GapRepair | None = None,
    ):
        """`before_fetch`, when given, is awaited before each fetch: a consumer
        of lower priority waits there, holding no unacknowledged messages.
        `on_gap` repairs from the graph what events lost to retention left
        undone; it is retried until it succeeds (None: the gap is reported only)."""
        self._bus = bus
        self._stream = stream
        self._spec = spec
        self._handler = handler
        self._before_fetch = before_fetch
        self._task: asyncio.Task | None = None
        self._sub: Any = None
        self._stopping = False
        self.inflight = 0
        #: The consumer's ack wait as JetStream applies it (its first backoff when one is set).
        self._ack_wait = spec.ack_wait_seconds
        self._dead_letters = DeadLetters(bus, stream, spec)
        self._gaps = GapWatch(bus, stream, spec.durable, spec.backoff_seconds, on_gap)

    @property
    def retention_looks(self) -> int:
        """How many times it asked the stream for its state (the gap watch, before a fetch)."""
        return self._gaps.looks

    @property
    def spec(self) -> ConsumerSpec:
        """What it subscribes to and how it retries."""
        return self._spec

    @property
    def dead_lettered(self) -> int:
        """Messages this consumer dead-lettered (its own failures and JetStream's advisories)."""
        return self._dead_letters.count

    async def _subscribe(self) -> None:
        js = self._bus.jetstream
        spec = self._spec
        config = ConsumerConfig(
            durable_name=spec.durable,
            filter_subjects=spec.filter_subjects,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=spec.ack_wait_seconds,
            max_deliver=spec.max_deliver,
            backoff=spec.backoff_seconds[: max(0, spec.max_attempts - 1)] or None,
            max_ack_pending=spec.batch_size * 20,
            inactive_threshold=spec.inactive_seconds,
        )
        try:
            info = await js.consumer_info(self._stream, spec.durable)
        except NotFoundError:
            if spec.fresh_start_if is not None and await self._exists(spec.fresh_start_if):
                log.info("new consumer starts with new messages", consumer=spec.durable, beside=spec.fresh_start_if)
                config.deliver_policy = DeliverPolicy.NEW
            await js.add_consumer(self._stream, config)
        else:
            existing = info.config.filter_subjects or (
                [info.config.filter_subject] if info.config.filter_subject else []
            )
            if (
                sorted(existing) != sorted(spec.filter_subjects)
                or info.config.max_deliver != spec.max_deliver
                or (info.config.inactive_threshold or None) != spec.inactive_seconds
            ):
                # A durable made by an older release listens to other subjects, or lets
                # JetStream drop a message at memgrid's last attempt, or another inactive
                # threshold was set: update it in place.
                log.info(
                    "consumer updated",
                    consumer=spec.durable,
                    subjects=spec.filter_subjects,
                    max_deliver=spec.max_deliver,
                    inactive_seconds=spec.inactive_seconds,
                )
                config.metadata = kept_metadata(info.config.metadata)
                await js.add_consumer(self._stream, config)
        info = await js.consumer_info(self._stream, spec.durable)
        self._ack_wait = float(info.config.ack_wait or spec.ack_wait_seconds)
        self._gaps.bound(info)
        await self._gaps.check(look=True)
        self._sub = await js.pull_subscribe_bind(durable=spec.durable, stream=self._stream)
        await self._dead_letters.watch_advisories()

    async def _exists(self, durable: str) -> bool:
        try:
            await self._bus.jetstream.consumer_info(self._stream, durable)
        except NotFoundError:
            return False
        return True

    async def pending(self) -> int:
        """Messages not yet delivered plus those delivered and not acknowledged."""
        try:
            info = await self._bus.jetstream.consumer_info(self._stream, self._spec.durable)
        except NotFoundError:
            return 0
        return int(info.num_pending) + int(info.num_ack_pending)

    async def _heartbeat(self, msgs) -> None:
        """Report the batch in progress until cancelled, so JetStream's ack wait
        restarts instead of running out while a long batch is handled."""
        interval = max(0.05, min(self._spec.heartbeat_seconds, self._ack_wait / 2))
        while True:
            await asyncio.sleep(interval)
            for msg in msgs:
                with contextlib.suppress(Exception):  # a lost connection: the fetch loop will see it
                    await msg.in_progress()

    async def run_once(self) -> int:
        """Fetch and handle one batch; returns how many messages it saw."""
        if self._before_fetch is not None:
            await self._before_fetch()
        await self._gaps.check()
        try:
            msgs = await self._sub.fetch(self._spec.batch_size, timeout=self._spec.fetch_timeout_seconds)
        except NatsTimeout:
            await self._gaps.idle()
            return 0
        except TimeoutError:
            # nats-py raises the builtin one too when nothing came. On a live
            # connection that is an empty fetch: taken for a lost bus, it made
            # the consumer pause a second and subscribe again, and recall's
            # projection fell behind enrichment's neighbour search.
            if self._bus.connected:
                await self._gaps.idle()
                return 0
            raise
        deliveries, handled = [], []
        self._gaps.delivered(int(m.metadata.sequence.stream) for m in msgs)
        for msg in msgs:
            try:
                event = event_from_pb(events_pb2.MemoryEvent.FromString(msg.data))
            except Exception as exc:  # a message no one can read: keep it aside, don't loop on it
                await self._dead_letters.dead_letter(msg, f"undecodable: {exc}")
                continue
            attempt = msg.metadata.num_delivered
            if attempt > self._spec.max_attempts:
                # Handled max_attempts times already: its dead-letter publish failed, or the
                # process died before it could say. Dead-lettered, not handled yet again.
                await self._dead_letters.dead_letter(
                    msg, f"not handled in {self._spec.max_attempts} attempts (ENRICHMENT_MAX_ATTEMPTS)"
                )
                continue
            deliveries.append(Delivery(event, attempt))
            handled.append(msg)
        if not deliveries:
            return len(msgs)
        self.inflight = len(deliveries)
        # Until every message is settled: the dead-letter publishes take time too.
        heartbeat = asyncio.create_task(self._heartbeat(handled))
        try:
            await self._handle(handled, deliveries)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
        return len(msgs)

    async def _handle(self, handled, deliveries: list[Delivery]) -> None:
        """Run the handler on a batch, then settle each message as it says."""
        try:
            outcomes = await self._handler(deliveries)
        except Exception as exc:
            log.exception("consumer handler failed", consumer=self._spec.durable)
            outcomes = [Outcome.RETRY] * len(deliveries)
            reason = f"{type(exc).__name__}: {exc}"
        else:
            reason = "handler asked for a retry"
        finally:
            self.inflight = 0
        for msg, delivery, outcome in zip(handled, deliveries, outcomes, strict=True):
            if outcome is Outcome.RETRY and delivery.attempt >= self._spec.max_attempts:
                await self._dead_letters.dead_letter(msg, reason)
            elif outcome is Outcome.RETRY:
                backoff = self._spec.backoff_seconds
                delay = backoff[min(delivery.attempt - 1, len(backoff) - 1)] if backoff else 1.0
                await msg.nak(delay=delay)
                CONSUMED.labels(self._spec.durable, "retried").inc()
            else:
                await msg.ack()
                CONSUMED.labels(self._spec.durable, outcome.value).inc()

    async def _loop(self) -> None:
        while not self._stopping:
            try:
                if self._sub is None:
                    await self._subscribe()
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the bus went away: wait, then resubscribe
                log.warning("consumer interrupted", consumer=self._spec.durable, error=str(exc))
                self._sub = None
                await asyncio.sleep(1.0)

    async def start(self) -> None:
        await self._subscribe()
        self._task = asyncio.create_task(self._loop())

    async def stop(self, grace_seconds: float = 10.0) -> None:
        """Finish the batch in hand (so its messages are acknowledged), then stop."""
        self._stopping = True
        if self._task is not None:
            done, _ = await asyncio.wait({self._task}, timeout=self._spec.fetch_timeout_seconds + grace_seconds)
            if not done:
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._sub.unsubscribe(), timeout=self._spec.fetch_timeout_seconds + 1)
            self._sub = None
        await self._dead_letters.stop()
        await self._gaps.stop()
