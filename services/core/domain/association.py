"""Creative association: which pairs of a sample to link, and how. Pure, no I/O.

From a sample of one tenant's memories with vectors, the pairs whose cosine
is at least `min_similarity` and that no edge joins yet become links, best
(most similar) first, at most `max_links` per run and `max_per_memory` per
memory (so one hub does not take the whole budget).

A link is DISCOVERED unless the contradiction rule holds, then CONTRADICTS.
The rule is conservative (a false CONTRADICTS misleads more than a missed
one): the pair is very similar (cosine ≥ `contradiction_similarity`, so they
speak of the same thing) and either exactly one of the two is negated (a
negation marker: not, never, cannot, no longer, n't, stopped, instead of,
anymore) or they hold opposing preference words (prefer/avoid, like/dislike,
love/hate, enable/disable, always/never, use/stop using via "stopped").
When an LLM judge is given, its answer replaces the rule for each pair.

Confidence on the edge: 0.5 + 0.4 × (cosine − min_similarity) / (1 −
min_similarity), in [0.5, 0.9]; a rule-made CONTRADICTS is capped at
`contradiction_confidence` (a judge's is not).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from services.core.domain.consolidation import MemorySample, unit_rows

#: The relation a discovered link gets: related, or related and conflicting.
DISCOVERED = "DISCOVERED"
CONTRADICTS = "CONTRADICTS"

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_NEGATIONS = frozenset({"not", "never", "stopped", "anymore", "cannot"})
_NEGATION_PHRASES = ("no longer", "instead of", "stop using", "stopped using", "gave up")
#: Opposing pairs: one side holds a word of the left set, the other of the right.
_OPPOSITES = (
    ({"prefer", "prefers", "preferred"}, {"avoid", "avoids", "avoided"}),
    ({"like", "likes", "liked"}, {"dislike", "dislikes", "disliked"}),
    ({"love", "loves", "loved"}, {"hate", "hates", "hated"}),
    ({"enable", "enables", "enabled"}, {"disable", "disables", "disabled"}),
    ({"always"}, {"never"}),
)


@dataclass(frozen=True, slots=True)
class AssociationPolicy:
    """The numbers of creative association (settings CONSOLIDATION_ASSOCIATION_*)."""

    sample_size: int = 200
    min_similarity: float = 0.8
    max_links: int = 50
    max_per_memory: int = 3
    contradiction_similarity: float = 0.85
    contradiction_confidence: float = 0.6


@dataclass(frozen=True, slots=True)
class Discovery:
    """A link creative association proposes between two memories of one tenant.

    `type` is DISCOVERED or CONTRADICTS; `similarity` the cosine of their
    vectors; `confidence` how sure the rule (or the judge) is, in [0, 1];
    `reason` a short why, kept on the edge."""

    source_id: str
    target_id: str
    type: str
    similarity: float
    confidence: float
    reason: str = ""


#: An LLM judge: (a, b, cosine) → "contradicts", "related" or "unrelated"
#: (no link), or None to fall back to the rule. The adapter lives outside the domain.
Judge = Callable[[MemorySample, MemorySample, float], str | None]


def pair_key(a: str, b: str) -> tuple[str, str]:
    """A pair of ids in a fixed order (an edge in either direction is the same pair)."""
    return (a, b) if a <= b else (b, a)


def candidate_pairs(
    samples: list[MemorySample], connected: set[tuple[str, str]], policy: AssociationPolicy
) -> list[tuple[MemorySample, MemorySample, float]]:
    """The pairs to link: cosine ≥ min_similarity, not in `connected`
    (pair_key order), most similar first (ties by ids), within max_links and
    max_per_memory."""
    kept, unit = unit_rows(samples)
    if len(kept) < 2:
        return []
    cosine = unit @ unit.T
    rows, cols = np.nonzero(np.triu(cosine >= policy.min_similarity, k=1))
    scored = sorted(
        ((float(cosine[i, j]), *pair_key(kept[i].id, kept[j].id), i, j) for i, j in zip(rows, cols, strict=True)),
        key=lambda t: (-t[0], t[1], t[2]),
    )
    chosen: list[tuple[MemorySample, MemorySample, float]] = []
    per_memory: Counter[str] = Counter()
    for similarity, first, second, i, j in scored:
        if len(chosen) >= policy.max_links:
            break
        if first == second or (first, second) in connected:
            continue
        if per_memory[first] >= policy.max_per_memory or per_memory[second] >= policy.max_per_memory:
            continue
        per_memory[first] += 1
        per_memory[second] += 1
        chosen.append((kept[i], kept[j], min(1.0, similarity)))
    return chosen


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def negated(text: str) -> bool:
    """Whether a text holds a negation marker (see the module docstring)."""
    lower = text.lower()
    words = _words(lower)
    return (
        bool(words & _NEGATIONS) or any(w.endswith("n't") for w in words) or any(p in lower for p in _NEGATION_PHRASES)
    )


def contradiction(a: str, b: str) -> str | None:
    """Why two texts on the same subject conflict ("negation" or
    "opposing:<word>/<word>"), or None. Similarity is the caller's check."""
    if negated(a) != negated(b):
        return "negation"
    words_a, words_b = _words(a), _words(b)
    for left, right in _OPPOSITES:
        for one, other in ((words_a, words_b), (words_b, words_a)):
            pos, neg = one & left, other & right
            if pos and neg and not (one & right) and not (other & left):
                return f"opposing:{min(pos)}/{min(neg)}"
    return None


def _confidence(similarity: float, policy: AssociationPolicy) -> float:
    span = max(1e-9, 1.0 - policy.min_similarity)
    position = min(1.0, max(0.0, (similarity - policy.min_similarity) / span))
    return round(0.5 + 0.4 * position, 4)


def classify(a: MemorySample, b: MemorySample, similarity: float, policy: AssociationPolicy) -> Discovery:
    """The link the rule makes of a candidate pair (source: the smaller id)."""
    source, target = pair_key(a.id, b.id)
    confidence = _confidence(similarity, policy)
    if similarity >= policy.contradiction_similarity:
        why = contradiction(a.content, b.content)
        if why:
            return Discovery(
                source, target, CONTRADICTS, similarity, min(confidence, policy.contradiction_confidence), why
            )
    return Discovery(source, target, DISCOVERED, similarity, confidence, "similar")


def judged(
    a: MemorySample, b: MemorySample, similarity: float, answer: str | None, policy: AssociationPolicy
) -> Discovery | None:
    """The link from a judge's answer: "contradicts", "related", "unrelated"
    (None: no link); any other answer (or None) falls back to the rule."""
    label = (answer or "").strip().lower()
    source, target = pair_key(a.id, b.id)
    confidence = _confidence(similarity, policy)
    if label == "contradicts":
        return Discovery(source, target, CONTRADICTS, similarity, confidence, "judge")
    if label == "related":
        return Discovery(source, target, DISCOVERED, similarity, confidence, "judge")
    if label == "unrelated":
        return None
    return classify(a, b, similarity, policy)


def discover(
    samples: list[MemorySample],
    connected: set[tuple[str, str]],
    policy: AssociationPolicy,
    judge: Judge | None = None,
) -> list[Discovery]:
    """The links of one run: candidate_pairs, each classified by the rule,
    or by `judge` when given (an async judge: call candidate_pairs, await
    it, then `judged`)."""
    links = []
    for a, b, similarity in candidate_pairs(samples, connected, policy):
        link = (
            judged(a, b, similarity, judge(a, b, similarity), policy) if judge else classify(a, b, similarity, policy)
        )
        if link is not None:
            links.append(link)
    return links
