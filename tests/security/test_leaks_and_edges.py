"""Smaller leaks and edges of issue 24, played as a hostile tenant: alpha
shares a stack with beta (and an operator) and reads what it can of beta's
activity; then the inputs that a bound or a check should stop.

- /enrichment/status shows a tenant its own counts only (the process's are an operator's);
- the /stream ready and gap events carry the tenant's own positions, never the event stream's;
- /metrics is not on the public port (the one the Ingress routes; tests/deploy checks the manifests);
- read-side tags, exclude_tags and context_tags are capped like the write side; /enrichment/reprocess too;
- a Last-Event-ID above 2^64 is a 400, not a 500;
- a short claim key stops a service at start-up without printing the key;
- the entity patterns run in linear time, and find the same entities in normal text."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import httpx
import pytest

from gateway.app import create_app
from gateway.routes.stream import resume_point
from services.core.domain.entities import extract_with_rules, find_emails, find_urls, noise_spans
from services.core.settings import Settings
from tests.e2e.conftest import gateway_url as gateway_url  # noqa: F401 (the e2e stack's fixtures)
from tests.e2e.conftest import stack_services as stack_services  # noqa: F401
from tests.e2e.test_stream import Stream, ready
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
A_READ, A_WRITE, A_ADMIN, B_WRITE, OPERATOR = "alpha-read", "alpha-write", "alpha-admin", "beta-write", "ops"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@pytest.fixture
def stack_settings(settings, tmp_path):
    path = tmp_path / "tokens.json"
    entries = [(A_READ, "alpha", "read"), (A_WRITE, "alpha", "write"), (A_ADMIN, "alpha", "admin")]
    entries.append((B_WRITE, "beta", "write"))
    path.write_text(
        json.dumps(
            [{"token_sha256": digest(t), "tenant": tenant, "role": role} for t, tenant, role in entries]
            + [{"token_sha256": digest(OPERATOR), "role": "operator", "id": "ops"}]
        )
    )
    return settings.override({"memgrid_tokens_file": path, "enrichment_reprocess_max_ids": 20})


@pytest.fixture
async def clients(gateway_url):  # noqa: F811
    opened = {
        token: httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {token}"}, timeout=60.0)
        for token in (A_READ, A_WRITE, A_ADMIN, B_WRITE, OPERATOR)
    }
    yield opened
    for client in opened.values():
        await client.aclose()


async def store(client: httpx.AsyncClient, content: str) -> str:
    reply = await client.post("/memory", json={"content": content, "type": "Context"})
    assert reply.status_code == 201, reply.text
    return reply.json()["memory_id"]


async def status(client: httpx.AsyncClient) -> dict:
    return (await client.get("/enrichment/status")).json()


async def enriched(client: httpx.AsyncClient, at_least: int) -> dict:
    """The caller's status once `at_least` memories were processed and none waits."""

    async def done():
        found = await status(client)
        return found if found["processed"] >= at_least and found["pending"] == 0 else None

    return await wait_for(done, within=60)


@pytest.mark.e2e
async def test_enrichment_status_shows_a_tenant_its_own_counts_only(clients):
    beta = [await store(clients[B_WRITE], f"Beta's private note number {n} about Kubernetes") for n in range(6)]
    await store(clients[A_WRITE], "Alpha's one note about PostgreSQL")
    await enriched(clients[A_READ], 1)
    everyone = await enriched(clients[OPERATOR], 1 + len(beta))
    mine = await status(clients[A_READ])
    # Alpha's own memory only: beta's six enrichments, its queue and failures are not alpha's to count.
    assert (mine["processed"], mine["pending"], mine["queue_size"], mine["failed"]) == (1, 0, 0, 0), mine
    assert mine["stats"]["scope"] == "tenant" and mine["stats"]["embedding"]["embedded"] == 1, mine
    assert everyone["stats"]["scope"] == "every tenant" and everyone["processed"] >= 1 + len(beta)


async def own_event_ids(client: httpx.AsyncClient) -> list[int]:
    """The ids of every event of the caller's tenant the stream holds (a replay from the start)."""
    ids = []
    async with client.stream("GET", "/stream", headers={"Last-Event-ID": "0"}) as response:
        stream = Stream(response)
        await stream.until(ready)
        try:
            while True:
                name, data = await stream.next(within=1.5)
                if isinstance(data, dict) and "memory_id" in data:
                    ids.append(int(stream.id))
        except TimeoutError:
            return ids


@pytest.mark.e2e
async def test_stream_ready_and_gap_events_carry_the_tenants_own_positions(clients):
    await store(clients[A_WRITE], "Alpha's note on the stream")
    await enriched(clients[A_READ], 1)  # alpha's events are all in: created, embedded, enriched
    for n in range(15):  # then beta's activity moves the event stream on, not alpha's position
        await store(clients[B_WRITE], f"Beta's note {n}")
    await enriched(clients[OPERATOR], 16)
    own = max(await own_event_ids(clients[A_READ]))
    async with clients[A_READ].stream("GET", "/stream") as response:
        stream = Stream(response)
        opened = (await stream.until(ready))[-1][1]
    assert opened["last_event_id"] == own and stream.id == str(own), opened  # alpha's last event, not beta's
    # Far ahead of the stream (as after a recreated stream): the gap resumes at alpha's own position too.
    async with clients[A_READ].stream("GET", "/stream", headers={"Last-Event-ID": str(10**12)}) as response:
        seen = await Stream(response).until(lambda name, data: name == "gap")
    gap = seen[-1][1]
    assert gap["requested_after"] == 10**12 and gap["resumed_after"] == own, gap
    # Beta's events are there, past alpha's: the positions were withheld, not missing.
    async with clients[B_WRITE].stream("GET", "/stream") as response:
        assert (await Stream(response).until(ready))[-1][1]["last_event_id"] > own + 15


@pytest.mark.e2e
async def test_reprocess_is_bounded(clients):
    ids = [str(uuid.uuid4()) for _ in range(21)]  # ENRICHMENT_REPROCESS_MAX_IDS is 20 here
    reply = await clients[A_ADMIN].post("/enrichment/reprocess", json={"ids": ids})
    assert reply.status_code == 400 and reply.json()["reason"] == "TOO_MANY_IDS", reply.text
    assert "20" in reply.json()["message"]
    within = await clients[A_ADMIN].post("/enrichment/reprocess", json={"ids": ids[:20]})
    assert within.status_code == 202, within.text


def gateway_alone(**settings) -> httpx.AsyncClient:
    """The gateway over ASGI, no services behind it: a check that passes reaches them and fails (5xx)."""
    app = create_app(Settings(_env_file=None, **settings), "unit-token")
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://gateway",
        headers={"Authorization": "Bearer unit-token"},
    )


@pytest.mark.parametrize(
    "path, reason",
    [
        ("/recall?tags=" + ",".join(f"t{i}" for i in range(51)), "TOO_MANY_TAGS"),
        ("/recall?exclude_tags=" + ",".join(f"t{i}" for i in range(51)), "TOO_MANY_TAGS"),
        ("/recall?context_tags=" + ",".join(f"t{i}" for i in range(51)), "TOO_MANY_TAGS"),
        ("/recall?query=x&exclude_tags=" + "x" * 129, "TAG_TOO_LONG"),
        ("/recall?context_tags=" + ":".join("abcdefghijk"), "TAG_TOO_DEEP"),
        ("/memory/by-tag?tags=" + ",".join(f"t{i}" for i in range(51)), "TOO_MANY_TAGS"),
    ],
)
async def test_read_side_tags_are_capped_like_the_write_side(path, reason):
    async with gateway_alone() as client:
        reply = await client.get(path)
    assert reply.status_code == 400 and reply.json()["reason"] == reason, reply.text


async def test_a_last_event_id_past_64_bits_is_a_400():
    for value in (str(2**64), "9" * 30):
        async with gateway_alone() as client:
            reply = await client.get("/stream", headers={"Last-Event-ID": value})
        assert reply.status_code == 400 and reply.json()["reason"] == "INVALID_EVENT_ID", reply.text
    assert resume_point(str(2**64 - 1), None) == 2**64 - 1  # the largest stream sequence is still an id


async def test_metrics_are_not_on_the_public_port():
    async with gateway_alone() as client:
        for path in ("/metrics", "/metrics/"):
            assert (await client.get(path)).status_code == 404


def test_a_short_claim_key_stops_a_service_without_printing_it(tmp_path):
    key = "short-but-secret-" + uuid.uuid4().hex[:8]  # 25 characters: under the 32 required
    env = {**os.environ, "SERVICE_CLAIM_KEY": key, "MEMGRID_DATA_DIR": str(tmp_path)}
    for name in ("services.ingest.main", "gateway.main"):
        run = subprocess.run(
            [sys.executable, "-m", name], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
        )
        assert run.returncode != 0, (name, run.stdout, run.stderr)
        output = run.stdout + run.stderr
        assert "service_claim_key" in output.lower() and key not in output, (name, output[-2000:])


#: The cost of the entity patterns on 20,000 characters: an adversarial text against a plain one.
_RATIO = textwrap.dedent(
    """
    import json, sys, time
    from services.core.domain.entities import extract_with_rules, find_emails, find_urls, noise_spans
    plain = ("We chose PostgreSQL over MongoDB; see docs.example.com and mail bob@example.org. " * 300)[:20000]
    def cost(text):
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            for f in (extract_with_rules, find_emails, find_urls, noise_spans):
                f(text)
            best = min(best, time.perf_counter() - started)
        return best
    ratios = {name: cost((unit * 20000)[:20000]) / cost(plain) for name, unit in json.loads(sys.argv[1]).items()}
    print(json.dumps(ratios))
    """
)
ADVERSARIAL = {"a.a": "a.", "a-a": "a-", "a@a": "a@", "@a.": "@a.", "a.a-": "a.a-", "a.b@": "a.b@", "www": "www."}


def test_the_entity_patterns_run_in_linear_time_and_find_the_same_entities():
    """Each adversarial text costs about what a plain one of its length does (a ratio, not milliseconds);
    before, `a.a.a...` of 20,000 characters took 89 s against 90 ms. Run apart, so a regression is
    a timeout here rather than a hung suite."""
    try:
        run = subprocess.run(
            [sys.executable, "-c", _RATIO, json.dumps(ADVERSARIAL)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the entity patterns took over 60 s on 20,000 adversarial characters")
    assert run.returncode == 0, run.stderr
    ratios = json.loads(run.stdout)
    assert max(ratios.values()) < 10, ratios
    # ... and finds what it found in normal text.
    text = (
        "Mail Bob.Smith+ops@mail.example.co.uk or see https://x.org/a?b=1, www.y.com and z.io; "
        "the docs moved... to docs.example.com/setup (not foo_bar.com). Ask @alice_w about project Apollo."
    )
    assert find_emails(text) == ["Bob.Smith+ops@mail.example.co.uk"]
    assert find_urls(text) == ["https://x.org/a?b=1", "www.y.com", "z.io", "docs.example.com/setup"]
    assert [text[s:e] for s, e in noise_spans(text)][:2] == ["Bob.Smith+ops@mail.example.co.uk", "https://x.org/a?b=1,"]
    assert extract_with_rules(text)["projects"] == ["Apollo"]
    assert find_urls("see 1.2.3.4.5.6.7.8.9.10.11.12.example.com") == ["1.2.3.4.5.6.7.8.9.10.11.12.example.com"]
