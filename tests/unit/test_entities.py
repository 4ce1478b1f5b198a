"""Entity rules (metadata.entities, entity tags) and person
resolution (merge rules, name normalisation)."""

from __future__ import annotations

import pytest

from services.core.domain.entities import (
    AMBIGUOUS_TERMS,
    ENTITY_CATEGORIES,
    KNOWN_ORGANIZATIONS,
    TECH_TERMS,
    clean_name,
    email_key,
    empty_entities,
    entity_tags,
    extract_with_rules,
    find_emails,
    find_handles,
    find_urls,
    merge_entities,
    merge_tags,
    noise_spans,
    person_key,
    project_mentions,
    resolve_person,
    slugify,
)


def test_categories_are_the_five_of_the_spec_in_order():
    assert ENTITY_CATEGORIES == ("tools", "projects", "people", "concepts", "organizations")


def test_empty_entities_has_every_category_with_fresh_lists():
    first, second = empty_entities(), empty_entities()
    assert first == {c: [] for c in ENTITY_CATEGORIES}
    first["tools"].append("x")
    assert second["tools"] == []


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("Amélie Durand", "amelie-durand"),
        ("PostgreSQL", "postgresql"),
        ("  Node.js  ", "node-js"),
        ("vector   search", "vector-search"),
        ("--C++--", "c"),
        ("Ångström_Lab / R&D", "angstrom-lab-r-d"),
        ("Crème brûlée!", "creme-brulee"),
        ("北京 大学", "北京-大学"),
        ("!!!", ""),
        ("", ""),
    ],
)
def test_slugify(name, slug):
    assert slugify(name) == slug


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("  Sarah   Chen ", "Sarah Chen"),
        ("Sarah's", "Sarah"),
        ("(Acme Corp.)", "Acme Corp"),
        ("C++", "C++"),
        ("Node.js", "Node.js"),
        ("Zoë\u200b Kim", "Zoë Kim"),
    ],
)
def test_clean_name(raw, clean):
    assert clean_name(raw) == clean


def test_merge_entities_dedups_case_insensitively_keeping_first_spelling_and_order():
    merged = merge_entities(
        {"tools": ["pytest", "Docker", "PYTEST"], "people": ["Sarah"]},
        {"tools": ["docker", "Redis"], "people": ["sarah", "Tom"]},
    )
    assert merged["tools"] == ["pytest", "Docker", "Redis"]
    assert merged["people"] == ["Sarah", "Tom"]


def test_merge_entities_always_has_all_categories_and_drops_unknown_blank_and_odd_values():
    merged = merge_entities({"places": ["Paris"], "tools": ["", "  ", None, 3, " Git "], "concepts": "ai"}, None)
    assert merged == {"tools": ["Git"], "projects": [], "people": [], "concepts": [], "organizations": []}


def test_entity_tags_format_and_category_order():
    tags = entity_tags({"organizations": ["OpenAI"], "tools": ["Node.js"], "people": ["Amélie Durand"]})
    assert tags == ["entity:tools:node-js", "entity:people:amelie-durand", "entity:organizations:openai"]


def test_entity_tags_skip_empty_slugs_and_repeat_tags():
    tags = entity_tags({"people": ["Amélie Durand", "amelie durand", "!!!"], "concepts": ["?"]})
    assert tags == ["entity:people:amelie-durand"]


def test_merge_tags_normalises_existing_then_appends_new_ones():
    merged = merge_tags("db, Decision,, db ,  ", ["entity:tools:redis", "entity:people:sarah"])
    assert merged == ["db", "Decision", "entity:tools:redis", "entity:people:sarah"]


def test_merge_tags_splits_list_items_and_keeps_existing_case():
    assert merge_tags(["a,b", " Project:X ", ""], []) == ["a", "b", "Project:X"]


def test_merge_tags_skips_new_tags_already_present_in_any_case():
    merged = merge_tags(["Entity:Tools:Redis"], ["entity:tools:redis", "entity:tools:docker", "ENTITY:TOOLS:DOCKER"])
    assert merged == ["Entity:Tools:Redis", "entity:tools:docker"]


def test_merge_tags_with_no_existing_tags():
    assert merge_tags(None, ["entity:tools:git"]) == ["entity:tools:git"]


def test_merge_tags_does_not_modify_its_input():
    existing = [" a ", "a"]
    merge_tags(existing, ["b"])
    assert existing == [" a ", "a"]


def test_tech_terms_are_a_curated_unique_list_with_the_usual_suspects():
    assert 60 <= len(TECH_TERMS) <= 120
    assert len({t.casefold() for t in TECH_TERMS}) == len(TECH_TERMS)
    for term in ("PostgreSQL", "MongoDB", "Redis", "Docker", "Kubernetes", "pytest", "FalkorDB", "Qdrant", "NATS"):
        assert term in TECH_TERMS
    for term in ("Python", "TypeScript", "React", "FastAPI", "gRPC", "spaCy"):
        assert term in TECH_TERMS
    assert not set(TECH_TERMS) & set(KNOWN_ORGANIZATIONS)
    assert AMBIGUOUS_TERMS.issubset(set(TECH_TERMS) | set(KNOWN_ORGANIZATIONS))


def test_rules_find_tech_terms_in_any_case_with_their_canonical_spelling():
    found = extract_with_rules("Moved from mongodb to POSTGRESQL, with pytest and Node.js.")
    assert found["tools"] == ["MongoDB", "PostgreSQL", "pytest", "Node.js"]


def test_rules_map_aliases_to_the_canonical_term():
    assert extract_with_rules("postgres on k8s")["tools"] == ["PostgreSQL", "Kubernetes"]


def test_ambiguous_terms_match_only_in_canonical_case():
    assert extract_with_rules("we must react quickly to the rust on the pipe")["tools"] == []
    assert extract_with_rules("We rewrote it in Rust with React")["tools"] == ["Rust", "React"]


def test_terms_need_word_boundaries():
    tools = extract_with_rules("JavaScript, redis.conf, mypython, Gitea and C++ code")["tools"]
    assert tools == ["JavaScript", "C++"]


def test_known_organisations_are_organisations_not_tools():
    found = extract_with_rules("OpenAI and anthropic ship models")
    assert found["organizations"] == ["OpenAI", "Anthropic"]
    assert found["tools"] == []


def test_rules_find_no_people_or_concepts():
    found = extract_with_rules("Sarah Chen likes vector search")
    assert found["people"] == [] and found["concepts"] == []


def test_terms_inside_emails_urls_and_handles_are_ignored():
    text = "Mail docker@example.com, see https://redis.io/docs and ping @kafka"
    assert extract_with_rules(text)["tools"] == []


def test_find_emails_handles_and_urls():
    text = "Write to Bob.Smith@Example.com. Ping @alice_w or see https://x.org/a?b=1, www.y.com and z.io."
    assert find_emails(text) == ["Bob.Smith@Example.com"]
    assert find_handles(text) == ["@alice_w"]
    assert find_urls(text) == ["https://x.org/a?b=1", "www.y.com", "z.io"]


def test_an_email_is_not_a_handle_nor_a_url():
    assert find_handles("a@b.com") == []
    assert find_urls("mail a@b.com") == []


def test_noise_spans_cover_emails_urls_and_handles():
    text = "hi @bob see a@b.com"
    assert [text[s:e] for s, e in noise_spans(text)] == ["@bob", "a@b.com"]


@pytest.mark.parametrize(
    ("text", "projects"),
    [
        ("Sarah chose PostgreSQL for the billing project", ["billing"]),
        ("We started project Apollo", ["Apollo"]),
        ('Kicked off project "Blue Sky" today', ["Blue Sky"]),
        ("Project: memgrid-v2 is live", ["memgrid-v2"]),
        ("The Memory Grid project shipped", ["Memory Grid"]),
        ("My automem project", ["automem"]),
        ("The project manager asked about our new project", []),
        ("A side project and the team project", []),
        ("I project revenue growth; this project is late", []),
        ("the Redis project", []),
    ],
)
def test_project_mentions(text, projects):
    assert [m.name for m in project_mentions(text)] == projects


def test_project_mention_span_covers_the_phrase():
    text = "for the billing project."
    (mention,) = project_mentions(text)
    assert text[mention.start : mention.end] == "the billing project"


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("Amélie Durand", "amelie durand"),
        ("amelie durand", "amelie durand"),
        ("  JOHN   SMITH ", "john smith"),
        ("John\u200b Smith\ufeff", "john smith"),
        ("José María García", "jose maria garcia"),
    ],
)
def test_person_key_normalises(name, key):
    assert person_key(name) == key


@pytest.mark.parametrize("name", ["John", "  Amélie  ", "", None, "Jo\u200b\u200bhn"])
def test_person_key_is_none_for_fewer_than_two_words(name):
    assert person_key(name) is None


def test_accented_and_plain_spellings_share_a_key():
    assert person_key("Amélie Durand") == person_key("AMELIE  DURAND")


@pytest.mark.parametrize(
    ("email", "key"),
    [(" John.Smith@Example.COM ", "john.smith@example.com"), ("a+b@x.io", "a+b@x.io"), ("nope", None), ("", None)],
)
def test_email_key(email, key):
    assert email_key(email) == key


CONTACTS = [
    {"name": "Amélie Durand", "email": "amelie@acme.com"},
    {"name": "John", "email": None},
    {"name": "John Smith", "emails": ["JS@work.com", "john@home.org"]},
    {"name": "Display Name Changed", "key": "sarah chen"},
]


def test_email_merges_case_insensitively():
    assert resolve_person(CONTACTS, email="AMELIE@Acme.com ") is CONTACTS[0]


def test_any_of_a_contacts_emails_merges():
    assert resolve_person(CONTACTS, email="js@WORK.com") is CONTACTS[2]


def test_two_word_names_merge_accent_and_case_insensitively():
    assert resolve_person(CONTACTS, name="amelie  durand") is CONTACTS[0]


def test_a_stored_key_is_used_before_the_name():
    assert resolve_person(CONTACTS, name="Sarah Chen") is CONTACTS[3]
    assert resolve_person(CONTACTS, name="Display Name Changed") is None


def test_a_single_first_name_never_merges():
    assert resolve_person(CONTACTS, name="John") is None
    assert resolve_person([{"name": "John", "key": None}], name="john") is None


def test_email_wins_over_name():
    assert resolve_person(CONTACTS, name="Amélie Durand", email="john@home.org") is CONTACTS[2]


def test_an_unknown_email_falls_back_to_the_name():
    assert resolve_person(CONTACTS, name="John Smith", email="new@x.com") is CONTACTS[2]


def test_no_match_gives_none():
    assert resolve_person(CONTACTS, name="Jane Doe", email="jane@doe.com") is None
    assert resolve_person([], name="Amélie Durand") is None
    assert resolve_person(CONTACTS) is None


def test_different_two_word_names_do_not_merge():
    assert resolve_person(CONTACTS, name="Amélie Dupont") is None


def test_shared_entity_nodes_follow_the_person_merge_rules():
    from services.core.domain.entities import shared_entity_tags

    tags = shared_entity_tags({"people": ["Amélie Durand", "John"], "tools": ["Redis"]})
    assert "entity:people:amelie-durand" in tags and "entity:tools:redis" in tags
    assert "entity:people:john" not in tags  # a first name alone never merges two people
    assert shared_entity_tags({"people": ["amelie  DURAND"]}) == ["entity:people:amelie-durand"]
