"""Reading query parameters: text, lists, counts, numbers, flags and a
query embedding; a malformed one is a 400 naming it (counts excepted)."""

from __future__ import annotations

import math

from fastapi import Request

from gateway.envelope import ApiError, from_domain
from gateway.routes.body import INT32_MAX, INT32_MIN, no_nul
from services.core.domain.drafts import check_tag_limits
from services.core.domain.errors import InvalidArgument
from services.core.domain.values import finite_number

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off", "")


def query_list(request: Request, name: str) -> list[str]:
    """A repeatable query parameter; comma-separated values are split too."""
    values = [no_nul(value, name) for value in request.query_params.getlist(name)]
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def query_tags(request: Request, name: str) -> list[str]:
    """A list of tags to read by, capped like the tags a write sends
    (MEMORY_MAX_TAGS, MEMORY_MAX_TAG_CHARS, MEMORY_MAX_TAG_SEGMENTS): each
    tag costs the read a prefix lookup or a comparison per memory, so past
    a bound it is a 400 naming the parameter, as on the write side."""
    tags = query_list(request, name)
    try:
        return check_tag_limits(tags, request.app.state.settings.limits, name)
    except InvalidArgument as exc:
        raise from_domain(exc) from None


def query_text(request: Request, name: str) -> str:
    """A parameter's text, stripped ('' when absent)."""
    return no_nul(request.query_params.get(name) or "", name).strip()


def query_int(request: Request, name: str) -> int:
    """A count; anything but an integer is 0, which the services read as
    their default (AutoMem's clients rely on that leniency). A count past
    int32 is clamped: the services cap every count far below it."""
    try:
        value = int(query_text(request, name) or 0)
    except ValueError:
        return 0
    return min(max(value, INT32_MIN), INT32_MAX)


def query_limit(request: Request, name: str = "limit") -> int:
    """A page size as AutoMem reads it: a whole number is at least 1 (0 or a
    negative one is 1; the services cap the top), anything else is 0, which
    the services read as their default."""
    try:
        value = int(query_text(request, name))
    except ValueError:
        return 0
    return min(max(value, 1), INT32_MAX)


def query_float(request: Request, name: str) -> float | None:
    """A finite number, or None when absent."""
    text = query_text(request, name)
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ApiError(400, f"'{name}' must be a number, not {text!r}", "NOT_A_NUMBER") from None
    try:
        return finite_number(value, name)
    except InvalidArgument as exc:
        raise from_domain(exc) from None


def query_bool(request: Request, name: str) -> bool:
    """A flag: true/1/yes/on or false/0/no/off (absent: false)."""
    text = query_text(request, name).lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ApiError(400, f"'{name}' must be true or false, not {text!r}", "NOT_A_BOOLEAN")


def query_embedding(request: Request) -> list[float]:
    """`embedding` as comma-separated numbers (or a JSON list)."""
    text = query_text(request, "embedding").strip("[]")
    if not text:
        return []
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise ApiError(400, "'embedding' must be a comma-separated list of numbers", "INVALID_EMBEDDING") from None
    if not all(math.isfinite(v) for v in values):
        raise ApiError(400, "'embedding' must hold finite numbers", "INVALID_EMBEDDING")
    return values
