"""OpenAILanguageModel: the LanguageModel port on an OpenAI-compatible
chat-completions API (OpenAI itself, or any server at `base_url`).

It never raises: the write path must not fail because the model did. A quota
error opens the circuit breaker, and while it is open no request goes out.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import openai
import structlog

from services.core.domain.classification import FALLBACK, Classification
from services.core.domain.factuality import Factuality, parse_factuality
from services.core.domain.llm import (
    CircuitBreaker,
    association_request,
    classification_request,
    clean_summary,
    factuality_request,
    parse_association,
    parse_classification,
    summary_request,
)

if TYPE_CHECKING:
    from services.core.settings import ModelSettings

log = structlog.get_logger()

_QUOTA_CODE = "insufficient_quota"
_TOO_MANY_REQUESTS = 429


def is_quota_error(exc: BaseException) -> bool:
    """Whether the API said the account's quota is spent (not a passing rate limit)."""
    if not isinstance(exc, openai.APIStatusError):
        return False
    if _QUOTA_CODE in (exc.code, exc.type):
        return True
    # Some OpenAI-compatible servers only say so in the text of a 429.
    return exc.status_code == _TOO_MANY_REQUESTS and "quota" in f"{exc.message} {exc.body}".lower()


def _answer_text(response: Any) -> str | None:
    # A compatible server may send no choices or no message; that is an empty answer.
    choices = getattr(response, "choices", None)
    if not choices:
        return None
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    return content if isinstance(content, str) else None


class OpenAILanguageModel:
    """LanguageModel over `openai.AsyncOpenAI`, at most `max_concurrency` calls at once."""

    def __init__(
        self,
        api_key: str,
        base_url: str | None,
        classification_model: str,
        summarization_model: str | None,
        timeout_seconds: float,
        input_chars: int,
        breaker: CircuitBreaker,
        max_concurrency: int,
    ):
        # No retries inside the client: a failure must be quick, and the
        # breaker, not a retry loop, decides when to try the model again.
        self._client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=timeout_seconds, max_retries=0)
        self._classification_model = classification_model
        self._summarization_model = summarization_model or classification_model
        self._input_chars = input_chars
        self._breaker = breaker
        self._slots = asyncio.Semaphore(max_concurrency)

    async def classify(self, content: str) -> Classification:
        """A type and confidence from the model; the fallback (Memory 0.3) when
        the breaker is open, the call fails or the answer is unusable."""
        request = classification_request(self._classification_model, content, self._input_chars)
        answer = await self._complete("classify", request)
        return FALLBACK if answer is None else parse_classification(answer)

    async def summarize(self, content: str, target_length: int) -> str | None:
        """About `target_length` characters of summary, or None when the model
        is skipped, fails, or answers with nothing shorter than the content."""
        request = summary_request(self._summarization_model, content, target_length)
        answer = await self._complete("summarize", request)
        return clean_summary(answer, content)

    async def assess_factuality(self, content: str, source: str | None) -> Factuality | None:
        """FACT / UNVERIFIED / FICTION from the model, or None when it is skipped,
        fails or answers unusably (the rule-based assessment then decides)."""
        request = factuality_request(self._classification_model, content, source, self._input_chars)
        return parse_factuality(await self._complete("factuality", request))

    async def judge_association(self, first: str, second: str) -> str | None:
        """contradicts / related / unrelated from the model, or None when it is
        skipped, fails or answers unusably (creative association's rule then decides)."""
        request = association_request(self._classification_model, first, second, self._input_chars)
        return parse_association(await self._complete("association", request))

    async def close(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    async def _complete(self, step: str, request: dict[str, Any]) -> str | None:
        """The text of one chat completion, or None when skipped or failed."""
        if not self._breaker.allow():
            return None
        async with self._slots:
            # Checked again: the breaker may have tripped while this call waited for a slot.
            if not self._breaker.allow():
                return None
            try:
                response = await self._client.chat.completions.create(**request)
            except Exception as exc:  # any failure is the fallback, by the port's contract
                if is_quota_error(exc):
                    self._breaker.trip()
                    log.warning("llm quota exhausted, circuit opened", step=step, model=request["model"])
                else:
                    log.warning("llm call failed", step=step, model=request["model"], error=type(exc).__name__)
                return None
        return _answer_text(response)


def language_model_from(settings: ModelSettings) -> OpenAILanguageModel | None:
    """The language model the settings describe, or None without an API key
    (the LLM steps are then skipped)."""
    if not settings.openai_api_key:
        return None
    return OpenAILanguageModel(
        api_key=settings.openai_api_key,
        base_url=settings.openai_base_url,
        classification_model=settings.classification_model,
        summarization_model=settings.summarization_model,
        timeout_seconds=settings.llm_timeout_seconds,
        input_chars=settings.classification_input_chars,
        breaker=CircuitBreaker(cooldown_seconds=settings.enrichment_circuit_cooldown_seconds, clock=time.monotonic),
        max_concurrency=settings.llm_max_concurrency,
    )
