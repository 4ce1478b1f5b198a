"""JetStreamEventWatch: one tenant's memory events, in stream order, from a
stream sequence on (EventWatchSource on NATS JetStream).

Each watch is an ephemeral pull consumer of its own, filtered on the tenant's
subjects (<prefix>.<tenant>.> or one subject per kind wanted), acknowledging
nothing and starting at a given stream sequence. The watch remembers the last
sequence it delivered; whatever happens to its consumer (the connection is
lost, the server restarts and forgets it, it sat idle past its threshold), a
new one starts right after that sequence, so the caller sees each event once
and in order. Pulling (rather than a push subscription) means a watch whose
caller reads slowly simply fetches less: nothing is dropped on the NATS side.

Every position a watch hands its caller is the tenant's own: the sequence
of one of its events (or the one it resumed from), never the event stream's
first or last sequence, which count every tenant's events. A new watch
starts after the tenant's last event (the same events follow as after the
stream's end: none of the tenant's lie between), and a gap resumes before
the tenant's first event the stream still holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass

import structlog
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from memgrid.v1 import events_pb2
from services.core.adapters.nats_bus import CLOSE_TIMEOUT_SECONDS, NatsEventBus, event_subject
from services.core.codec import event_from_pb
from services.core.domain.errors import Unavailable
from services.core.domain.watch import SequencedEvent, WatchGap, WatchOpened

log = structlog.get_logger()


class _ConsumerLost(Exception):
    """The watch's consumer or connection is gone: open another after the last sequence."""


@dataclass(frozen=True, slots=True)
class WatchTuning:
    """How a watch pulls: events per fetch, how long one pull waits, how long
    the server keeps an idle consumer, and the pause before opening again."""

    batch_size: int = 256
    fetch_seconds: float = 5.0
    inactive_seconds: float = 30.0
    retry_initial_seconds: float = 0.1
    retry_max_seconds: float = 2.0


def start_point(after: int | None, first: int, last: int) -> tuple[int, WatchGap | None]:
    """Where a watch starts (it delivers the events after the sequence returned)
    for a caller that has seen up to `after` (None: nothing, only new events),
    on a stream holding `first`..`last` (0, 0 or first > last when empty)."""
    if after is None:
        return last, None
    if after > last:
        # Beyond the end: the stream was recreated (or the id is not one of
        # ours); replaying it all could be huge, so start with new events.
        return last, WatchGap(after, last, "reset")
    if first > 0 and after + 1 < first:
        return first - 1, WatchGap(after, first - 1, "expired")
    return after, None


class JetStreamEventWatch:
    """EventWatchSource on the bus's JetStream connection (recall's own)."""

    def __init__(self, bus: NatsEventBus, *, stream: str, subject_prefix: str, tuning: WatchTuning | None = None):
        self._bus = bus
        self._stream = stream
        self._prefix = subject_prefix
        self._tuning = tuning or WatchTuning()

    def subjects(self, tenant: str, kinds: list[str]) -> list[str]:
        """The consumer's filter: every kind of the tenant's, or one subject per kind."""
        if not kinds:
            return [event_subject(self._prefix, tenant, ">")]
        return [event_subject(self._prefix, tenant, kind) for kind in sorted(set(kinds))]

    async def watch(
        self, tenant: str, after_sequence: int | None, kinds: list[str]
    ) -> AsyncGenerator[WatchOpened | WatchGap | SequencedEvent, None]:
        """WatchOpened once the consumer exists, then the events (and a gap
        when the stream no longer holds what was asked for), until the caller
        stops. Raises Unavailable when the first opening fails (NATS is
        down), so a caller learns at once that no watch could be opened."""
        subjects = self.subjects(tenant, kinds)
        try:
            first, last = await self._bounds()
            position, gap = await self._own_start(subjects, after_sequence, first, last)
            sub: _Consumer | None = await self._open(subjects, position)
        except Exception as exc:
            raise Unavailable(
                "NATS_UNAVAILABLE", f"no event watch could be opened: {exc or type(exc).__name__}"
            ) from exc
        try:
            # The stream's bounds are not the tenant's to see: the opened message carries its own position only.
            yield WatchOpened(position, 0, 0)
            if gap is not None:
                yield gap
            pause = self._tuning.retry_initial_seconds
            while True:
                if sub is None:
                    try:
                        first, last = await self._bounds()
                        resumed, gap = await self._own_start(subjects, position, first, last)
                        sub = await self._open(subjects, resumed)
                    except Exception as exc:
                        log.info("event watch not reopened yet", error=str(exc) or type(exc).__name__)
                        await asyncio.sleep(pause)
                        pause = min(pause * 2, self._tuning.retry_max_seconds)
                        continue
                    pause = self._tuning.retry_initial_seconds
                    if gap is not None:
                        yield gap
                    position = resumed
                try:
                    batch = await sub.fetch_batch()
                except _ConsumerLost as exc:
                    log.info("event watch consumer lost; reopening", after=position, cause=str(exc))
                    await sub.close()
                    sub = None
                    continue
                for sequence, data in batch:
                    position = sequence
                    try:
                        event = event_from_pb(events_pb2.MemoryEvent.FromString(data))
                    except Exception as exc:  # another consumer dead-letters it; a watch skips it
                        log.warning("undecodable memory event skipped by a watch", sequence=sequence, error=str(exc))
                        continue
                    if event.tenant == tenant:  # two tenant names may sanitise to one subject token
                        yield SequencedEvent(sequence, event)
        finally:
            if sub is not None:
                await sub.close()

    async def _own_start(
        self, subjects: list[str], after: int | None, first: int, last: int
    ) -> tuple[int, WatchGap | None]:
        """start_point, in the tenant's own positions: where the stream's end
        stood, the tenant's last event (0: none held); where its start stood,
        just before the tenant's first event held (its last when none is)."""
        position, gap = start_point(after, first, last)
        if after is not None and gap is None:
            return position, None  # the caller's own position
        if gap is not None and gap.reason == "expired":
            position = max(0, await self._own_first(subjects, first) - 1)
        else:
            position = await self._own_last(subjects)
        return position, None if gap is None else WatchGap(gap.requested_after, position, gap.reason)

    async def _own_last(self, subjects: list[str]) -> int:
        """The sequence of the tenant's last event the stream holds on these subjects (0: none)."""
        found = 0
        for subject in subjects:
            with contextlib.suppress(NotFoundError):
                found = max(found, int((await self._bus.jetstream.get_last_msg(self._stream, subject)).seq))
        return found

    async def _own_first(self, subjects: list[str], first: int) -> int:
        """The sequence of the tenant's first event held on these subjects (past its last + 1: none)."""
        found = None
        for subject in subjects:
            with contextlib.suppress(NotFoundError):
                msg = await self._bus.jetstream.get_msg(self._stream, seq=max(1, first), subject=subject, next=True)
                found = int(msg.seq) if found is None else min(found, int(msg.seq))
        return found if found is not None else await self._own_last(subjects) + 1

    async def _bounds(self) -> tuple[int, int]:
        js = self._bus.jetstream
        if js is None or not self._bus.connected:
            raise ConnectionError("NATS is not connected")
        info = await js.stream_info(self._stream)
        return int(info.state.first_seq), int(info.state.last_seq)

    async def _open(self, subjects: list[str], after: int) -> _Consumer:
        js = self._bus.jetstream
        name = f"watch-{uuid.uuid4().hex}"
        config = ConsumerConfig(
            name=name,
            filter_subjects=subjects,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=after + 1,
            ack_policy=AckPolicy.NONE,  # a watch reads; the durable consumers do the work
            inactive_threshold=self._tuning.inactive_seconds,
            mem_storage=True,
            num_replicas=1,
        )
        await js.add_consumer(self._stream, config)
        sub = await js.pull_subscribe_bind(consumer=name, stream=self._stream)
        return _Consumer(self._bus, self._stream, name, sub, self._tuning)


class _Consumer:
    """One ephemeral consumer of a watch and its pull subscription."""

    def __init__(self, bus: NatsEventBus, stream: str, name: str, sub, tuning: WatchTuning):
        self._bus = bus
        self._stream = stream
        self._name = name
        self._sub = sub
        self._tuning = tuning
        self._reconnects = bus.reconnects
        self._checked = time.monotonic()

    async def fetch_batch(self) -> list[tuple[int, bytes]]:
        """The next events (sequence, data), or none after a pull that found
        nothing; raises _ConsumerLost when the consumer can no longer deliver."""
        try:
            msgs = await self._sub.fetch(self._tuning.batch_size, timeout=self._tuning.fetch_seconds)
        except TimeoutError:  # nats-py raises its own (a subclass) or the builtin one on an empty pull
            await self._still_there()
            return []
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise _ConsumerLost(str(exc) or type(exc).__name__) from exc
        self._checked = time.monotonic()
        return [(int(m.metadata.sequence.stream), m.data) for m in msgs]

    async def _still_there(self) -> None:
        """An empty pull cannot tell a quiet tenant from a consumer that is
        gone, so check the consumer after a reconnect, and at least twice per
        inactivity threshold."""
        if not self._bus.connected:
            raise _ConsumerLost("NATS is not connected")
        due = time.monotonic() - self._checked > self._tuning.inactive_seconds / 2
        if self._bus.reconnects == self._reconnects and not due:
            return
        try:
            await self._bus.jetstream.consumer_info(self._stream, self._name)
        except NotFoundError as exc:
            raise _ConsumerLost("consumer no longer exists") from exc
        except Exception as exc:
            raise _ConsumerLost(str(exc) or type(exc).__name__) from exc
        self._reconnects, self._checked = self._bus.reconnects, time.monotonic()

    async def close(self) -> None:
        """Unsubscribe and delete the consumer (bounded: it expires by itself anyway)."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._sub.unsubscribe(), timeout=CLOSE_TIMEOUT_SECONDS)
        if self._bus.connected:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    self._bus.jetstream.delete_consumer(self._stream, self._name), timeout=CLOSE_TIMEOUT_SECONDS
                )
