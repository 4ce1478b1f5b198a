"""The rule that says a consumer lost events to the stream's retention, and
the records that carry it (docs/operations.md, Retention)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from nats.js.api import StreamConfig

from services.core.adapters.nats_bus import LIMITS_KEY, limits_are_memgrids
from services.core.adapters.nats_retention import GAP_KEY, gap_record, kept_metadata, read_gap
from services.core.domain.retention import ConsumerGap, events_lost

AT = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "delivered, first, lost",
    [
        (0, 0, 0),  # an empty stream that never held anything
        (0, 1, 0),  # a new consumer on a stream that still holds its first event
        (5, 6, 0),  # the stream's first event is the consumer's next one
        (5, 3, 0),  # the stream still holds events the consumer has read
        (5, 7, 1),  # sequence 6 went before the consumer read it
        (3, 9, 5),  # 4 to 8 went
        (13, 14, 0),  # every event expired, but the consumer had read them all
        (0, 10, 9),  # a new consumer on a stream whose first 9 expired
    ],
)
def test_a_consumer_lost_the_events_from_its_next_to_before_the_streams_first(delivered, first, lost):
    assert events_lost(delivered, first) == lost
    if lost:
        assert ConsumerGap("embed", delivered + 1, first, AT).lost == lost


def test_a_gap_record_reads_back_and_survives_a_config_update():
    gap = ConsumerGap("recall-projector", 4, 9, AT)
    record = gap_record(gap)
    metadata = {GAP_KEY: json.dumps(record), "_nats.ver": "2.12.0"}
    assert read_gap(metadata) == record and record["lost"] == 5 and record["repaired_at"] is None
    assert kept_metadata(metadata) == {GAP_KEY: json.dumps(record)}
    assert read_gap(None) is None and read_gap({GAP_KEY: "not json"}) is None and kept_metadata({}) is None


@pytest.mark.parametrize(
    "max_age, max_bytes, metadata, memgrids",
    [
        (None, None, None, True),  # an older release's stream: no limits, no record
        (3600.0, None, None, False),  # an operator set a limit on such a stream
        (604800.0, 1 << 31, {LIMITS_KEY: json.dumps([604800.0, 1 << 31])}, True),  # as memgrid set them
        (3600.0, 1 << 31, {LIMITS_KEY: json.dumps([604800.0, 1 << 31])}, False),  # changed by hand since
        (None, None, {LIMITS_KEY: json.dumps([0, 0])}, True),  # memgrid set unlimited
    ],
)
def test_the_streams_limits_are_memgrids_until_an_operator_changes_them(max_age, max_bytes, metadata, memgrids):
    config = StreamConfig(name="S", max_age=max_age, max_bytes=max_bytes, metadata=metadata)
    assert limits_are_memgrids(config) is memgrids
