"""Which entities a recall's entity expansion reads (expand_entities): the
rarest of each seed's, as counted (FalkorMemoryReader.entity_neighbours)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def rarest_entities(
    mentions_of_seeds: Iterable[tuple[str, str]], mentions: Mapping[str, int], *, per_seed: int, over: int
) -> list[str]:
    """The entities to read, rarest first (ties by tag): each seed's per_seed
    rarest among those mentioned by more than one memory (one: only the seed
    itself, nothing to share) and by fewer than `over` (the stopwords of
    entities). `mentions_of_seeds` holds (seed id, entity tag) pairs;
    `mentions`, an entity's mention count (counted up to `over`)."""
    by_seed: dict[str, list[str]] = {}
    for seed, tag in mentions_of_seeds:
        count = mentions.get(tag, 0)
        if 1 < count < over:
            by_seed.setdefault(seed, []).append(tag)
    chosen: set[str] = set()
    for tags in by_seed.values():
        chosen.update(sorted(set(tags), key=lambda t: (mentions[t], t))[: max(per_seed, 0)])
    return sorted(chosen, key=lambda t: (mentions[t], t))
