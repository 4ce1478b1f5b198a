"""The whole stack in-process: four services and the gateway over real HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
import uvicorn

from devstack.servers import free_port
from gateway.app import create_app
from gateway.clients import ServiceClients
from services.consolidate.bootstrap import build_app as build_consolidate
from services.core.grpc.server import start
from services.enrich.bootstrap import build_app as build_enrich
from services.ingest.bootstrap import build_app as build_ingest
from services.recall.bootstrap import build_app as build_recall
from tests.conftest import plane_of

API_TOKEN = "e2e-token"
BUILDERS = {"ingest": build_ingest, "recall": build_recall, "enrich": build_enrich, "consolidate": build_consolidate}


@pytest.fixture
def stack_settings(settings):
    """Write-path tests see records as ingest stored them: enrichment, which
    rewrites tags and metadata in the background, is off (it has its own tests)."""
    return settings.override({"enrichment_enabled": False})


@pytest.fixture
async def stack_services(stack_settings):
    """The four services, started in-process on free ports."""
    services = {}
    dialled = stack_settings
    try:
        for name, build in BUILDERS.items():
            services[name] = await start(
                name, build(dialled), host="127.0.0.1", port=0, grace_seconds=1.0, plane=plane_of(stack_settings)
            )
            # The services started later dial this one where it listens (enrich reaches recall).
            dialled = dialled.override({f"{name}_addr": f"127.0.0.1:{services[name].port}"})
        yield services
    finally:
        for service in services.values():
            await service.stop()


@asynccontextmanager
async def serving(app) -> AsyncIterator[str]:
    """An ASGI app served by uvicorn on a free port, in this event loop: its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def connect(services: dict, settings) -> ServiceClients:
    """Clients of the started services, signing with the test stack's key."""
    return ServiceClients.connect({name: f"127.0.0.1:{s.port}" for name, s in services.items()}, plane_of(settings))


@pytest.fixture
async def gateway_url(stack_settings, stack_services):
    """The gateway over real HTTP on a free port, dialling the services."""
    async with serving(create_app(stack_settings, API_TOKEN, connect(stack_services, stack_settings))) as url:
        yield url


@pytest.fixture
async def client(gateway_url):
    async with httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {API_TOKEN}"}) as c:
        yield c


@pytest.fixture
async def anonymous(gateway_url):
    async with httpx.AsyncClient(base_url=gateway_url) as c:
        yield c
