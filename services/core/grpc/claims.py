"""The signed claim every call to a service carries: who it is made for.

The gateway (and a service calling another) signs, per call, a short-lived
claim naming the tenant, the role, the tenant's memory limit and the actor;
each service verifies it (services/core/grpc/plane.py) and takes the caller
from it alone, so call metadata a client writes itself counts for nothing.

The form is compact and needs no library: base64url(JSON payload) "." base64url
(HMAC-SHA256 over a domain tag and the payload), with a key every process of
one deployment shares (SERVICE_CLAIM_KEY). HMAC rather than signatures with
key pairs: every signer is also a verifier here (enrich both serves and
calls), so a public key would buy nothing, and HMAC costs microseconds.
Pure: the clock is a parameter.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from dataclasses import dataclass

#: Metadata key carrying the claim on every call.
CLAIM_METADATA_KEY = "x-memgrid-claim"
#: The role every-tenant operations need.
ADMIN_ROLE = "admin"
#: Mixed into every signature, so an HMAC made with the same key for anything
#: else can never pass as a claim.
_DOMAIN = b"memgrid-claim-v1."
#: A key shorter than this is refused (an HMAC key should carry >= 256 bits).
MIN_KEY_LENGTH = 32


class ClaimRefused(Exception):
    """A claim that does not stand; `reason` is stable (MISSING, MALFORMED,
    BAD_SIGNATURE, EXPIRED), for the status and the refusal counter."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Claim:
    """A verified caller. `tenant` None: a call on no tenant's behalf (the
    every-tenant status); `expires` is a Unix time in seconds."""

    tenant: str | None
    role: str
    memory_limit: int | None = None
    actor: str | None = None
    expires: float = 0.0

    @property
    def admin(self) -> bool:
        """Whether the claim may ask for every tenant's data."""
        return self.role == ADMIN_ROLE


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, payload: str) -> str:
    return _b64(hmac.new(key, _DOMAIN + payload.encode("ascii"), hashlib.sha256).digest())


def check_key(key: bytes) -> bytes:
    """The key itself, or ValueError when it is too short to sign with."""
    if len(key) < MIN_KEY_LENGTH:
        raise ValueError(f"SERVICE_CLAIM_KEY must be at least {MIN_KEY_LENGTH} characters")
    return key


def sign_claim(
    key: bytes,
    tenant: str | None,
    role: str,
    memory_limit: int | None = None,
    actor: str | None = None,
    ttl: float = 60.0,
    *,
    now: float | None = None,
) -> str:
    """A claim for `tenant` with `role`, valid for `ttl` seconds from `now`."""
    expires = (time.time() if now is None else now) + ttl
    body = {"t": tenant, "r": role, "e": round(expires, 3)}
    if memory_limit is not None:
        body["m"] = memory_limit
    if actor is not None:
        body["a"] = actor
    payload = _b64(json.dumps(body, separators=(",", ":"), ensure_ascii=True).encode("ascii"))
    return f"{payload}.{_mac(key, payload)}"


def verify_claim(key: bytes, token: str | None, *, now: float | None = None, skew: float = 5.0) -> Claim:
    """The claim `token` carries, if it was signed with `key` and has not
    expired (`skew` seconds of clock difference allowed); ClaimRefused otherwise."""
    if not token:
        raise ClaimRefused("MISSING", f"call metadata '{CLAIM_METADATA_KEY}' is required")
    payload, dot, mac = token.partition(".")
    if not dot or not payload or not mac or not payload.isascii():
        raise ClaimRefused("MALFORMED", "the call's claim is not a claim")
    # The signature first: nothing of an unsigned payload is even parsed.
    if not hmac.compare_digest(mac.encode("ascii", "replace"), _mac(key, payload).encode("ascii")):
        raise ClaimRefused("BAD_SIGNATURE", "the call's claim is not signed with this deployment's key")
    try:
        body = json.loads(_unb64(payload))
        tenant, role, expires = body.get("t"), body["r"], float(body["e"])
        memory_limit, actor = body.get("m"), body.get("a")
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError):
        raise ClaimRefused("MALFORMED", "the call's claim is not a claim") from None
    if (
        not isinstance(role, str)
        or not (tenant is None or (isinstance(tenant, str) and tenant))
        or not (memory_limit is None or (type(memory_limit) is int and memory_limit >= 0))
        or not (actor is None or isinstance(actor, str))
    ):
        raise ClaimRefused("MALFORMED", "the call's claim is not a claim")
    if (time.time() if now is None else now) > expires + skew:
        raise ClaimRefused("EXPIRED", "the call's claim has expired")
    return Claim(tenant, role, memory_limit, actor, expires)


def claim_metadata(
    key: bytes,
    tenant: str | None,
    role: str,
    memory_limit: int | None = None,
    actor: str | None = None,
    ttl: float = 60.0,
) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying a fresh claim (what tests and tools send)."""
    return ((CLAIM_METADATA_KEY, sign_claim(key, tenant, role, memory_limit, actor, ttl)),)


@dataclass(frozen=True)
class ClaimSigner:
    """Signs claims with one key and lifetime; `actor` is the default actor
    (a service's own calls: `system:<service>`)."""

    key: bytes
    ttl_seconds: float = 60.0
    actor: str | None = None

    def metadata(
        self, tenant: str | None, role: str, memory_limit: int | None = None, actor: str | None = None
    ) -> tuple[tuple[str, str], ...]:
        """Call metadata with a claim fresh for this call."""
        return claim_metadata(self.key, tenant, role, memory_limit, actor or self.actor, self.ttl_seconds)
