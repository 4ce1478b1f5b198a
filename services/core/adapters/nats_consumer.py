"""A durable JetStream pull consumer: fetch a batch, hand it to a handler,
ack, retry with backoff, or dead-letter after the last attempt.

Replicas that share the durable name share the work (each message goes to
one of them), which is how recall and enrich scale out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from prometheus_client import Counter

from memgrid.v1 import events_pb2
from services.core.codec import event_from_pb
from services.core.ports import Delivery, Outcome

log = structlog.get_logger()

CONSUMED = Counter("memgrid_events_consumed_total", "Memory events handled by a consumer", ["consumer", "outcome"])


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


class JetStreamConsumer:
    def __init__(
        self,
        bus,
        stream: str,
        spec: ConsumerSpec,
        handler: Handler,
        *,
        before_fetch: Callable[[], Awaitable[None]] | None = None,
    ):
        """`before_fetch`, when given, is awaited before each fetch: a consumer
        of lower priority waits there, holding no unacknowledged messages."""
        self._bus = bus
        self._stream = stream
        self._spec = spec
        self._handler = handler
        self._before_fetch = before_fetch
        self._task: asyncio.Task | None = None
        self._sub = None
        self._stopping = False
        self.inflight = 0

    async def _subscribe(self) -> None:
        js = self._bus.jetstream
        spec = self._spec
        config = ConsumerConfig(
            durable_name=spec.durable,
            filter_subjects=spec.filter_subjects,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=spec.ack_wait_seconds,
            max_deliver=spec.max_attempts,
            backoff=spec.backoff_seconds[: max(0, spec.max_attempts - 1)] or None,
            max_ack_pending=spec.batch_size * 20,
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
            if sorted(existing) != sorted(spec.filter_subjects):
                # A durable made by an older release listens to other subjects: update it in place.
                log.info("consumer subjects updated", consumer=spec.durable, subjects=spec.filter_subjects)
                await js.add_consumer(self._stream, config)
        self._sub = await js.pull_subscribe_bind(durable=spec.durable, stream=self._stream)

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

    async def _dead_letter(self, msg, reason: str) -> None:
        headers = {"Memgrid-Reason": reason[:200], "Memgrid-Subject": msg.subject}
        await self._bus.jetstream.publish(self._spec.dead_letter_subject, msg.data, headers=headers)

    async def run_once(self) -> int:
        """Fetch and handle one batch; returns how many messages it saw."""
        if self._before_fetch is not None:
            await self._before_fetch()
        try:
            msgs = await self._sub.fetch(self._spec.batch_size, timeout=self._spec.fetch_timeout_seconds)
        except NatsTimeout:
            return 0
        except TimeoutError:
            # nats-py raises the builtin one too when nothing came. On a live
            # connection that is an empty fetch: taken for a lost bus, it made
            # the consumer pause a second and subscribe again, and recall's
            # projection fell behind enrichment's neighbour search.
            if self._bus.connected:
                return 0
            raise
        deliveries, handled = [], []
        for msg in msgs:
            try:
                event = event_from_pb(events_pb2.MemoryEvent.FromString(msg.data))
            except Exception as exc:  # a message no one can read: keep it aside, don't loop on it
                await self._dead_letter(msg, f"undecodable: {exc}")
                await msg.ack()
                CONSUMED.labels(self._spec.durable, "dead_lettered").inc()
                continue
            deliveries.append(Delivery(event, msg.metadata.num_delivered))
            handled.append(msg)
        if not deliveries:
            return len(msgs)
        self.inflight = len(deliveries)
        try:
            outcomes = await self._handler(deliveries)
        except Exception as exc:
            log.exception("consumer handler failed", consumer=self._spec.durable)
            outcomes = [Outcome.RETRY] * len(deliveries)
            reason = str(exc)
        else:
            reason = "handler asked for a retry"
        finally:
            self.inflight = 0
        for msg, delivery, outcome in zip(handled, deliveries, outcomes, strict=True):
            if outcome is Outcome.RETRY and delivery.attempt >= self._spec.max_attempts:
                await self._dead_letter(msg, reason)
                await msg.ack()
                CONSUMED.labels(self._spec.durable, "dead_lettered").inc()
            elif outcome is Outcome.RETRY:
                backoff = self._spec.backoff_seconds
                delay = backoff[min(delivery.attempt - 1, len(backoff) - 1)] if backoff else 1.0
                await msg.nak(delay=delay)
                CONSUMED.labels(self._spec.durable, "retried").inc()
            else:
                await msg.ack()
                CONSUMED.labels(self._spec.durable, outcome.value).inc()
        return len(msgs)

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
