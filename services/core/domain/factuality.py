"""Factuality of a memory: a label, a confidence
and the reason, assessed by rules (no model), and promoted by corroboration
from other sources."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

FACT = "FACT"
UNVERIFIED = "UNVERIFIED"
FICTION = "FICTION"
LABELS: tuple[str, ...] = (FACT, UNVERIFIED, FICTION)

#: Base trust per connector.
SOURCE_TRUST: dict[str, float] = {
    "gmail": 0.95,
    "slack": 0.90,
    "photos": 0.85,
    "locations": 0.85,
    "whatsapp": 0.80,
    "imessage": 0.80,
    "manual": 0.70,
}
DEFAULT_TRUST = 0.70

#: Trust from which a specific, unhedged statement is a FACT on its own.
HIGH_TRUST = 0.9
#: assess(): the starting confidence is TRUST_WEIGHT * source trust, then each
#: kind of specific detail adds SPECIFICITY_BONUS and each hedge removes
#: HEDGE_PENALTY (at most MAX_CUES of each count), clamped to the bounds.
TRUST_WEIGHT = 0.7
SPECIFICITY_BONUS = 0.05
HEDGE_PENALTY = 0.10
MAX_CUES = 3
MIN_CONFIDENCE = 0.05
MAX_CONFIDENCE = 0.95
#: FICTION confidence: one cue, plus a bonus for each further cue, capped.
FICTION_CONFIDENCE = 0.6
FICTION_BONUS = 0.1
MAX_FICTION_CONFIDENCE = 0.9
#: corroborate(): confidence by the number of other sources that support a memory.
CORROBORATED_BY_MANY = 0.90
CORROBORATED_BY_ONE = 0.80
SAME_SOURCE_ONLY = 0.65

HEDGE_CUES: tuple[str, ...] = (
    "i think", "i guess", "i believe", "i heard", "maybe", "perhaps", "probably", "possibly", "might",
    "may be", "could be", "not sure", "unsure", "rumor", "rumour", "allegedly", "apparently", "supposedly",
    "seems", "seemed", "kind of", "sort of", "unconfirmed", "if i remember", "iirc",
)  # fmt: skip
FICTION_CUES: tuple[str, ...] = (
    "imagine", "what if", "once upon a time", "in the story", "in my story", "in the novel", "in the movie",
    "in the game", "joke", "jokes", "joking", "just kidding", "pretend", "hypothetically", "hypothetical",
    "let's say", "fictional", "make-believe", "role-play", "roleplay", "daydream", "fairy tale",
)  # fmt: skip

_MONTHS = (
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
#: Kinds of specific detail, checked in this order; each match is removed
#: before the next kind, so "2024-03-15" is a date and not also a number.
_SPECIFICS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "date",
        re.compile(
            rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}[/.]\d{{1,2}}[/.]\d{{2,4}}\b"
            rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}})?"
            rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\b(?:,?\s+\d{{4}})?"
            rf"|\b(?:Q[1-4]\s+)?(?:19|20)\d{{2}}\b",
            re.IGNORECASE,
        ),
    ),
    ("time", re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\s*(?:[ap]\.?m\.?)?|\b\d{1,2}\s*[ap]\.?m\.?(?!\w)", re.IGNORECASE)),
    (
        "amount",
        re.compile(
            r"[$€£¥]\s?\d[\d,.]*(?:\s?[kmb]n?\b)?|\b\d[\d,.]*\s?(?:%|percent\b|usd\b|eur\b|gbp\b|dollars\b|euros\b)",
            re.IGNORECASE,
        ),
    ),
    ("number", re.compile(r"\b\d[\d,.]*\b")),
)
_SENTENCE_ENDS = ".!?:;\"'(“"
_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*")
_NOT_PROPER = frozenset({"I", "I'm", "I've", "I'll", "I'd", "OK"})


@dataclass(frozen=True, slots=True)
class Factuality:
    """A factuality assessment: label (FACT, UNVERIFIED or FICTION),
    confidence in [0, 1] and a human-readable rationale."""

    label: str
    confidence: float
    rationale: str

    def __post_init__(self) -> None:
        if self.label not in LABELS:
            raise ValueError(f"factuality label must be one of {', '.join(LABELS)}, not {self.label!r}")
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"factuality confidence must be within [0, 1], not {self.confidence}")

    def to_dict(self) -> dict[str, str | float]:
        """The stored JSON shape: {label, confidence, rationale}."""
        return {"label": self.label, "confidence": self.confidence, "rationale": self.rationale}


def source_trust(source: str | None, default: float = DEFAULT_TRUST) -> float:
    """The base trust of a connector (case-insensitive), or `default` for an unknown one."""
    return SOURCE_TRUST.get((source or "").strip().lower(), default)


def _cue_pattern(cues: Iterable[str]) -> re.Pattern[str]:
    body = "|".join(re.escape(c).replace(r"\ ", r"\s+") for c in sorted(cues, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{body})(?!\w)", re.IGNORECASE)


_HEDGES = _cue_pattern(HEDGE_CUES)
_FICTION = _cue_pattern(FICTION_CUES)


def _cues(pattern: re.Pattern[str], text: str) -> list[str]:
    found = dict.fromkeys(" ".join(m.group().lower().split()) for m in pattern.finditer(text))
    return list(found)


def specifics(text: str) -> list[str]:
    """The kinds of specific detail in a text: date, time, amount, number,
    proper noun (a capitalised word that does not start a sentence)."""
    kinds = []
    rest = text
    for kind, pattern in _SPECIFICS:
        if pattern.search(rest):
            kinds.append(kind)
            rest = pattern.sub(" ", rest)
    for m in _CAPITALISED.finditer(text):
        before = text[: m.start()].rstrip()
        if m.group() not in _NOT_PROPER and before and before[-1] not in _SENTENCE_ENDS:
            kinds.append("proper noun")
            break
    return kinds


def _quoted(cues: list[str]) -> str:
    return ", ".join(f"'{c}'" for c in cues) if cues else "none"


def assess(text: str, source_trust: float) -> Factuality:
    """The rule-based factuality of a text from a source of the given trust.

    Fiction cues ("imagine", "what if", "joke"...) make it FICTION. Otherwise it
    is UNVERIFIED, or FACT when the source trust is at least HIGH_TRUST, the
    text has a specific detail and no hedge. Confidence starts from the source
    trust, rises with each kind of specific detail and falls with each hedge.
    """
    trust = min(1.0, max(0.0, source_trust))
    fiction = _cues(_FICTION, text)
    if fiction:
        confidence = min(MAX_FICTION_CONFIDENCE, FICTION_CONFIDENCE + FICTION_BONUS * (len(fiction) - 1))
        return Factuality(FICTION, round(confidence, 3), f"hypothetical or fictional cues: {_quoted(fiction)}")
    hedges = _cues(_HEDGES, text)
    details = specifics(text)
    confidence = (
        TRUST_WEIGHT * trust
        + SPECIFICITY_BONUS * min(len(details), MAX_CUES)
        - HEDGE_PENALTY * min(len(hedges), MAX_CUES)
    )
    confidence = round(min(MAX_CONFIDENCE, max(MIN_CONFIDENCE, confidence)), 3)
    label = FACT if trust >= HIGH_TRUST and details and not hedges else UNVERIFIED
    rationale = (
        f"source trust {trust:.2f}; specific details: {', '.join(details) or 'none'}; hedging: {_quoted(hedges)}"
    )
    if label == FACT:
        rationale = f"high-trust source with specific details; {rationale}"
    return Factuality(label, confidence, rationale)


def corroborate(current: Factuality, supporting_sources: Iterable[str], own_source: str) -> Factuality:
    """Promotion by the sources of the memories that support this one.

    Distinct sources other than `own_source` (case-insensitive) count: two or
    more make it FACT at 0.90, one makes it FACT at 0.80; supports from the
    same source only leave the label and raise the confidence to 0.65. It never
    demotes: a FACT stays FACT and no confidence goes down. Only UNVERIFIED is
    promoted: FICTION means contradicted or flagged, and agreement from other
    memories does not undo that, so FICTION is returned unchanged.
    """
    own = own_source.strip().lower()
    supporters = {s.strip().lower() for s in supporting_sources if s and s.strip()}
    others = sorted(supporters - {own})
    if current.label == FICTION or not supporters:
        return current
    if others:
        target = CORROBORATED_BY_MANY if len(others) >= 2 else CORROBORATED_BY_ONE
        rationale = f"corroborated by {len(others)} other source(s): {', '.join(others)}"
        label = FACT
    else:
        target = SAME_SOURCE_ONLY
        rationale = f"supported only by other memories from {own}"
        label = current.label
    if label == current.label and target <= current.confidence:
        return current
    return Factuality(label, max(target, current.confidence), f"{rationale}; was {current.label} {current.confidence}")


#: Longest rationale kept from a model's answer.
MAX_RATIONALE_CHARS = 300


def parse_factuality(text: str | None) -> Factuality | None:
    """A model's JSON answer {label, confidence, rationale}, or None when it
    is unusable (the rules then decide)."""
    try:
        answer = json.loads(text or "")
    except ValueError:
        return None
    if not isinstance(answer, dict) or not isinstance(answer.get("label"), str):
        return None
    label = answer["label"].strip().upper()
    if label not in LABELS:
        return None
    confidence = answer.get("confidence")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)):
        return None
    rationale = answer.get("rationale")
    if not isinstance(rationale, str):
        rationale = ""
    return Factuality(label, min(1.0, max(0.0, float(confidence))), f"model: {rationale[:MAX_RATIONALE_CHARS]}")


def legacy_factuality(metadata: object, enriched: bool) -> dict | None:
    """The assessment an earlier release's enrichment stored in
    metadata.factuality, or None when the key holds anything else.

    Only a record enrichment processed (`enriched`) qualifies, and only the
    exact shape it wrote ({label, confidence, rationale}, a known label): a
    client's own metadata.factuality stays the client's."""
    if not enriched or not isinstance(metadata, dict):
        return None
    value = metadata.get("factuality")
    if not isinstance(value, dict) or set(value) != {"label", "confidence", "rationale"}:
        return None
    confidence = value["confidence"]
    if value["label"] not in LABELS or isinstance(confidence, bool) or not isinstance(confidence, (int, float)):
        return None
    return value if isinstance(value["rationale"], str) else None


def lift_factuality(metadata: dict, factuality: dict | None, enriched: bool) -> tuple[dict, dict | None]:
    """(metadata, factuality) with a legacy metadata.factuality moved out,
    when the record has no factuality of its own yet; otherwise unchanged."""
    if factuality is not None or (legacy := legacy_factuality(metadata, enriched)) is None:
        return metadata, factuality
    return {k: v for k, v in metadata.items() if k != "factuality"}, legacy
