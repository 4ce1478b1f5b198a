"""What a consolidation pass reports: its progress while it runs (GET
/consolidate/status), its counts and errors, a bounded sample of its
changes with before and after, and the records it had to skip.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

import structlog

from services.core.domain.consolidation import MemorySample

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class Change:
    """One change a pass made (or, dry, would make), for the report's sample."""

    memory_id: str
    action: str
    before: str
    after: str


@dataclass(slots=True)
class RunProgress:
    """A running pass, as GET /consolidate/status shows it: updated every page."""

    task: str
    tenant: str
    mode: str
    dry_run: bool
    started_at: datetime
    processed: int = 0
    total: int = 0
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class PassResult:
    """What a pass did: counts (or, dry, would have), errors, a sample of changes."""

    counts: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    sample: list[Change] = field(default_factory=list)


#: Called after every page: lets the runner renew its lease (it raises when the lease was lost).
Heartbeat = Callable[[RunProgress], Awaitable[None]]


async def no_heartbeat(progress: RunProgress) -> None:
    return None


class Sampler:
    def __init__(self, result: PassResult, limit: int):
        self._result, self._limit = result, limit

    def add(self, memory_id: str, action: str, before: object, after: object) -> None:
        if len(self._result.sample) < self._limit:
            self._result.sample.append(Change(memory_id, action, _text(before), _text(after)))


#: The skipped records a pass names in its error (all are counted and logged).
_SKIPS_NAMED = 5


class Skips:
    """The records a pass could not read or score: each skipped, counted
    (`skipped`) and logged with its id; at the end, one error that names the
    first few, so the run is not reported as a plain success."""

    def __init__(self, result: PassResult, task: str, tenant: str):
        self._result, self._task, self._tenant = result, task, tenant
        self._named: list[str] = []

    def add(self, memory_id: str, why: str) -> None:
        # Counted only when something is skipped: a clean run's counts stay as they were.
        self._result.counts["skipped"] = self._result.counts.get("skipped", 0) + 1
        log.warning(
            "consolidation skipped a record", task=self._task, tenant=self._tenant, memory_id=memory_id, why=why
        )
        if len(self._named) < _SKIPS_NAMED:
            self._named.append(f"{memory_id} ({why})")

    def close(self) -> None:
        skipped = self._result.counts.get("skipped", 0)
        if skipped:
            more = f" and {skipped - len(self._named)} more" if skipped > len(self._named) else ""
            self._result.errors.append(
                f"skipped {skipped} record(s) it could not read or score: {'; '.join(self._named)}{more}"
            )


def readable(samples: list[MemorySample], skips: Skips) -> list[MemorySample]:
    """The samples the store could read; each other one skipped and counted."""
    kept = []
    for sample in samples:
        if sample.unreadable:
            skips.add(sample.id, sample.unreadable)
        else:
            kept.append(sample)
    return kept


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6f}"
    return str(value)
