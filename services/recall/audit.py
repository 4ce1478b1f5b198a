"""The audit log's reads: one memory's history, the tenant's log page by
page, and verification of the tenant's hash chain."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime

from services.core.domain.audit import AuditEntry, Verification
from services.core.domain.errors import InvalidArgument
from services.core.domain.ids import validate_memory_id
from services.core.domain.model import EventKind
from services.core.domain.times import to_micros
from services.core.ports.audit import AuditReader

#: What `kind` may filter on: the event kinds (an entry's kind is its event's).
_KINDS = frozenset(kind.value for kind in EventKind)


@dataclass(frozen=True, slots=True)
class AuditLimits:
    default_limit: int
    max_limit: int
    verify_page: int


def _page_token(seq: int) -> str:
    return base64.urlsafe_b64encode(f"seq:{seq}".encode()).decode().rstrip("=")


def _after_seq(token: str) -> int:
    """The sequence a page token continues after (0: the start)."""
    if not token:
        return 0
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        prefix, _, seq = text.partition(":")
        if prefix == "seq" and seq.isdigit():
            return int(seq)
    except ValueError:
        pass
    raise InvalidArgument("PAGE_TOKEN_INVALID", "'page_token' is not one this listing gave", field="page_token")


class AuditReads:
    """History, listing and verify over the AuditReader port, one tenant at a time."""

    def __init__(self, audit: AuditReader, limits: AuditLimits):
        self._audit = audit
        self._limits = limits

    def _limit(self, limit: int) -> int:
        if limit < 0:
            raise InvalidArgument("LIMIT_INVALID", "'limit' must be 0 or more", field="limit")
        if limit > self._limits.max_limit:
            raise InvalidArgument("LIMIT_TOO_LARGE", f"'limit' must be at most {self._limits.max_limit}", field="limit")
        return limit or self._limits.default_limit

    async def history(self, tenant: str, memory_id: str, limit: int = 0) -> list[AuditEntry]:
        """The memory's entries, oldest first (also after it was deleted)."""
        memory_id = validate_memory_id(memory_id)
        return await self._audit.history(tenant, memory_id, self._limit(limit))

    async def list_entries(
        self,
        tenant: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        kind: str = "",
        memory_id: str = "",
        limit: int = 0,
        page_token: str = "",
    ) -> tuple[list[AuditEntry], str]:
        """A page of the tenant's log in sequence order, and the token of the next page ("" at the end)."""
        if since is not None and until is not None and until <= since:
            raise InvalidArgument("TIME_WINDOW_INVALID", "'until' must be after 'since'", field="until")
        if memory_id:
            memory_id = validate_memory_id(memory_id, "memory_id")
        kind = kind.strip().lower()
        if kind and kind not in _KINDS:
            raise InvalidArgument(
                "AUDIT_KIND_UNKNOWN", f"'kind' must be one of {', '.join(sorted(_KINDS))}", field="kind"
            )
        limit = self._limit(limit)
        entries = await self._audit.list_entries(
            tenant,
            after_seq=_after_seq(page_token),
            limit=limit,
            since_us=to_micros(since) if since is not None else None,
            until_us=to_micros(until) if until is not None else None,
            kind=kind,
            memory_id=memory_id,
        )
        more = len(entries) == limit
        return entries, _page_token(entries[-1].seq) if more else ""

    async def verify(self, tenant: str) -> tuple[Verification, int]:
        """Recompute the tenant's chain from entry 1; (the verdict, the tenant's last sequence)."""
        last = await self._audit.last_seq(tenant)
        check = Verification()
        after = 0
        page_size = self._limits.verify_page
        # A window of the sequence at a time (an index range); an empty one
        # before the counter's end is a removed entry, which finish() names.
        while check.ok and (
            page := await self._audit.list_entries(tenant, after_seq=after, limit=page_size, within=page_size)
        ):
            check.feed(page)
            after = page[-1].seq
        return check.finish(last), last
