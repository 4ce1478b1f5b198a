"""Recall's time window: time_query phrases and start/end bounds, pure.

A window is half-open, [start, end), in UTC, and applies to a memory's
`timestamp`. It narrows the candidates; it never brings back an expired
memory.
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
_QUARTER = re.compile(r"^(?:in\s+)?(?:q([1-4])(?:\s+(?:of\s+)?(\d{4}))?|(\d{4})[\s-]?q([1-4]))$")
_SEASON = re.compile(r"^(?:(this|last|in)\s+)?(?:the\s+)?(spring|summer|autumn|fall|winter)(?:\s+(?:of\s+)?(\d{4}))?$")
_SINCE = re.compile(r"^since\s+(.+)$")
_BEFORE_AFTER = re.compile(r"^(before|after)\s+(.+)$")
_BETWEEN = re.compile(r"^(?:between\s+(.+?)\s+and|from\s+(.+?)\s+(?:to|until))\s+(.+)$")
#: Parts of the day, in UTC like every phrase: (first hour, hours long).
_DAY_PARTS = {
    "this morning": (5, 7),  # 05:00-12:00
    "this afternoon": (12, 5),  # 12:00-17:00
    "this evening": (17, 7),  # 17:00-24:00
    "tonight": (18, 12),  # 18:00 to 06:00 the next day
    "last night": (-6, 12),  # 18:00 yesterday to 06:00 today
}
#: Seasons are meteorological and of the northern hemisphere: whole months,
#: spring March-May, summer June-August, autumn (fall) September-November,
#: winter December-February. A season is named by the year it starts in, so
#: "winter 2024" is December 2024 to February 2025.
_SEASON_START = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}

ACCEPTED = (
    "today, yesterday, this morning/afternoon/evening, tonight, last night, this/last week, this/last weekend, "
    "this/last month, this/last quarter, Q1-Q4 (optionally with a year: Q3 2024), this/last year, "
    "a season (spring, summer, autumn or fall, winter; this/last, optionally with a year: summer 2024), "
    "last N hours/days/weeks/months/years, N days ago, a month name (optionally with a year), a year, "
    "an ISO date, since <phrase or date>, before <phrase or date>, after <phrase or date>, "
    "between <phrase or date> and <phrase or date>"
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
    except (ValueError, OverflowError, InvalidArgument):  # a count, a year or a date beyond the calendar
        window = None
    if window is None:
        raise InvalidArgument(
            "INVALID_TIME_QUERY", f"time_query {text!r} is not understood; use {ACCEPTED}", field="time_query"
        )
    return window


def _quarter_start(year: int, quarter: int) -> datetime:
    return _month_start(year, 3 * (quarter - 1) + 1)


def _season(name: str, year: int) -> tuple[datetime, datetime]:
    start = _month_start(year, _SEASON_START[name])
    return start, _add_months(start, 3)


def _latest_season(name: str, now: datetime, *, ended: bool) -> Window:
    """The latest occurrence of the season that has begun by now (ended: that has ended by now)."""
    for year in (now.year, now.year - 1, now.year - 2):
        start, end = _season(name, year)
        if (end if ended else start) <= now:
            return Window(start, end)
    raise ValueError(name)  # unreachable: two years back always has one


def _point(phrase: str, now: datetime) -> Window | None:
    """The window of a phrase inside since/before/after/between: any phrase,
    or an ISO date-time (a window of one instant)."""
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}t[0-9:.]+(?:z|[+-]\d{2}:?\d{2})?", phrase):
        at = parse_iso(phrase.upper(), "time_query")
        return Window(at, at)
    if _SINCE.match(phrase) or _BEFORE_AFTER.match(phrase) or _BETWEEN.match(phrase):
        return None  # one connective a phrase
    return _window_of(phrase, now)


def _window_of(phrase: str, now: datetime) -> Window | None:
    today = _day(now)
    monday = today - timedelta(days=today.weekday())
    quarter = (today.month - 1) // 3 + 1
    this_quarter = _quarter_start(today.year, quarter)
    fixed = {
        "today": (today, today + timedelta(days=1)),
        "yesterday": (today - timedelta(days=1), today),
        "this week": (monday, None),
        "last week": (monday - timedelta(days=7), monday),
        # Weeks start on Monday: this weekend is this week's Saturday and Sunday.
        "this weekend": (monday + timedelta(days=5), monday + timedelta(days=7)),
        "last weekend": (monday - timedelta(days=2), monday),
        "this month": (_month_start(today.year, today.month), None),
        "last month": (_add_months(today, -1), _month_start(today.year, today.month)),
        "this quarter": (this_quarter, None),
        "last quarter": (_add_months(this_quarter, -3), this_quarter),
        "this year": (datetime(today.year, 1, 1, tzinfo=UTC), None),
        "last year": (datetime(today.year - 1, 1, 1, tzinfo=UTC), datetime(today.year, 1, 1, tzinfo=UTC)),
        "recent": (today - timedelta(days=7), None),
        "recently": (today - timedelta(days=7), None),
    }
    if phrase in fixed:
        start, end = fixed[phrase]
        return Window(start, end)
    if phrase in _DAY_PARTS:
        first, hours = _DAY_PARTS[phrase]
        start = today + timedelta(hours=first)
        return Window(start, start + timedelta(hours=hours))
    if match := _SINCE.match(phrase):
        since = _point(match.group(1), now)
        return None if since is None or since.start is None else Window(since.start, None)
    if match := _BEFORE_AFTER.match(phrase):
        bound = _point(match.group(2), now)
        if bound is None:
            return None
        if match.group(1) == "before":
            return None if bound.start is None else Window(None, bound.start)
        return None if bound.end is None else Window(bound.end, None)
    if match := _BETWEEN.match(phrase):
        earlier, later = _point(match.group(1) or match.group(2), now), _point(match.group(3), now)
        if earlier is None or later is None or earlier.start is None:
            return None
        # The second phrase is included whole (between march and may ends with
        # May); an instant ends the window there; an open phrase leaves it open.
        end = later.end
        if end is not None and end < earlier.start:
            return None
        return Window(earlier.start, end)
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
    if match := _QUARTER.match(phrase):
        number = int(match.group(1) or match.group(4))
        year_text = match.group(2) or match.group(3)
        # A quarter without a year is the latest that has begun, as a month name.
        year = int(year_text) if year_text else (today.year if number <= quarter else today.year - 1)
        start = _quarter_start(year, number)
        return Window(start, _add_months(start, 3))
    if match := _SEASON.match(phrase):
        which, name, year_text = match.groups()
        if year_text:
            return None if which in ("this", "last") else Window(*_season(name, int(year_text)))
        # "last summer" is the latest summer that has ended; "summer" and
        # "this summer", the latest that has begun (the current one, in summer).
        return _latest_season(name, now, ended=which == "last")
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
