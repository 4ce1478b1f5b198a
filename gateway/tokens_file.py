"""Many tenants: MEMGRID_TOKENS_FILE, a JSON list of token entries.

    [{"token_sha256": "<hex sha256 of the token>", "tenant": "acme", "role": "write",
      "memory_limit": 10000, "id": "acme-ci"},
     {"token_sha256": "<hex sha256 of another token>", "role": "operator", "id": "ops"}]

`id` (optional) names the token in the audit log; without one, the first 12
hex digits of its digest do. Every entry but an operator's belongs to one
tenant; an `operator` entry (what crosses tenants: every_tenant, every
tenant's archives) belongs to none, so it names no `tenant` and no
`memory_limit`.

Only digests are stored, so the file holds no secret. The file is re-read when
it changes (size, mtime or inode differ), checked at most once per
`check_seconds`; a file that turns bad on reload is refused and the last good
one stays in force. Error messages name the entry and field, never a value (a
raw token pasted by mistake must not reach a log).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import structlog

log = structlog.get_logger()

#: Roles, weakest first; each includes every right of those before it. `admin`
#: manages its own tenant; `operator` (no tenant's) acts across tenants.
ROLES = ("read", "write", "review", "admin", "operator")
OPERATOR = "operator"
#: Tenant names become NATS subject tokens (memory.events.<tenant>.<kind>), so
#: only characters that survive there unchanged are allowed (no collisions).
TENANT_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
_DIGEST_PATTERN = re.compile(r"[0-9a-fA-F]{64}")
_FIELDS = {"token_sha256", "tenant", "role", "memory_limit", "id"}
#: A token's id, the audit log's actor: no ':' (`system:<service>` is the services' own).
TOKEN_ID_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_MISSING = (-1, -1, -1)  # the signature of a file that cannot be stat'ed


class TokensFileError(ValueError):
    """The tokens file cannot be used as it is."""


@dataclass(frozen=True, slots=True)
class TokenEntry:
    digest: bytes
    #: None for an operator, who belongs to no tenant.
    tenant: str | None
    role: str
    memory_limit: int | None = None
    #: Who the audit log records (never the token): the entry's `id`, or a digest prefix.
    token_id: str = field(default="", compare=False)


def mint_token(nbytes: int = 32) -> str:
    """A new random URL-safe token that never starts with '-'.

    A token is pasted as a shell argument (`memgrid tokens revoke TOKEN`,
    `--token TOKEN`); one starting with '-' (1 in 64 of token_urlsafe's) would
    be read as an option."""
    while True:
        token = secrets.token_urlsafe(nbytes)
        if not token.startswith("-"):
            return token


def token_digest(token: str) -> bytes:
    """The sha256 of a token, the only form in which tokens are compared."""
    return hashlib.sha256(token.encode()).digest()


def _entry(index: int, item: object) -> TokenEntry:
    where = f"entry {index}"
    if not isinstance(item, dict):
        raise TokensFileError(f"{where} must be a JSON object")
    unknown = sorted(set(item) - _FIELDS)
    if unknown:
        raise TokensFileError(f"{where}: unknown field(s) {', '.join(unknown)}")
    digest = item.get("token_sha256")
    if not isinstance(digest, str) or not _DIGEST_PATTERN.fullmatch(digest):
        raise TokensFileError(f"{where}: 'token_sha256' must be 64 hex characters (the sha256 of the token)")
    role = item.get("role")
    if role not in ROLES:
        raise TokensFileError(f"{where}: 'role' must be one of {', '.join(ROLES)}")
    tenant = item.get("tenant")
    if role == OPERATOR:
        # An operator crosses tenants: one naming a tenant would read as that tenant's admin, and is not.
        if "tenant" in item or "memory_limit" in item:
            raise TokensFileError(
                f"{where}: an 'operator' entry belongs to no tenant: it takes no 'tenant' or 'memory_limit'"
            )
    elif tenant is None:
        raise TokensFileError(f"{where}: 'tenant' is required (only an 'operator' entry names none)")
    elif not isinstance(tenant, str) or not TENANT_PATTERN.fullmatch(tenant):
        raise TokensFileError(f"{where}: 'tenant' must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'")
    limit = item.get("memory_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise TokensFileError(f"{where}: 'memory_limit' must be a whole number >= 0")
    token_id = item.get("id")
    if token_id is None:
        token_id = f"sha256-{digest[:12].lower()}"  # the digest's start: names the token, reveals nothing of it
    elif not isinstance(token_id, str) or not TOKEN_ID_PATTERN.fullmatch(token_id):
        raise TokensFileError(f"{where}: 'id' must be 1-64 characters of A-Z, a-z, 0-9, '_', '.' or '-'")
    return TokenEntry(bytes.fromhex(digest), tenant, role, limit, token_id)


def parse_tokens(text: str) -> dict[bytes, TokenEntry]:
    """The entries of a tokens file by digest; TokensFileError when malformed."""
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise TokensFileError(f"not valid JSON ({exc})") from None
    if not isinstance(items, list):
        raise TokensFileError("must be a JSON list of token entries")
    entries: dict[bytes, TokenEntry] = {}
    for index, item in enumerate(items):
        entry = _entry(index, item)
        if entry.digest in entries:
            raise TokensFileError(f"entry {index}: the same token_sha256 appears twice")
        entries[entry.digest] = entry
    return entries


def _signature(path: Path) -> tuple[int, int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size, stat.st_ino


class TokensFile:
    """The entries of a tokens file, kept current with the file.

    Raises TokensFileError at construction when the file is missing or
    malformed: the gateway refuses to start rather than lock everyone out."""

    def __init__(self, path: Path, *, check_seconds: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.path = Path(path)
        self._check_seconds = check_seconds
        self._clock = clock
        self._checked = clock()
        self._refused: tuple[int, int, int] | None = None  # the bad version already warned about
        try:
            self._signature = _signature(self.path)
            self._entries = parse_tokens(self.path.read_text())
        except OSError as exc:
            raise TokensFileError(f"tokens file {self.path}: cannot be read ({exc.strerror})") from None
        except TokensFileError as exc:
            raise TokensFileError(f"tokens file {self.path}: {exc}") from None

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, digest: bytes) -> TokenEntry | None:
        """The entry for a token digest, or None. The dict lookup runs on a
        sha256 digest, so its timing tells nothing usable about a token; the
        match is then confirmed with a constant-time compare."""
        self.refresh()
        entry = self._entries.get(digest)
        if entry is not None and hmac.compare_digest(entry.digest, digest):
            return entry
        return None

    def refresh(self) -> None:
        """Re-read the file if it changed (checked at most once per interval)."""
        now = self._clock()
        if now - self._checked < self._check_seconds:
            return
        self._checked = now
        try:
            signature = _signature(self.path)
        except OSError as exc:
            self._refuse(None, f"cannot be read ({exc.strerror})")
            return
        if signature == self._signature:
            self._refused = None  # back to the version in force
            return
        if signature == self._refused:
            return
        try:
            entries = parse_tokens(self.path.read_text())
        except OSError as exc:
            self._refuse(signature, f"cannot be read ({exc.strerror})")
            return
        except TokensFileError as exc:
            self._refuse(signature, str(exc))
            return
        self._entries, self._signature, self._refused = entries, signature, None
        log.info("tokens file reloaded", path=str(self.path), entries=len(entries))

    def _refuse(self, signature: tuple[int, int, int] | None, why: str) -> None:
        signature = signature or _MISSING
        if signature == self._refused:
            return  # warned about this one already
        self._refused = signature
        log.warning("tokens file refused; the last good version stays in force", path=str(self.path), error=why)
