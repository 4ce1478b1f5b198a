"""services.recall.readiness.CaughtUp: ready once the backlog is small, or
once the wait ran out; a backlog it cannot read counts as not caught up."""

from __future__ import annotations

from services.recall.readiness import CaughtUp


def backlog(*values):
    """A pending() that answers `values` in turn (an exception instance is raised), then the last one."""
    answers = list(values)

    async def pending() -> int:
        value = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(value, Exception):
            raise value
        return value

    return pending


async def test_it_waits_until_the_backlog_is_at_most_the_limit():
    reads = backlog(500, 250, 101, 100)
    assert await CaughtUp(reads, max_pending=100, timeout_seconds=30, poll_seconds=0.001).wait() is True


async def test_a_backlog_it_cannot_read_is_read_again():
    reads = backlog(ConnectionError("bus away"), ConnectionError("bus away"), 0)
    assert await CaughtUp(reads, max_pending=0, timeout_seconds=30, poll_seconds=0.001).wait() is True


async def test_it_gives_up_after_the_timeout_and_serves_anyway():
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0  # each look at the clock: a second later
        return now[0]

    gate = CaughtUp(backlog(1000), max_pending=100, timeout_seconds=5, poll_seconds=0.001, clock=clock)
    assert await gate.wait() is False
    assert now[0] <= 20  # it stopped at the deadline, not later
