"""The rules of the LLM steps of the write path: what the model is
asked, how its answer becomes a Classification or a summary, and the circuit
breaker that skips the model after a quota error. Pure: the adapter does I/O."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from services.core.domain.classification import FALLBACK, Classification
from services.core.domain.model import MEMORY_TYPES

#: The classification system prompt, verbatim from the reference (AutoMem).
CLASSIFICATION_SYSTEM_PROMPT = """\
You are a memory classification system. Classify each memory into exactly ONE of these types:
- Decision: Choices made, selected options, what was decided
- Pattern: Recurring behaviors, typical approaches, consistent tendencies
- Preference: Likes/dislikes, favorites, personal tastes
- Style: Communication approach, formatting, tone used
- Habit: Regular routines, repeated actions, schedules
- Insight: Discoveries, learnings, realizations, key findings
- Context: Situational background, what was happening, circumstances

Return JSON with: {"type": "<type>", "confidence": <0.0-1.0>}"""

#: Lowercase type names the model may answer with, mapped to a canonical type:
#: the canonical names themselves, and the legacy types of older AutoMem releases.
TYPE_ALIASES: dict[str, str] = {
    **{name.lower(): name for name in MEMORY_TYPES},
    "memory": "Context",
    "milestone": "Context",
    "analysis": "Insight",
    "observation": "Insight",
    "document": "Context",
    "meeting_notes": "Context",
    "template": "Pattern",
    "project": "Context",
    "issue": "Insight",
    "timeline": "Context",
    "organization": "Context",
    "person": "Context",
    "interests": "Preference",
    "personality": "Preference",
    "emotional_patterns": "Preference",
    "relationship_dynamics": "Preference",
    "personal_situation": "Context",
    "health_habits": "Habit",
    "practical_info": "Context",
    "communication": "Preference",
    "legal_analysis": "Insight",
}

#: Request parameters fixed by the reference (not deployment settings).
CLASSIFICATION_MAX_TOKENS = 50
LEGACY_TEMPERATURE = 0.3
#: Model families that reject max_tokens (and a non-default temperature).
COMPLETION_TOKENS_PREFIXES = ("o1", "o3", "o4", "gpt-4o", "gpt-4.1", "gpt-5")

#: What an answer with a type outside the vocabulary becomes.
UNMAPPED_TYPE = "Context"
UNMAPPED_CONFIDENCE = 0.5
#: The confidence of an answer that gives a type but no usable confidence.
MISSING_CONFIDENCE = 0.7

#: Roughly four characters per token; twice that budget so a summary is not cut mid-sentence.
_CHARS_PER_SUMMARY_TOKEN = 2


def uses_completion_tokens(model: str) -> bool:
    """Whether the model takes max_completion_tokens (and no temperature)."""
    return model.startswith(COMPLETION_TOKENS_PREFIXES)


def _token_limit(model: str, max_tokens: int) -> dict[str, Any]:
    if uses_completion_tokens(model):
        return {"max_completion_tokens": max_tokens}
    return {"max_tokens": max_tokens, "temperature": LEGACY_TEMPERATURE}


def classification_request(model: str, content: str, input_chars: int) -> dict[str, Any]:
    """Keyword arguments of the chat-completion call that classifies content,
    of which the model sees the first `input_chars` characters."""
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": CLASSIFICATION_SYSTEM_PROMPT},
            {"role": "user", "content": content[:input_chars]},
        ],
        "response_format": {"type": "json_object"},
        **_token_limit(model, CLASSIFICATION_MAX_TOKENS),
    }


def _canonical_type(value: str) -> str | None:
    name = value.strip()
    if name in MEMORY_TYPES:
        return name
    return TYPE_ALIASES.get(name.lower())


def _confidence(value: object) -> float:
    # bool is an int in Python, but `true` is not a confidence.
    if value is None or isinstance(value, bool):
        return MISSING_CONFIDENCE
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return MISSING_CONFIDENCE
    if math.isnan(number):
        return MISSING_CONFIDENCE
    return min(1.0, max(0.0, number))


def parse_classification(text: str | None) -> Classification:
    """The Classification in the model's answer, by the memory model's rules: aliases
    normalised, an unmappable type is Context 0.5, a missing confidence 0.7,
    and an empty or unusable answer the fallback (Memory 0.3)."""
    if not text or not text.strip():
        return FALLBACK
    try:
        answer = json.loads(text)
    except ValueError:
        return FALLBACK
    if not isinstance(answer, dict):
        return FALLBACK
    raw_type = answer.get("type")
    if not isinstance(raw_type, str) or not raw_type.strip():
        return FALLBACK
    canonical = _canonical_type(raw_type)
    if canonical is None:
        return Classification(UNMAPPED_TYPE, UNMAPPED_CONFIDENCE)
    return Classification(canonical, _confidence(answer.get("confidence")))


def summary_system_prompt(target_length: int) -> str:
    """The instruction for a summary of about `target_length` characters."""
    return (
        f"Summarize the following memory in about {target_length} characters. "
        "Preserve the key facts: names, numbers, dates, decisions and their reasons. "
        "Reply with the summary only, as plain text, with no preamble, quotes or markdown."
    )


def summary_request(model: str, content: str, target_length: int) -> dict[str, Any]:
    """Keyword arguments of the chat-completion call that summarises content."""
    max_tokens = max(CLASSIFICATION_MAX_TOKENS, target_length // _CHARS_PER_SUMMARY_TOKEN)
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": summary_system_prompt(target_length)},
            {"role": "user", "content": content},
        ],
        **_token_limit(model, max_tokens),
    }


def clean_summary(text: str | None, original: str) -> str | None:
    """The model's summary trimmed, or None when it is empty or no shorter
    than the original (then there is nothing to gain from storing it)."""
    if text is None:
        return None
    summary = text.strip()
    if not summary or len(summary) >= len(original):
        return None
    return summary


class CircuitBreaker:
    """Skips the model for `cooldown_seconds` after a quota error, so a
    spent quota costs one failed call per cooldown instead of one per write."""

    def __init__(self, *, cooldown_seconds: float, clock: Callable[[], float]):
        self._cooldown_seconds = cooldown_seconds
        self._clock = clock
        self._open_until: float | None = None

    def allow(self) -> bool:
        """Whether a call may go out now; the breaker closes once the cooldown is over."""
        if self._open_until is None:
            return True
        if self._clock() >= self._open_until:
            self._open_until = None
            return True
        return False

    def trip(self) -> None:
        """Open the breaker for the cooldown, counted from now."""
        self._open_until = self._clock() + self._cooldown_seconds

    @property
    def is_open(self) -> bool:
        """Whether calls are being skipped now."""
        return not self.allow()


#: The factuality assessment prompt.
FACTUALITY_SYSTEM_PROMPT = """You assess the factuality of a memory an AI agent stored. Label it:
- FACT: specific, verifiable, from a reliable source, stated without hedging
- UNVERIFIED: the default; plausible but single-source or vague
- FICTION: hypothetical, a joke, a story, or contradicted by what it says
Consider source reliability, specificity (dates, amounts, names) and hedging ("I think", "maybe").
Return JSON with: {"label": "<FACT|UNVERIFIED|FICTION>", "confidence": <0.0-1.0>, "rationale": "<one sentence>"}"""
FACTUALITY_MAX_TOKENS = 120


def factuality_request(model: str, content: str, source: str | None, input_chars: int) -> dict[str, Any]:
    """Keyword arguments of the chat-completion call that assesses factuality."""
    text = content[:input_chars]
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": FACTUALITY_SYSTEM_PROMPT},
            {"role": "user", "content": f"Source: {source or 'manual'}\nMemory: {text}"},
        ],
        "response_format": {"type": "json_object"},
        **_token_limit(model, FACTUALITY_MAX_TOKENS),
    }


#: The prompt of creative association's judge: how two similar memories relate.
ASSOCIATION_SYSTEM_PROMPT = """Two memories an AI agent stored are similar in meaning. Say how they relate:
- contradicts: they cannot both be true now (one negates, reverses or replaces the other)
- related: they speak of the same thing and agree or complement each other
- unrelated: the similarity is superficial
Return JSON with: {"relation": "<contradicts|related|unrelated>"}"""
ASSOCIATION_MAX_TOKENS = 20
#: The answers the judge may give (anything else: the rule decides).
ASSOCIATION_ANSWERS = ("contradicts", "related", "unrelated")


def association_request(model: str, first: str, second: str, input_chars: int) -> dict[str, Any]:
    """Keyword arguments of the chat-completion call that judges a pair of memories."""
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": ASSOCIATION_SYSTEM_PROMPT},
            {"role": "user", "content": f"Memory 1: {first[:input_chars]}\nMemory 2: {second[:input_chars]}"},
        ],
        "response_format": {"type": "json_object"},
        **_token_limit(model, ASSOCIATION_MAX_TOKENS),
    }


def parse_association(text: str | None) -> str | None:
    """The judge's answer (one of ASSOCIATION_ANSWERS), or None when unusable."""
    try:
        answer = json.loads(text or "")
    except ValueError:
        return None
    relation = answer.get("relation") if isinstance(answer, dict) else None
    if not isinstance(relation, str) or relation.strip().lower() not in ASSOCIATION_ANSWERS:
        return None
    return relation.strip().lower()
