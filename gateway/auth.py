"""API tokens (Authorization: Bearer, X-API-Key, or ?api_key=; docs/auth-and-tenants.md),
the caller they stand for, and roles.

Roles, each including the ones before it: read (every GET), write (create,
update, delete, associate, supersede), review (write, the human review of
memories and force past a tombstone), admin (everything of its own tenant,
admin routes included), operator (across tenants: every_tenant, every
tenant's archives and figures). An operator is a tokens-file entry of role
`operator`, which belongs to no tenant, or AUTOMEM_API_TOKEN with
X-Admin-Token (ADMIN_API_TOKEN)."""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from fastapi import Request

from gateway.envelope import ApiError
from gateway.tokens_file import OPERATOR, ROLES, TokensFile, mint_token, token_digest
from services.core.settings import GatewaySettings

TOKEN_FILE_NAME = "api_token"  # noqa: S105  a file name, not a password


@dataclass(frozen=True)
class Caller:
    """Who is calling: the tenant every call is scoped to, the role, and the
    tenant's memory limit (None: unlimited). An operator's tenant-scoped
    calls act on DEFAULT_TENANT, as the single token's do."""

    tenant: str
    role: str
    memory_limit: int | None = None
    #: True for the single-tenant AUTOMEM_API_TOKEN, which reaches admin
    #: routes only with X-Admin-Token, as the reference does.
    legacy: bool = False
    #: The token's id, the audit log's actor (never the token): `legacy` for AUTOMEM_API_TOKEN.
    token_id: str = field(default="", compare=False)  # names the caller; equality is its rights
    #: May act across tenants (every_tenant, every tenant's archives and figures): a tokens-file
    #: `operator`, or AUTOMEM_API_TOKEN with X-Admin-Token. A tenant's admin is not one.
    operator: bool = False


def role_allows(role: str, needed: str) -> bool:
    """Whether `role` includes the rights of `needed` (ROLES is ordered)."""
    return ROLES.index(role) >= ROLES.index(needed)


def presented_token(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return request.headers.get("x-api-key") or request.query_params.get("api_key") or None


def presented_admin_token(request: Request) -> str:
    """The admin token where AutoMem reads it: X-Admin-Token, X-Admin-Api-Key
    or ?admin_token= ('' when none is sent)."""
    return (
        request.headers.get("x-admin-token")
        or request.headers.get("x-admin-api-key")
        or request.query_params.get("admin_token")
        or ""
    )


class TokenAuth:
    """Both token sources: AUTOMEM_API_TOKEN (tenant `default_tenant`, role
    write; admin routes also need ADMIN_API_TOKEN in X-Admin-Token) and the
    tokens file (a tenant and role per token). Either may be absent.

    Tokens are compared as sha256 digests with hmac.compare_digest, so
    neither their content nor their length shows in the timing; they are
    never logged or echoed."""

    def __init__(
        self,
        api_token: str | None,
        default_tenant: str,
        admin_token: str | None = None,
        *,
        tokens: TokensFile | None = None,
        memory_limit: int | None = None,
    ):
        self._token = token_digest(api_token) if api_token else None
        self._tenant = default_tenant
        self._admin = token_digest(admin_token) if admin_token else None
        self._tokens = tokens
        self._memory_limit = memory_limit

    @classmethod
    def from_settings(cls, gateway: GatewaySettings, api_token: str | None) -> TokenAuth:
        """Raises TokensFileError when MEMGRID_TOKENS_FILE is set but unusable."""
        tokens = None
        if gateway.memgrid_tokens_file is not None:
            tokens = TokensFile(gateway.memgrid_tokens_file, check_seconds=gateway.tokens_file_check_seconds)
        return cls(
            api_token,
            gateway.default_tenant,
            gateway.admin_api_token,
            tokens=tokens,
            memory_limit=gateway.tenant_memory_limit,
        )

    @property
    def many_tenants(self) -> bool:
        """Whether tokens come from a tokens file (tenants other than the default)."""
        return self._tokens is not None

    def authenticate(self, request: Request) -> Caller:
        """The caller behind the presented token; 401 when there is none."""
        token = presented_token(request)
        if token is None:
            raise ApiError(401, "missing API token", "UNAUTHENTICATED")
        digest = token_digest(token)
        if self._tokens is not None and (entry := self._tokens.lookup(digest)) is not None:
            limit = entry.memory_limit if entry.memory_limit is not None else self._memory_limit
            if entry.role == OPERATOR:  # belongs to no tenant: its tenant-scoped calls are the default tenant's
                return Caller(self._tenant, OPERATOR, limit, token_id=entry.token_id, operator=True)
            assert entry.tenant is not None  # noqa: S101  narrows the type: the tokens file refuses an entry without one
            return Caller(entry.tenant, entry.role, limit, token_id=entry.token_id)
        if self._token is not None and hmac.compare_digest(digest, self._token):
            return Caller(self._tenant, "write", self._memory_limit, legacy=True, token_id="legacy")  # noqa: S106  the audit log's actor label, not a token
        raise ApiError(401, "invalid API token", "UNAUTHENTICATED")

    def authorize(self, request: Request, needed: str) -> Caller:
        """The caller, if their role includes `needed`; 401 or 403 otherwise."""
        caller = self.authenticate(request)
        if role_allows(caller.role, needed):
            return caller
        # The single-tenant token reviews with X-Admin-Token too: a deployment
        # of one token has no review token, and its admin is the operator.
        if needed in ("review", "admin", OPERATOR) and caller.legacy:
            self._check_admin_header(request)
            return replace(caller, role=OPERATOR, operator=True)
        raise ApiError(
            403, f"this token's role '{caller.role}' may not do this: it needs the '{needed}' role", "PERMISSION_DENIED"
        )

    def _check_admin_header(self, request: Request) -> None:
        if self._admin is None:
            raise ApiError(403, "admin routes are disabled: ADMIN_API_TOKEN is not set", "PERMISSION_DENIED")
        presented = presented_admin_token(request)
        if not hmac.compare_digest(token_digest(presented), self._admin):
            raise ApiError(403, "admin token required in X-Admin-Token", "PERMISSION_DENIED")


def load_or_create_token(data_dir: Path) -> tuple[str, bool]:
    """The token saved under the data dir, minted on first run.

    Returns (token, created)."""
    path = data_dir / TOKEN_FILE_NAME
    if path.exists():
        saved = path.read_text().strip()
        if saved:
            return saved, False
        path.unlink()  # an empty file would lock every client out
    data_dir.mkdir(parents=True, exist_ok=True)
    token = mint_token()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never readable by others
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token, True
