"""JSON responses rendered by orjson, and the route class every router uses.

FastAPI turns a returned dict into JSON by walking every value in Python
(jsonable_encoder) and then json.dumps: for a memory with its 384-number
embedding that took longer than the rest of the gateway's work. orjson does
it in one pass in native code, prints numpy float32 arrays (embeddings) in
their shortest form, and a route's dict goes straight to it.

Every route reads its own body and query string (see gateway/openapi.py), so
FastAPI's per-request machinery (dependency solving, parameter validation,
the exit stacks for dependencies with yield) has nothing to do but costs
about a millisecond of CPU a request: JsonRoute serves a request with a
plan made once from the endpoint's signature instead. FastAPI still routes,
documents (OpenAPI) and answers errors through the app's handlers."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable
from typing import Any, TypeGuard

import orjson
from fastapi import params
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


class Json(JSONResponse):
    """A JSON response; NaN and infinities (which JSON has no word for) print as null."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=_OPTIONS)


#: How an endpoint argument is filled: from the request, a path parameter or a dependency.
_Source = Callable[[Request], Awaitable[Any]]


def _plan(path: str, endpoint: Callable[..., Any]) -> list[tuple[str, _Source]]:
    """One source per parameter of `endpoint`. The endpoints take only the
    Request, path parameters and dependencies of the request alone (the
    caller's role check); anything else is refused here, at startup, rather
    than silently left unfilled."""
    hints = typing.get_type_hints(endpoint)
    sources: list[tuple[str, _Source]] = []
    for name, parameter in inspect.signature(endpoint).parameters.items():
        if hints.get(name) is Request:
            sources.append((name, _the_request))
        elif isinstance(parameter.default, params.Depends) and _of_the_request(parameter.default.dependency):
            sources.append((name, parameter.default.dependency))
        elif "{" + name + "}" in path:
            sources.append((name, _path_parameter(name)))
        else:
            raise TypeError(f"{endpoint.__name__}: {name!r} is not the request, a path parameter or a dependency")
    return sources


def _of_the_request(dependency: Callable[..., Any] | None) -> TypeGuard[_Source]:
    """Whether a dependency is an async function of the request alone."""
    if dependency is None or not inspect.iscoroutinefunction(dependency):
        return False
    return list(typing.get_type_hints(dependency).get(p) for p in inspect.signature(dependency).parameters) == [Request]


async def _the_request(request: Request) -> Request:
    return request


def _path_parameter(name: str) -> _Source:
    async def source(request: Request) -> str:
        return request.path_params[name]

    return source


class JsonRoute(APIRoute):
    """An APIRoute whose endpoint's dict becomes a Json response at the
    route's status code (a Response the endpoint returns passes through),
    served by a plan made once from the endpoint's signature. An exception
    goes to the app's handlers (gateway/envelope.py), as from any route."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any):
        super().__init__(path, endpoint, **kwargs)
        status = kwargs.get("status_code") or 200
        sources = _plan(path, endpoint)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            request = Request(scope, receive, send)
            result = await endpoint(**{name: await source(request) for name, source in sources})
            response = result if isinstance(result, Response) else Json(result, status_code=status)
            await response(scope, receive, send)

        self.app = app
