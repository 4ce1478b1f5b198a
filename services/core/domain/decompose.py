"""Query decomposition for multi-hop questions (recall's `auto_decompose`),
pure: a question naming people or places is searched again for each named
one alone and with each of the question's topics, so a memory about the
entity that does not repeat the question's words is still found
("Would Caroline pursue writing?" also searches "Caroline", "Caroline writing").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Capitalised words that start questions, months, days and adjectives of
#: origin: capitalised, but no entity a memory would be about.
_NOT_ENTITY_TEXT = """
    What Would Could Does Did How Why When Where Which Who Whose Will Can Should Has Have Had Is Are Was Were Do
    Been Being The Answer Yes No Likely Based According Since Because January February March April May June July
    August September October November December Monday Tuesday Wednesday Thursday Friday Saturday Sunday National
    American European Asian African
"""
_NOT_ENTITIES = frozenset(_NOT_ENTITY_TEXT.split())
#: Question and filler words that are no topic.
_NOT_TOPIC_TEXT = """
    would could should will can may might does did has have had is are was were be been being the a an to for of
    in on at by with about as if or and but what which who whom whose where when why how this that these those it
    its they them their he she his her him likely probably possibly considered pursue want like prefer interested
    still ever more most some any all only
"""
_NOT_TOPICS = frozenset(_NOT_TOPIC_TEXT.split())
#: Topics that ask about someone's work: the entity is also searched with
#: the words of its wider interests, where another answer may be.
_CAREER_TOPICS = frozenset({"career", "job", "work"})
_CAREER_QUERY = "interests goals plans"
_POSSESSIVE = re.compile(r"\b([A-Z][a-z]+)['\u2019]s\b")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class DecomposePolicy:
    """The numbers of decomposition, from settings."""

    max_entities: int = 2  # entities searched
    max_topics: int = 3  # topics paired with each entity (or searched alone)
    topic_words: int = 5  # topics read from the question
    min_topic_length: int = 4  # shorter words are no topic


def query_entities(query: str) -> list[str]:
    """Capitalised names in the question, in order of appearance: not the
    first word, not a word after a sentence's end, not a question word or
    month; possessives ("Caroline's") count."""
    words = query.split()
    found: list[str] = []
    for i, word in enumerate(words):
        clean = "".join(_WORD.findall(word))
        if len(clean) < 2 or clean in _NOT_ENTITIES or "'s" in word or "\u2019s" in word:
            continue
        if not (clean[0].isupper() and clean[1:].islower()):
            continue
        if i == 0 or words[i - 1][-1] in ".?!":
            continue
        if clean not in found:
            found.append(clean)
    for name in _POSSESSIVE.findall(query):
        if name not in _NOT_ENTITIES and name not in found:
            found.append(name)
    return found


def query_topics(query: str, entities: list[str], policy: DecomposePolicy) -> list[str]:
    """The question's content words (long enough, no filler, no entity), in order, at most `topic_words`."""
    exclude = {e.lower() for e in entities}
    pattern = re.compile(rf"\b[a-z]{{{policy.min_topic_length},}}\b")
    topics: list[str] = []
    for word in pattern.findall(query.lower()):
        if word not in _NOT_TOPICS and word not in exclude and word not in topics:
            topics.append(word)
    return topics[: policy.topic_words]


def decompose(query: str, policy: DecomposePolicy) -> list[str]:
    """The supplementary queries of a question: each entity alone, with each
    topic, and with its wider interests when the question is about work; a
    question without entities is searched by its topics."""
    entities = query_entities(query)
    topics = query_topics(query, entities, policy)
    queries: list[str] = []
    for entity in entities[: policy.max_entities]:
        queries.append(entity)
        queries.extend(f"{entity} {topic}" for topic in topics[: policy.max_topics])
        if _CAREER_TOPICS & set(topics):
            queries.append(f"{entity} {_CAREER_QUERY}")
    if topics and not entities:
        queries.extend(topics[: policy.max_topics])
    original = query.strip().lower()
    return [q for q in dict.fromkeys(queries) if q.lower() != original]
