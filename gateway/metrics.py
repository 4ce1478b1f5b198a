"""Request counts and latency per route, for the gateway's /metrics.

Labelled by the route's template (`/memory/{memory_id}`, not each id), so
the series stay few; a request no route matched counts as `unmatched`."""

from __future__ import annotations

import time

from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUESTS = Counter("memgrid_gateway_requests_total", "REST requests answered", ["method", "route", "status"])
LATENCY = Histogram(
    "memgrid_gateway_request_seconds",
    "Time to answer a REST request (to the start of the response)",
    ["route"],
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
)


class RequestMetrics:
    """ASGI middleware: one counter increment and one histogram observation a request."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def observed(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                route = getattr(scope.get("route"), "path", "unmatched")
                LATENCY.labels(route).observe(time.perf_counter() - started)
                REQUESTS.labels(scope["method"], route, str(status)).inc()
            await send(message)

        await self.app(scope, receive, observed)
