"""Task leases: which process runs a consolidation task (or a backup) for a tenant."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    """A task's lease on a tenant: who holds it, until when, and how far it got."""

    task: str
    tenant: str
    owner: str
    acquired_at: datetime
    expires_at: datetime
    progress: dict[str, Any] = field(default_factory=dict)
