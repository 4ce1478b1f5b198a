"""What a question is about (services/core/domain/query_focus.py): its words
without the framing words, for the text arms and the related-words
component, and its focus text (no names, no framing) for the vector arm."""

from __future__ import annotations

import pytest

from services.core.domain.query_focus import FRAMING_WORDS, focus_terms, focus_text
from services.core.domain.recall_text import STOPWORDS, tokens
from services.core.domain.related_words import question_words


def test_the_framing_words_that_are_not_stopwords_leave_the_terms():
    query = "Would Caroline likely be considered a writer?"
    assert "likely" in tokens(query) and "considered" in tokens(query)  # BM25 would weigh these
    assert focus_terms(query) == ["caroline", "writer"]


def test_a_query_of_framing_words_alone_is_searched_as_it_is():
    assert focus_terms("What kind?") == ["kind"]
    assert focus_terms("likely") == ["likely"]


@pytest.mark.parametrize(
    ("query", "focus"),
    [
        ("Would Caroline likely pursue writing as a career option?", "they pursue writing as a career option"),
        ("What might John's degree be in?", "their degree in"),
        ("When did Melanie paint a sunrise?", "When they paint a sunrise"),
        ("What kind of pot did Mel make?", "of pot they make"),
    ],
)
def test_the_focus_text_has_no_names_and_no_framing(query, focus):
    assert focus_text(query) == focus


def test_the_focus_text_of_nothing_but_framing_is_the_nameless_query():
    assert focus_text("What would it be?") == "What would it be?"
    # A name is kept when it is all a query asks about (query_names.without_names).
    assert focus_text("Would Anna?") == "Anna"


def test_a_query_without_framing_words_is_its_nameless_self():
    # One text to embed, not two, for a plain query: the vector arm embeds each distinct text once.
    assert focus_text("camping trip, lake?") == "camping trip, lake?"
    assert focus_text("photos of Melanie's camping trip") == "photos of their camping trip"


def test_the_related_words_expand_only_what_the_question_is_about():
    assert question_words(["Would Melanie likely enjoy camping?"]) == ["enjoy", "camping"]


def test_the_framing_words_are_lowercase_words():
    assert all(w == w.lower() and w.isalpha() for w in FRAMING_WORDS)
    assert {"likely", "might", "considered"} - STOPWORDS == {"likely", "might", "considered"}
