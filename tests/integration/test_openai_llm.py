"""OpenAILanguageModel: the real `openai` client over real HTTP against a
stub chat-completions server on a free local port (never the real API)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from services.core.adapters.openai_llm import OpenAILanguageModel, language_model_from
from services.core.domain.classification import Classification
from services.core.domain.llm import CLASSIFICATION_SYSTEM_PROMPT, CircuitBreaker, summary_system_prompt
from services.core.settings import ModelSettings, Settings

pytestmark = pytest.mark.integration

FALLBACK = Classification("Memory", 0.3)
COOLDOWN_SECONDS = 300.0
QUOTA_BODY = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
}


def completion(content: str | None, model: str = "gpt-4o-mini") -> dict:
    """A chat-completion response body as OpenAI sends it."""
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class StubOpenAI:
    """Records each request and answers with the queued (status, body) replies,
    the last one repeating."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.paths: list[str] = []
        self._replies: list[tuple[int, object]] = [(200, completion('{"type": "Decision", "confidence": 0.9}'))]
        self._lock = threading.Lock()
        self.delay_seconds = 0.0
        self.in_flight = 0
        self.max_in_flight = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, reply = stub._record(self.path, json.loads(body))
                time.sleep(stub.delay_seconds)
                stub._done()
                payload = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:  # keep test output quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # A short poll interval keeps shutdown (once per test) quick.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def reply(self, *replies: tuple[int, object]) -> None:
        """Answer the next requests with these replies, the last one repeating."""
        with self._lock:
            self._replies = list(replies)

    def _record(self, path: str, body: dict) -> tuple[int, object]:
        with self._lock:
            self.paths.append(path)
            self.requests.append(body)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self._replies.pop(0) if len(self._replies) > 1 else self._replies[0]

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class FakeClock:
    """Monotonic seconds that a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def stub() -> Iterator[StubOpenAI]:
    server = StubOpenAI()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def make_model(stub, clock):
    """Builds OpenAILanguageModels on the stub; closes them after the test."""
    built: list[OpenAILanguageModel] = []

    def make(
        model: str = "gpt-4o-mini", summarization_model: str | None = None, max_concurrency: int = 4
    ) -> OpenAILanguageModel:
        llm = OpenAILanguageModel(
            api_key="sk-test",
            base_url=stub.base_url,
            classification_model=model,
            summarization_model=summarization_model,
            timeout_seconds=5.0,
            input_chars=1000,
            breaker=CircuitBreaker(cooldown_seconds=COOLDOWN_SECONDS, clock=clock),
            max_concurrency=max_concurrency,
        )
        built.append(llm)
        return llm

    yield make
    for llm in built:
        await llm.close()


@pytest.fixture
def llm(make_model) -> OpenAILanguageModel:
    return make_model()


def ok(content: str | None) -> tuple[int, object]:
    return 200, completion(content)


async def test_classify_sends_spec_request_for_the_default_model(stub, llm):
    content = "x" * 990 + "0123456789" + "TAIL" * 100
    stub.reply(ok('{"type": "Insight", "confidence": 0.85}'))

    found = await llm.classify(content)

    assert found == Classification("Insight", 0.85)
    assert stub.paths == ["/v1/chat/completions"]
    body = stub.requests[0]
    assert body["model"] == "gpt-4o-mini"
    assert body["max_completion_tokens"] == 50
    assert "temperature" not in body
    assert "max_tokens" not in body
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"][0] == {"role": "system", "content": CLASSIFICATION_SYSTEM_PROMPT}
    assert body["messages"][1]["role"] == "user"
    assert body["messages"][1]["content"] == "x" * 990 + "0123456789"
    assert len(body["messages"][1]["content"]) == 1000


async def test_classify_sends_max_tokens_and_temperature_to_other_models(stub, make_model):
    llm = make_model("llama3")
    stub.reply(ok('{"type": "Habit", "confidence": 0.6}'))
    assert await llm.classify("Stretch at noon") == Classification("Habit", 0.6)
    body = stub.requests[0]
    assert body["model"] == "llama3"
    assert body["max_tokens"] == 50
    assert body["temperature"] == pytest.approx(0.3)
    assert "max_completion_tokens" not in body
    assert body["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('{"type": "analysis", "confidence": 0.8}', Classification("Insight", 0.8)),
        ('{"type": "decision", "confidence": 0.75}', Classification("Decision", 0.75)),
        ('{"type": "Recipe", "confidence": 0.95}', Classification("Context", 0.5)),
        ('{"type": "Style"}', Classification("Style", 0.7)),
        ('{"type": "Pattern", "confidence": 3}', Classification("Pattern", 1.0)),
    ],
)
async def test_classify_normalises_the_answer_end_to_end(stub, llm, answer, expected):
    stub.reply(ok(answer))
    assert await llm.classify("Some content") == expected


@pytest.mark.parametrize(
    "reply",
    [
        ok("this is not json"),
        ok(""),
        ok(None),
        ok('["Decision"]'),
        (200, {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []}),
        (500, {"error": {"message": "boom", "type": "server_error", "code": None}}),
        (400, {"error": {"message": "bad model", "type": "invalid_request_error", "code": None}}),
        (503, "<html>upstream down</html>"),
    ],
    ids=["invalid-json", "empty", "null", "not-an-object", "no-choices", "http-500", "http-400", "http-503-html"],
)
async def test_unusable_answers_and_api_errors_are_the_fallback(stub, llm, reply):
    stub.reply(reply)
    assert await llm.classify("Some content") == FALLBACK
    assert len(stub.requests) == 1  # max_retries=0: one quick failure, no retry storm


async def test_connection_failure_is_the_fallback(stub, llm):
    stub.stop()  # nothing listens on the port any more
    assert await llm.classify("Some content") == FALLBACK
    assert await llm.summarize("Some long content " * 20, 100) is None


async def test_quota_error_opens_the_breaker_until_the_cooldown_ends(stub, llm, clock):
    stub.reply((429, QUOTA_BODY), ok('{"type": "Decision", "confidence": 0.9}'))

    assert await llm.classify("first") == FALLBACK
    assert len(stub.requests) == 1

    # Open: no HTTP request at all, for either step.
    assert await llm.classify("second") == FALLBACK
    assert await llm.summarize("a long enough text to summarise " * 10, 50) is None
    clock.now += COOLDOWN_SECONDS - 1
    assert await llm.classify("third") == FALLBACK
    assert len(stub.requests) == 1

    clock.now += 1
    assert await llm.classify("fourth") == Classification("Decision", 0.9)
    assert len(stub.requests) == 2
    assert stub.requests[1]["messages"][1]["content"] == "fourth"


async def test_a_429_that_mentions_quota_only_in_its_message_trips_the_breaker(stub, llm):
    stub.reply((429, {"error": {"message": "Monthly quota exceeded for this key", "type": "rate_limit"}}))
    assert await llm.classify("first") == FALLBACK
    assert await llm.classify("second") == FALLBACK
    assert len(stub.requests) == 1


async def test_a_plain_rate_limit_does_not_trip_the_breaker(stub, llm):
    slow_down = {
        "error": {"message": "Rate limit reached, retry in 20ms", "type": "requests", "code": "rate_limit_exceeded"}
    }
    stub.reply((429, slow_down), ok('{"type": "Decision", "confidence": 0.9}'))
    assert await llm.classify("first") == FALLBACK
    assert await llm.classify("second") == Classification("Decision", 0.9)
    assert len(stub.requests) == 2


async def test_a_quota_error_in_summarize_also_skips_classify(stub, llm):
    stub.reply((429, QUOTA_BODY))
    assert await llm.summarize("a long enough text to summarise " * 10, 50) is None
    assert await llm.classify("anything") == FALLBACK
    assert len(stub.requests) == 1


async def test_concurrent_calls_are_bounded_by_max_concurrency(stub, make_model):
    llm = make_model(max_concurrency=2)
    stub.delay_seconds = 0.1
    found = await asyncio.gather(*(llm.classify(f"content {i}") for i in range(6)))
    assert found == [Classification("Decision", 0.9)] * 6
    assert len(stub.requests) == 6
    assert stub.max_in_flight == 2


async def test_calls_waiting_for_a_slot_are_skipped_once_the_quota_error_lands(stub, make_model):
    llm = make_model(max_concurrency=1)
    stub.delay_seconds = 0.1
    stub.reply((429, QUOTA_BODY), ok('{"type": "Decision", "confidence": 0.9}'))
    found = await asyncio.gather(*(llm.classify(f"content {i}") for i in range(4)))
    assert found == [FALLBACK] * 4
    assert len(stub.requests) == 1


async def test_summarize_returns_the_stub_text_and_sends_the_whole_content(stub, llm):
    content = "We chose PostgreSQL over MongoDB because we need ACID transactions. " * 20
    stub.reply(ok("  Chose PostgreSQL over MongoDB for ACID.  \n"))

    assert await llm.summarize(content, 300) == "Chose PostgreSQL over MongoDB for ACID."

    body = stub.requests[0]
    assert body["model"] == "gpt-4o-mini"  # no summarization model: the classification model
    assert body["messages"][0] == {"role": "system", "content": summary_system_prompt(300)}
    assert body["messages"][1] == {"role": "user", "content": content}
    assert "max_completion_tokens" in body and "temperature" not in body
    assert "response_format" not in body


async def test_summarize_uses_the_summarization_model_when_set(stub, make_model):
    llm = make_model("gpt-4o-mini", summarization_model="llama3")
    stub.reply(ok("Short."))
    assert await llm.summarize("A much longer original text.", 100) == "Short."
    body = stub.requests[0]
    assert body["model"] == "llama3"
    assert body["temperature"] == pytest.approx(0.3) and "max_tokens" in body


@pytest.mark.parametrize(
    "reply",
    [
        ok(""),
        ok(None),
        ok("This answer is much longer than the original content it was meant to shorten."),
        (500, {"error": {"message": "boom", "type": "server_error"}}),
    ],
    ids=["empty", "null", "not-shorter", "http-500"],
)
async def test_summarize_is_none_for_an_unusable_answer_or_an_error(stub, llm, reply):
    stub.reply(reply)
    assert await llm.summarize("A short original text.", 300) is None
    assert len(stub.requests) == 1


def test_no_api_key_means_no_language_model():
    assert language_model_from(ModelSettings(_env_file=None, openai_api_key=None)) is None
    assert language_model_from(ModelSettings(_env_file=None, openai_api_key="")) is None


async def test_factory_builds_a_model_from_settings(stub):
    settings = Settings(
        _env_file=None,
        openai_api_key="sk-test",
        openai_base_url=stub.base_url,
        classification_model="llama3",
        classification_input_chars=5,
    )
    llm = language_model_from(settings.models)
    assert llm is not None
    try:
        stub.reply(ok('{"type": "observation", "confidence": 0.66}'))
        assert await llm.classify("abcdefgh") == Classification("Insight", 0.66)
    finally:
        await llm.close()
    assert stub.requests[0]["model"] == "llama3"
    assert stub.requests[0]["messages"][1]["content"] == "abcde"


async def test_factuality_asks_the_model_and_parses_its_answer(stub, llm):
    stub.reply(ok('{"label": "FACT", "confidence": 0.85, "rationale": "specific and sourced"}'))
    result = await llm.assess_factuality("Invoice 4411 was paid on 3 March 2026.", "gmail")
    assert (result.label, result.confidence) == ("FACT", 0.85)
    request = stub.requests[-1]
    assert request["response_format"] == {"type": "json_object"}
    assert "FACT" in request["messages"][0]["content"]
    assert request["messages"][1]["content"] == "Source: gmail\nMemory: Invoice 4411 was paid on 3 March 2026."


async def test_factuality_is_none_when_the_model_fails(stub, llm):
    stub.reply((500, {"error": {"message": "boom"}}))
    assert await llm.assess_factuality("anything", None) is None


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (ok('{"relation": "contradicts"}'), "contradicts"),
        (ok('{"relation": " Related "}'), "related"),
        (ok('{"relation": "unrelated"}'), "unrelated"),
        (ok('{"relation": "maybe"}'), None),
        (ok("not json"), None),
        ((500, {"error": {"message": "boom"}}), None),
    ],
)
async def test_judge_association_sends_both_memories_and_reads_the_relation(stub, llm, reply, expected):
    stub.reply(reply)
    assert await llm.judge_association("We use Postgres", "We no longer use Postgres") == expected
    sent = stub.requests[-1]
    assert sent["messages"][1]["content"] == "Memory 1: We use Postgres\nMemory 2: We no longer use Postgres"
    assert sent["response_format"] == {"type": "json_object"}
