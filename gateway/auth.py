"""API tokens: Authorization: Bearer, X-API-Key, or ?api_key= (spec 003)."""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from fastapi import Request

from gateway.envelope import ApiError

TOKEN_FILE_NAME = "api_token"


@dataclass(frozen=True)
class Caller:
    tenant: str
    role: str


def presented_token(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return request.headers.get("x-api-key") or request.query_params.get("api_key") or None


class TokenAuth:
    """Single-tenant compatibility: one API token, tenant `default_tenant`;
    admin routes also need ADMIN_API_TOKEN in X-Admin-Token."""

    def __init__(self, api_token: str, default_tenant: str, admin_token: str | None = None):
        self._token = api_token.encode()
        self._tenant = default_tenant
        self._admin = admin_token.encode() if admin_token else None

    def authenticate_admin(self, request: Request) -> Caller:
        caller = self.authenticate(request)
        if self._admin is None:
            raise ApiError(403, "admin routes are disabled: ADMIN_API_TOKEN is not set", "PERMISSION_DENIED")
        presented = request.headers.get("x-admin-token", "")
        if not hmac.compare_digest(presented.encode(), self._admin):
            raise ApiError(403, "admin token required in X-Admin-Token", "PERMISSION_DENIED")
        return Caller(caller.tenant, "admin")

    def authenticate(self, request: Request) -> Caller:
        token = presented_token(request)
        if token is None:
            raise ApiError(401, "missing API token", "UNAUTHENTICATED")
        if not hmac.compare_digest(token.encode(), self._token):
            raise ApiError(401, "invalid API token", "UNAUTHENTICATED")
        return Caller(self._tenant, "write")


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
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never readable by others
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token, True
