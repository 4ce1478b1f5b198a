"""Which entities expand_entities reads: each seed's rarest, within the bounds."""

from services.core.domain.entity_expansion import rarest_entities


def test_each_seed_keeps_its_rarest_entities_and_the_union_comes_rarest_first():
    pairs = [("s1", "a"), ("s1", "b"), ("s1", "c"), ("s2", "c"), ("s2", "d")]
    mentions = {"a": 5, "b": 2, "c": 3, "d": 9}
    assert rarest_entities(pairs, mentions, per_seed=2, over=100) == ["b", "c", "d"]  # s1: b, c; s2: c, d
    assert rarest_entities(pairs, mentions, per_seed=1, over=100) == ["b", "c"]
    assert rarest_entities(pairs, mentions, per_seed=0, over=100) == []


def test_an_entity_of_one_memory_or_of_too_many_is_not_read():
    pairs = [("s1", "alone"), ("s1", "hub"), ("s1", "edge"), ("s1", "fine"), ("s1", "unknown")]
    mentions = {"alone": 1, "hub": 201, "edge": 200, "fine": 4}
    assert rarest_entities(pairs, mentions, per_seed=5, over=201) == ["fine", "edge"]
    # The stopword rule makes room for the next rarest: the hub does not use a seed's place.
    assert rarest_entities(pairs, mentions, per_seed=1, over=201) == ["fine"]


def test_ties_are_broken_by_tag_and_a_pair_repeated_counts_once():
    pairs = [("s1", "y"), ("s1", "x"), ("s1", "x"), ("s2", "z")]
    mentions = {"x": 3, "y": 3, "z": 3}
    assert rarest_entities(pairs, mentions, per_seed=1, over=10) == ["x", "z"]
    assert rarest_entities(pairs, mentions, per_seed=2, over=10) == ["x", "y", "z"]
