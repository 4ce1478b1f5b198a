"""A service's background loop: one asyncio task, from start() until stop()."""

from __future__ import annotations

import asyncio
import contextlib


class BackgroundLoop:
    """Runs the subclass's `_loop` coroutine as one task; stop() cancels it and waits."""

    _task: asyncio.Task | None = None

    async def _loop(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
