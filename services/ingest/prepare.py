"""A new memory from a draft: validated, summarised when long, classified,
and sent to review when a rule says so."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from services.core.domain.classification import FALLBACK, Classification, classify_by_patterns
from services.core.domain.drafts import Draft, build_memory, validate_content, validate_metadata
from services.core.domain.limits import Limits
from services.core.domain.model import Memory
from services.core.domain.review_policy import ReviewPolicy, review_rule
from services.core.domain.trust import TrustState
from services.core.ports import LanguageModel


@dataclass(frozen=True, slots=True)
class Summarised:
    original_length: int
    summarized_length: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPreparation:
    limits: Limits
    llm: LanguageModel | None
    auto_summarize: bool
    summary_target_length: int
    review: ReviewPolicy
    new_id: Callable[[], str]

    async def _classify(self, content: str) -> Classification:
        """Regex first; the LLM only when nothing matched and a key is set."""
        found = classify_by_patterns(content)
        if found is not None:
            return found
        if self.llm is None:
            return FALLBACK
        return await self.llm.classify(content)

    async def _summarise(self, draft: Draft) -> tuple[Draft, Summarised | None]:
        """Content between the soft and hard limits becomes a summary; the
        original is kept in metadata.original_content."""
        content = draft.content
        if not (self.auto_summarize and self.llm and len(content) > self.limits.content_soft_limit):
            return draft, None
        summary = await self.llm.summarize(content, self.summary_target_length)
        if not summary:
            return draft, None
        return replace(draft, content=summary, original_content=content), Summarised(len(content), len(summary))

    async def prepare(self, tenant: str, draft: Draft, now: datetime) -> tuple[Memory, Summarised | None]:
        """The memory `draft` makes, with a new id, and its summary's lengths when it was summarised."""
        validate_content(draft.content, self.limits)
        validate_metadata(draft.metadata_json)  # a bad body is refused before the model is asked to summarise it
        draft, summarised = await self._summarise(draft)
        explicit = draft.type is not None and draft.type.strip()
        classification = FALLBACK if explicit else await self._classify(draft.content)
        memory = build_memory(
            draft,
            memory_id=self.new_id(),
            tenant=tenant,
            now=now,
            limits=self.limits,
            classify=lambda _content: classification,
        )
        rule = review_rule(memory, self.review) if memory.trust_state == TrustState.ACTIVE else None
        if rule is not None:
            memory = replace(memory, trust_state=TrustState.PENDING_REVIEW.value, review_rule=rule)
        return memory, summarised

    async def prepare_all(
        self, tenant: str, drafts: list[Draft], now: datetime
    ) -> list[tuple[Memory, Summarised | None]]:
        """Each draft prepared, in order; at once only where a language model
        may be asked: without one nothing awaits, and a task for each of a
        batch's 500 items cost more than the items' own preparation."""
        if self.llm is None:
            return [await self.prepare(tenant, draft, now) for draft in drafts]
        return list(await asyncio.gather(*(self.prepare(tenant, draft, now) for draft in drafts)))
