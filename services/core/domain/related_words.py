"""The related-words component of ranked recall, pure: a question's words
stand for their near neighbours among the shortlist's own words ("family"
for "kids", "fam", "husband"), judged by the embedder's vectors of single
words, and each candidate scores BM25 over those neighbours, each weighed
by its cosine to the question's word. A memory that shares no word with the
question, and is only loosely near it as a whole, is found by the words it
does use. Names are left out of the question's words (a name's neighbours
are other names), and so are the question's own words (the keyword arm
scores those).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from services.core.domain.query_focus import focus_terms
from services.core.domain.query_names import without_names
from services.core.domain.recall_text import tokens


def question_words(queries: Iterable[str]) -> list[str]:
    """The words of the queries that are expanded: no stopwords, no names, no framing words."""
    return list(dict.fromkeys(w for q in queries for w in focus_terms(without_names(q))))


def vocabulary(texts: Iterable[str], exclude: Iterable[str]) -> list[str]:
    """The distinct words of the texts (no stopwords), less `exclude`."""
    left = set(exclude)
    return [w for w in dict.fromkeys(w for text in texts for w in tokens(text)) if w not in left]


def related_terms(
    words: Sequence[str],
    candidates: Sequence[str],
    vectors: Mapping[str, np.ndarray],
    *,
    threshold: float,
    per_word: int,
) -> dict[str, float]:
    """Each of `candidates` within `threshold` cosine of a question word (at
    most `per_word` of them a word, the nearest), with its best cosine.
    Vectors are unit length; a word without one is skipped."""
    pool = [w for w in candidates if w in vectors]
    asked = [w for w in words if w in vectors]
    if not pool or not asked or per_word <= 0:
        return {}
    matrix = np.stack([vectors[w] for w in pool])
    related: dict[str, float] = {}
    for word in asked:
        cosines = matrix @ vectors[word]
        nearest = np.argsort(-cosines, kind="stable")[:per_word]
        for i in nearest:
            cosine = float(cosines[i])
            if cosine < threshold:
                break
            related[pool[i]] = max(related.get(pool[i], 0.0), cosine)
    return related


def related_scores(related: Mapping[str, float], texts: Mapping[str, str], *, k1: float, b: float) -> dict[str, float]:
    """BM25 of each text over the related words, each weighed by its cosine,
    with document frequencies counted over these texts, scaled so the best
    text scores 1.0 (0 for every text when none holds a related word)."""
    if not related or not texts:
        return {key: 0.0 for key in texts}
    words = {key: tokens(text) for key, text in texts.items()}
    n = len(words)
    frequency = {w: 0 for w in related}
    for found in words.values():
        for w in set(found) & related.keys():
            frequency[w] += 1
    idf = {w: math.log(1.0 + (n - df + 0.5) / (df + 0.5)) for w, df in frequency.items()}
    average = sum(len(found) for found in words.values()) / n or 1.0
    scores = {}
    for key, found in words.items():
        norm = k1 * (1.0 - b + b * len(found) / average)
        total = 0.0
        for w in set(found) & related.keys():
            tf = found.count(w)
            total += related[w] * idf[w] * tf * (k1 + 1.0) / (tf + norm)
        scores[key] = total
    best = max(scores.values(), default=0.0)
    return {key: (s / best if best > 0 else 0.0) for key, s in scores.items()}
