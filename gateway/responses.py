"""JSON responses rendered by orjson, and the route class every router uses.

FastAPI turns a returned dict into JSON by walking every value in Python
(jsonable_encoder) and then json.dumps: for a memory with its 384-number
embedding that took longer than the rest of the gateway's work. orjson does
it in one pass in native code, prints numpy float32 arrays (embeddings) in
their shortest form, and a route's dict goes straight to it."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import orjson
from fastapi.routing import APIRoute
from starlette.responses import JSONResponse, Response

_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


class Json(JSONResponse):
    """A JSON response; NaN and infinities (which JSON has no word for) print as null."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=_OPTIONS)


class JsonRoute(APIRoute):
    """An APIRoute whose endpoint's dict becomes a Json response at the
    route's status code, skipping FastAPI's jsonable_encoder; a Response the
    endpoint returns passes through unchanged."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any):
        status = kwargs.get("status_code") or 200

        @functools.wraps(endpoint)
        async def respond(*args: Any, **named: Any) -> Any:
            result = await endpoint(*args, **named)
            return result if isinstance(result, Response) else Json(result, status_code=status)

        super().__init__(path, respond, **kwargs)
