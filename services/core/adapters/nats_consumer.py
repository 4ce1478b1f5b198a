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
the stream. `python -m services.core.dlq replay` re-drives dead letters.
While a batch is handled the consumer heartbeats (in-progress acks), so a
long batch is not redelivered under it.

Nor is an event skipped silently when the stream's retention removed it
before the consumer read it: before each fetch (the one that would step over
the hole) the consumer compares its position with the stream's first
sequence (services.core.domain.retention), counts and records the gap
(services.core.adapters.nats_retention) and runs its repair from the graph
(`on_gap`) beside the events that are still there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from prometheus_client import Counter

from memgrid.v1 import events_pb2
from services.core.adapters.nats_retention import (
    BEHIND,
    GAPS,
    LOST,
    SEEN_KEY,
    gap_record,
    kept_metadata,
    read_gap,
    seen_of,
    write_gap,
    write_metadata,
)
from services.core.codec import event_from_pb
from services.core.domain.delivery import Delivery, Outcome
from services.core.domain.retention import ConsumerGap, events_lost
from services.core.domain.times import format_iso

log = structlog.get_logger()

CONSUMED = Counter("memgrid_events_consumed_total", "Memory events handled by a consumer", ["consumer", "outcome"])


Handler = Callable[[list[Delivery]], Awaitable[list[Outcome]]]
#: How often, at most, a quiet consumer records how far it knows it missed nothing (a consumer update).
SEEN_RECORD_SECONDS = 60.0
#: Brings what a consumer derives from events in line with the graph, after events were lost.
GapRepair = Callable[[ConsumerGap], Awaitable[None]]


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


def _header(value: str) -> str:
    """A header value: one line (NATS headers hold no CR or LF)."""
    return " ".join(str(value).split())


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
        self._sub = None
        self._stopping = False
        self.inflight = 0
        self._advisories = None
        #: The consumer's ack wait as JetStream applies it (its first backoff when one is set).
        self._ack_wait = spec.ack_wait_seconds
        self.dead_lettered = 0
        self._on_gap = on_gap
        #: The last stream sequence JetStream delivered to (or skipped past for) this consumer, as known here.
        self._seen = 0
        #: The stream's last sequence at the last check (before the last fetch).
        self._end = 0
        #: The last `_seen` kept in the consumer's metadata (SEEN_KEY), and when.
        self._seen_recorded = 0
        self._recorded_at = float("-inf")
        #: The gap the repair task works on next, and that task.
        self._gap: ConsumerGap | None = None
        self._repair: asyncio.Task | None = None
        self.gaps = 0
        self.repaired = 0

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
        self._seen = max(self._seen, seen_of(info))
        self._resume_repair(read_gap(info.config.metadata))
        await self._check_gap()
        self._sub = await js.pull_subscribe_bind(durable=spec.durable, stream=self._stream)
        await self._watch_advisories()

    async def _check_gap(self) -> None:
        """Whether retention removed events this consumer has not read yet
        (services.core.domain.retention); asked before the fetch that would
        step over them without a word."""
        js = self._bus.jetstream
        state = (await js.stream_info(self._stream)).state
        first, self._end = int(state.first_seq), int(state.last_seq)
        if not events_lost(self._seen, first):
            return
        # Its exact position: JetStream also steps past other subjects' events, which are no loss.
        info = await js.consumer_info(self._stream, self._spec.durable)
        self._seen = max(self._seen, seen_of(info))
        if not events_lost(self._seen, first):
            return
        gap = ConsumerGap(self._spec.durable, self._seen + 1, first, datetime.now(UTC))
        self._seen = first - 1  # reported once: the next fetch goes on from the first event held
        log.error(
            "events lost to the stream's retention; repairing from the graph",
            consumer=gap.consumer,
            lost=gap.lost,
            next_sequence=gap.next_sequence,
            first_sequence=gap.first_sequence,
        )
        GAPS.labels(gap.consumer).inc()
        LOST.labels(gap.consumer).inc(gap.lost)
        BEHIND.labels(gap.consumer).set(1)
        self.gaps += 1
        await self._record(gap_record(gap))
        self._start_repair(gap)

    async def _idle(self) -> None:
        """After an empty fetch: when nothing of this consumer's waits, every
        event up to the stream's end before the fetch was delivered or was
        another subject's. JetStream's own position stays at the last event it
        delivered, so without this a quiet consumer would take the other
        subjects' events expiring past it for lost ones of its own."""
        end = self._end
        info = await self._bus.jetstream.consumer_info(self._stream, self._spec.durable)
        if int(info.num_pending) != 0:
            return
        self._seen = max(self._seen, end, seen_of(info))
        if self._seen > self._seen_recorded and time.monotonic() - self._recorded_at >= SEEN_RECORD_SECONDS:
            # Kept with the consumer, now and then, for a restart and for /health to read.
            self._recorded_at = time.monotonic()
            try:
                await write_metadata(self._bus.jetstream, self._stream, self._spec.durable, SEEN_KEY, str(self._seen))
            except Exception as exc:  # the next quiet fetch tries again
                log.info("could not record a consumer's position", consumer=self._spec.durable, error=str(exc))
            else:
                self._seen_recorded = self._seen

    def _resume_repair(self, record: dict | None) -> None:
        """A recorded gap whose repair never finished (the process stopped
        during it): repaired now. One repair is enough while it runs here."""
        if record is None or record.get("repaired_at") or self._gap is not None:
            return
        if self._repair is not None and not self._repair.done():
            return
        try:
            gap = ConsumerGap(
                self._spec.durable,
                int(record["next_sequence"]),
                int(record["first_sequence"]),
                datetime.fromisoformat(record["detected_at"]),
            )
        except (KeyError, TypeError, ValueError):
            log.error("unreadable gap record", consumer=self._spec.durable, record=record)
            return
        log.warning("a repair after lost events did not finish; repairing again", consumer=gap.consumer)
        BEHIND.labels(gap.consumer).set(1)
        self._start_repair(gap)

    def _start_repair(self, gap: ConsumerGap) -> None:
        if self._on_gap is None:
            return  # reported (log, metrics, record) and left to an operator
        self._gap = gap  # a repair running now goes again for it, from the graph as it is then
        if self._repair is None or self._repair.done():
            self._repair = asyncio.create_task(self._repairing())

    async def _repairing(self) -> None:
        delays = self._spec.backoff_seconds or [1.0]
        failures = 0
        while self._gap is not None:
            gap, self._gap = self._gap, None
            try:
                await self._on_gap(gap)
            except Exception as exc:  # a store is away: the same gap again, after a pause
                log.warning("repair after lost events failed; trying again", consumer=gap.consumer, error=str(exc))
                self._gap = self._gap or gap
                await asyncio.sleep(delays[min(failures, len(delays) - 1)])
                failures += 1
                continue
            if self._gap is None:
                BEHIND.labels(gap.consumer).set(0)
                self.repaired += 1
                log.info("repaired after lost events", consumer=gap.consumer, lost=gap.lost)
                await self._record(gap_record(gap, format_iso(datetime.now(UTC))))

    async def _record(self, record: dict) -> None:
        """Keep the gap with the consumer (for /health, and a repair a restart must finish)."""
        try:
            await write_gap(self._bus.jetstream, self._stream, self._spec.durable, record)
        except Exception as exc:  # the log and the metrics still say it
            log.warning("could not record a gap on the consumer", consumer=self._spec.durable, error=str(exc))

    async def _watch_advisories(self) -> None:
        """Dead-letter what JetStream gave up on (its max-deliveries advisory):
        a message whose every delivery failed before memgrid could dead-letter
        it (the bus was down, the process died). One replica takes each advisory
        (a queue group); the dead letter's id makes a second one a duplicate."""
        nc = getattr(self._bus, "nats", None)
        if nc is None or self._advisories is not None:
            return
        subject = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{self._stream}.{self._spec.durable}"
        self._advisories = await nc.subscribe(subject, queue=f"{self._spec.durable}-dlq", cb=self._on_max_deliveries)

    async def _on_max_deliveries(self, advisory) -> None:
        try:
            notice = json.loads(advisory.data)
            sequence = int(notice["stream_seq"])
            deliveries = int(notice.get("deliveries", self._spec.max_deliver))
        except (ValueError, KeyError, TypeError, AttributeError):
            log.error("unreadable max-deliveries advisory", consumer=self._spec.durable, data=advisory.data[:200])
            return
        delays = self._spec.backoff_seconds or [1.0]
        for attempt in range(self._spec.dead_letter_attempts):
            try:
                original = await self._bus.jetstream.get_msg(self._stream, sequence)
            except NotFoundError:
                log.error("a message JetStream gave up on is gone from the stream", sequence=sequence)
                return
            except Exception as exc:  # the bus is away: tried again after a pause
                log.error("could not read a message to dead-letter", sequence=sequence, error=str(exc))
                await asyncio.sleep(delays[min(attempt, len(delays) - 1)])
                continue
            try:
                await self._publish_dead_letter(
                    data=original.data or b"",
                    subject=original.subject,
                    headers=original.headers,
                    sequence=sequence,
                    deliveries=deliveries,
                    reason=f"JetStream stopped after {deliveries} deliveries",
                )
            except Exception as exc:  # tried again after a pause: the message is still in the stream
                log.error(
                    "dead-letter publish failed; trying again",
                    consumer=self._spec.durable,
                    sequence=sequence,
                    error=str(exc),
                )
                await asyncio.sleep(delays[min(attempt, len(delays) - 1)])
                continue
            self.dead_lettered += 1
            CONSUMED.labels(self._spec.durable, "dead_lettered").inc()
            return
        # The message is still in the stream (limits retention); say where, loudly.
        log.critical(
            "could not dead-letter a message", consumer=self._spec.durable, stream=self._stream, sequence=sequence
        )

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

    async def _publish_dead_letter(
        self, *, data: bytes, subject: str, headers: dict | None, sequence: int, deliveries: int, reason: str
    ) -> None:
        """Publish a dead letter: the message as it was, its headers (the
        original Nats-Msg-Id kept as Memgrid-Original-Msg-Id), why and from
        where. Its own Nats-Msg-Id (consumer and stream sequence) makes a
        second dead letter of the same message a duplicate JetStream drops."""
        kept = {k: v for k, v in (headers or {}).items() if not k.startswith("Memgrid-")}
        original_id = kept.pop("Nats-Msg-Id", None)
        kept.update(
            {
                "Nats-Msg-Id": f"{self._spec.durable}:{self._stream}:{sequence}",
                "Memgrid-Reason": _header(reason)[:500],
                "Memgrid-Subject": subject,
                "Memgrid-Stream": self._stream,
                "Memgrid-Stream-Seq": str(sequence),
                "Memgrid-Consumer": self._spec.durable,
                "Memgrid-Deliveries": str(deliveries),
            }
        )
        if original_id:
            kept["Memgrid-Original-Msg-Id"] = original_id
        await self._bus.jetstream.publish(self._spec.dead_letter_subject, data, headers=kept)

    async def _dead_letter(self, msg, reason: str) -> None:
        """Dead-letter a delivery, then acknowledge it; when the publish fails,
        keep it (nak with delay: JetStream delivers it again, and that
        delivery, past max_attempts, is dead-lettered in turn)."""
        meta = msg.metadata
        try:
            await self._publish_dead_letter(
                data=msg.data,
                subject=msg.subject,
                headers=msg.headers,
                sequence=meta.sequence.stream,
                deliveries=meta.num_delivered,
                reason=reason,
            )
        except Exception as exc:
            log.error(
                "dead-letter publish failed; the message is kept and tried again",
                consumer=self._spec.durable,
                sequence=meta.sequence.stream,
                error=str(exc),
            )
            backoff = self._spec.backoff_seconds or [1.0]
            await msg.nak(delay=backoff[-1])
            CONSUMED.labels(self._spec.durable, "dead_letter_failed").inc()
            return
        await msg.ack()
        self.dead_lettered += 1
        CONSUMED.labels(self._spec.durable, "dead_lettered").inc()

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
        await self._check_gap()
        try:
            msgs = await self._sub.fetch(self._spec.batch_size, timeout=self._spec.fetch_timeout_seconds)
        except NatsTimeout:
            await self._idle()
            return 0
        except TimeoutError:
            # nats-py raises the builtin one too when nothing came. On a live
            # connection that is an empty fetch: taken for a lost bus, it made
            # the consumer pause a second and subscribe again, and recall's
            # projection fell behind enrichment's neighbour search.
            if self._bus.connected:
                await self._idle()
                return 0
            raise
        deliveries, handled = [], []
        self._seen = max([self._seen, *(int(m.metadata.sequence.stream) for m in msgs)])
        for msg in msgs:
            try:
                event = event_from_pb(events_pb2.MemoryEvent.FromString(msg.data))
            except Exception as exc:  # a message no one can read: keep it aside, don't loop on it
                await self._dead_letter(msg, f"undecodable: {exc}")
                continue
            attempt = msg.metadata.num_delivered
            if attempt > self._spec.max_attempts:
                # Handled max_attempts times already: its dead-letter publish failed, or the
                # process died before it could say. Dead-lettered, not handled yet again.
                await self._dead_letter(
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
                await self._dead_letter(msg, reason)
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
        if self._advisories is not None:
            with contextlib.suppress(Exception):
                await self._advisories.unsubscribe()
            self._advisories = None
        if self._repair is not None:
            # Its gap stays recorded as not repaired: the next start repairs again.
            self._repair.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._repair
            self._repair = None
