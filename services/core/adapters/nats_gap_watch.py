"""A consumer's watch on events lost to the stream's retention.

Before a fetch (the one that would step over the hole) the consumer
compares its position with the stream's first sequence
(services.core.domain.retention), counts and records the gap
(services.core.adapters.nats_retention) and runs its repair from the graph
(`on_gap`) beside the events that are still there. It looks again only
where retention can have removed something since the last look
(`look_lasts`): a consumer that had read everything there was then, and a
look younger than LOOK_SECONDS, need none.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import structlog
from nats.js.api import RetentionPolicy, StreamConfig

from services.core.adapters.nats_retention import (
    BEHIND,
    GAPS,
    LOST,
    SEEN_KEY,
    gap_record,
    read_gap,
    seen_of,
    write_gap,
    write_metadata,
)
from services.core.domain.retention import ConsumerGap, StreamLimits, events_lost, look_lasts
from services.core.domain.times import format_iso

log = structlog.get_logger()

#: How often, at most, a quiet consumer records how far it knows it missed nothing (a consumer update).
SEEN_RECORD_SECONDS = 60.0
#: Brings what a consumer derives from events in line with the graph, after events were lost.
GapRepair = Callable[[ConsumerGap], Awaitable[object]]  # what a repair answers is not read


def stream_limits(config: StreamConfig) -> StreamLimits:
    """What can remove the stream's events, as its config says."""
    return StreamLimits(
        max_age_seconds=float(config.max_age or 0),
        max_msgs=int(config.max_msgs or 0),
        max_bytes=int(config.max_bytes or 0),
        max_msgs_per_subject=int(config.max_msgs_per_subject or 0),
        by_limits_only=config.retention in (None, RetentionPolicy.LIMITS)
        and not config.allow_msg_ttl
        and not config.allow_rollup_hdrs,
    )


class GapWatch:
    """How far one durable knows it missed nothing, and the repair of what it missed."""

    def __init__(
        self,
        bus: Any,
        stream: str,
        durable: str,
        backoff_seconds: list[float],
        on_gap: GapRepair | None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._bus = bus
        self._clock = clock
        self._stream = stream
        self._durable = durable
        self._backoff = backoff_seconds
        self._on_gap = on_gap
        #: The last stream sequence JetStream delivered to (or skipped past for) this consumer, as known here.
        self._seen = 0
        #: The stream's last sequence at the last look (before a fetch).
        self._end = 0
        #: Until when (monotonic) the last look answers for a consumer that has read up to `_end`.
        self._look_until = float("-inf")
        #: How many times it asked the stream for its state.
        self.looks = 0
        #: The last `_seen` kept in the consumer's metadata (SEEN_KEY), and when.
        self._seen_recorded = 0
        self._recorded_at = float("-inf")
        #: The gap the repair task works on next, and that task.
        self._gap: ConsumerGap | None = None
        self._repair: asyncio.Task | None = None
        self.gaps = 0
        self.repaired = 0

    def bound(self, info: Any) -> None:
        """The consumer as JetStream keeps it, on (re)subscribing: its position, and a gap left unrepaired."""
        self._seen = max(self._seen, seen_of(info))
        self._resume_repair(read_gap(info.config.metadata))

    def delivered(self, sequences: Iterable[int]) -> None:
        """A fetch delivered these stream sequences."""
        self._seen = max([self._seen, *sequences])

    async def check(self, *, look: bool = False) -> None:
        """Whether retention removed events this consumer has not read yet
        (services.core.domain.retention); asked before the fetch that would
        step over them without a word. Not asked again while the last look
        answers for every event this consumer has left to read: it has read
        up to where the stream ended at that look, and the look is younger
        than the stream's limits allow (look_lasts). `look`: ask whatever the last look said (on
        subscribing)."""
        if not look and self._seen >= self._end and self._clock() < self._look_until:
            return
        js = self._bus.jetstream
        asked = self._clock()  # before the stream's state: what is stored after it is younger
        info = await js.stream_info(self._stream)
        self.looks += 1
        state = info.state
        first, self._end = int(state.first_seq), int(state.last_seq)
        self._look_until = asked + look_lasts(stream_limits(info.config))
        if not events_lost(self._seen, first):
            return
        # Its exact position: JetStream also steps past other subjects' events, which are no loss.
        info = await js.consumer_info(self._stream, self._durable)
        self._seen = max(self._seen, seen_of(info))
        if not events_lost(self._seen, first):
            return
        gap = ConsumerGap(self._durable, self._seen + 1, first, datetime.now(UTC))
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

    async def idle(self) -> None:
        """After an empty fetch: when nothing of this consumer's waits, every
        event up to the stream's end before the fetch was delivered or was
        another subject's. JetStream's own position stays at the last event it
        delivered, so without this a quiet consumer would take the other
        subjects' events expiring past it for lost ones of its own."""
        end = self._end
        info = await self._bus.jetstream.consumer_info(self._stream, self._durable)
        if int(info.num_pending) != 0:
            return
        self._seen = max(self._seen, end, seen_of(info))
        if self._seen > self._seen_recorded and time.monotonic() - self._recorded_at >= SEEN_RECORD_SECONDS:
            # Kept with the consumer, now and then, for a restart and for /health to read.
            self._recorded_at = time.monotonic()
            try:
                await write_metadata(self._bus.jetstream, self._stream, self._durable, SEEN_KEY, str(self._seen))
            except Exception as exc:  # the next quiet fetch tries again
                log.info("could not record a consumer's position", consumer=self._durable, error=str(exc))
            else:
                self._seen_recorded = self._seen

    async def stop(self) -> None:
        if self._repair is not None:
            # Its gap stays recorded as not repaired: the next start repairs again.
            self._repair.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._repair
            self._repair = None

    def _resume_repair(self, record: dict | None) -> None:
        """A recorded gap whose repair never finished (the process stopped
        during it): repaired now. One repair is enough while it runs here."""
        if record is None or record.get("repaired_at") or self._gap is not None:
            return
        if self._repair is not None and not self._repair.done():
            return
        try:
            gap = ConsumerGap(
                self._durable,
                int(record["next_sequence"]),
                int(record["first_sequence"]),
                datetime.fromisoformat(record["detected_at"]),
            )
        except (KeyError, TypeError, ValueError):
            log.error("unreadable gap record", consumer=self._durable, record=record)
            return
        log.warning("a repair after lost events did not finish; repairing again", consumer=gap.consumer)
        BEHIND.labels(gap.consumer).set(1)
        self._start_repair(gap)

    def _start_repair(self, gap: ConsumerGap) -> None:
        if self._on_gap is None:
            return  # reported (log, metrics, record) and left to an operator
        self._gap = gap  # a repair running now goes again for it, from the graph as it is then
        if self._repair is None or self._repair.done():
            self._repair = asyncio.create_task(self._repairing(self._on_gap))

    async def _repairing(self, on_gap: GapRepair) -> None:
        delays = self._backoff or [1.0]
        failures = 0
        while self._gap is not None:
            gap, self._gap = self._gap, None
            try:
                await on_gap(gap)
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
            await write_gap(self._bus.jetstream, self._stream, self._durable, record)
        except Exception as exc:  # the log and the metrics still say it
            log.warning("could not record a gap on the consumer", consumer=self._durable, error=str(exc))
