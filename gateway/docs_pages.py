"""The browsable API description: Swagger UI at /docs and ReDoc at /redoc,
their scripts, style and icon served by the gateway under /docs/assets.

FastAPI's own pages load those from a CDN (and ReDoc's fonts from Google),
which leaves a blank page without internet or behind a strict proxy. The
assets come from the fastapi-offline package (Swagger UI 5, ReDoc 2); the
pages are FastAPI's, open to everyone as before, as /openapi.json is."""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

DOCS = "/docs"
REDOC = "/redoc"
ASSETS = "/docs/assets"
OAUTH2_REDIRECT = "/docs/oauth2-redirect"

#: swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js and favicon.png.
ASSET_DIR = str(files("fastapi_offline") / "static")


def _root(request: Request) -> str:
    """The prefix a proxy mounts the gateway under (ASGI root_path), as FastAPI's pages use it."""
    return request.scope.get("root_path", "").rstrip("/")


def install(app: FastAPI) -> None:
    """Add /docs, its OAuth2 redirect page, /redoc and the assets they load
    to an app made with docs_url=None and redoc_url=None."""

    async def swagger_ui(request: Request) -> HTMLResponse:
        root = _root(request)
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS}/favicon.png",
            oauth2_redirect_url=root + OAUTH2_REDIRECT,
            init_oauth=app.swagger_ui_init_oauth,
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    async def swagger_ui_redirect(request: Request) -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    async def redoc(request: Request) -> HTMLResponse:
        root = _root(request)
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS}/favicon.png",
            with_google_fonts=False,  # the system's fonts: Google's would need the internet again
        )

    app.router.routes.extend(
        [
            Route(DOCS, swagger_ui, include_in_schema=False),
            Route(OAUTH2_REDIRECT, swagger_ui_redirect, include_in_schema=False),
            Route(REDOC, redoc, include_in_schema=False),
            Mount(ASSETS, StaticFiles(directory=ASSET_DIR), name="docs-assets"),
        ]
    )
