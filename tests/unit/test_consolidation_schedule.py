"""Consolidation's modes and schedule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.consolidation import TASK_ORDER, Progress, Schedule, Task, page_pause, tasks_for_mode
from services.core.domain.errors import InvalidArgument

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def test_modes_name_one_task_or_all_in_order():
    assert tasks_for_mode("full") == TASK_ORDER == (Task.DECAY, Task.CREATIVE, Task.CLUSTER, Task.FORGET)
    assert tasks_for_mode(" Decay ") == (Task.DECAY,)
    with pytest.raises(InvalidArgument) as raised:
        tasks_for_mode("dream")
    assert raised.value.field == "mode" and raised.value.reason == "INVALID_MODE"


def test_the_next_run_is_the_last_start_plus_the_interval_and_zero_is_never():
    schedule = Schedule({"decay": 86_400, "forget": 0})
    assert schedule.next_run("decay", None, NOW) == NOW and schedule.due("decay", None, NOW)
    last = NOW - timedelta(hours=20)
    assert schedule.next_run(Task.DECAY, last, NOW) == last + timedelta(days=1)
    assert not schedule.due("decay", last, NOW)
    assert schedule.due("decay", NOW - timedelta(days=2), NOW)
    assert schedule.next_run("forget", None, NOW) is None and not schedule.due("forget", None, NOW)
    assert schedule.next_run("cluster", None, NOW) is None  # not configured: off


def test_progress_fraction():
    assert Progress("decay", done=50, total=200).fraction == 0.25
    assert Progress("decay", done=5).fraction is None
    assert Progress("decay", done=300, total=200).fraction == 1.0


def test_the_pause_after_a_page_is_a_duty_cycle_with_a_floor():
    # ratio x the page's time: the pass holds at most 1 / (1 + ratio) of the store.
    assert page_pause(0.2, floor_seconds=0.05, ratio=1.5) == pytest.approx(0.3)
    assert page_pause(0.01, floor_seconds=0.05, ratio=1.5) == 0.05  # a quick page still waits the floor
    assert page_pause(0.2, floor_seconds=0.0, ratio=0.0) == 0.0  # both off: no pause
    assert page_pause(-1.0, floor_seconds=0.0, ratio=2.0) == 0.0  # a clock step back is no negative pause
