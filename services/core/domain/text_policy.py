"""Which words and texts the full-text arms of recall search, pure.

The graph adapter asks these rules and runs what they decide: which query
words an arm keeps given their document frequencies (max_df, scan), and which
text of a memory's tags and metadata the tag and metadata arms index.
"""

from __future__ import annotations

from services.core.domain.recall_text import DF_REACH

#: Metadata keys the metadata arm does not search (bookkeeping, or copies of the content).
UNSEARCHED_METADATA = frozenset({"enrichment", "original_content", "summary"})
#: How much of a memory's metadata text the metadata arm indexes.
SEARCH_META_CHARS = 2000
_TAG_SEPARATORS = str.maketrans({":": " ", "/": " ", "-": " ", "_": " "})


def search_tags(tags: list[str]) -> str:
    """The tags as words, for the full-text index (the tag arm)."""
    return " ".join(tag.translate(_TAG_SEPARATORS) for tag in tags)


def search_meta(metadata: dict) -> str:
    """Metadata's text values (entities included), for the metadata arm;
    the keys in UNSEARCHED_METADATA are left out."""
    words: list[str] = []

    def walk(value) -> None:
        if isinstance(value, str):
            words.append(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in UNSEARCHED_METADATA:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(metadata if isinstance(metadata, dict) else {})
    return " ".join(words)[:SEARCH_META_CHARS]


def within_max_df(words: list[str], df: dict[str, int], max_df: int) -> list[str]:
    """The words held by no more than max_df memories (the commoner ones say
    little, and every match costs a row)."""
    return [w for w in words if df.get(w, 0) <= max_df]


def rarest_fallback(words: list[str], df: dict[str, int], max_df: int) -> list[str]:
    """When every word is over max_df: the rarest alone, if it is within
    DF_REACH x max_df; otherwise nothing (the arm finds nothing)."""
    if not words:
        return []
    rarest = min(words, key=lambda w: (df.get(w, 0), w))
    return [rarest] if df.get(rarest, 0) <= DF_REACH * max_df else []


def rarest_within(words: list[str], df: dict[str, int], scan: int) -> list[str]:
    """The words, rarest first, while their document frequencies add up to
    no more than scan (the rarest always)."""
    taken: list[str] = []
    total = 0
    for word in sorted(dict.fromkeys(words), key=lambda w: (df.get(w, 0), w)):
        total += df.get(word, 0)
        if taken and total > scan:
            break
        taken.append(word)
    return taken


def searched(words: list[str], df: dict[str, int]) -> list[str]:
    """The words with any match at all (one without is not worth a query term)."""
    return [w for w in words if df.get(w, 0) > 0]
