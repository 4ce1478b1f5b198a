"""Factuality: connector trust, the rule-based assessment and
corroboration by other sources."""

from __future__ import annotations

import pytest

from services.core.domain.factuality import (
    FACT,
    FICTION,
    UNVERIFIED,
    Factuality,
    assess,
    corroborate,
    source_trust,
    specifics,
)


@pytest.mark.parametrize(
    ("source", "trust"),
    [
        ("gmail", 0.95),
        ("slack", 0.90),
        ("photos", 0.85),
        ("locations", 0.85),
        ("whatsapp", 0.80),
        ("imessage", 0.80),
        ("manual", 0.70),
    ],
)
def test_source_trust_table_of_the_spec(source, trust):
    assert source_trust(source) == trust


def test_source_trust_is_case_insensitive_and_trimmed():
    assert source_trust(" Gmail ") == 0.95


def test_unknown_source_gets_the_default():
    assert source_trust("telegram") == 0.7
    assert source_trust(None) == 0.7
    assert source_trust("telegram", default=0.5) == 0.5


def test_factuality_rejects_unknown_labels_and_confidence_out_of_range():
    with pytest.raises(ValueError, match="label"):
        Factuality("TRUE", 0.5, "")
    with pytest.raises(ValueError, match="confidence"):
        Factuality(FACT, 1.2, "")


def test_factuality_as_stored_json():
    assert Factuality(FACT, 0.9, "why").to_dict() == {"label": "FACT", "confidence": 0.9, "rationale": "why"}


def test_plain_statement_is_unverified_by_default():
    result = assess("The team likes the new dashboard", source_trust=0.7)
    assert result.label == UNVERIFIED
    assert 0.3 < result.confidence < 0.7


@pytest.mark.parametrize(
    "cue", ["I think", "maybe", "probably", "might", "not sure", "rumor", "perhaps", "apparently", "I heard"]
)
def test_hedging_lowers_confidence(cue):
    plain = assess("the launch moved to the next sprint", 0.8)
    hedged = assess(f"{cue} the launch moved to the next sprint", 0.8)
    assert hedged.label == UNVERIFIED
    assert hedged.confidence < plain.confidence
    assert f"'{cue.lower()}'" in hedged.rationale


def test_more_hedges_lower_it_further():
    one = assess("maybe the launch moved", 0.8)
    three = assess("I think maybe the launch probably moved", 0.8)
    assert three.confidence < one.confidence


def test_hedges_need_whole_words():
    assert "hedging: none" in assess("the mighty team shipped", 0.8).rationale


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("invoice due 2026-03-15", "date"),
        ("invoice due March 15", "date"),
        ("invoice due on 15 March 2026", "date"),
        ("standup at 10:30", "time"),
        ("standup at 9am", "time"),
        ("budget is $250,000", "amount"),
        ("costs dropped 40%", "amount"),
        ("we hired 3 engineers", "number"),
        ("the call with Sarah went well", "proper noun"),
    ],
)
def test_specifics_are_recognised(text, kind):
    assert kind in specifics(text)


def test_a_date_is_not_also_a_number_and_sentence_starts_are_not_proper_nouns():
    assert specifics("Yesterday. Then 2026-03-15") == ["date"]


def test_specificity_raises_confidence():
    vague = assess("the budget review happened", 0.7)
    specific = assess("the budget review with Acme happened on March 15, 2026 and approved $250,000", 0.7)
    assert specific.confidence > vague.confidence
    assert "date" in specific.rationale and "amount" in specific.rationale


@pytest.mark.parametrize(
    "text",
    [
        "Imagine we had unlimited budget",
        "What if the database was sentient",
        "Once upon a time there was a server",
        "In the story, the hero deploys on Friday",
        "That was just a joke about the outage",
        "Let's pretend we are pirates",
        "Hypothetically, we could drop the index",
    ],
)
def test_fiction_cues_make_fiction(text):
    result = assess(text, source_trust=0.95)
    assert result.label == FICTION
    assert result.confidence >= 0.6
    assert "cues" in result.rationale


def test_more_fiction_cues_raise_fiction_confidence():
    assert assess("imagine, what if, once upon a time", 0.7).confidence > assess("imagine that", 0.7).confidence


def test_high_trust_with_specifics_and_no_hedge_is_fact():
    result = assess("Invoice of $250,000 from Acme is due on 2026-03-15", source_trust=0.95)
    assert result.label == FACT
    assert result.confidence > 0.75
    assert "high-trust" in result.rationale


@pytest.mark.parametrize(
    ("text", "trust"),
    [
        ("Invoice of $250,000 from Acme is due on 2026-03-15", 0.85),  # trust below 0.9
        ("Maybe the invoice of $250,000 is due on 2026-03-15", 0.95),  # hedged
        ("the invoice is due soon", 0.95),  # nothing specific
    ],
)
def test_fact_needs_high_trust_specifics_and_no_hedge(text, trust):
    assert assess(text, trust).label == UNVERIFIED


def test_trust_raises_confidence():
    assert assess("the launch moved", 0.95).confidence > assess("the launch moved", 0.7).confidence


@pytest.mark.parametrize("trust", [-1.0, 0.0, 1.0, 5.0])
def test_confidence_stays_in_bounds(trust):
    worst = assess("I think maybe probably not sure, a rumor", trust)
    best = assess("On 2026-03-15 at 10:30 Acme paid $5,000 for 3 seats", trust)
    for result in (worst, best):
        assert 0.0 < result.confidence < 1.0


UNSURE = Factuality(UNVERIFIED, 0.5, "single source")


@pytest.mark.parametrize(
    ("supporters", "label", "confidence"),
    [
        (["gmail", "slack"], FACT, 0.90),
        (["gmail", "slack", "whatsapp", "whatsapp"], FACT, 0.90),
        (["gmail"], FACT, 0.80),
        (["gmail", "GMAIL", " gmail "], FACT, 0.80),
        (["whatsapp", "WhatsApp"], UNVERIFIED, 0.65),
    ],
)
def test_corroboration_table(supporters, label, confidence):
    result = corroborate(UNSURE, supporters, own_source="whatsapp")
    assert (result.label, result.confidence) == (label, confidence)


def test_own_source_among_others_does_not_count():
    assert corroborate(UNSURE, ["whatsapp", "gmail"], own_source="WhatsApp").confidence == 0.80


def test_no_supporters_changes_nothing():
    assert corroborate(UNSURE, [], own_source="slack") is UNSURE
    assert corroborate(UNSURE, ["", "  "], own_source="slack") is UNSURE


def test_rationale_names_the_corroborating_sources():
    result = corroborate(UNSURE, ["slack", "gmail"], own_source="manual")
    assert "2 other source(s): gmail, slack" in result.rationale
    assert "was UNVERIFIED 0.5" in result.rationale


def test_never_demotes_a_fact():
    strong = Factuality(FACT, 0.95, "official email")
    assert corroborate(strong, ["slack"], own_source="gmail") is strong
    assert corroborate(strong, ["gmail"], own_source="gmail") is strong


def test_a_weaker_fact_gains_confidence_but_stays_fact():
    weak = Factuality(FACT, 0.7, "x")
    assert corroborate(weak, ["slack", "photos"], own_source="gmail") == Factuality(
        FACT, 0.9, "corroborated by 2 other source(s): photos, slack; was FACT 0.7"
    )


def test_confidence_never_goes_down_on_promotion_or_same_source_support():
    confident = Factuality(UNVERIFIED, 0.85, "x")
    promoted = corroborate(confident, ["slack"], own_source="gmail")
    assert (promoted.label, promoted.confidence) == (FACT, 0.85)
    assert corroborate(Factuality(UNVERIFIED, 0.7, "x"), ["gmail"], own_source="gmail").confidence == 0.7


def test_fiction_is_never_promoted():
    story = Factuality(FICTION, 0.6, "a joke")
    assert corroborate(story, ["gmail", "slack", "photos"], own_source="manual") is story


@pytest.mark.parametrize(
    "answer, expected",
    [
        ('{"label": "fact", "confidence": 0.8, "rationale": "dated and sourced"}', ("FACT", 0.8)),
        ('{"label": "FICTION", "confidence": 1.7, "rationale": "a story"}', ("FICTION", 1.0)),
        ('{"label": "UNVERIFIED", "confidence": -1}', ("UNVERIFIED", 0.0)),
    ],
)
def test_a_model_answer_is_parsed_and_clamped(answer, expected):
    from services.core.domain.factuality import parse_factuality

    result = parse_factuality(answer)
    assert (result.label, result.confidence) == expected and result.rationale.startswith("model:")


@pytest.mark.parametrize(
    "answer",
    [None, "", "not json", "[]", '{"label": "TRUE", "confidence": 0.5}', '{"label": "FACT", "confidence": "high"}'],
)
def test_an_unusable_model_answer_is_none(answer):
    from services.core.domain.factuality import parse_factuality

    assert parse_factuality(answer) is None


LEGACY = {"label": "FICTION", "confidence": 0.8, "rationale": "hypothetical or fictional cues: 'imagine'"}


@pytest.mark.parametrize(
    "metadata, enriched, lifted",
    [
        ({"source": "slack", "factuality": LEGACY}, True, True),
        ({"factuality": {**LEGACY, "confidence": 1}}, True, True),
        ({"factuality": LEGACY}, False, False),  # never enriched: the client's own
        ({"factuality": {**LEGACY, "by": "me"}}, True, False),  # another shape
        ({"factuality": {**LEGACY, "label": "TRUE"}}, True, False),
        ({"factuality": {**LEGACY, "confidence": True}}, True, False),
        ({"factuality": {**LEGACY, "rationale": 5}}, True, False),
        ({"factuality": "FACT"}, True, False),
        ({}, True, False),
    ],
)
def test_only_enrichments_own_legacy_factuality_is_lifted_out_of_metadata(metadata, enriched, lifted):
    from services.core.domain.factuality import lift_factuality

    out, factuality = lift_factuality(metadata, None, enriched)
    if lifted:
        assert factuality == metadata["factuality"]
        assert out == {k: v for k, v in metadata.items() if k != "factuality"}
    else:
        assert (out, factuality) == (metadata, None)


def test_a_record_with_its_own_factuality_keeps_its_metadata_as_is():
    from services.core.domain.factuality import lift_factuality

    own = {"label": "FACT", "confidence": 0.9, "rationale": "r"}
    assert lift_factuality({"factuality": LEGACY}, own, True) == ({"factuality": LEGACY}, own)
