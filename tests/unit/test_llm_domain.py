"""The pure rules of the LLM steps: request shape, answer parsing,
summary cleaning and the circuit breaker."""

from __future__ import annotations

import json

import pytest

from services.core.domain.classification import FALLBACK, Classification
from services.core.domain.llm import (
    CLASSIFICATION_SYSTEM_PROMPT,
    TYPE_ALIASES,
    CircuitBreaker,
    classification_request,
    clean_summary,
    parse_classification,
    summary_request,
    summary_system_prompt,
)
from services.core.domain.model import MEMORY_TYPES


def answer(**fields) -> str:
    return json.dumps(fields)


class FakeClock:
    """Monotonic seconds that a test moves by hand."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


# The system prompt and the request.


def test_system_prompt_is_spec_000_verbatim():
    assert CLASSIFICATION_SYSTEM_PROMPT.startswith(
        "You are a memory classification system. Classify each memory into exactly ONE of these types:\n"
        "- Decision: Choices made, selected options, what was decided\n"
    )
    assert "- Context: Situational background, what was happening, circumstances\n\n" in CLASSIFICATION_SYSTEM_PROMPT
    assert CLASSIFICATION_SYSTEM_PROMPT.endswith('Return JSON with: {"type": "<type>", "confidence": <0.0-1.0>}')
    for name in MEMORY_TYPES:
        assert f"\n- {name}: " in CLASSIFICATION_SYSTEM_PROMPT


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-4o", "gpt-4.1-nano", "gpt-5", "o1-mini", "o3", "o4-mini"])
def test_new_models_get_max_completion_tokens_and_no_temperature(model):
    request = classification_request(model, "hello", 1000)
    assert request["model"] == model
    assert request["max_completion_tokens"] == 50
    assert "max_tokens" not in request
    assert "temperature" not in request


@pytest.mark.parametrize("model", ["llama3", "gpt-4-turbo", "gpt-3.5-turbo", "mistral-small"])
def test_other_models_get_max_tokens_and_temperature_0_3(model):
    request = classification_request(model, "hello", 1000)
    assert request["max_tokens"] == 50
    assert request["temperature"] == pytest.approx(0.3)
    assert "max_completion_tokens" not in request


def test_request_asks_for_a_json_object_with_the_system_prompt_and_the_first_n_chars():
    content = "a" * 999 + "bc" + "z" * 50
    request = classification_request("gpt-4o-mini", content, 1000)
    assert request["response_format"] == {"type": "json_object"}
    system, user = request["messages"]
    assert system == {"role": "system", "content": CLASSIFICATION_SYSTEM_PROMPT}
    assert user["role"] == "user"
    assert user["content"] == "a" * 999 + "b"


def test_input_limit_comes_from_the_caller():
    request = classification_request("gpt-4o-mini", "abcdef", 3)
    assert request["messages"][1]["content"] == "abc"


# Parsing the answer.


@pytest.mark.parametrize("name", MEMORY_TYPES)
def test_canonical_types_are_kept_with_their_confidence(name):
    assert parse_classification(answer(type=name, confidence=0.82)) == Classification(name, 0.82)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("decision", "Decision"),
        ("INSIGHT", "Insight"),
        (" habit ", "Habit"),
        ("analysis", "Insight"),
        ("memory", "Context"),
        ("Memory", "Context"),
        ("milestone", "Context"),
        ("template", "Pattern"),
        ("health_habits", "Habit"),
        ("interests", "Preference"),
        ("legal_analysis", "Insight"),
        ("Meeting_Notes", "Context"),
    ],
)
def test_aliases_are_normalised(raw, expected):
    assert parse_classification(answer(type=raw, confidence=0.8)) == Classification(expected, 0.8)


def test_alias_table_holds_the_legacy_names_and_maps_only_to_canonical_types():
    legacy = {
        "memory": "Context",
        "milestone": "Context",
        "analysis": "Insight",
        "observation": "Insight",
        "document": "Context",
        "meeting_notes": "Context",
        "template": "Pattern",
        "project": "Context",
        "issue": "Insight",
        "timeline": "Context",
        "organization": "Context",
        "person": "Context",
        "interests": "Preference",
        "personality": "Preference",
        "emotional_patterns": "Preference",
        "relationship_dynamics": "Preference",
        "personal_situation": "Context",
        "health_habits": "Habit",
        "practical_info": "Context",
        "communication": "Preference",
        "legal_analysis": "Insight",
    }
    for alias, canonical in legacy.items():
        assert TYPE_ALIASES[alias] == canonical
    for name in MEMORY_TYPES:
        assert TYPE_ALIASES[name.lower()] == name
    assert set(TYPE_ALIASES.values()) <= set(MEMORY_TYPES)
    assert all(key == key.lower() for key in TYPE_ALIASES)


@pytest.mark.parametrize("raw", ["Recipe", "banana", "meeting notes"])
def test_an_unmappable_type_is_context_0_5_whatever_the_confidence(raw):
    assert parse_classification(answer(type=raw, confidence=0.99)) == Classification("Context", 0.5)


@pytest.mark.parametrize("confidence", [None, "high", [0.9], {"v": 1}, True, float("nan")])
def test_a_missing_or_non_numeric_confidence_is_0_7(confidence):
    text = answer(type="Decision") if confidence is None else answer(type="Decision", confidence=confidence)
    assert parse_classification(text) == Classification("Decision", 0.7)


def test_a_null_confidence_is_0_7():
    assert parse_classification('{"type": "Style", "confidence": null}') == Classification("Style", 0.7)


@pytest.mark.parametrize(("confidence", "expected"), [(1.7, 1.0), (-0.2, 0.0), (0, 0.0), (1, 1.0), ("0.45", 0.45)])
def test_confidence_is_clamped_to_0_1(confidence, expected):
    assert parse_classification(answer(type="Habit", confidence=confidence)) == Classification("Habit", expected)


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "   \n",
        "not json",
        '{"type": "Decision"',
        '["Decision", 0.9]',
        '"Decision"',
        "42",
        "null",
        "{}",
        '{"confidence": 0.9}',
        '{"type": "", "confidence": 0.9}',
        '{"type": "   ", "confidence": 0.9}',
        '{"type": null, "confidence": 0.9}',
        '{"type": 7, "confidence": 0.9}',
    ],
)
def test_an_empty_invalid_or_typeless_answer_is_the_fallback(text):
    found = parse_classification(text)
    assert found == FALLBACK
    assert (found.type, found.confidence) == ("Memory", 0.3)


# Summaries.


def test_summary_prompt_names_the_target_length_and_asks_for_plain_text():
    prompt = summary_system_prompt(300)
    assert "about 300 characters" in prompt
    assert "key facts" in prompt
    assert "plain text" in prompt
    assert "about 120 characters" in summary_system_prompt(120)


def test_summary_request_sends_the_whole_content_and_the_model_rules():
    content = "x" * 1800
    request = summary_request("gpt-4o-mini", content, 300)
    system, user = request["messages"]
    assert system == {"role": "system", "content": summary_system_prompt(300)}
    assert user == {"role": "user", "content": content}
    assert request["max_completion_tokens"] >= 75  # ~4 chars a token: room for 300 characters
    assert "temperature" not in request and "response_format" not in request
    legacy = summary_request("llama3", content, 300)
    assert legacy["max_tokens"] == request["max_completion_tokens"]
    assert legacy["temperature"] == pytest.approx(0.3)


def test_clean_summary_trims_and_keeps_a_shorter_text():
    assert clean_summary("  Chose Postgres for ACID.\n", "We chose PostgreSQL over MongoDB for ACID.") == (
        "Chose Postgres for ACID."
    )


@pytest.mark.parametrize("text", [None, "", "  \n "])
def test_clean_summary_rejects_an_empty_answer(text):
    assert clean_summary(text, "some long original content") is None


def test_clean_summary_rejects_an_answer_not_shorter_than_the_original():
    original = "short original"
    assert clean_summary(original, original) is None
    assert clean_summary(original + " and more", original) is None
    assert clean_summary(original[:-1], original) == original[:-1]


# The circuit breaker.


def test_breaker_starts_closed():
    breaker = CircuitBreaker(cooldown_seconds=300, clock=FakeClock())
    assert breaker.allow()
    assert not breaker.is_open


def test_trip_opens_the_breaker_for_the_cooldown_then_it_closes_by_itself():
    clock = FakeClock()
    breaker = CircuitBreaker(cooldown_seconds=300, clock=clock)
    breaker.trip()
    assert not breaker.allow()
    assert breaker.is_open
    clock.now += 299.9
    assert not breaker.allow()
    clock.now += 0.1
    assert breaker.allow()
    assert not breaker.is_open
    clock.now += 10_000
    assert breaker.allow()


def test_a_new_trip_restarts_the_cooldown_from_now():
    clock = FakeClock()
    breaker = CircuitBreaker(cooldown_seconds=60, clock=clock)
    breaker.trip()
    clock.now += 50
    breaker.trip()
    clock.now += 50
    assert not breaker.allow()
    clock.now += 10
    assert breaker.allow()


def test_cooldown_comes_from_the_caller():
    clock = FakeClock()
    breaker = CircuitBreaker(cooldown_seconds=5, clock=clock)
    breaker.trip()
    clock.now += 5
    assert breaker.allow()
