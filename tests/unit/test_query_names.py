"""The query without its names (services/core/domain/query_names.py), the
second text the vector arm embeds."""

from __future__ import annotations

import pytest

from services.core.domain.query_names import without_names


@pytest.mark.parametrize(
    ("query", "nameless"),
    [
        ("What did Melanie paint recently?", "What did they paint recently?"),
        ("What are Melanie's pets' names?", "What are their pets' names?"),
        ("When did Caroline and Melanie go camping?", "When did they and they go camping?"),
        ("Where did Jon open his Door Dash account?", "Where did they open his they they account?"),
        # The word opening a sentence is capitalised because it is first, not because it is a name.
        ("Caroline went where? Melanie knows.", "Caroline went where? Melanie knows."),
        ("Tell me. Where did Caroline go?", "Tell me. Where did they go?"),
    ],
)
def test_names_become_pronouns(query, nameless):
    assert without_names(query) == nameless


@pytest.mark.parametrize(
    "query",
    [
        "how does the retry loop back off",  # no capital at all
        "Why does PostgreSQL lock the row for the API?",  # terms: mixed case and capitals throughout
        "Is the iPhone build on LGBTQ+ week?",
        "Melanie?",  # nothing but a name: nothing would be left to search for
        "Who is Melanie?",  # nothing but a name and stopwords
    ],
)
def test_a_query_without_names_or_with_nothing_else_is_unchanged(query):
    assert without_names(query) == query
