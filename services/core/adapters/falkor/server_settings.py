"""FalkorDB's own settings that bound memgrid's queries and its writes' safety,
read at start-up (ensure_schema, through FalkorConnection.check_timeouts and
check_durability): the query timeouts and the append-only file, each logged
and warned about where it leaves a query unbounded or an acknowledged write
losable. Never a refusal: a managed server may not let us read or change them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import redis.exceptions as redis_errors
import structlog

log = structlog.get_logger()

#: Sends one command about the server (FalkorConnection._admin).
Admin = Callable[..., Awaitable[Any]]


def config_value(reply) -> int:
    """The value of a GRAPH.CONFIG GET reply ([name, value])."""
    value = reply[1] if isinstance(reply, (list, tuple)) and len(reply) == 2 else reply
    return int(value.decode() if isinstance(value, bytes) else value)


async def read_timeouts(admin: Admin, where: str) -> tuple[int, int] | None:
    """The server's (TIMEOUT_DEFAULT, TIMEOUT_MAX) in milliseconds (0: none),
    warned about where they leave queries unbounded: without TIMEOUT_MAX any
    other client's query can hold the server's threads (and every memgrid
    query behind it) for as long as it runs. None when the server does not
    let us read them."""
    try:
        default = config_value(await admin("GRAPH.CONFIG", "GET", "TIMEOUT_DEFAULT"))
        maximum = config_value(await admin("GRAPH.CONFIG", "GET", "TIMEOUT_MAX"))
    except (redis_errors.ResponseError, ValueError, TypeError) as exc:
        log.warning("could not read FalkorDB's query timeouts", where=where, error=str(exc))
        return None
    if not default or not maximum:
        log.warning(
            "FalkorDB has no query timeout set: a query sent without TIMEOUT runs until it ends",
            where=where,
            timeout_default_ms=default,
            timeout_max_ms=maximum,
            hint="load the module with TIMEOUT_DEFAULT and TIMEOUT_MAX (the devstack does)",
        )
    return default, maximum


def timeout_to_send(configured_ms: int, maximum_ms: int) -> int:
    """The TIMEOUT memgrid's queries carry: FALKORDB_QUERY_TIMEOUT_MS, brought
    down to the server's TIMEOUT_MAX (one above it makes FalkorDB refuse every
    query); warned about where it is changed or 0."""
    if maximum_ms and configured_ms > maximum_ms:
        log.warning(
            "FALKORDB_QUERY_TIMEOUT_MS is above the server's TIMEOUT_MAX; sending TIMEOUT_MAX instead",
            configured_ms=configured_ms,
            timeout_max_ms=maximum_ms,
        )
        configured_ms = maximum_ms
    if not configured_ms:
        log.warning("FALKORDB_QUERY_TIMEOUT_MS is 0: memgrid's queries carry no timeout of their own")
    return configured_ms


async def read_durability(admin: Admin, where: str, expected_fsync: str | None) -> tuple[str, str] | None:
    """The server's (appendonly, appendfsync), logged, and warned about where a
    write FalkorDB acknowledged could be lost on a crash beyond what
    FALKORDB_APPENDFSYNC (`expected_fsync`; None: not checked) accepts
    (docs/operations.md, Durability). None when the server does not answer
    CONFIG GET."""
    try:
        values = {}
        for name in ("appendonly", "appendfsync"):
            reply = await admin("CONFIG", "GET", name)
            value = reply.get(name) if isinstance(reply, dict) else (reply[1] if len(reply) == 2 else None)
            values[name] = value.decode() if isinstance(value, bytes) else str(value)
    except (redis_errors.ResponseError, TypeError, IndexError) as exc:
        log.warning("could not read FalkorDB's persistence settings", where=where, error=str(exc))
        return None
    log.info("falkordb durability", where=where, appendonly=values["appendonly"], appendfsync=values["appendfsync"])
    if values["appendonly"] != "yes":
        log.warning(
            "FalkorDB runs without its append-only file: a crash loses every write since the last snapshot",
            where=where,
            hint="start it with --appendonly yes (the devstack does)",
        )
    elif expected_fsync and values["appendfsync"] != expected_fsync:
        log.warning(
            "FalkorDB's appendfsync is not FALKORDB_APPENDFSYNC",
            where=where,
            server=values["appendfsync"],
            expected=expected_fsync,
        )
    return values["appendonly"], values["appendfsync"]
