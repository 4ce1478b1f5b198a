"""JsonRoute: a request served from a plan made once from the endpoint's signature."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from fastapi import Depends, FastAPI, Request
from starlette.responses import PlainTextResponse

from gateway import envelope
from gateway.envelope import ApiError
from gateway.responses import JsonRoute
from gateway.routes import ROUTES


async def caller(request: Request) -> str:
    if request.headers.get("x-who") is None:
        raise ApiError(401, "who are you?", "UNAUTHENTICATED")
    return request.headers["x-who"]


def app_with(*routes: tuple[str, object], **options) -> FastAPI:
    app = FastAPI()
    envelope.install(app)
    for path, endpoint in routes:
        app.router.routes.append(JsonRoute(path, endpoint, methods=["GET"], **options))
    return app


async def get(app: FastAPI, path: str, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
        return await client.get(path, headers=headers)


async def test_the_request_path_parameters_and_dependencies_are_filled():
    async def endpoint(item_id: str, request: Request, who: str = Depends(caller)):
        return {"item": item_id, "who": who, "q": request.query_params.get("q"), "vector": np.ones(2, np.float32)}

    app = app_with(("/items/{item_id}", endpoint), status_code=203)
    reply = await get(app, "/items/a1?q=x", **{"x-who": "ann"})
    assert (reply.status_code, reply.json()) == (203, {"item": "a1", "who": "ann", "q": "x", "vector": [1.0, 1.0]})


async def test_an_error_goes_to_the_apps_handlers_and_a_response_passes_through():
    async def text(request: Request, who: str = Depends(caller)):
        return PlainTextResponse("plain")

    app = app_with(("/text", text))
    refused = await get(app, "/text")
    assert (refused.status_code, refused.json()["message"]) == (401, "who are you?")
    assert (await get(app, "/text", **{"x-who": "ann"})).text == "plain"


def test_a_parameter_the_plan_cannot_fill_is_refused_at_startup():
    async def endpoint(request: Request, limit: int = 5):
        return {}

    with pytest.raises(TypeError, match="'limit' is not the request, a path parameter or a dependency"):
        JsonRoute("/items", endpoint, methods=["GET"])


def test_a_dependency_of_more_than_the_request_is_refused_at_startup():
    async def paged(request: Request, page: int = 1) -> int:
        return page

    async def endpoint(request: Request, page: int = Depends(paged)):
        return {}

    with pytest.raises(TypeError, match="'page' is not the request"):
        JsonRoute("/items", endpoint, methods=["GET"])


def test_every_gateway_route_is_a_json_route():
    assert ROUTES and all(isinstance(route, JsonRoute) for route in ROUTES)
