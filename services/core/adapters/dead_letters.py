"""The dead-letter stream, read and re-driven (services/core/dlq.py is its CLI).

A consumer dead-letters a message it could not handle (nats_consumer.py) into
the stream <NATS_STREAM>_DLQ, subject <NATS_SUBJECT_PREFIX>_dlq.<consumer>,
with the original subject and headers. replay publishes each one back to its
original subject (every consumer of that subject sees it again: they read the
graph, so a second delivery is harmless) and deletes it from the dead-letter
stream only once the events' stream acknowledged it; a dead letter whose
replay failed stays for the next one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nats.js.errors import NotFoundError

from services.core.adapters.nats_bus import NatsEventBus, dead_letter_subject


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One dead letter as the dead-letter stream holds it."""

    sequence: int
    #: The stream holding it: the dead-letter stream, or (legacy) the events' stream.
    stream: str
    consumer: str
    subject: str
    reason: str
    deliveries: int
    headers: dict[str, str]
    data: bytes


@dataclass(slots=True)
class ReplayReport:
    replayed: list[int] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)
    skipped: dict[int, str] = field(default_factory=dict)


def _where(bus: NatsEventBus, consumer: str | None, legacy: bool) -> tuple[str, str]:
    """(stream, subject filter) of the dead letters. Legacy: where releases
    before the dead-letter stream put them, <prefix>.dlq.<consumer>.failed in
    the events' stream."""
    prefix = bus.subject_prefix
    if legacy:
        return bus.stream, f"{prefix}.dlq.{consumer}.failed" if consumer else f"{prefix}.dlq.*.failed"
    return bus.dead_letter_stream, dead_letter_subject(prefix, consumer) if consumer else f"{prefix}_dlq.>"


async def dead_letters(
    bus: NatsEventBus, *, consumer: str | None = None, limit: int | None = None, legacy: bool = False
) -> list[DeadLetter]:
    """The dead letters, oldest first (of one consumer when named), at most
    `limit`; with `legacy`, those an earlier release left in the events' stream."""
    js = bus.jetstream
    stream, subject = _where(bus, consumer, legacy)
    found: list[DeadLetter] = []
    sequence = 1
    while limit is None or len(found) < limit:
        try:
            msg = await js.get_msg(stream, sequence, subject=subject, next=True)
        except NotFoundError:
            break
        headers = dict(msg.headers or {})
        named = msg.subject.split(".")
        found.append(
            DeadLetter(
                sequence=msg.seq,
                stream=stream,
                consumer=headers.get("Memgrid-Consumer", named[-2] if legacy else named[-1]),
                subject=headers.get("Memgrid-Subject", ""),
                reason=headers.get("Memgrid-Reason", ""),
                deliveries=int(headers.get("Memgrid-Deliveries", "0") or 0),
                headers=headers,
                data=msg.data or b"",
            )
        )
        sequence = msg.seq + 1
    return found


async def replay(
    bus: NatsEventBus, *, consumer: str | None = None, limit: int | None = None, legacy: bool = False
) -> ReplayReport:
    """Publish each dead letter back to its original subject; delete it from
    the stream holding it once the events' stream acknowledged it."""
    report = ReplayReport()
    js = bus.jetstream
    events = bus.subjects.removesuffix(">")
    for letter in await dead_letters(bus, consumer=consumer, limit=limit, legacy=legacy):
        if not letter.subject.startswith(events):
            report.skipped[letter.sequence] = f"original subject {letter.subject!r} is not in the events' stream"
            continue
        headers = {k: v for k, v in letter.headers.items() if not k.startswith("Memgrid-") and k != "Nats-Msg-Id"}
        original = letter.headers.get("Memgrid-Original-Msg-Id", "")
        # Its own message id: the original's would be dropped as a duplicate
        # within the stream's duplicate window; a replay run twice inside that
        # window publishes once.
        headers["Nats-Msg-Id"] = f"{original}~replay~{letter.stream}:{letter.sequence}"
        headers["Memgrid-Replayed-From"] = f"{letter.stream}:{letter.sequence}"
        try:
            await js.publish(letter.subject, letter.data, headers=headers)
        except Exception as exc:  # kept for the next replay
            report.failed[letter.sequence] = f"{type(exc).__name__}: {exc}"
            continue
        await js.delete_msg(letter.stream, letter.sequence)
        report.replayed.append(letter.sequence)
    return report


class DeadLetterQueue:
    """The dead letters of one deployment, on a bus connection of its own."""

    def __init__(self, bus: NatsEventBus):
        self._bus = bus

    async def __aenter__(self) -> DeadLetterQueue:
        await self._bus.connect()
        return self

    async def __aexit__(self, *exc) -> None:
        await self._bus.close()

    async def list(
        self, *, consumer: str | None = None, limit: int | None = None, legacy: bool = False
    ) -> list[DeadLetter]:
        return await dead_letters(self._bus, consumer=consumer, limit=limit, legacy=legacy)

    async def replay(
        self, *, consumer: str | None = None, limit: int | None = None, legacy: bool = False
    ) -> ReplayReport:
        return await replay(self._bus, consumer=consumer, limit=limit, legacy=legacy)
