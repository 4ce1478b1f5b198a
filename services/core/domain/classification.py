"""Regex classification of memory content, the free first step
before the LLM fallback."""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.core.domain.model import FALLBACK_TYPE

#: Patterns per type, checked in this order; the first type with a match wins.
PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Decision", (r"decided to", r"chose (\w+) over", r"going with", r"opted for")),
    ("Pattern", (r"usually", r"typically", r"tend to", r"often", r"consistently")),
    ("Preference", (r"prefer", r"like.*better", r"favorite", r"rather than", r"\balways use\b")),
    ("Style", (r"wrote.in.style", r"communicated", r"formatted as")),
    ("Habit", (r"\balways\b(?!\s+use\b)", r"every time", r"daily", r"weekly", r"routine")),
    ("Insight", (r"realized", r"discovered", r"learned that", r"figured out")),
    ("Context", (r"during", r"while working on", r"in the context of", r"when")),
)
_COMPILED = tuple((name, tuple(re.compile(p, re.IGNORECASE) for p in pats)) for name, pats in PATTERNS)

#: Confidence of the regex step: 0.6 for one match, more for several, capped.
SINGLE_MATCH_CONFIDENCE = 0.6
PER_MATCH_BONUS = 0.1
MAX_REGEX_CONFIDENCE = 0.95
#: What the classifier returns when nothing usable is found.
FALLBACK_CONFIDENCE = 0.3


@dataclass(frozen=True, slots=True)
class Classification:
    type: str
    confidence: float


def classify_by_patterns(content: str) -> Classification | None:
    """The first type whose patterns match, with the spec's confidence rule."""
    for name, patterns in _COMPILED:
        matches = sum(1 for p in patterns if p.search(content))
        if matches == 1:
            return Classification(name, SINGLE_MATCH_CONFIDENCE)
        if matches > 1:
            return Classification(name, min(MAX_REGEX_CONFIDENCE, SINGLE_MATCH_CONFIDENCE + PER_MATCH_BONUS * matches))
    return None


FALLBACK = Classification(FALLBACK_TYPE, FALLBACK_CONFIDENCE)
