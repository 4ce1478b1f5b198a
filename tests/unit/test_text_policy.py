"""The rules the full-text arms follow (services/core/domain/text_policy.py),
and the analysis summary's state order taken from the domain's."""

from __future__ import annotations

from services.core.adapters.falkor.views import _STATE_CASE
from services.core.domain.recall_text import DF_REACH
from services.core.domain.state import PRECEDENCE
from services.core.domain.text_policy import rarest_fallback, search_meta, search_tags, searched, within_max_df


def test_words_over_max_df_are_left_out():
    df = {"rare": 3, "edge": 10, "common": 11}
    assert within_max_df(["rare", "edge", "common"], df, 10) == ["rare", "edge"]


def test_when_every_word_is_common_the_rarest_alone_is_searched_within_reach():
    df = {"a": 50, "b": 20, "c": 20}
    assert rarest_fallback(["a", "c", "b"], df, 10) == ["b"]  # ties go to the first in order
    assert rarest_fallback(["a"], {"a": DF_REACH * 10}, 10) == ["a"]
    assert rarest_fallback(["a"], {"a": DF_REACH * 10 + 1}, 10) == []
    assert rarest_fallback([], {}, 10) == []


def test_words_without_matches_are_not_searched():
    assert searched(["seen", "unseen"], {"seen": 1}) == ["seen"]


def test_the_metadata_arm_leaves_bookkeeping_and_content_copies_out():
    text = search_meta({"source": "slack", "summary": "copy", "enrichment": {"x": "y"}, "people": ["Ada", {"n": "Bo"}]})
    assert text == "slack Ada Bo"
    assert search_meta("not a dict") == ""  # type: ignore[arg-type]


def test_tags_become_words():
    assert search_tags(["project:alpha-beta", "a/b_c"]) == "project alpha beta a b c"


def test_the_analysis_summary_decides_states_in_the_domain_order():
    positions = [_STATE_CASE.index(f"THEN '{state.value}'") for state in PRECEDENCE]
    assert positions == sorted(positions) and len(PRECEDENCE) == 4
