"""Schema-based fuzzing: schemathesis reads the live /openapi.json and sends
each operation requests generated from its parameters and body schemas, with
a valid token (and the admin header, so admin routes run too). No answer may
be a server error, and every answer must be documented: its status code,
content type and body schema.

The examples are bounded (MAX_EXAMPLES per operation) and derandomised, so a
run is repeatable and takes about half a minute. Operations with a
{memory_id} draw it from generated strings and from ids of stored memories,
so the fuzzing reaches past "not found".

Hypothesis drives blocking HTTP calls, so it runs in a worker thread while
the event loop keeps serving the in-process stack.
"""

from __future__ import annotations

import asyncio

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.e2e.conftest import API_TOKEN

pytestmark = pytest.mark.e2e

ADMIN_TOKEN = "fuzz-admin-token"
HEADERS = {"Authorization": f"Bearer {API_TOKEN}", "X-Admin-Token": ADMIN_TOKEN}
MAX_EXAMPLES = 25
#: Fewer examples where each call is slow and the input space small.
EXAMPLES = {
    # A rebuild of the vector index takes over a second even on a handful of
    # memories, and the body has one field (batch_size).
    "POST /admin/reindex": 4,
}

#: Operations not fuzzed, each with the reason. Every other operation of the
#: live description is fuzzed; the test fails if this names one it lacks.
EXCLUDED = {
    # An endless server-sent event stream: no answer ever completes, so no
    # check can run on one (tests/e2e/test_stream.py covers the stream).
    "GET /stream": "endless text/event-stream",
}


def no_server_error(ctx, response, case):
    """not_a_server_error, except a 501 the operation documents (an operation
    not built yet says so; none is today)."""
    if response.status_code == 501 and "501" in case.operation.definition.raw.get("responses", {}):
        return None
    return not_a_server_error(ctx, response, case)


CHECKS = [no_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture
def stack_settings(stack_settings):
    """An admin token, so admin routes are fuzzed past the 403."""
    return stack_settings.override({"admin_api_token": ADMIN_TOKEN})


def fuzz(description: dict, base_url: str, memory_ids: list[str]) -> tuple[set[str], dict[str, str]]:
    """Fuzz every operation but EXCLUDED; (labels seen, failure report by label)."""
    schema = schemathesis.openapi.from_dict(description)
    schema.config.update(base_url=base_url)
    # Tokens come from HEADERS: generated security parameters would only test 401s.
    schema.config.generation.update(modes=[schemathesis.GenerationMode.POSITIVE], with_security_parameters=False)
    seen, failures = set(), {}
    with requests.Session() as session:
        for result in schema.get_all_operations():
            operation = result.ok()
            seen.add(operation.label)
            if operation.label in EXCLUDED:
                continue
            strategy = operation.as_strategy()
            if "{memory_id}" in operation.path:
                stored = [operation.as_strategy(path_parameters={"memory_id": i}) for i in memory_ids]
                strategy = st.one_of(strategy, *stored)

            @hypothesis.settings(
                max_examples=EXAMPLES.get(operation.label, MAX_EXAMPLES),
                derandomize=True,
                database=None,
                deadline=None,
                suppress_health_check=list(hypothesis.HealthCheck),
                phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
            )
            @hypothesis.given(case=strategy)
            def run(case):
                case.call_and_validate(session=session, headers=HEADERS, checks=CHECKS, timeout=30)

            try:
                run()
            except (schemathesis.errors.FailureGroup, Exception) as exc:  # reported with a curl reproduction
                failures[operation.label] = str(exc)
    return seen, failures


@pytest.mark.timeout(300)  # about 30 s alone; room for a loaded machine
async def test_every_operation_answers_without_server_errors_and_as_documented(client, gateway_url):
    description = (await client.get("/openapi.json")).json()
    ids = []
    for content in ("Chose PostgreSQL over MongoDB for ACID", "Helm charts deploy the stack"):
        created = await client.post("/memory", json={"content": content, "tags": ["fuzz"]})
        assert created.status_code == 201, created.text
        ids.append(created.json()["memory_id"])
    seen, failures = await asyncio.to_thread(fuzz, description, gateway_url, ids)
    assert set(EXCLUDED) <= seen, "EXCLUDED names an operation the description lacks"
    assert len(seen) >= 28, sorted(seen)
    assert not failures, "\n\n".join(f"== {label}\n{report}" for label, report in sorted(failures.items()))
