"""parse_iso, format_iso, to_micros and from_micros."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta, timezone

import pytest

from services.core.domain.errors import InvalidArgument
from services.core.domain.times import format_iso, from_micros, parse_iso, to_micros


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-15T10:30:00Z", datetime(2024, 1, 15, 10, 30, tzinfo=UTC)),
        ("2024-01-15T10:30:00z", datetime(2024, 1, 15, 10, 30, tzinfo=UTC)),
        ("2024-01-15T10:30:00+00:00", datetime(2024, 1, 15, 10, 30, tzinfo=UTC)),
        ("2024-01-15T10:30:00.123456Z", datetime(2024, 1, 15, 10, 30, 0, 123456, tzinfo=UTC)),
        ("2024-01-15T05:30:00-05:00", datetime(2024, 1, 15, 10, 30, tzinfo=UTC)),
        ("2024-01-01T01:00:00+02:00", datetime(2023, 12, 31, 23, 0, tzinfo=UTC)),
        ("2024-01-15T10:30:00", datetime(2024, 1, 15, 10, 30, tzinfo=UTC)),
        (" 2024-01-15T10:30:00Z ", datetime(2024, 1, 15, 10, 30, tzinfo=UTC)),
    ],
)
def test_parse_iso_returns_utc(text, expected):
    parsed = parse_iso(text, "timestamp")
    assert parsed == expected
    assert parsed.utcoffset() == timedelta(0)
    assert (parsed.hour, parsed.day) == (expected.hour, expected.day)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "yesterday",
        "2024-02-30T00:00:00Z",
        "2024-01-15T25:00:00",
        None,
        1705314600,
        # Valid where written, but past the years datetime holds once in UTC (found by the fuzzer).
        "9999-12-31T23:59:59-23:59",
        "0001-01-01T00:00:00+23:59",
    ],
)
def test_parse_iso_rejects_invalid_values_naming_the_field(value):
    with pytest.raises(InvalidArgument) as caught:
        parse_iso(value, "t_invalid")
    assert caught.value.reason == "INVALID_TIMESTAMP"
    assert caught.value.field == "t_invalid"
    assert "t_invalid" in caught.value.message


def test_format_iso_uses_a_plus_zero_offset():
    value = datetime(2024, 1, 15, 10, 30, 0, 123456, tzinfo=UTC)
    assert format_iso(value) == "2024-01-15T10:30:00.123456+00:00"


def test_format_iso_converts_other_offsets_to_utc():
    value = datetime(2024, 1, 15, 12, 30, tzinfo=timezone(timedelta(hours=2)))
    assert format_iso(value) == "2024-01-15T10:30:00+00:00"


def test_format_iso_of_none_is_none():
    assert format_iso(None) is None


def test_parse_then_format_normalises_z():
    assert format_iso(parse_iso("2024-01-15T10:30:00Z", "timestamp")) == "2024-01-15T10:30:00+00:00"


def test_to_micros_counts_from_the_epoch():
    value = datetime(2024, 1, 15, 10, 30, 0, 123456, tzinfo=UTC)
    seconds = calendar.timegm((2024, 1, 15, 10, 30, 0))
    assert to_micros(value) == seconds * 1_000_000 + 123456
    assert to_micros(datetime(1970, 1, 1, tzinfo=UTC)) == 0
    assert to_micros(datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC)) == 1
    assert to_micros(datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)) == -1


def test_to_micros_ignores_the_offset_of_the_same_instant():
    utc = datetime(2024, 1, 15, 10, 30, tzinfo=UTC)
    plus2 = datetime(2024, 1, 15, 12, 30, tzinfo=timezone(timedelta(hours=2)))
    assert to_micros(plus2) == to_micros(utc)


@pytest.mark.parametrize(
    "value",
    [
        datetime(2024, 1, 15, 10, 30, 0, 123456, tzinfo=UTC),
        datetime(2024, 1, 15, 10, 30, 0, 1, tzinfo=UTC),
        datetime(2024, 1, 15, 10, 30, 0, 999999, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(1901, 3, 4, 5, 6, 7, 890123, tzinfo=UTC),
        datetime(2999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ],
)
def test_micros_round_trip_exactly(value):
    micros = to_micros(value)
    assert isinstance(micros, int)
    back = from_micros(micros)
    assert back == value
    assert back.microsecond == value.microsecond
    assert back.utcoffset() == timedelta(0)


def test_micros_of_none_is_none():
    assert to_micros(None) is None
    assert from_micros(None) is None
