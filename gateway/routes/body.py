"""Reading a request body: strict JSON, its Content-Type, NUL characters and
the whole numbers a body may carry."""

from __future__ import annotations

import json
import math
import re

from fastapi import Request

from gateway.envelope import ApiError
from gateway.translate import require_object

#: A \\uD800-\\uDFFF escape: the only way a lone surrogate (which no UTF-8
#: encoder, protobuf's included, accepts) gets into a parsed body.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
#: Protobuf int32, the type of every count the services take.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
#: The integers a response can print: orjson, which renders them, stops at 64 bits.
INT_MIN, UINT64_MAX = -(2**63), 2**64 - 1


def _malformed(detail: str) -> ApiError:
    return ApiError(400, f"malformed JSON: {detail}", "MALFORMED_JSON")


def _no_constant(name: str) -> float:
    raise _malformed(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _malformed(f"the number {text[:40]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    """An integer of 64 bits at most (so it also fits a double, which protobuf
    and the stores need): a bigger one would be stored, then break every
    read that returns it."""
    value = int(text)
    if not INT_MIN <= value <= UINT64_MAX:
        raise _malformed(f"the number {text[:40]}{'...' if len(text) > 40 else ''} is out of range")
    return value


def _nul_at(value: object, path: str = "") -> str | None:
    """Where the first NUL character is (a key or a string), as a.b[2]; None when nowhere."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        where = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else key
        if isinstance(key, str) and "\x00" in key:
            return where
        if (found := _nul_at(item, where)) is not None:
            return found
    return None


def no_nul(text: str, where: str) -> str:
    """FalkorDB reads a query's parameters as C strings, so a NUL would cut
    the query short: refused here, naming where it was."""
    if "\x00" in text:
        raise ApiError(400, f"'{where}' must not contain NUL characters", "NUL_CHARACTER")
    return text


def decode_json(raw: bytes) -> object:
    """Strict JSON: UTF-8 (or UTF-16/32) text holding no NaN, Infinity,
    number beyond a double, lone surrogate or NUL character, nested within
    Python's recursion limit; anything else is a 400, never a 500."""
    try:
        value = json.loads(raw, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_bounded_int)
        if _SURROGATE_ESCAPE.search(raw):
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        if b"\\u0000" in raw and (where := _nul_at(value)) is not None:
            no_nul("\x00", where.replace("\x00", "\\u0000") or "request body")
    except RecursionError:
        raise _malformed("nested too deeply") from None
    except UnicodeEncodeError:
        raise _malformed("a string holds a lone surrogate escape, which is not Unicode text") from None
    except ValueError as exc:
        raise _malformed(str(exc)) from None
    return value


def is_json_media_type(content_type: str) -> bool:
    """application/json or application/<anything>+json, any case, with any
    parameters (charset=utf-8 ...)."""
    media = content_type.split(";", 1)[0].strip().lower()
    kind, _, subtype = media.partition("/")
    return kind == "application" and (subtype == "json" or (subtype.endswith("+json") and len(subtype) > 5))


def require_json_content_type(request: Request) -> None:
    """A body must come as JSON: any other Content-Type is a 415 naming it.

    A missing Content-Type is a 415 too. AutoMem reads bodies with Flask's
    request.get_json(silent=True), which ignores a body not labelled JSON,
    so a client sending none got a 400 there, never a stored memory; its MCP
    client and the documented curl calls always send application/json. So
    no working client leaves it out, and reading such a body anyway would
    take what a browser sends cross-site with no CORS preflight (a body
    without a Content-Type, like text/plain, needs none)."""
    content_type = request.headers.get("content-type", "").strip()
    if not content_type:
        raise ApiError(415, "Content-Type must be application/json; none was sent", "UNSUPPORTED_MEDIA_TYPE")
    if not is_json_media_type(content_type):
        shown = content_type[:100].encode("ascii", "backslashreplace").decode()
        raise ApiError(415, f"Content-Type must be application/json, got {shown!r}", "UNSUPPORTED_MEDIA_TYPE")


async def json_body(request: Request) -> object:
    """The request's JSON value; an empty body is a 400, a body sent as
    anything but JSON a 415."""
    raw = await request.body()
    if not raw.strip():
        raise ApiError(400, "request body must be a JSON object", "BODY_NOT_OBJECT")
    require_json_content_type(request)
    return decode_json(raw)


async def optional_json_object(request: Request) -> dict:
    """The JSON object sent, or {} when the body is empty (routes whose every
    field is optional, called without a body whatever the Content-Type); a
    body sent as anything but JSON is a 415."""
    raw = await request.body()
    if not raw.strip():
        return {}
    require_json_content_type(request)
    return require_object(decode_json(raw))


def body_count(body: dict, name: str) -> int:
    """An optional whole number in a body (0 when absent: the service's default)."""
    value = body.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"'{name}' must be a whole number", "NOT_AN_INTEGER")
    if not 0 <= value <= INT32_MAX:
        raise ApiError(400, f"'{name}' must be between 0 and {INT32_MAX}, got {value}", "OUT_OF_RANGE")
    return value
