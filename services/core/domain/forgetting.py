"""Forgetting: whether a memory is kept, archived or deleted. Pure, no I/O.

Off by default: a threshold of 0 turns its step off. When on, a memory whose
relevance score is below `delete_below` is deleted, below `archive_below`
archived, unless it is protected: importance at or above
`protect_importance`, younger than `protect_days` (by its timestamp), or of a
protected type (Decision and Insight by default). A memory without a score
yet (decay never ran over it) is kept: forgetting judges only scored memories.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum


class Verdict(StrEnum):
    """What forgetting does with one memory."""

    KEEP = "keep"
    ARCHIVE = "archive"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class ForgetPolicy:
    """The forgetting rules (settings CONSOLIDATION_FORGET_*); thresholds 0 = that step off."""

    archive_below: float = 0.0
    delete_below: float = 0.0
    protect_importance: float = 0.7
    protect_days: int = 90
    protected_types: frozenset[str] = frozenset({"Decision", "Insight"})

    @property
    def enabled(self) -> bool:
        """Whether forgetting can do anything at all."""
        return self.archive_below > 0 or self.delete_below > 0


def protection(*, type: str, importance: float, timestamp: datetime, now: datetime, policy: ForgetPolicy) -> str | None:
    """Why a memory may not be forgotten (a short reason), or None when it may."""
    if importance >= policy.protect_importance:
        return "importance"
    if now - timestamp < timedelta(days=policy.protect_days):
        return "young"
    if type in policy.protected_types:
        return "type"
    return None


def verdict(
    *,
    type: str,
    importance: float,
    timestamp: datetime,
    relevance_score: float | None,
    archived: bool,
    now: datetime,
    policy: ForgetPolicy,
) -> Verdict:
    """Keep, archive or delete. Deletion wins over archiving (an archived
    memory may still be deleted later); an archived memory is never archived
    again; a protected or unscored memory is always kept."""
    if not policy.enabled or relevance_score is None:
        return Verdict.KEEP
    if protection(type=type, importance=importance, timestamp=timestamp, now=now, policy=policy):
        return Verdict.KEEP
    if policy.delete_below > 0 and relevance_score < policy.delete_below:
        return Verdict.DELETE
    if policy.archive_below > 0 and relevance_score < policy.archive_below and not archived:
        return Verdict.ARCHIVE
    return Verdict.KEEP
