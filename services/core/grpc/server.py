"""Serving a memgrid gRPC service: health, reflection, metrics, error mapping,
graceful shutdown. Each service's main.py calls run(); tests call start()."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from services.core.actor import acting_as, system_actor
from services.core.domain.errors import DomainError
from services.core.grpc.errors import to_grpc_status
from services.core.grpc.plane import ClaimInterceptor, ServicePlane
from services.core.grpc.wrapping import around_calls
from services.core.heap import freeze_startup_objects, time_collections
from services.core.observability import GRPC_LATENCY, GRPC_REQUESTS

if TYPE_CHECKING:
    from services.core.settings import Settings

log = structlog.get_logger()

#: The largest gRPC message a service or the gateway sends or takes. gRPC's
#: default, 4 MiB, is less than a 500-item batch with embeddings or a
#: 2000-node graph snapshot; the gateway bounds what comes in
#: (MAX_REQUEST_BYTES, 32 MiB of JSON by default), and this sits well above
#: what that lets through (a short JSON number can grow to ~11 bytes as a
#: protobuf Value).
MAX_MESSAGE_BYTES = 256 * 1024 * 1024


def message_options(max_bytes: int = MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    """The channel and server options bounding a message both ways: a larger
    one is refused with RESOURCE_EXHAUSTED before it reaches a servicer
    (GRPC_MAX_MESSAGE_BYTES in a service's main)."""
    return [("grpc.max_receive_message_length", max_bytes), ("grpc.max_send_message_length", max_bytes)]


class Application(Protocol):
    """What a service's bootstrap builds: its servicers and their lifecycle."""

    #: Fully-qualified gRPC service names, for health and reflection.
    service_names: list[str]
    #: The main service's name, and what it waits for before it answers SERVING (None: nothing; ServiceApp.ready).
    service_name: str
    ready: Callable[[], Awaitable[object]] | None
    ready_wait_seconds: float

    def register(self, server: grpc.aio.Server) -> None: ...

    async def start(self) -> None:
        """Connect to dependencies (retrying while they come up)."""

    async def stop(self) -> None: ...


@asynccontextmanager
async def _guarded(service: str, method: str, context):
    """Map what a call raises to a rich status, and count and time the call."""
    started = time.perf_counter()
    code = "OK"
    try:
        yield
    except DomainError as exc:
        code = exc.status
        status = to_grpc_status(exc)
        await context.abort(status.code, status.details, status.trailing_metadata)
    except NotImplementedError:
        code = "UNIMPLEMENTED"
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{method} is not implemented yet")
    except asyncio.CancelledError:
        code = "CANCELLED"
        raise
    except Exception as exc:
        if isinstance(exc, grpc.aio.AbortError):
            code = (context.code() or grpc.StatusCode.UNKNOWN).name
            raise
        code = "INTERNAL"
        log.exception("unhandled error", method=method)
        await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method}")
    finally:
        GRPC_REQUESTS.labels(service, method, code).inc()
        GRPC_LATENCY.labels(service, method).observe(time.perf_counter() - started)


class ErrorAndMetricsInterceptor(grpc.aio.ServerInterceptor):
    """Maps domain errors to rich statuses and counts every call (unary, and
    server streaming such as RebuildIndex)."""

    def __init__(self, service: str):
        self._service = service

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method.rsplit("/", 1)[-1]
        service = self._service
        wrapped = around_calls(handler, lambda _request, context: _guarded(service, method, context))
        return handler if wrapped is None else wrapped


def server_options(max_message_bytes: int, max_connection_age_seconds: float = 0.0) -> list[tuple[str, int]]:
    """A server's options: messages bounded both ways; no SO_REUSEPORT (gRPC's default on Linux), so a
    second process on a taken port fails to start rather than silently sharing the port and answering some
    of its calls with "method not found"; with an age (GRPC_MAX_CONNECTION_AGE_SECONDS), each connection
    told to go after it (GOAWAY), so a client dialling one DNS name for every replica resolves it again.
    No grace: calls in flight (a watch, an index rebuild) finish on the old connection."""
    options = [*message_options(max_message_bytes), ("grpc.so_reuseport", 0)]
    if max_connection_age_seconds > 0:
        options.append(("grpc.max_connection_age_ms", int(max_connection_age_seconds * 1000)))
    return options


@dataclass
class RunningService:
    """A started service: its bound port, and how to stop it gracefully."""

    name: str
    port: int
    server: grpc.aio.Server
    health: health.aio.HealthServicer
    app: Application
    grace_seconds: float
    #: Marks the main service SERVING once the app is ready (Application.ready); None when it needs no wait.
    readiness: asyncio.Task | None = None
    _stopped: bool = field(default=False, repr=False)

    async def stop(self) -> None:
        """NOT_SERVING first (so balancers drain us), then finish in-flight calls."""
        if self._stopped:
            return
        self._stopped = True
        log.info("shutting down", grace_seconds=self.grace_seconds)
        if self.readiness is not None:
            self.readiness.cancel()
        await self.health.enter_graceful_shutdown()
        await self.server.stop(self.grace_seconds)
        await self.app.stop()
        log.info("stopped")


async def start(
    name: str,
    app: Application,
    *,
    host: str,
    port: int,
    grace_seconds: float,
    plane: ServicePlane,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    max_connection_age_seconds: float = 0.0,
) -> RunningService:
    """Bind (with TLS when the plane has it), answer health as NOT_SERVING,
    start the app, then mark SERVING (the main service only once the app's
    `ready` returned, when it has one). Every call but health and reflection
    must carry a claim signed with the plane's key; a message over
    `max_message_bytes` is refused (RESOURCE_EXHAUSTED)."""
    interceptors = [ErrorAndMetricsInterceptor(name), ClaimInterceptor(name, plane)]
    server = grpc.aio.server(
        interceptors=interceptors, options=server_options(max_message_bytes, max_connection_age_seconds)
    )
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    app.register(server)
    names = [*app.service_names, health.SERVICE_NAME, reflection.SERVICE_NAME]
    reflection.enable_server_reflection(names, server)
    bound = plane.add_port(server, f"{host}:{port}")
    for service_name in ("", *app.service_names):
        await health_servicer.set(service_name, health_pb2.HealthCheckResponse.NOT_SERVING)
    await server.start()
    log.info("grpc listening", host=host, port=bound, tls=plane.tls)
    try:
        # What app.start() starts (loops, consumers) writes as the service itself, in the audit log.
        with acting_as(system_actor(name)):
            await app.start()
    except BaseException:
        await server.stop(0)
        raise
    gated = app.service_name if app.ready is not None else None
    for service_name in ("", *app.service_names):
        if service_name != gated:
            await health_servicer.set(service_name, health_pb2.HealthCheckResponse.SERVING)
    log.info("serving", services=app.service_names, waiting_for_ready=gated)
    readiness = None
    if gated:
        readiness = asyncio.create_task(_serve_when_ready(health_servicer, gated, app.ready))
        await asyncio.wait({readiness}, timeout=app.ready_wait_seconds)
    return RunningService(name, bound, server, health_servicer, app, grace_seconds, readiness)


async def _serve_when_ready(health_servicer: health.aio.HealthServicer, service_name: str, ready) -> None:
    """Mark `service_name` SERVING once `ready()` returns (or raised: logged, and served anyway, since a
    replica that never turns ready takes no traffic at all)."""
    try:
        await ready()
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("readiness check failed; serving anyway", service=service_name)
    await health_servicer.set(service_name, health_pb2.HealthCheckResponse.SERVING)
    log.info("ready", service=service_name)


async def run_until_signalled(running: RunningService) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await running.stop()


def main(
    name: str,
    build_app,
    groups: Iterable[str],
    *,
    nice: Callable[[Settings], int] | None = None,
    freeze_after_start: bool = False,
) -> None:
    """The entrypoint of every service: settings -> bootstrap -> serve.

    `build_app(settings)` is the service's composition root, `groups` the
    settings groups it reads (process and plane, which this reads too, are
    always loaded); `nice`, when given, is the niceness the process takes
    first (background work that should yield the CPU to the services
    answering requests). Every service times its garbage collections
    (heap.GC_PAUSES); with `freeze_after_start` what it holds once started
    is frozen out of the collector's reach (heap.freeze_startup_objects).
    """
    from services.core.observability import configure_logging, start_metrics_server
    from services.core.settings import Settings

    settings = Settings.load(*dict.fromkeys(("process", "plane", *groups)))
    if nice is not None and nice(settings):
        os.nice(nice(settings))
    configure_logging(name, level=settings.process.log_level, json_logs=settings.process.log_json)
    start_metrics_server(settings.plane.metrics_port(name), host=settings.plane.listen_host)
    plane = ServicePlane.from_settings(settings.plane, settings.process.memgrid_data_dir)
    time_collections()

    async def serve() -> None:
        app = build_app(settings)
        running = await start(
            name,
            app,
            host=settings.plane.listen_host,
            port=settings.plane.grpc_port(name),
            grace_seconds=settings.process.shutdown_grace_seconds,
            plane=plane,
            max_message_bytes=settings.plane.grpc_max_message_bytes,
            max_connection_age_seconds=settings.plane.grpc_max_connection_age_seconds,
        )
        if freeze_after_start:
            freeze_startup_objects()
        await run_until_signalled(running)

    asyncio.run(serve())
