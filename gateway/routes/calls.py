"""What a route needs to call a service: the stubs, the call's metadata and
deadline, and the time it took."""

from __future__ import annotations

import time

from fastapi import Request

from gateway.auth import Caller
from gateway.clients import ClaimFor, ServiceClients


def clients(request: Request) -> ServiceClients:
    """The service stubs the app opened at start-up."""
    return request.app.state.clients


def call_options(request: Request, who: Caller) -> dict:
    """Metadata (the caller a claim is signed for: tenant, role, memory limit,
    token id as the actor; the stub called signs it for its own service) and
    deadline for a call on the caller's behalf."""
    return {
        "metadata": ClaimFor(who.tenant, who.role, who.memory_limit, actor=who.token_id or None),
        "timeout": request.app.state.settings.plane.grpc_timeout_seconds,
    }


def elapsed_ms(started: float) -> float:
    """Milliseconds since `started` (a time.perf_counter() reading), as answers report them."""
    return round((time.perf_counter() - started) * 1000, 2)
