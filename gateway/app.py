"""The HTTP gateway: the public REST surface over the gRPC services."""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from starlette.routing import Route

from gateway import docs_pages, envelope, openapi_document
from gateway.auth import TokenAuth
from gateway.body_limit import BodyLimit
from gateway.clients import ServiceClients
from gateway.console import mount as console
from gateway.mcp.server import McpEndpoint
from gateway.metrics import RequestMetrics
from gateway.responses import Json
from gateway.routes import ROUTES
from gateway.stream import StreamHub
from services.core.settings import Settings

#: The settings groups the gateway reads: its own, the plane's, the process's, and the few of others it
#: applies (the memory model's tag limits, the vector size /health compares, restore uploads and backup
#: chunks, recall's watch heartbeat).
GROUPS = ("process", "plane", "gateway", "memory", "vectors", "backup", "recall")


def create_app(settings: Settings, api_token: str | None, clients: ServiceClients | None = None) -> FastAPI:
    """The ASGI app; `clients` defaults to channels built from settings.

    `api_token` is the single-tenant token (None: only the tokens file's
    tokens); raises TokensFileError when MEMGRID_TOKENS_FILE is unusable."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.clients = clients or ServiceClients.from_settings(settings.plane, settings.process.memgrid_data_dir)
        # /stream watches events through recall (WatchMemoryEvents): the gateway holds no bus connection.
        app.state.stream = StreamHub.from_settings(
            settings, app.state.clients.recall, app.state.clients.signer("recall")
        )
        try:
            async with app.state.mcp.running():
                yield
        finally:
            await app.state.stream.close()
            await app.state.clients.close()

    # docs_url, redoc_url None: docs_pages serves both pages over local assets, not FastAPI's CDN.
    app = FastAPI(
        title="memgrid",
        version="0.1.0",
        lifespan=lifespan,
        default_response_class=Json,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.auth = TokenAuth.from_settings(settings.gateway, api_token)
    envelope.install(app)
    app.add_middleware(
        BodyLimit,
        limit=settings.gateway.max_request_bytes,
        paths={"/restore": settings.backup.restore_max_upload_bytes},
    )
    # Outside the body limit, so a 413 carries the CORS headers too.
    origins = [o.strip() for o in settings.gateway.cors_allow_origins.split(",") if o.strip()]
    app.add_middleware(CORSMiddleware, allow_origins=origins, allow_methods=["*"], allow_headers=["*"])
    app.add_middleware(RequestMetrics)  # outermost: every answer counts, a 413 or a CORS preflight too
    app.router.routes.extend(ROUTES)
    app.state.mcp = McpEndpoint(app, app.version)
    app.router.routes.append(Route("/mcp", app.state.mcp, methods=["GET", "POST", "DELETE"]))
    openapi_document.install(app)
    docs_pages.install(app)
    console.install(app)
    return app
