"""Recall's time window: time_query phrases and start/end bounds, pure.

A window is half-open, [start, end), in UTC, and applies to a memory's
`timestamp`. It narrows the candidates; it never brings back an expired
memory (spec 000).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from services.core.domain.errors import InvalidArgument
from services.core.domain.times import parse_iso

_UNITS = {"hour": "hours", "day": "days", "week": "weeks", "month": "months", "year": "years"}
_MONTHS = {
    name: i + 1
    for i, name in enumerate(
        ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
         "november", "december")
    )
}  # fmt: skip
_MONTHS.update({name[:3]: n for name, n in list(_MONTHS.items())})
_WORD_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_NUMBER = r"(\d+|a|an|one|two|three|four|five|six|seven)"
_RELATIVE = re.compile(
    rf"^(?:last|past|previous|the last|the past|within the last)\s+{_NUMBER}\s+(hour|day|week|month|year)s?$"
)
_AGO = re.compile(rf"^{_NUMBER}\s+(hour|day|week|month|year)s?\s+ago$")
_MONTH_NAME = re.compile(r"^(?:in\s+)?([a-z]+)(?:\s+(\d{4}))?$")
_YEAR = re.compile(r"^(?:in\s+)?(\d{4})$")

ACCEPTED = (
    "today, yesterday, this/last week, this/last month, this/last year, last N hours/days/weeks/months/years, "
    "N days ago, a month name (optionally with a year), a year, or an ISO date"
)


@dataclass(frozen=True, slots=True)
class Window:
    start: datetime | None = None
    end: datetime | None = None

    @property
    def empty(self) -> bool:
        return self.start is None and self.end is None


def _day(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _month_start(year: int, month: int) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


def _add_months(at: datetime, months: int) -> datetime:
    index = at.year * 12 + at.month - 1 + months
    return _month_start(index // 12, index % 12 + 1)


def _shift(now: datetime, count: int, unit: str) -> datetime:
    if unit in ("month", "year"):
        index = now.year * 12 + now.month - 1 - count * (12 if unit == "year" else 1)
        year, month = index // 12, index % 12 + 1
        # The same day of the month, or the month's last day when it is shorter.
        return now.replace(year=year, month=month, day=min(now.day, calendar.monthrange(year, month)[1]))
    return now - timedelta(**{_UNITS[unit]: count})


def _count(text: str) -> int:
    return int(text) if text.isdigit() else _WORD_NUMBERS[text]


def parse_time_query(text: str, now: datetime) -> Window:
    """A window from a phrase; INVALID_ARGUMENT (field time_query) when the
    phrase is not one of ACCEPTED."""
    try:
        window = _window_of(" ".join(text.strip().lower().split()), now)
    except (ValueError, OverflowError):  # a count or a year beyond the calendar
        window = None
    if window is None:
        raise InvalidArgument(
            "INVALID_TIME_QUERY", f"time_query {text!r} is not understood; use {ACCEPTED}", field="time_query"
        )
    return window


def _window_of(phrase: str, now: datetime) -> Window | None:
    today = _day(now)
    fixed = {
        "today": (today, today + timedelta(days=1)),
        "yesterday": (today - timedelta(days=1), today),
        "this week": (today - timedelta(days=today.weekday()), None),
        "last week": (today - timedelta(days=today.weekday() + 7), today - timedelta(days=today.weekday())),
        "this month": (_month_start(today.year, today.month), None),
        "last month": (_add_months(today, -1), _month_start(today.year, today.month)),
        "this year": (datetime(today.year, 1, 1, tzinfo=UTC), None),
        "last year": (datetime(today.year - 1, 1, 1, tzinfo=UTC), datetime(today.year, 1, 1, tzinfo=UTC)),
        "recent": (today - timedelta(days=7), None),
        "recently": (today - timedelta(days=7), None),
    }
    if phrase in fixed:
        start, end = fixed[phrase]
        return Window(start, end)
    if match := _RELATIVE.match(phrase):
        return Window(_shift(now, _count(match.group(1)), match.group(2)), None)
    if match := _AGO.match(phrase):
        count, unit = _count(match.group(1)), match.group(2)
        if unit in ("hour",):
            at = _shift(now, count, unit)
            return Window(at - timedelta(hours=1), at + timedelta(hours=1))
        day = _day(_shift(now, count, unit))
        return Window(day, day + timedelta(days=1))
    if match := _YEAR.match(phrase):
        year = int(match.group(1))
        return Window(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC))
    if (match := _MONTH_NAME.match(phrase)) and match.group(1) in _MONTHS:
        month = _MONTHS[match.group(1)]
        year = int(match.group(2)) if match.group(2) else (today.year if month <= today.month else today.year - 1)
        start = _month_start(year, month)
        return Window(start, _add_months(start, 1))
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", phrase):
        day = parse_iso(phrase, "time_query")
        return Window(day, day + timedelta(days=1))
    return None


def resolve_window(time_query: str | None, start: str | None, end: str | None, now: datetime) -> Window:
    """time_query gives a window; start and end (ISO 8601) override its
    bounds. Garbage is INVALID_ARGUMENT naming the field; start after end too."""
    window = parse_time_query(time_query, now) if time_query and time_query.strip() else Window()
    lower = parse_iso(start, "start") if start and start.strip() else window.start
    upper = parse_iso(end, "end") if end and end.strip() else window.end
    if lower is not None and upper is not None and lower > upper:
        raise InvalidArgument("INVALID_TIME_RANGE", "start must not be after end", field="start")
    return Window(lower, upper)
