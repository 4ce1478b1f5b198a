"""A candidate's memory, for the stages after the arms' look-up (where every candidate carries one)."""

from __future__ import annotations

from services.core.domain.model import Memory
from services.core.domain.recall_ranking import Candidate


def memory_of(candidate: Candidate) -> Memory:
    """The memory a candidate carries; a candidate past the look-up without one is a bug."""
    if candidate.memory is None:
        raise LookupError(f"candidate {candidate.id} reached a later stage without its memory")
    return candidate.memory
