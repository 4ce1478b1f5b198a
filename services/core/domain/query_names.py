"""A recall query without the names in it, pure: the second text the vector
arm embeds.

A small sentence embedder gives a name a large share of a short question's
vector: "What did Melanie paint recently?" lands near every memory that
addresses or mentions Melanie ("Hey Melanie! ...") whatever it is about,
and the memory that answers (Melanie speaking of her painting, her name
nowhere in it) ranks below them. The vector arm therefore searches with the
mean of two vectors: the query as asked, and the query with its names
replaced by a pronoun ("What did they paint recently?"), which finds what
the question is about. Who it is about is kept by the other arms and
components: the keyword arm matches the name, and the speaker component
lifts what that person said.

A name here is a capitalised word that does not open a sentence (the first
word of a question is capitalised because it is first): "Melanie",
"Melanie's", "Door Dash". Words in capitals throughout ("LGBTQ", "API") and
mixed-case words ("PostgreSQL", "iPhone") are kept: they are terms, not
names, and the embedder knows them.
"""

from __future__ import annotations

import re

from services.core.domain.recall_text import tokens

#: A capitalised word (one capital, then lowercase letters), with an optional possessive.
_NAME = re.compile(r"\b[A-Z][^\W\d_A-Z]+\b(?!['’]?[\w-])|\b[A-Z][^\W\d_A-Z]+['’]s\b")
#: Where a sentence opens: the start of the text, or after . ! ? or a line break (and any quotes or spaces).
_OPENING = re.compile(r"(?:^|[.!?\n])[\s\"'“‘(]*$")
_PRONOUN = "they"
_POSSESSIVE = "their"
_SPACES = re.compile(r"[ \t]{2,}")


def without_names(text: str) -> str:
    """The text with each name (a capitalised word not opening a sentence)
    replaced by "they" ("their" for a possessive), or the text unchanged when
    it holds no name, or nothing but names and stopwords would be left."""
    parts: list[str] = []
    last = 0
    for match in _NAME.finditer(text):
        if _OPENING.search(text, 0, match.start()) is not None:
            continue
        parts.append(text[last : match.start()])
        parts.append(_POSSESSIVE if match.group().endswith(("'s", "’s")) else _PRONOUN)
        last = match.end()
    if not parts:
        return text
    stripped = _SPACES.sub(" ", "".join(parts) + text[last:])
    return stripped if tokens(stripped) else text
