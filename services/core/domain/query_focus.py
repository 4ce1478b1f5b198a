"""What a question is about, pure: its words without the words that only
frame it as a question.

"Would Caroline likely pursue writing as a career option?" is about
writing and careers; "would", "likely" and the rest say how it is asked.
Those framing words hurt two ways. In the search vector of a small
sentence embedder they pull towards every memory phrased as a question or a
guess, whatever it is about. As keywords, the ones that are not stopwords
("likely", "might", "considered", "kind") are rare in what people write
down, so BM25 weighs them heavily and lifts any memory that happens to use
them.

So the vector arm's second text (the focus text) is the query without its
names (domain/query_names.py) and without its framing words, and the text
arms and the related-words component search the query's words less the
framing words. A query made of nothing but framing words and stopwords is
kept as it is: then they are what the caller is looking for.
"""

from __future__ import annotations

import re

from services.core.domain.query_names import without_names
from services.core.domain.recall_text import tokens

#: Interrogative and modal words that frame a question, chosen once from
#: what they are (not fitted): the question words, the auxiliaries that open
#: a question, and the hedges of a question that asks for a guess.
FRAMING_WORDS = frozenset(
    (
        *("would", "could", "might", "likely", "probably", "considered", "consider"),
        *("be", "is", "it", "does", "do", "did"),
        *("what", "which", "who", "whom", "how", "whose", "kind", "kinds", "sort", "type"),
    )
)

#: A word as the focus text keeps it: letters, digits, apostrophes and hyphens.
_WORD = re.compile(r"[\w'’-]+")


def focus_terms(query: str) -> list[str]:
    """The query's searchable words (no stopwords) less its framing words;
    all of its searchable words when nothing else is left."""
    words = tokens(query)
    focused = [w for w in words if w not in FRAMING_WORDS]
    return focused or words


def focus_text(query: str) -> str:
    """The query without its names (each replaced by a pronoun) and without
    its framing words, its words joined by single spaces; the nameless query
    when it has no framing word, or nothing but framing words and stopwords
    would be left."""
    nameless = without_names(query)
    words = _WORD.findall(nameless)
    kept = [w for w in words if w.lower() not in FRAMING_WORDS]
    if len(kept) == len(words):  # nothing framed it: no second text to embed for a plain query
        return nameless
    return " ".join(kept) if tokens(" ".join(kept)) else nameless
