"""Recall's time window (services.core.domain.timewindow): time_query
phrases and start/end bounds against a fixed `now`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from services.core.domain.errors import InvalidArgument
from services.core.domain.timewindow import Window, parse_time_query, resolve_window

#: A Wednesday afternoon.
NOW = datetime(2026, 3, 18, 15, 30, tzinfo=UTC)


def d(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def test_now_is_a_wednesday():
    assert NOW.weekday() == 2


@pytest.mark.parametrize(
    ("phrase", "start", "end"),
    [
        ("today", d(2026, 3, 18), d(2026, 3, 19)),
        ("yesterday", d(2026, 3, 17), d(2026, 3, 18)),
        ("this week", d(2026, 3, 16), None),
        ("last week", d(2026, 3, 9), d(2026, 3, 16)),
        ("this month", d(2026, 3, 1), None),
        ("last month", d(2026, 2, 1), d(2026, 3, 1)),
        ("this year", d(2026, 1, 1), None),
        ("last year", d(2025, 1, 1), d(2026, 1, 1)),
        ("recent", d(2026, 3, 11), None),
        ("recently", d(2026, 3, 11), None),
    ],
)
def test_calendar_phrases(phrase, start, end):
    assert parse_time_query(phrase, NOW) == Window(start, end)


@pytest.mark.parametrize("phrase", ["  Last   WEEK ", "LAST WEEK", "last\tweek"])
def test_phrases_ignore_case_and_spacing(phrase):
    assert parse_time_query(phrase, NOW) == Window(d(2026, 3, 9), d(2026, 3, 16))


def test_weeks_start_on_monday():
    monday = d(2026, 3, 16, 8)
    sunday = d(2026, 3, 22, 23, 59)
    assert parse_time_query("this week", monday).start == d(2026, 3, 16)
    assert parse_time_query("this week", sunday).start == d(2026, 3, 16)
    assert parse_time_query("last week", monday) == Window(d(2026, 3, 9), d(2026, 3, 16))
    assert parse_time_query("last week", sunday) == Window(d(2026, 3, 9), d(2026, 3, 16))


def test_this_and_last_week_across_a_year_boundary():
    friday = d(2027, 1, 1, 12)  # the week began on Monday 2026-12-28
    assert parse_time_query("this week", friday).start == d(2026, 12, 28)
    assert parse_time_query("last week", friday) == Window(d(2026, 12, 21), d(2026, 12, 28))


def test_last_month_in_january_is_december_of_the_previous_year():
    january = d(2026, 1, 10, 9)
    assert parse_time_query("last month", january) == Window(d(2025, 12, 1), d(2026, 1, 1))
    assert parse_time_query("this month", january) == Window(d(2026, 1, 1), None)


def test_yesterday_on_the_first_of_march_of_a_leap_year():
    assert parse_time_query("yesterday", d(2024, 3, 1, 6)) == Window(d(2024, 2, 29), d(2024, 3, 1))


def test_calendar_phrases_use_the_utc_day_of_now():
    # 01:00 on the 19th in UTC+3 is still the 18th in UTC.
    late = datetime(2026, 3, 19, 1, 0, tzinfo=timezone(timedelta(hours=3)))
    assert parse_time_query("today", late) == Window(d(2026, 3, 18), d(2026, 3, 19))


@pytest.mark.parametrize(
    ("phrase", "start"),
    [
        ("last 3 days", NOW - timedelta(days=3)),
        ("past 2 weeks", NOW - timedelta(weeks=2)),
        ("last 1 week", NOW - timedelta(weeks=1)),
        ("last 24 hours", NOW - timedelta(hours=24)),
        ("the last two hours", NOW - timedelta(hours=2)),
        ("within the last seven days", NOW - timedelta(days=7)),
        ("previous 1 day", NOW - timedelta(days=1)),
        ("the past 25 days", NOW - timedelta(days=25)),
        ("last 1 month", d(2026, 2, 18, 15, 30)),
        ("last 3 months", d(2025, 12, 18, 15, 30)),
        ("last 2 years", d(2024, 3, 18, 15, 30)),
        ("last 1 days", NOW - timedelta(days=1)),
    ],
)
def test_relative_phrases_are_rolling_and_open_ended(phrase, start):
    assert parse_time_query(phrase, NOW) == Window(start, None)


def test_last_month_is_the_calendar_month_but_last_1_month_is_rolling():
    assert parse_time_query("last month", NOW) == Window(d(2026, 2, 1), d(2026, 3, 1))
    assert parse_time_query("last 1 month", NOW) == Window(d(2026, 2, 18, 15, 30), None)


@pytest.mark.parametrize(
    ("now", "phrase", "start"),
    [
        # The same day of the month, or the last day of a shorter month.
        (d(2026, 3, 31, 12), "last 1 month", d(2026, 2, 28, 12)),
        (d(2024, 3, 31, 12), "last 1 month", d(2024, 2, 29, 12)),
        (d(2026, 5, 31, 12), "last 1 month", d(2026, 4, 30, 12)),
        (d(2026, 3, 29, 12), "last 2 months", d(2026, 1, 29, 12)),
        (d(2026, 3, 31, 12), "last 1 year", d(2025, 3, 31, 12)),
        (d(2024, 2, 29, 12), "last 1 year", d(2023, 2, 28, 12)),
        (d(2024, 2, 29, 12), "last 4 years", d(2020, 2, 29, 12)),
    ],
)
def test_rolling_months_and_years_keep_the_day_where_it_exists(now, phrase, start):
    assert parse_time_query(phrase, now).start == start


@pytest.mark.parametrize(
    ("phrase", "start", "end"),
    [
        ("5 days ago", d(2026, 3, 13), d(2026, 3, 14)),
        ("a day ago", d(2026, 3, 17), d(2026, 3, 18)),
        ("2 weeks ago", d(2026, 3, 4), d(2026, 3, 5)),
        ("a month ago", d(2026, 2, 18), d(2026, 2, 19)),
        ("one year ago", d(2025, 3, 18), d(2025, 3, 19)),
        # Hours ago: an hour either side of the moment.
        ("2 hours ago", d(2026, 3, 18, 12, 30), d(2026, 3, 18, 14, 30)),
        ("an hour ago", d(2026, 3, 18, 13, 30), d(2026, 3, 18, 15, 30)),
    ],
)
def test_ago_phrases(phrase, start, end):
    assert parse_time_query(phrase, NOW) == Window(start, end)


@pytest.mark.parametrize(
    ("now", "phrase", "start"),
    [
        (d(2026, 5, 31, 12), "1 month ago", d(2026, 4, 30)),
        (d(2026, 3, 31, 12), "1 year ago", d(2025, 3, 31)),
        (d(2026, 3, 30, 12), "1 month ago", d(2026, 2, 28)),
    ],
)
def test_months_and_years_ago_land_on_the_same_day_or_the_month_end(now, phrase, start):
    assert parse_time_query(phrase, now) == Window(start, start + timedelta(days=1))


@pytest.mark.parametrize(
    ("phrase", "start", "end"),
    [
        ("march", d(2026, 3, 1), d(2026, 4, 1)),
        ("March", d(2026, 3, 1), d(2026, 4, 1)),
        ("mar", d(2026, 3, 1), d(2026, 4, 1)),
        ("in march", d(2026, 3, 1), d(2026, 4, 1)),
        ("in march 2024", d(2024, 3, 1), d(2024, 4, 1)),
        ("february 2024", d(2024, 2, 1), d(2024, 3, 1)),
        ("january", d(2026, 1, 1), d(2026, 2, 1)),
        # A month name later than this month is the previous year's.
        ("april", d(2025, 4, 1), d(2025, 5, 1)),
        ("december", d(2025, 12, 1), d(2026, 1, 1)),
        ("in dec", d(2025, 12, 1), d(2026, 1, 1)),
        ("december 2026", d(2026, 12, 1), d(2027, 1, 1)),
    ],
)
def test_month_names(phrase, start, end):
    assert parse_time_query(phrase, NOW) == Window(start, end)


@pytest.mark.parametrize(
    ("phrase", "start", "end"),
    [
        ("2023", d(2023, 1, 1), d(2024, 1, 1)),
        ("in 2023", d(2023, 1, 1), d(2024, 1, 1)),
        ("2026", d(2026, 1, 1), d(2027, 1, 1)),
    ],
)
def test_years(phrase, start, end):
    assert parse_time_query(phrase, NOW) == Window(start, end)


def test_an_iso_date_is_that_day():
    assert parse_time_query("2026-01-05", NOW) == Window(d(2026, 1, 5), d(2026, 1, 6))
    assert parse_time_query("2024-02-29", NOW) == Window(d(2024, 2, 29), d(2024, 3, 1))


@pytest.mark.parametrize(
    ("phrase", "start", "end"),
    [
        # Parts of the day, in UTC (NOW is 15:30 on Wednesday the 18th).
        ("this morning", d(2026, 3, 18, 5), d(2026, 3, 18, 12)),
        ("this afternoon", d(2026, 3, 18, 12), d(2026, 3, 18, 17)),
        ("this evening", d(2026, 3, 18, 17), d(2026, 3, 19)),
        ("tonight", d(2026, 3, 18, 18), d(2026, 3, 19, 6)),
        ("last night", d(2026, 3, 17, 18), d(2026, 3, 18, 6)),
        # Weekends: Saturday and Sunday of a Monday-first week.
        ("last weekend", d(2026, 3, 14), d(2026, 3, 16)),
        ("this weekend", d(2026, 3, 21), d(2026, 3, 23)),
        # Quarters: calendar quarters; without a year, the latest that has begun.
        ("this quarter", d(2026, 1, 1), None),
        ("last quarter", d(2025, 10, 1), d(2026, 1, 1)),
        ("Q3 2024", d(2024, 7, 1), d(2024, 10, 1)),
        ("q3 of 2024", d(2024, 7, 1), d(2024, 10, 1)),
        ("in Q4 2023", d(2023, 10, 1), d(2024, 1, 1)),
        ("2024-Q2", d(2024, 4, 1), d(2024, 7, 1)),
        ("2024 q1", d(2024, 1, 1), d(2024, 4, 1)),
        ("q1", d(2026, 1, 1), d(2026, 4, 1)),
        ("q2", d(2025, 4, 1), d(2025, 7, 1)),
        # Seasons: meteorological, northern hemisphere, named by the year they start in.
        ("last summer", d(2025, 6, 1), d(2025, 9, 1)),
        ("summer 2024", d(2024, 6, 1), d(2024, 9, 1)),
        ("in the summer of 2024", d(2024, 6, 1), d(2024, 9, 1)),
        ("last spring", d(2025, 3, 1), d(2025, 6, 1)),
        ("this spring", d(2026, 3, 1), d(2026, 6, 1)),
        ("spring", d(2026, 3, 1), d(2026, 6, 1)),
        ("last autumn", d(2025, 9, 1), d(2025, 12, 1)),
        ("last fall", d(2025, 9, 1), d(2025, 12, 1)),
        ("fall 2023", d(2023, 9, 1), d(2023, 12, 1)),
        ("last winter", d(2025, 12, 1), d(2026, 3, 1)),
        ("winter 2024", d(2024, 12, 1), d(2025, 3, 1)),
        # since, before, after, between: any phrase or date as a bound.
        ("since march", d(2026, 3, 1), None),
        ("since january 2025", d(2025, 1, 1), None),
        ("since 2026-03-01", d(2026, 3, 1), None),
        ("since last week", d(2026, 3, 9), None),
        ("since 2026-03-01T10:00:00Z", d(2026, 3, 1, 10), None),
        ("before 2025-06-01", None, d(2025, 6, 1)),
        ("before march 2025", None, d(2025, 3, 1)),
        ("before 2026-03-01T10:00:00+02:00", None, d(2026, 3, 1, 8)),
        ("after 2025-06-01", d(2025, 6, 2), None),
        ("after 2024", d(2025, 1, 1), None),
        ("between 2025-01-01 and 2025-03-31", d(2025, 1, 1), d(2025, 4, 1)),
        ("between january 2025 and march 2025", d(2025, 1, 1), d(2025, 4, 1)),
        ("from 2025-01-01 to 2025-01-31", d(2025, 1, 1), d(2025, 2, 1)),
        ("between 2025-01-01t06:00:00z and 2025-01-02t06:00:00z", d(2025, 1, 1, 6), d(2025, 1, 2, 6)),
        ("between last year and this week", d(2025, 1, 1), None),
    ],
)
def test_common_agent_phrases(phrase, start, end):
    assert parse_time_query(phrase, NOW) == Window(start, end)


@pytest.mark.parametrize(
    ("now", "phrase", "start", "end"),
    [
        # In summer, "last summer" is last year's; once it has ended, this year's.
        (d(2026, 7, 10), "last summer", d(2025, 6, 1), d(2025, 9, 1)),
        (d(2026, 7, 10), "this summer", d(2026, 6, 1), d(2026, 9, 1)),
        (d(2026, 10, 2), "last summer", d(2026, 6, 1), d(2026, 9, 1)),
        # Winter spans the new year.
        (d(2026, 1, 20), "this winter", d(2025, 12, 1), d(2026, 3, 1)),
        (d(2026, 1, 20), "last winter", d(2024, 12, 1), d(2025, 3, 1)),
        # Quarters across a year boundary.
        (d(2026, 2, 1), "last quarter", d(2025, 10, 1), d(2026, 1, 1)),
        (d(2026, 12, 31, 23), "this quarter", d(2026, 10, 1), None),
        # On a Sunday "this weekend" is today's and "last weekend" the week before.
        (d(2026, 3, 22, 10), "this weekend", d(2026, 3, 21), d(2026, 3, 23)),
        (d(2026, 3, 22, 10), "last weekend", d(2026, 3, 14), d(2026, 3, 16)),
    ],
)
def test_seasons_quarters_and_weekends_depend_on_now(now, phrase, start, end):
    assert parse_time_query(phrase, now) == Window(start, end)


@pytest.mark.parametrize(
    "phrase",
    [
        "since",
        "since whenever",
        "before",
        "after this week",  # an open window has no end to come after
        "between 2025-03-01 and 2025-01-01",  # the wrong way round
        "between march and",
        "since before 2025-01-01",  # one connective a phrase
        "q5",
        "q3 24",
        "last summer 2024",
        "this morning 2024",
        "summertime",
        "since 2026-02-30",
    ],
)
def test_new_forms_still_refuse_garbage(phrase):
    with pytest.raises(InvalidArgument) as caught:
        parse_time_query(phrase, NOW)
    assert caught.value.field == "time_query"
    assert caught.value.reason == "INVALID_TIME_QUERY"
    for form in ("this morning", "tonight", "last weekend", "this/last quarter", "since", "between"):
        assert form in caught.value.message


@pytest.mark.parametrize(
    "phrase",
    [
        "when the moon is full",
        "",
        "   ",
        "last",
        "last fortnight",
        "past week",  # relative phrases need a number ("last week" is the calendar week)
        "last eight days",  # word numbers stop at seven
        "last -3 days",
        "3 days",
        "sept",
        "marchy",
        "next week",
        "tomorrow",
        "2026-03",
        "18/03/2026",
        "2026-01-05T10:00:00Z",
    ],
)
def test_garbage_is_invalid_naming_time_query(phrase):
    with pytest.raises(InvalidArgument) as caught:
        parse_time_query(phrase, NOW)
    assert caught.value.field == "time_query"
    assert caught.value.reason == "INVALID_TIME_QUERY"
    assert "last week" in caught.value.message  # it says what is accepted


def test_an_impossible_iso_date_names_time_query():
    with pytest.raises(InvalidArgument) as caught:
        parse_time_query("2026-02-30", NOW)
    assert caught.value.field == "time_query"


@pytest.mark.parametrize(
    "phrase",
    ["last 5000 years", "3000 years ago", "last 99999999 months", "last 1000000000 days", "0000", "9999", "march 0000"],
)
def test_counts_and_years_beyond_the_calendar_are_invalid_not_a_crash(phrase):
    with pytest.raises(InvalidArgument) as caught:
        parse_time_query(phrase, NOW)
    assert caught.value.field == "time_query"


# resolve_window ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("blank", [None, "", "  "])
def test_nothing_sent_is_an_empty_window(blank):
    window = resolve_window(blank, blank, blank, NOW)
    assert window == Window()
    assert window.empty


def test_a_window_with_either_bound_is_not_empty():
    assert not Window(start=NOW).empty
    assert not Window(end=NOW).empty


def test_time_query_alone():
    assert resolve_window("yesterday", None, None, NOW) == Window(d(2026, 3, 17), d(2026, 3, 18))


def test_start_and_end_override_the_time_query_bounds():
    assert resolve_window("this month", None, "2026-03-10T00:00:00Z", NOW) == Window(d(2026, 3, 1), d(2026, 3, 10))
    assert resolve_window("last week", "2026-03-12T06:00:00Z", None, NOW) == Window(d(2026, 3, 12, 6), d(2026, 3, 16))
    assert resolve_window("last year", "2025-06-01", "2025-07-01", NOW) == Window(d(2025, 6, 1), d(2025, 7, 1))


def test_start_and_end_alone_are_parsed_to_utc():
    window = resolve_window(None, "2026-03-01T12:00:00+02:00", "2026-03-02T00:00:00Z", NOW)
    assert window == Window(d(2026, 3, 1, 10), d(2026, 3, 2))
    assert window.start.utcoffset() == timedelta(0)
    assert resolve_window("", "2026-03-01", "", NOW) == Window(d(2026, 3, 1), None)


def test_start_equal_to_end_is_allowed():
    assert resolve_window(None, "2026-03-01", "2026-03-01", NOW) == Window(d(2026, 3, 1), d(2026, 3, 1))


def test_start_after_end_is_invalid_naming_start():
    with pytest.raises(InvalidArgument) as caught:
        resolve_window(None, "2026-03-02", "2026-03-01", NOW)
    assert caught.value.field == "start"
    assert caught.value.reason == "INVALID_TIME_RANGE"


def test_a_start_after_the_time_query_end_is_invalid_too():
    with pytest.raises(InvalidArgument) as caught:
        resolve_window("yesterday", "2026-03-18T12:00:00Z", None, NOW)
    assert caught.value.field == "start"


@pytest.mark.parametrize(
    ("start", "end", "field"),
    [("not a date", None, "start"), (None, "2026-13-01", "end"), ("2026-03-01", "soon", "end")],
)
def test_garbage_bounds_name_their_field(start, end, field):
    with pytest.raises(InvalidArgument) as caught:
        resolve_window(None, start, end, NOW)
    assert caught.value.field == field
    assert caught.value.reason == "INVALID_TIMESTAMP"


def test_a_garbage_time_query_is_invalid_even_with_both_bounds():
    with pytest.raises(InvalidArgument) as caught:
        resolve_window("whenever", "2026-03-01", "2026-03-02", NOW)
    assert caught.value.field == "time_query"
