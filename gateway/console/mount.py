"""Serves the console's files under /ui, each answer with a strict
Content-Security-Policy: scripts, styles and calls only from the gateway
itself, no inline script or style, no framing. The console is a static page
like /docs, open without a token; every call it makes takes the user's."""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from starlette.responses import RedirectResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PREFIX = "/ui"
ASSET_DIR = str(files("gateway.console") / "static")

CSP = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "object-src 'none'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'self'",
    )
)
HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    # Revalidated on every load: a gateway upgraded under an open tab serves its new modules.
    (b"cache-control", b"no-cache"),
)


class Hardened:
    """An ASGI app's answers with HEADERS added (replacing any of the same name)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_hardened(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in HEADERS}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": [*kept, *HEADERS]}
            await send(message)

        await self.app(scope, receive, send_hardened)


def install(app: FastAPI) -> None:
    """Add /ui (a redirect to /ui/) and the console's files under /ui/."""

    async def to_index(request) -> RedirectResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return RedirectResponse(f"{root}{PREFIX}/", status_code=308)

    app.router.routes.extend(
        [
            Route(PREFIX, to_index, include_in_schema=False),
            Mount(PREFIX, Hardened(StaticFiles(directory=ASSET_DIR, html=True)), name="console"),
        ]
    )
