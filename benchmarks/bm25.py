"""Okapi BM25 over a small in-memory corpus: the lexical reference that recall
quality is measured against.

Tokens are lowercase runs of ASCII letters and digits (so "don't" gives "don"
and "t"), minus NLTK's English stopword list, which already holds such
fragments. IDF is Lucene's ln(1 + (N - df + 0.5) / (df + 0.5)), never
negative, so a term found in most turns still counts a little rather than
pushing a turn down (rank-bm25's Okapi floors it with an epsilon instead).
"""

from __future__ import annotations

import math
import re
from collections import Counter

_TOKEN = re.compile(r"[a-z0-9]+")

#: NLTK's English stopword list (179 words; those with an apostrophe never match a token).
_NLTK_ENGLISH = """
    i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his
    himself she she's her hers herself it it's its itself they them their theirs themselves what which who whom this
    that that'll these those am is are was were be been being have has had having do does did doing a an the and but
    if or because as until while of at by for with about against between into through during before after above below
    to from up down in out on off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will just don don't should
    should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't
    haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't
    weren weren't won won't wouldn wouldn't
"""
STOPWORDS = frozenset(_NLTK_ENGLISH.split())


def tokenize(text: str) -> list[str]:
    """Lowercase alphanumeric tokens of the text, stopwords removed."""
    return [token for token in _TOKEN.findall(text.lower()) if token not in STOPWORDS]


class BM25:
    """BM25 scores of every document for a query (k1 = 1.2, b = 0.75 unless given)."""

    def __init__(self, documents: list[str], k1: float = 1.2, b: float = 0.75):
        if not documents:
            raise ValueError("BM25 needs at least one document")
        self.k1 = k1
        self.b = b
        self._terms = [Counter(tokenize(document)) for document in documents]
        self._lengths = [sum(terms.values()) for terms in self._terms]
        self._average_length = sum(self._lengths) / len(documents) or 1.0
        frequencies: Counter[str] = Counter()
        for terms in self._terms:
            frequencies.update(terms.keys())
        n = len(documents)
        self._idf = {term: math.log(1.0 + (n - df + 0.5) / (df + 0.5)) for term, df in frequencies.items()}

    def idf(self, term: str) -> float:
        """The term's inverse document frequency (0 for a term in no document)."""
        return self._idf.get(term, 0.0)

    def scores(self, query: str) -> list[float]:
        """One score per document, in corpus order; 0 where no query term occurs."""
        query_terms = [term for term in tokenize(query) if term in self._idf]
        scores = []
        for terms, length in zip(self._terms, self._lengths, strict=True):
            norm = self.k1 * (1.0 - self.b + self.b * length / self._average_length)
            score = 0.0
            for term in query_terms:
                tf = terms.get(term, 0)
                if tf:
                    score += self._idf[term] * tf * (self.k1 + 1.0) / (tf + norm)
            scores.append(score)
        return scores

    def rank(self, query: str, k: int | None = None) -> list[int]:
        """Document indexes by descending score (ties in corpus order), the first k if given."""
        scores = self.scores(query)
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        return order if k is None else order[:k]
