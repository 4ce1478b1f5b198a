"""ISO 8601 parsing and formatting in UTC (stored with +00:00)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import overload

from services.core.domain.errors import InvalidArgument

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def parse_iso(value: str, field: str) -> datetime:
    """Parse an ISO 8601 date-time; 'Z' is accepted and naive times are UTC.

    Raises InvalidArgument (reason INVALID_TIMESTAMP) naming the field.
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument("INVALID_TIMESTAMP", f"{field} must be an ISO 8601 date-time", field=field)
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgument(
            "INVALID_TIMESTAMP", f"{field} is not a valid ISO 8601 date-time: {value!r}", field=field
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:59-01:00 is past year 9999 in UTC
        raise InvalidArgument(
            "INVALID_TIMESTAMP", f"{field} is out of range in UTC (years 1 to 9999): {value!r}", field=field
        ) from None


@overload
def format_iso(value: datetime) -> str: ...
@overload
def format_iso(value: None) -> None: ...
@overload
def format_iso(value: datetime | None) -> str | None: ...
def format_iso(value: datetime | None) -> str | None:
    """UTC ISO 8601 with a +00:00 offset, as the reference stores it."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat()


@overload
def to_micros(value: datetime) -> int: ...
@overload
def to_micros(value: None) -> None: ...
@overload
def to_micros(value: datetime | None) -> int | None: ...
def to_micros(value: datetime | None) -> int | None:
    """Epoch microseconds (exact; how the graph stores times)."""
    if value is None:
        return None
    return (value - _EPOCH) // _MICROSECOND


@overload
def from_micros(value: int) -> datetime: ...
@overload
def from_micros(value: None) -> None: ...
@overload
def from_micros(value: int | None) -> datetime | None: ...
def from_micros(value: int | None) -> datetime | None:
    """The inverse of to_micros."""
    if value is None:
        return None
    return _EPOCH + timedelta(microseconds=int(value))
