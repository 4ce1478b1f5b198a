"""Idempotency keys: a request's claim on one. Pure, no I/O."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class IdempotencyClaim:
    """A request's claim on an idempotency key: the write happens only if
    this request (owner) holds the key, which expires at expires_us."""

    tenant: str
    key: str
    owner: str
    request_hash: str
    expires_us: int
