"""A consumer's dead letters: a delivery that failed its last attempt, or a
message JetStream gave up on (its max-deliveries advisory), published to the
dead-letter stream with why and from where, and only then acknowledged.

A failed dead-letter publish keeps the message (a nak with delay) and
JetStream delivers it again, past max_attempts, when it is dead-lettered
without being handled again (services.core.adapters.nats_consumer).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Any

import structlog
from nats.js.errors import NotFoundError
from prometheus_client import Counter

if TYPE_CHECKING:
    from services.core.adapters.nats_consumer import ConsumerSpec

log = structlog.get_logger()

CONSUMED = Counter("memgrid_events_consumed_total", "Memory events handled by a consumer", ["consumer", "outcome"])


def _header(value: str) -> str:
    """A header value: one line (NATS headers hold no CR or LF)."""
    return " ".join(str(value).split())


class DeadLetters:
    """One consumer's dead letters (the durable's), and its watch on JetStream's advisories."""

    def __init__(self, bus: Any, stream: str, spec: ConsumerSpec):
        self._bus = bus
        self._stream = stream
        self._spec = spec
        self._advisories: Any = None
        self.count = 0

    async def watch_advisories(self) -> None:
        """Dead-letter what JetStream gave up on (its max-deliveries advisory):
        a message whose every delivery failed before memgrid could dead-letter
        it (the bus was down, the process died). One replica takes each advisory
        (a queue group); the dead letter's id makes a second one a duplicate."""
        nc = getattr(self._bus, "nats", None)
        if nc is None or self._advisories is not None:
            return
        subject = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{self._stream}.{self._spec.durable}"
        self._advisories = await nc.subscribe(subject, queue=f"{self._spec.durable}-dlq", cb=self._on_max_deliveries)

    async def stop(self) -> None:
        if self._advisories is not None:
            with contextlib.suppress(Exception):
                await self._advisories.unsubscribe()
            self._advisories = None

    async def _on_max_deliveries(self, advisory: Any) -> None:
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
                await self.publish(
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
            self.count += 1
            CONSUMED.labels(self._spec.durable, "dead_lettered").inc()
            return
        # The message is still in the stream (limits retention); say where, loudly.
        log.critical(
            "could not dead-letter a message", consumer=self._spec.durable, stream=self._stream, sequence=sequence
        )

    async def publish(
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

    async def dead_letter(self, msg: Any, reason: str) -> None:
        """Dead-letter a delivery, then acknowledge it; when the publish fails,
        keep it (nak with delay: JetStream delivers it again, and that
        delivery, past max_attempts, is dead-lettered in turn)."""
        meta = msg.metadata
        try:
            await self.publish(
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
        self.count += 1
        CONSUMED.labels(self._spec.durable, "dead_lettered").inc()
