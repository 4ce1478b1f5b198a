"""Recall's text analysis, pure: the words of a query or a memory, a light
stemmer, the commonest words of a sample, and BM25 with the document
frequency rules the keyword arm counts by."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_TOKEN = re.compile(r"[a-z0-9]+")
#: Words that carry no signal for the tag and exact-match components.
_STOPWORD_TEXT = """
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def all_words(text: str) -> list[str]:
    """Lowercase alphanumeric words, stopwords kept."""
    return _TOKEN.findall(text.lower())


def tokens(text: str) -> list[str]:
    """Lowercase alphanumeric words without stopwords."""
    return [t for t in all_words(text) if t not in STOPWORDS]


_SUFFIXES = ("ingly", "edly", "ing", "ies", "ied", "ed", "es", "ly", "s")


#: The bounds of the two caches below until a process sets its own: the
#: defaults of RECALL_STEM_CACHE_WORDS and RECALL_STEM_CACHE_TEXTS.
STEM_CACHE_WORDS = 1 << 16
STEM_CACHE_TEXTS = 1 << 14


@functools.lru_cache(maxsize=STEM_CACHE_WORDS)
def stem(word: str) -> str:
    """A light suffix stripper: enough to match plural and tense variants
    (memory/memories, database/databases, cache/cached/caching, class/classes).
    Cached: BM25 stems every word of a couple of hundred candidates per query,
    and words repeat."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):
                return word
            if suffix in ("ies", "ied"):
                return stem(word[: -len(suffix)] + "y")
            return word[: -len(suffix)]
    # A final e goes, as it does before -es, -ed and -ing.
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def common_words(texts: Iterable[str], count: int) -> list[str]:
    """At most `count` words found in the most texts (two at least), commonest
    first: in a sample of the corpus, the words whose document frequencies
    cost the most to count when a query first names them."""
    found: dict[str, int] = {}
    for text in texts:
        for word in set(tokens(text)):
            found[word] = found.get(word, 0) + 1
    return [w for w in sorted(found, key=lambda w: (-found[w], w)) if found[w] > 1][:count]


def _text_stems(text: str) -> tuple[str, ...]:
    """The stemmed words of a text, cached: BM25 re-reads the texts of the
    keyword arm's candidates on every query, and at scale the same texts
    come back for query after query."""
    return tuple(stem(t) for t in tokens(text))


text_stems = functools.lru_cache(maxsize=STEM_CACHE_TEXTS)(_text_stems)


def bound_stem_caches(words: int, texts: int) -> None:
    """Set the most words and texts whose stems are kept (a process's
    start-up, from its settings); what they held is dropped. Each is a
    process's memory: every new word or text of the corpus takes a place
    until the bound (docs/reliability.md has the cost of each)."""
    global stem, text_stems  # noqa: PLW0603  the module's caches, rebuilt once at start-up
    stem = functools.lru_cache(maxsize=words)(stem.__wrapped__)
    text_stems = functools.lru_cache(maxsize=texts)(_text_stems)


@dataclass(frozen=True, slots=True)
class TextHit:
    """A full-text arm's hit: the engine's score and the text it matched."""

    id: str
    score: float
    text: str = ""


def bm25(
    query_words: Iterable[str],
    texts: Mapping[str, str],
    document_frequency: Mapping[str, int],
    corpus_size: int,
    *,
    k1: float,
    b: float,
) -> dict[str, float]:
    """Okapi BM25 of each text for the query: term frequencies from the
    texts (light stemming), document frequencies from the full-text index
    (corpus-wide), Lucene's non-negative IDF, and the texts' mean length
    standing in for the corpus's. The engine's own scores rank poorly, so
    the keyword arm re-ranks its candidates with this."""
    words = list(dict.fromkeys(query_words))
    if not words or not texts:
        return {}
    terms = {i: text_stems(text) for i, text in texts.items()}
    average = sum(len(t) for t in terms.values()) / len(terms) or 1.0
    n = max(corpus_size, max(document_frequency.values(), default=0), 1)
    weights = {}
    for word in words:
        df = min(document_frequency.get(word, 0), n)
        weights[stem(word)] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    scores = {}
    for memory_id, stems in terms.items():
        length = len(stems)
        total = 0.0
        for word_stem, idf in weights.items():
            tf = stems.count(word_stem)
            if tf:
                total += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))
        scores[memory_id] = total
    return scores


#: How far past the document-frequency bound (max_df) words are still told
#: apart: when every query word is over the bound, the rarest is searched if
#: within this many times it, and BM25 counts frequencies this far (past it a
#: word's weight is small anyway).
DF_REACH = 10


def df_count_cap(max_df: int) -> int:
    """Where counting a word's document frequency can stop, for both rules above."""
    return DF_REACH * max_df + 1
