"""tag_prefixes, normalize_tags and the keys a match by tag compares."""

from __future__ import annotations

import pytest

from services.core.domain.errors import InvalidArgument
from services.core.domain.tags import normalize_tags, required_tag_keys, tag_key, tag_prefixes


def test_spec_example_gives_every_cumulative_prefix():
    assert sorted(tag_prefixes(["project:automem:api"])) == ["project", "project:automem", "project:automem:api"]


def test_slash_splits_too():
    assert sorted(tag_prefixes(["team/backend/db"])) == ["team", "team/backend", "team/backend/db"]


def test_mixed_separators_keep_the_original_separator_in_each_prefix():
    assert sorted(tag_prefixes(["slack:channel/general"])) == ["slack", "slack:channel", "slack:channel/general"]


def test_a_tag_without_separator_is_its_own_prefix():
    assert tag_prefixes(["decision"]) == ["decision"]


def test_prefixes_are_lowercased_and_trimmed():
    assert sorted(tag_prefixes(["  Project:AutoMem  "])) == ["project", "project:automem"]


@pytest.mark.parametrize("tags", [[], [""], ["   "], ["", " \t "]])
def test_blank_tags_are_skipped(tags):
    assert tag_prefixes(tags) == []


def test_no_prefix_appears_twice():
    prefixes = tag_prefixes(["a:b", "A:C", "a:b", "a", "A:B:c"])
    assert len(prefixes) == len(set(prefixes))
    assert set(prefixes) == {"a", "a:b", "a:c", "a:b:c"}


def test_the_input_list_is_not_modified():
    tags = ["  Project:X "]
    tag_prefixes(tags)
    assert tags == ["  Project:X "]


def test_normalize_splits_a_comma_separated_string():
    assert normalize_tags("project:automem, decision,,  api ") == ["project:automem", "decision", "api"]


def test_normalize_splits_list_items_trims_and_drops_blanks_and_repeats():
    assert normalize_tags(["a,b", " c ", "", "   ", "a", "b , d"]) == ["a", "b", "c", "d"]


def test_normalize_keeps_case():
    assert normalize_tags(["Project:AutoMem"]) == ["Project:AutoMem"]


@pytest.mark.parametrize("tags", ["", " , ,", [], [" ", ","]])
def test_normalize_of_only_blanks_is_empty(tags):
    assert normalize_tags(tags) == []


def test_a_tag_key_is_trimmed_and_lowercase():
    assert tag_key("  Project:AutoMem \t") == "project:automem"


def test_required_tag_keys_are_sorted_without_blanks_repeats_or_non_strings():
    assert required_tag_keys([" Old", "old", "ARCHIVE ", "", None, 3, "a,b"]) == ["a,b", "archive", "old"]


@pytest.mark.parametrize("tags", [[], [""], ["  ", "\t"], [None]])
def test_required_tag_keys_of_nothing_is_tags_required(tags):
    with pytest.raises(InvalidArgument) as refused:
        required_tag_keys(tags)
    assert (refused.value.reason, refused.value.field) == ("TAGS_REQUIRED", "tags")
    assert refused.value.message == "'tags' must name at least one tag"
