"""The access recorder batches recall's accesses per tenant, off the request."""

from __future__ import annotations

import asyncio

from services.recall.access import AccessRecorder


class Touches:
    """The recorder's write, collected (the graph's touch_memories in the service)."""

    def __init__(self, fail_for: str | None = None):
        self.calls: list[tuple[str, list[str], int]] = []
        self._fail_for = fail_for

    async def __call__(self, tenant: str, ids: list[str], accessed_us: int) -> None:
        if tenant == self._fail_for:
            raise ConnectionError("graph down")
        self.calls.append((tenant, ids, accessed_us))


def clock(start: int = 1000):
    ticks = iter(range(start, 10**9))
    return lambda: next(ticks)


async def test_ids_are_written_once_per_tenant_with_the_latest_access_time():
    touches = Touches()
    recorder = AccessRecorder(touches, flush_seconds=60, batch_size=100, clock_us=clock())
    recorder.record("a", ["m1", "m2"])
    recorder.record("b", ["x1"])
    recorder.record("a", ["m2", "m3"])
    assert touches.calls == []  # nothing is written while recording
    assert await recorder.flush() == 4
    assert sorted(touches.calls) == [("a", ["m1", "m2", "m3"], 1002), ("b", ["x1"], 1001)]
    assert await recorder.flush() == 0 and len(touches.calls) == 2


async def test_the_loop_flushes_every_interval_or_as_soon_as_a_batch_is_full():
    touches = Touches()
    recorder = AccessRecorder(touches, flush_seconds=0.05, batch_size=3, clock_us=clock())
    recorder.start()
    try:
        recorder.record("a", ["m1"])
        await asyncio.sleep(0.15)
        assert touches.calls and touches.calls[0][:2] == ("a", ["m1"])
        slow = AccessRecorder(touches, flush_seconds=60, batch_size=3, clock_us=clock())
        slow.start()
        slow.record("b", ["x1", "x2", "x3"])  # a full batch does not wait for the interval
        for _ in range(50):
            if any(call[0] == "b" for call in touches.calls):
                break
            await asyncio.sleep(0.01)
        assert ("b", ["x1", "x2", "x3"]) in [call[:2] for call in touches.calls]
        await slow.stop()
    finally:
        await recorder.stop()


async def test_stop_writes_what_is_waiting_and_a_failed_tenant_does_not_stop_the_others():
    touches = Touches(fail_for="down")
    recorder = AccessRecorder(touches, flush_seconds=60, batch_size=100, clock_us=clock())
    recorder.start()
    recorder.record("down", ["d1"])
    recorder.record("up", ["u1"])
    await recorder.stop()
    assert [call[:2] for call in touches.calls] == [("up", ["u1"])]
