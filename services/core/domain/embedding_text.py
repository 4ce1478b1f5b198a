"""What enrichment embeds for a memory, pure: its content, then the memory
written just before it in the same scope and, optionally, the one written
just after it (contextual embedding).

A turn of a conversation ("Yes! It was amazing.") often means little alone;
the turn before it says what it answers, and the turn after it often says
what it meant ("That's great, what did the group talk about?"). Embedding
them together puts the exchange's subject into the memory's vector, while
the keyword arm still matches the memory's own words. The memory's own
content comes first, so the embedder's token limit cuts the context, never
the memory; each neighbour is cut to `context_chars` first.

Which memory is "just before": the latest one of the same tenant written
at most the context window earlier (by timestamp, then by the order it was
recorded in: a batch's items are recorded in their order), sharing one of
the memory's own tags when it has any (enrichment's entity tags do not
count), never the memory itself. "Just after" is the same looking forward:
the earliest one at most the window later.

A memory's vector therefore depends on its neighbours: when one arrives
or its content changes, the memories whose text names it are embedded
again (`neighbours_to_refresh`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from services.core.domain.entities import ENTITY_TAG_PREFIX
from services.core.domain.model import Memory


def scope_tags(tags: Iterable[str]) -> list[str]:
    """A memory's own tags, the ones its predecessor must share one of."""
    # The tags enrichment derives do not place a memory in a conversation.
    return [t for t in tags if not t.casefold().startswith(ENTITY_TAG_PREFIX)]


#: The reason of an `embedded` event for a vector embedded again because a
#: neighbour arrived or changed: the memory's own content did not change, so
#: enrichment's second stage has nothing new to do for it.
CONTEXT_REFRESH = "context"


@dataclass(frozen=True, slots=True)
class Preceding:
    """What the store looks up for one memory's neighbours, before and after it."""

    memory_id: str
    timestamp_us: int
    recorded_us: int
    tags: tuple[str, ...]


def preceding_query(memory: Memory, timestamp_us: int, recorded_us: int) -> Preceding:
    return Preceding(memory.id, timestamp_us, recorded_us, tuple(scope_tags(memory.tags)))


@dataclass(frozen=True, slots=True)
class Neighbour:
    """A memory next to another in its scope, as its embedding text reads it."""

    memory_id: str
    content: str


@dataclass(frozen=True, slots=True)
class Neighbours:
    """The memories just before and just after one memory (None: no such memory)."""

    before: Neighbour | None = None
    after: Neighbour | None = None


def contextual_text(content: str, preceding: str | None, context_chars: int, following: str | None = None) -> str:
    """The text embedded for a memory: its content, then (each on a new line)
    the memory before it and the memory after it, each cut to context_chars;
    the content alone without either."""
    parts = [content]
    for neighbour in (preceding, following):
        cut = (neighbour or "").strip()[: max(0, context_chars)].strip()
        if cut:
            parts.append(cut)
    return "\n".join(parts)


def neighbours_to_refresh(embedded: dict[str, Neighbours], *, following: bool, skip: Iterable[str] = ()) -> list[str]:
    """The memories whose embedding text changed because these memories were
    (re-)embedded for new content: the memory after each (whose text reads it
    as its predecessor) and, when texts read the following memory too, the
    memory before each. Memories in `skip` (embedded in the same batch, with
    these texts already) and those embedded now are left out; sorted."""
    left_out = set(skip) | set(embedded)
    found: set[str] = set()
    for neighbours in embedded.values():
        for neighbour in (neighbours.after, neighbours.before if following else None):
            if neighbour is not None and neighbour.memory_id not in left_out:
                found.add(neighbour.memory_id)
    return sorted(found)
