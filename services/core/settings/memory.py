"""The memory model: its limits and defaults, the write path's rules, and which writes wait for review."""

from __future__ import annotations

from pydantic import Field

from services.core.domain.limits import Limits
from services.core.domain.review_policy import ReviewPolicy
from services.core.settings.base import Group


class MemorySettings(Group):
    """The memory model: what a memory may hold and how it is written (ingest; the gateway and recall
    apply its tag limits)."""

    # Memory model limits and defaults (docs/api.md describes the model).
    memory_content_soft_limit: int = 500  # longer content is summarised (the original kept in metadata)
    memory_content_hard_limit: int = 2000  # longer content is a 400
    default_importance: float = 0.5  # a memory's importance when none is sent
    explicit_type_confidence: float = 0.9  # the confidence of a type the client sent without one
    batch_max_items: int = Field(default=500, ge=1)  # memories in one POST /memory/batch
    # Write-side bounds (POST /memory, batch items, PATCH, supersede); past one, a 400 naming the field.
    # Segments are a tag's parts between ':' and '/': each makes a prefix, so their number bounds the cost.
    memory_max_tags: int = Field(default=50, ge=1)
    memory_max_tag_chars: int = Field(default=128, ge=1)  # characters of one tag
    memory_max_tag_segments: int = Field(default=10, ge=1)  # parts of one tag
    memory_max_metadata_bytes: int = Field(default=16 * 1024, ge=2)  # UTF-8 JSON as stored
    delete_by_tag_page_size: int = 200  # memories DELETE /memory/by-tag removes per graph query
    idempotency_ttl_seconds: float = 86_400.0  # how long an Idempotency-Key is remembered
    write_conflict_retries: int = 3  # a write that meets a concurrent change is retried this often, then a 409

    # Summaries of long content (with the language model).
    memory_auto_summarize: bool = True  # summarise content past MEMORY_CONTENT_SOFT_LIMIT (with an LLM)
    memory_summary_target_length: int = 300  # the length a summary aims at (characters)

    # Human review.
    #
    # Human review (services/core/domain/review_policy.py): the tenants whose
    # every new memory waits for review (stored pending_review, withheld until
    # a review or admin caller decides). The REVIEW_* defaults review nothing.
    review_tenants: list[str] = []
    review_low_confidence_types: list[str] = []  # e.g. ["Decision"]: these types are reviewed ...
    review_confidence_below: float = Field(default=0.6, ge=0, le=1)  # ... when their confidence is below this
    review_fiction: bool = False  # a new memory the factuality rules label FICTION is reviewed
    review_contradictions: bool = False  # the newer memory of a CONTRADICTS edge is reviewed

    def limits(self, vector_size: int) -> Limits:
        """The validation limits the domain applies (`vector_size`: VectorSettings.vector_size)."""
        return Limits(
            content_soft_limit=self.memory_content_soft_limit,
            content_hard_limit=self.memory_content_hard_limit,
            default_importance=self.default_importance,
            explicit_type_confidence=self.explicit_type_confidence,
            vector_size=vector_size,
            batch_max_items=self.batch_max_items,
            max_tags=self.memory_max_tags,
            max_tag_chars=self.memory_max_tag_chars,
            max_tag_segments=self.memory_max_tag_segments,
            max_metadata_bytes=self.memory_max_metadata_bytes,
        )

    @property
    def review_policy(self) -> ReviewPolicy:
        """Which new memories wait for review."""
        return ReviewPolicy(
            tenants=frozenset(self.review_tenants),
            low_confidence_types=frozenset(self.review_low_confidence_types),
            confidence_below=self.review_confidence_below,
            fiction=self.review_fiction,
            contradictions=self.review_contradictions,
        )
