"""Clustering: groups of similar memories, summarised as MetaPatterns. Pure, no I/O.

Greedy leader clustering over unit vectors: memories are taken in order of
importance (then id); each one not yet in a group leads a new group of every
ungrouped memory whose cosine to it is at least `min_similarity` (itself
included), at most `max_size` (the closest). Groups smaller than `min_size`
are dropped, and their members stay free for later leaders. Deterministic:
the same inputs give the same groups.

The summary is rule-made, no model: "<n> <dominant type> memories on
<w1>, <w2>, <w3>: <first sentence of the member closest to the centre>",
the words being the most common content words among the members (each
counted once per member, held by at least two), truncated to `summary_chars`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from services.core.domain.consolidation import MemorySample, unit_rows

_WORD = re.compile(r"[a-z][a-z0-9_-]{2,}")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
#: Words too common to say what a group is about.
_STOPWORDS = frozenset((
    "the", "and", "for", "with", "that", "this", "from", "are", "was", "were", "have", "has", "had", "but", "not",
    "you", "your", "our", "their", "they", "them", "its", "into", "about", "when", "then", "than", "there", "here",
    "what", "which", "who", "will", "would", "should", "could", "can", "use", "used", "using", "also", "just",
    "more", "most", "some", "any", "all", "each", "very", "been", "being", "over", "under", "after", "before",
    "because", "while", "where", "why", "how",
))  # fmt: skip
_THEME_WORDS = 3


@dataclass(frozen=True, slots=True)
class ClusterPolicy:
    """The numbers of clustering (settings CONSOLIDATION_CLUSTER_*)."""

    min_similarity: float = 0.75
    min_size: int = 3
    max_size: int = 50
    summary_chars: int = 240


@dataclass(frozen=True, slots=True)
class Cluster:
    """A group of similar memories of one tenant, as a MetaPattern records it.

    `member_ids` closest to the group's centre first; `cohesion` the members'
    mean cosine to the centre; `dominant_type` the most common type."""

    member_ids: tuple[str, ...]
    summary: str
    cohesion: float
    dominant_type: str

    @property
    def size(self) -> int:
        return len(self.member_ids)


def first_sentence(text: str) -> str:
    """The text up to its first sentence end (or all of it), on one line."""
    flat = " ".join(text.split())
    return _SENTENCE_END.split(flat, maxsplit=1)[0] if flat else ""


def summarize(members: list[MemorySample], central: MemorySample, policy: ClusterPolicy) -> tuple[str, str]:
    """(summary, dominant type) of a group (see the module docstring)."""
    dominant = Counter(m.type for m in members).most_common(1)[0][0]
    counts: Counter[str] = Counter()
    for m in members:
        counts.update({w for w in _WORD.findall(m.content.lower()) if w not in _STOPWORDS})
    themes = [w for w, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if n >= 2][:_THEME_WORDS]
    head = f"{len(members)} {dominant} memories"
    if themes:
        head += f" on {', '.join(themes)}"
    text = f"{head}: {first_sentence(central.content)}"
    if len(text) > policy.summary_chars:
        text = text[: max(0, policy.summary_chars - 1)].rstrip() + "…"
    return text, dominant


def cluster(samples: list[MemorySample], policy: ClusterPolicy) -> list[Cluster]:
    """The groups of the samples (see the module docstring), largest first."""
    kept, unit = unit_rows(samples)
    if len(kept) < max(1, policy.min_size):
        return []
    order = sorted(range(len(kept)), key=lambda i: (-kept[i].importance, kept[i].id))
    free = np.ones(len(kept), dtype=bool)
    groups: list[Cluster] = []
    for leader in order:
        if not free[leader]:
            continue
        cosine = unit @ unit[leader]
        near = np.nonzero(free & (cosine >= policy.min_similarity))[0]
        if len(near) < policy.min_size:
            continue
        chosen = sorted(near, key=lambda i: (-float(cosine[i]), kept[i].id))[: policy.max_size]
        free[chosen] = False
        centre = unit[chosen].mean(axis=0)
        centre /= max(1e-12, float(np.linalg.norm(centre)))
        to_centre = unit[chosen] @ centre
        ranked = sorted(range(len(chosen)), key=lambda k: (-float(to_centre[k]), kept[chosen[k]].id))
        members = [kept[chosen[k]] for k in ranked]
        summary, dominant = summarize(members, members[0], policy)
        groups.append(
            Cluster(
                member_ids=tuple(m.id for m in members),
                summary=summary,
                cohesion=round(float(to_centre.mean()), 4),
                dominant_type=dominant,
            )
        )
    return sorted(groups, key=lambda g: (-g.size, g.member_ids[0]))
