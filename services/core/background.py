"""A service's background loop: one asyncio task, from start() until stop(),
running the subclass's pass every `_interval` seconds."""

from __future__ import annotations

import asyncio
import contextlib

import structlog

log = structlog.get_logger()


class BackgroundLoop:
    """Runs `_pass` every `_interval` seconds (the first after `_first`, or
    after one interval when None) as one task; a failed pass is logged and the
    next one tries again. An interval of 0 or less turns the loop off. stop()
    cancels the task and waits."""

    _task: asyncio.Task | None = None
    _interval: float
    _first: float | None = None
    #: The warning a failed pass logs.
    _failed = "background pass failed"

    async def _pass(self) -> None:
        raise NotImplementedError

    async def _loop(self) -> None:
        if self._interval <= 0:
            return  # turned off
        delay = self._interval if self._first is None else self._first
        while True:
            await asyncio.sleep(delay)
            delay = self._interval
            try:
                await self._pass()
            except Exception as exc:  # a dependency is down: the next pass tries again
                log.warning(self._failed, error=str(exc))

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
