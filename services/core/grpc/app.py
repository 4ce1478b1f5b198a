"""A service application: one servicer plus the resources it opens and closes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import grpc
import structlog

log = structlog.get_logger()


@dataclass
class ServiceApp:
    """Implements services.core.grpc.server.Application.

    `startups` run in order at start (each may wait for its dependency);
    `shutdowns` run in order at stop.
    """

    service_name: str
    add_servicer: Callable[[object, grpc.aio.Server], None]
    servicer: object
    startups: list[Callable[[], Awaitable[None] | None]] = field(default_factory=list)
    shutdowns: list[Callable[[], Awaitable[None] | None]] = field(default_factory=list)
    step_timeout_seconds: float = 15.0
    #: More services the same process serves: (full name, add_servicer, servicer).
    extra_services: list[tuple[str, Callable[[object, grpc.aio.Server], None], object]] = field(default_factory=list)
    #: Awaited in the background once started: until it returns, `service_name` answers NOT_SERVING (what a
    #: readiness probe asks) while the overall status ("", what liveness asks) and the extra services serve.
    #: None: the service is ready as soon as it started.
    ready: Callable[[], Awaitable[object]] | None = None
    #: How long start() waits for `ready` before it returns: with nothing to wait for (the common case)
    #: the service is SERVING when start() returns, as it is without `ready`.
    ready_wait_seconds: float = 1.0

    @property
    def service_names(self) -> list[str]:
        return [self.service_name, *(name for name, _, _ in self.extra_services)]

    def register(self, server: grpc.aio.Server) -> None:
        self.add_servicer(self.servicer, server)
        for _, add, servicer in self.extra_services:
            add(servicer, server)

    async def start(self) -> None:
        for step in self.startups:
            result = step()
            if result is not None:
                await result

    async def stop(self) -> None:
        """Each step gets a bounded time: one stuck dependency must not hold
        the whole shutdown (the pod would be killed mid-way instead)."""
        for step in self.shutdowns:
            result = step()
            if result is None:
                continue
            try:
                await asyncio.wait_for(result, timeout=self.step_timeout_seconds)
            except TimeoutError:
                log.warning("shutdown step timed out", step=getattr(step, "__qualname__", repr(step)))


def full_service_name(module, name: str) -> str:
    """The fully-qualified name of a service in a generated *_pb2 module."""
    return module.DESCRIPTOR.services_by_name[name].full_name
