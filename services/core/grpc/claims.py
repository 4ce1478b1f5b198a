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
A claim names its audience, the service (ingest, recall, enrich,
consolidate) it is for: each service refuses a claim made for another, so
one captured on the plaintext plane cannot be replayed elsewhere. The roles
are the gateway's; `operator` (on no tenant's behalf, or across tenants) is
the only role every_tenant is taken from.
Pure: the clock is a parameter.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

#: Metadata key carrying the claim on every call.
CLAIM_METADATA_KEY = "x-memgrid-claim"
#: A tenant's own administration (its backups, audit, tombstones, reindex).
ADMIN_ROLE = "admin"
#: The role every-tenant operations need, and the only one a claim on no tenant's behalf may carry.
OPERATOR_ROLE = "operator"
#: Claim roles, weakest first; each includes the rights of those before it (the gateway's token roles).
ROLES = ("read", "write", "review", ADMIN_ROLE, OPERATOR_ROLE)
#: Mixed into every signature, so an HMAC made with the same key for anything
#: else can never pass as a claim.
_DOMAIN = b"memgrid-claim-v1."
#: A key shorter than this is refused (an HMAC key should carry >= 256 bits).
MIN_KEY_LENGTH = 32


class ClaimRefused(Exception):
    """A claim that does not stand; `reason` is stable (MISSING, MALFORMED,
    BAD_SIGNATURE, EXPIRED, WRONG_AUDIENCE), for the status and the refusal counter."""

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
    #: The services the claim is for (the gateway and the services sign one per call).
    audience: tuple[str, ...] = ()

    def allows(self, needed: str) -> bool:
        """Whether the claim's role includes `needed` (an unknown role includes nothing)."""
        return self.role in ROLES and ROLES.index(self.role) >= ROLES.index(needed)

    @property
    def operator(self) -> bool:
        """Whether the claim may act across tenants (every_tenant, no tenant's behalf)."""
        return self.role == OPERATOR_ROLE


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


def _audience(audience: str | Iterable[str]) -> list[str]:
    names = [audience] if isinstance(audience, str) else list(audience)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError("a claim names the service (or services) it is for")
    return names


def sign_claim(
    key: bytes,
    tenant: str | None,
    role: str,
    memory_limit: int | None = None,
    actor: str | None = None,
    ttl: float = 60.0,
    *,
    audience: str | Iterable[str],
    now: float | None = None,
) -> str:
    """A claim for `tenant` with `role`, for the service `audience` (or
    those services), valid for `ttl` seconds from `now`."""
    expires = (time.time() if now is None else now) + ttl
    body = {"t": tenant, "r": role, "e": round(expires, 3), "s": _audience(audience)}
    if memory_limit is not None:
        body["m"] = memory_limit
    if actor is not None:
        body["a"] = actor
    payload = _b64(json.dumps(body, separators=(",", ":"), ensure_ascii=True).encode("ascii"))
    return f"{payload}.{_mac(key, payload)}"


def verify_claim(key: bytes, token: str | None, *, audience: str, now: float | None = None, skew: float = 5.0) -> Claim:
    """The claim `token` carries, if it was signed with `key`, is for the
    service `audience` and has not expired (`skew` seconds of clock
    difference allowed); ClaimRefused otherwise."""
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
        memory_limit, actor, services = body.get("m"), body.get("a"), body.get("s")
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError):
        raise ClaimRefused("MALFORMED", "the call's claim is not a claim") from None
    if (
        not (services is None or (isinstance(services, list) and all(isinstance(n, str) for n in services)))
        or not isinstance(role, str)
        or not (tenant is None or (isinstance(tenant, str) and tenant))
        or not (memory_limit is None or (type(memory_limit) is int and memory_limit >= 0))
        or not (actor is None or isinstance(actor, str))
    ):
        raise ClaimRefused("MALFORMED", "the call's claim is not a claim")
    if (time.time() if now is None else now) > expires + skew:
        raise ClaimRefused("EXPIRED", "the call's claim has expired")
    if services is None or audience not in services:  # None: a claim made before claims named their service
        raise ClaimRefused("WRONG_AUDIENCE", f"the call's claim is not for the {audience} service")
    return Claim(tenant, role, memory_limit, actor, expires, tuple(services))


def claim_metadata(
    key: bytes,
    tenant: str | None,
    role: str,
    memory_limit: int | None = None,
    actor: str | None = None,
    ttl: float = 60.0,
    *,
    audience: str | Iterable[str],
) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying a fresh claim for the service `audience` (what tests and tools send)."""
    return ((CLAIM_METADATA_KEY, sign_claim(key, tenant, role, memory_limit, actor, ttl, audience=audience)),)


@dataclass(frozen=True)
class ClaimSigner:
    """Signs claims with one key and lifetime for one service, the audience;
    `actor` is the default actor (a service's own calls: `system:<service>`)."""

    key: bytes
    ttl_seconds: float = 60.0
    actor: str | None = None
    #: The service the claims are for ('': none yet, for_service names it).
    audience: str = ""

    def for_service(self, audience: str) -> ClaimSigner:
        """The same signer, signing claims for `audience`."""
        return replace(self, audience=audience)

    def metadata(
        self, tenant: str | None, role: str, memory_limit: int | None = None, actor: str | None = None
    ) -> tuple[tuple[str, str], ...]:
        """Call metadata with a claim fresh for this call, for the signer's service."""
        return claim_metadata(
            self.key, tenant, role, memory_limit, actor or self.actor, self.ttl_seconds, audience=self.audience
        )
