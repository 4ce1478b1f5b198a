"""Which failures of a query allow sending it again: refused before it ran
(any query), lost mid-call (an idempotent one), or a timeout (none); and
whether a query is a read (idempotent)."""

from __future__ import annotations

import re

import redis.exceptions as redis_errors

from services.core.adapters.falkor.cluster import CLUSTER_REFUSALS

#: A clause that changes the graph: a query without one is a read, safe to send again.
_WRITE_CLAUSE = re.compile(r"\b(CREATE|MERGE|SET|DELETE|REMOVE)\b", re.IGNORECASE)


def not_sent(exc: BaseException) -> bool:
    """Errors raised before the query reached FalkorDB, or with FalkorDB
    refusing it unrun (still loading its data; on a cluster, its slot moved
    or has no master yet): any query may be sent again."""
    if isinstance(exc, CLUSTER_REFUSALS):
        return True
    if isinstance(exc, redis_errors.TimeoutError):
        return str(exc).startswith("Timeout connecting")
    if isinstance(exc, redis_errors.BusyLoadingError):
        return True
    if isinstance(exc, redis_errors.ConnectionError):
        # redis-py words a failed connect "Error <n> connecting to <host>" (or
        # "Error connecting to"); a connection lost after the command went out
        # reads "Connection closed by server" or "Error while reading ...".
        return "connecting to" in str(exc)
    return isinstance(exc, redis_errors.ResponseError) and str(exc).startswith("LOADING")


def retryable(exc: BaseException) -> bool:
    """Errors after which running the query again is harmless when it is
    idempotent: those of not_sent, and a connection lost mid-call (the query
    may have run). A timeout is not among them: FalkorDB stopped the query
    ("Query timed out"), or the reply was lost after it ran; running it again
    would cost the same time again."""
    return not_sent(exc) or isinstance(exc, redis_errors.ConnectionError)


def is_read(cypher: str) -> bool:
    """Whether a query has no clause that writes (so running it twice is harmless)."""
    return _WRITE_CLAUSE.search(cypher) is None


def timed_out(exc: BaseException) -> bool:
    """Whether a query failed on a time limit: FalkorDB's own, or no reply on the socket in time."""
    if isinstance(exc, redis_errors.TimeoutError):
        return not retryable(exc)
    return isinstance(exc, redis_errors.ResponseError) and str(exc).startswith("Query timed out")
