"""GRAPH.QUERY replies read without the client library's parser when they
hold only plain values (null, string, integer, boolean, double, and arrays
and maps of them), which is what the store's queries return on every hot path.

falkordb-py parses each cell of a compact reply with an awaited coroutine:
about 2 µs a value, and a recall reads around 1,500 of them (the keyword
arm's candidates, the shortlist's records, their relations). This reads the
same cells in one synchronous pass, a few times faster. A reply with anything
else (nodes, edges, paths, points, vectors, temporal values) goes to the
library's parser unchanged, so the results are the library's either way
(tests/integration/test_falkor_reply.py compares the two on real replies).
"""

from __future__ import annotations

from typing import Any

from falkordb.asyncio.query_result import QueryResult
from falkordb.helpers import stringify_param_value
from redis.exceptions import ResponseError

# The compact format's type codes (falkordb.asyncio.query_result.ResultSetScalarTypes).
_NULL, _STRING, _INTEGER, _BOOLEAN, _DOUBLE, _ARRAY, _MAP = 1, 2, 3, 4, 5, 6, 10


class _NotPlain(Exception):
    """A cell this reader leaves to the library."""


def params_header(params: dict[str, Any] | None) -> str:
    """The `CYPHER name=value ...` prefix that carries a query's parameters."""
    if not params:
        return ""
    return "CYPHER " + " ".join(f"{name}={param_text(value)}" for name, value in params.items()) + " "


#: A map key as the parameter text writes it ("`key`:"), by key: a batch's rows repeat the same few.
_KEYS: dict[str, str] = {}


def _key(key: str) -> str:
    text = _KEYS.get(key)
    if text is None:
        # The library's checks (no empty key, no backtick) and form, once a key.
        text = stringify_param_value({key: None})[1 : -len(":null}")] + ":"
        if len(_KEYS) < 10_000:
            _KEYS[key] = text
    return text


def param_text(value: Any) -> str:
    """What falkordb-py's stringify_param_value writes for `value`, in 0.6
    of its time for the types a write sends (exact str, int, float, bool,
    None, list, tuple, and dict with str keys; anything else goes to the
    library): a 500-memory batch's rows took about 8% of ingest's CPU in it.
    A unit test holds the two equal."""
    kind = type(value)
    if kind is str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if kind is int or kind is float or kind is bool:
        return str(value)
    if value is None:
        return "null"
    if kind is dict:
        if all(type(k) is str for k in value):
            return "{" + ",".join(_key(k) + param_text(v) for k, v in value.items()) + "}"
        return stringify_param_value(value)
    if kind is list or kind is tuple:
        return "[" + ",".join(map(param_text, value)) + "]"
    return stringify_param_value(value)


def _cell(cell: list) -> Any:
    kind, value = cell
    if kind == _STRING:
        return _text(value)
    if kind == _INTEGER:
        return int(value)
    if kind == _NULL:
        return None
    if kind == _DOUBLE:
        return float(value)
    if kind == _BOOLEAN:
        return value in ("true", b"true")
    if kind == _ARRAY:
        return [_cell(item) for item in value]
    if kind == _MAP:  # [key, cell, key, cell, ...]
        return {_text(value[i]): _cell(value[i + 1]) for i in range(0, len(value), 2)}
    raise _NotPlain


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


class Reply:
    """A query's rows, as the library's QueryResult.result_set holds them."""

    __slots__ = ("result_set",)

    def __init__(self, result_set: list[list[Any]]):
        self.result_set = result_set


async def read_reply(graph, response: list) -> Reply | QueryResult:
    """The rows of a compact GRAPH.QUERY reply; errors raise as the library raises them."""
    if isinstance(response[0], ResponseError):
        raise response[0]
    if isinstance(response[-1], ResponseError):
        raise response[-1]
    if len(response) == 1:  # statistics alone: a write that returns nothing
        return Reply([])
    try:
        return Reply([[_cell(cell) for cell in row] for row in response[1]])
    except _NotPlain:
        result = QueryResult(graph)
        await result.parse(response)
        return result
