"""Timestamp conversions in codec.py: the same values as protobuf's own
FromDatetime and ToDatetime, which they replace for speed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from google.protobuf import timestamp_pb2

from memgrid.v1 import memory_pb2
from services.core.codec import ts_from_pb, ts_to_pb

VALUES = [
    datetime(2024, 1, 15, 10, 30, 0, 999999, tzinfo=UTC),
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(1901, 3, 4, 5, 6, 7, 890123, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(2024, 6, 1, 12, 0, 0, 1, tzinfo=timezone(timedelta(hours=-7))),
]


@pytest.mark.parametrize("value", VALUES)
def test_timestamps_convert_as_protobuf_converts_them(value):
    theirs = timestamp_pb2.Timestamp()
    theirs.FromDatetime(value.astimezone(UTC))
    assert ts_to_pb(value) == theirs

    message = memory_pb2.Memory()
    message.timestamp.CopyFrom(theirs)
    back = ts_from_pb(message, "timestamp")
    assert back == theirs.ToDatetime(tzinfo=UTC) == value
    assert back.utcoffset() == timedelta(0)


def test_an_unset_timestamp_is_none():
    assert ts_to_pb(None) is None
    assert ts_from_pb(memory_pb2.Memory(), "timestamp") is None
