"""The models: the language model's steps, the embedder, the entity extractor."""

from __future__ import annotations

from typing import Protocol

from services.core.domain.classification import Classification
from services.core.domain.factuality import Factuality


class LanguageModel(Protocol):
    """The LLM steps of the write path: classification and summaries."""

    async def classify(self, content: str) -> Classification:
        """A type and confidence for content no regex matched; never raises:
        an empty, invalid or failed answer is the fallback (Memory, 0.3)."""

    async def summarize(self, content: str, target_length: int) -> str | None:
        """About `target_length` characters of summary, or None when the
        model is unavailable or its answer is unusable."""

    async def assess_factuality(self, content: str, source: str | None) -> Factuality | None:
        """A factuality label from the model, or None (the rules then decide)."""

    async def judge_association(self, first: str, second: str) -> str | None:
        """How two similar memories relate: "contradicts", "related" or
        "unrelated", or None when the model is unavailable or its answer
        unusable (creative association's rule then decides)."""


class Embedder(Protocol):
    """Turns text into vectors of a fixed dimension."""

    #: Length of every vector this embedder returns.
    dimension: int
    #: Provider and model, e.g. "local:all-MiniLM-L6-v2" (recorded with each vector).
    name: str

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit-length vector per text, in order. Raises on failure."""


class EntityExtractor(Protocol):
    """Entities by category ({tools, projects, people, concepts, organizations})."""

    def extract_many(self, texts: list[str]) -> list[dict[str, list[str]]]:
        """One entity map per text, in order (CPU-bound: call it off the loop)."""
