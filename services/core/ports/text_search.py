"""Recall's full-text arms and the word statistics behind them."""

from __future__ import annotations

from typing import Protocol

from services.core.domain.recall_request import Scope
from services.core.domain.recall_text import TextHit


class TextSearch(Protocol):
    """The full-text arms of ranked recall and the word statistics behind
    them, per tenant."""

    async def search_text(
        self,
        scope: Scope,
        arm: str,
        words: list[str],
        limit: int,
        *,
        max_df: int | None = None,
        scan: int | None = None,
    ) -> list[TextHit]:
        """A full-text arm (keyword, tag, metadata) within the scope, best
        first, with the text matched; words in more than max_df memories are
        left out (when all are, the rarest is searched), and about scan
        matches at most are read."""

    async def document_frequencies(
        self, tenant: str, field: str, words: list[str], *, cap: int | None = None, recount: bool = False
    ) -> dict[str, int]:
        """How many of the tenant's memories hold each word in a full-text
        field (cached per tenant; recount: counted again and cached)."""

    async def arm_frequencies(self, tenant: str, arms: list[str], words: list[str], *, cap: int) -> None:
        """Count and cache, in one query, the tenant's frequencies search_text reads first for these arms."""

    async def sample_texts(self, tenant: str, field: str, size: int) -> list[str]:
        """A random sample of the tenant's memories' texts in a full-text field."""
