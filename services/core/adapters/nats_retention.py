"""A durable consumer's gaps on JetStream: the record, the metrics, the lag.

A consumer that finds it lost events to retention (services.core.domain.
retention) records the gap in its own JetStream config (metadata key
`memgrid_gap`: one JSON object, with `repaired_at` once its repair from the
graph finished). The record lives with the consumer, so every replica and
every process sees it: recall's /health figures read it (and the live rule,
which also finds a consumer that is stopped while retention passes it), and
a consumer restarted in the middle of a repair starts it again. Beside it,
`memgrid_seen`: a sequence up to which a quiet consumer knows it missed
nothing. JetStream's position stays at the last event a filtered consumer
was delivered, so without it the other subjects' events expiring past a
quiet consumer would read as lost.
"""

from __future__ import annotations

import json

import structlog
from nats.js.errors import NotFoundError
from prometheus_client import Counter, Gauge

from services.core.domain.retention import ConsumerGap, events_lost
from services.core.domain.times import format_iso

log = structlog.get_logger()

GAPS = Counter(
    "memgrid_consumer_gaps_total", "Times a durable consumer found events lost to the stream's retention", ["consumer"]
)
LOST = Counter(
    "memgrid_consumer_events_lost_total",
    "Stream sequences a durable consumer lost to retention (at most: some were other subjects')",
    ["consumer"],
)
BEHIND = Gauge(
    "memgrid_consumer_behind",
    "1 while a durable consumer has lost events and its repair from the graph has not finished",
    ["consumer"],
)

#: The consumer metadata key holding its last gap.
GAP_KEY = "memgrid_gap"
#: ... and the one holding the sequence up to which it missed nothing (delivered, or another subject's).
SEEN_KEY = "memgrid_seen"


def gap_record(gap: ConsumerGap, repaired_at: str | None = None) -> dict:
    return {
        "lost": gap.lost,
        "next_sequence": gap.next_sequence,
        "first_sequence": gap.first_sequence,
        "detected_at": format_iso(gap.detected_at),
        "repaired_at": repaired_at,
    }


def read_gap(metadata: dict | None) -> dict | None:
    """The consumer's recorded gap, or None (none recorded, or unreadable)."""
    raw = (metadata or {}).get(GAP_KEY)
    if not raw:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def seen_of(info) -> int:
    """The last sequence a consumer (its ConsumerInfo) is known to have missed nothing up to."""
    try:
        recorded = int((info.config.metadata or {}).get(SEEN_KEY, 0))
    except (TypeError, ValueError):
        recorded = 0
    return max(int(info.delivered.stream_seq), recorded)


async def write_metadata(js, stream: str, durable: str, key: str, value: str) -> None:
    """Store one key of the consumer's metadata: the same config otherwise,
    so its position and pending acknowledgements stay as they are."""
    info = await js.consumer_info(stream, durable)
    metadata = {k: v for k, v in (info.config.metadata or {}).items() if not k.startswith("_nats")}
    metadata[key] = value
    await js.add_consumer(stream, info.config.evolve(metadata=metadata))


async def write_gap(js, stream: str, durable: str, record: dict) -> None:
    await write_metadata(js, stream, durable, GAP_KEY, json.dumps(record, separators=(",", ":")))


def kept_metadata(existing: dict | None) -> dict | None:
    """What of an existing consumer's metadata a config update carries over (memgrid's keys)."""
    kept = {k: v for k, v in (existing or {}).items() if k in (GAP_KEY, SEEN_KEY)}
    return kept or None


async def consumers_lag(js, stream: str, durables: tuple[str, ...]) -> tuple[dict[str, float], list[str]]:
    """The /health figures of the durables' retention: how many are behind
    (a recorded gap whose repair has not finished, or, for one with no pull
    waiting, a stopped one, the rule now) and the sequences they lost; and
    their names, for the component's detail. A consumer that is pulling
    checks itself, knowing (as JetStream's position does not) what it stepped
    past of other subjects; a stopped one's count is an upper bound."""
    first = int((await js.stream_info(stream)).state.first_seq)
    behind, lost = [], 0
    for durable in durables:
        try:
            info = await js.consumer_info(stream, durable)
        except NotFoundError:
            continue
        now = 0 if int(info.num_waiting or 0) else events_lost(seen_of(info), first)
        record = read_gap(info.config.metadata)
        unrepaired = record is not None and not record.get("repaired_at")
        if now or unrepaired:
            behind.append(durable)
            if now:
                lost += now
            elif record is not None:  # unrepaired
                lost += int(record.get("lost", 0))
    return {"consumers_behind": float(len(behind)), "events_lost": float(lost)}, behind
