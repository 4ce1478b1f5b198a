"""How the results of a ranked recall are put together beyond the
ranking, pure: each query's share (per_query_limit), the expansions
appended after the ranked results, and the entities they share."""

from __future__ import annotations

from collections.abc import Iterable

from services.core.domain.analysis import split_entity_tag
from services.core.domain.model import Memory
from services.core.domain.recall_ranking import Candidate, fingerprint


def per_query_cap(candidates: list[Candidate], per_query_limit: int, query_count: int) -> list[Candidate]:
    """At most `per_query_limit` candidates of each query (its best by score),
    as AutoMem ranks each query on its own before merging them; candidates
    that no query found (priority, listing, context) stay. Order is kept."""
    if query_count <= 1 or not per_query_limit:
        return candidates
    ranked = sorted(candidates, key=lambda c: (-c.final, c.id))
    kept = {c.id for c in candidates if not c.queries}
    for index in range(query_count):
        kept.update(c.id for c in [c for c in ranked if index in c.queries][:per_query_limit])
    return [c for c in candidates if c.id in kept]


def entity_names(memory: Memory) -> list[str]:
    """The entities a memory mentions, by its entity tags (entity:<category>:<name>), in tag order."""
    names = (split_entity_tag(tag) for tag in memory.tags)
    return list(dict.fromkeys(found[1].lower() for found in names if found))


def append_new(results: list[Candidate], extra: Iterable[Candidate]) -> tuple[list[Candidate], int]:
    """`extra` without what `results` already hold (by id, or by content: a
    duplicate is merged into the result it repeats), and how many were merged."""
    by_content = {fingerprint(c.memory.content): c for c in results if c.memory is not None}
    ids = {c.id for c in results}
    added: list[Candidate] = []
    removed = 0
    for candidate in extra:
        if candidate.memory is None or candidate.id in ids:
            continue
        key = fingerprint(candidate.memory.content)
        if key in by_content:
            by_content[key].deduped_from.append(candidate.id)
            removed += 1
            continue
        ids.add(candidate.id)
        by_content[key] = candidate
        added.append(candidate)
    return added, removed
