"""Which new memories wait for a human review (docs/trust.md), pure.

A memory a rule catches is stored `pending_review`: every read but a read
by id withholds it until a `review` or `admin` caller approves (verified)
or rejects it (rejected, and a tombstone keeps its content out). The rules,
each a setting (REVIEW_*), are checked in this order and the first that
holds is recorded on the memory (review_rule), so the queue says why:

- tenant: the tenant reviews everything (REVIEW_TENANTS);
- low_confidence: a memory of one of REVIEW_LOW_CONFIDENCE_TYPES whose
  confidence is below REVIEW_CONFIDENCE_BELOW;
- fiction: the rule-based factuality labels the content FICTION (REVIEW_FICTION);
- contradicts: a CONTRADICTS edge names it as the newer memory (REVIEW_CONTRADICTIONS);
  the older one becomes disputed either way.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.core.domain.factuality import FICTION, assess, source_trust
from services.core.domain.model import Memory

TENANT = "tenant"
LOW_CONFIDENCE = "low_confidence"
FICTION_RULE = "fiction"
CONTRADICTS = "contradicts"
#: Every rule name, as the queue reports them.
RULES = (TENANT, LOW_CONFIDENCE, FICTION_RULE, CONTRADICTS)


@dataclass(frozen=True, slots=True)
class ReviewPolicy:
    """The review rules, from settings. The defaults review nothing."""

    tenants: frozenset[str] = frozenset()
    low_confidence_types: frozenset[str] = frozenset()
    confidence_below: float = 0.0
    fiction: bool = False
    contradictions: bool = False

    @property
    def reviews_anything(self) -> bool:
        return bool(self.tenants or self.low_confidence_types or self.fiction or self.contradictions)


def review_rule(memory: Memory, policy: ReviewPolicy) -> str | None:
    """The first rule that holds a new memory back for review, or None."""
    if memory.tenant in policy.tenants:
        return TENANT
    if memory.type in policy.low_confidence_types and memory.confidence < policy.confidence_below:
        return LOW_CONFIDENCE
    if policy.fiction:
        source = memory.metadata.get("source") if isinstance(memory.metadata, dict) else None
        if assess(memory.content, source_trust(source if isinstance(source, str) else None)).label == FICTION:
            return FICTION_RULE
    return None


def contradiction_holds(policy: ReviewPolicy) -> bool:
    """Whether a CONTRADICTS edge sends its newer memory to review."""
    return policy.contradictions
