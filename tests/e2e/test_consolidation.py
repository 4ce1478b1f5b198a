"""Consolidation through the gateway (POST /consolidate, GET
/consolidate/status) on the whole stack: a dry run changes nothing; decay
scores within the clamp; forgetting archives and deletes exactly what it
should and recall (vector arm included) then withholds it; creative
association links a related pair once; clustering makes a MetaPattern; the
history survives a restart; the roles."""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from services.core.grpc.server import start
from tests.conftest import plane_of
from tests.e2e.conftest import BUILDERS
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

READ, WRITE, ADMIN, B_WRITE = "alpha-read", "alpha-write", "alpha-admin", "beta-write"
#: Belongs to no tenant: what crosses tenants (every_tenant) is its call, not alpha's admin's.
OPERATOR = "the-operator"
#: Fields a read may change without consolidation having done anything.
VOLATILE = ("last_accessed",)


@pytest.fixture
def stack_settings(stack_settings, tmp_path):
    path = tmp_path / "tokens.json"
    entries = [
        (READ, "alpha", "read"),
        (WRITE, "alpha", "write"),
        (ADMIN, "alpha", "admin"),
        (B_WRITE, "beta", "write"),
    ]
    path.write_text(
        json.dumps(
            [
                {"token_sha256": hashlib.sha256(t.encode()).hexdigest(), "tenant": tenant, "role": role}
                for t, tenant, role in entries
            ]
            + [{"token_sha256": hashlib.sha256(OPERATOR.encode()).hexdigest(), "role": "operator"}]
        )
    )
    return stack_settings.override(
        {
            "memgrid_tokens_file": path,
            # Forgetting on: below 0.3 archived, below 0.05 deleted (protections as by default).
            "consolidation_forget_archive_threshold": 0.3,
            "consolidation_forget_delete_threshold": 0.05,
        }
    )


@pytest.fixture
async def tokens(gateway_url):
    opened = {
        token: httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {token}"}, timeout=30.0)
        for token in (READ, WRITE, ADMIN, B_WRITE, OPERATOR)
    }
    yield opened
    for client in opened.values():
        await client.aclose()


def direction(size: int, seed: int, *, near: int | None = None, noise: float = 0.1) -> list[float]:
    """A unit vector: its own direction (seed), or close to `near`'s."""
    base = [math.sin((i + 1) * (seed * 0.731 + 0.17)) for i in range(size)]
    if near is not None:
        anchor = [math.sin((i + 1) * (near * 0.731 + 0.17)) for i in range(size)]
        base = [a + noise * b for a, b in zip(anchor, base, strict=True)]
    norm = math.sqrt(sum(v * v for v in base))
    return [round(v / norm, 6) for v in base]


def ago(days: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).isoformat()


async def store(client: httpx.AsyncClient, content: str, **fields) -> str:
    reply = await client.post("/memory", json={"content": content, "type": "Context", **fields})
    assert reply.status_code == 201, reply.text
    return reply.json()["memory_id"]


async def read(client: httpx.AsyncClient, memory_id: str) -> dict | None:
    reply = await client.get(f"/memory/{memory_id}", params={"state_mode": "history"})
    if reply.status_code == 404:
        return None
    assert reply.status_code == 200, reply.text
    return reply.json()["memory"]


def stable(memory: dict) -> dict:
    return {k: v for k, v in memory.items() if k not in VOLATILE}


async def consolidate(client: httpx.AsyncClient, **body) -> dict:
    reply = await client.post("/consolidate", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def run_of(answer: dict, task: str) -> dict:
    [run] = [r for r in answer["runs"] if r["task"] == task]
    return run


async def forget_world(client: httpx.AsyncClient, size: int) -> dict[str, str]:
    """Memories whose fate under the fixture's thresholds is known from the formula
    (scores: never-accessed old memories sit on their floor, importance x 0.3)."""
    return {
        # Floor 0.03 < 0.05: deleted.
        "doomed": await store(
            client, "An old note nobody needs", importance=0.1, timestamp=ago(400), embedding=direction(size, 1)
        ),
        # Floor 0.15: below 0.3, above 0.05: archived.
        "faded": await store(
            client, "A faded note about an old sprint", importance=0.5, timestamp=ago(400), embedding=direction(size, 2)
        ),
        # Protected: importance >= 0.7, younger than 90 days, a Decision.
        "important": await store(client, "An important old fact", importance=0.8, timestamp=ago(400)),
        "young": await store(client, "A recent low note", importance=0.1, timestamp=ago(30)),
        "decision": await store(
            client, "We decided on Postgres long ago", type="Decision", importance=0.1, timestamp=ago(400)
        ),
    }


async def test_a_dry_run_changes_nothing_and_reports_what_it_would(tokens, stack_settings):
    client = tokens[WRITE]
    world = await forget_world(client, stack_settings.vectors.vector_size)
    before = {key: stable(await read(client, memory_id)) for key, memory_id in world.items()}
    answer = await consolidate(client, mode="full")  # dry_run omitted: a dry run
    assert answer["dry_run"] is True and answer["mode"] == "full"
    assert [r["task"] for r in answer["runs"]] == ["decay", "creative", "cluster", "forget"]
    assert all(r["dry_run"] and r["tenant"] == "alpha" and not r["errors"] for r in answer["runs"])
    decay, forget = run_of(answer, "decay"), run_of(answer, "forget")
    assert decay["counts"]["updated"] == len(world)
    assert {c["memory_id"] for c in decay["sample"]} == set(world.values())
    assert (forget["counts"]["deleted"], forget["counts"]["archived"]) == (1, 1)
    assert {(c["memory_id"], c["action"]) for c in forget["sample"]} == {
        (world["doomed"], "deleted"),
        (world["faded"], "archived"),
    }
    # Every record it touched (or would have) reads back as it was.
    for key, memory_id in world.items():
        assert stable(await read(client, memory_id)) == before[key], key
    status = (await client.get("/consolidate/status")).json()
    assert [h["dry_run"] for h in status["history"]] == [True] * 4
    # A dry run is not a run of the schedule: the decay has not run yet as far as next runs go.
    decay_next = {t["task"]: t for t in status["next_runs"]}["decay"]
    assert decay_next["last_run"] is None and decay_next["interval_seconds"] == 86400


async def test_decay_writes_relevance_within_the_clamp(tokens):
    client = tokens[WRITE]
    ids = {
        await store(client, "Fresh and important", importance=0.9): 0.9,
        await store(client, "Old and unimportant", importance=0.2, timestamp=ago(800)): 0.2,
        await store(client, "Middling", importance=0.5, timestamp=ago(20)): 0.5,
    }
    answer = await consolidate(client, mode="decay", dry_run=False)
    run = run_of(answer, "decay")
    # The first scores are baselines: written, no event.
    assert run["counts"]["updated"] == 3 and run["counts"]["events"] == 0 and not run["dry_run"]
    for memory_id, importance in ids.items():
        score = (await read(client, memory_id))["relevance_score"]
        assert importance * 0.3 - 1e-9 <= score <= 1.0, (memory_id, score)
    old = next(i for i, imp in ids.items() if imp == 0.2)
    assert (await read(client, old))["relevance_score"] == pytest.approx(0.2 * 0.3)  # on its floor
    status = (await client.get("/consolidate/status")).json()
    [last] = status["history"]
    assert (last["task"], last["mode"], last["dry_run"], last["counts"]["updated"]) == ("decay", "decay", False, 3)
    assert last["started"] and last["finished"] and last["errors"] == []
    decay_next = {t["task"]: t for t in status["next_runs"]}["decay"]
    assert decay_next["last_run"] == last["started"]
    due = datetime.fromisoformat(decay_next["next_run"]) - datetime.fromisoformat(last["started"])
    assert due == timedelta(seconds=86400)
    assert {t["task"]: t["next_run"] for t in status["next_runs"]}["forget"] is None  # forget: not scheduled


async def test_forgetting_archives_and_deletes_exactly_and_recall_withholds_them(tokens, stack_settings):
    client = tokens[WRITE]
    size = stack_settings.vectors.vector_size
    world = await forget_world(client, size)
    vectors = {key: ",".join(str(v) for v in direction(size, seed)) for key, seed in (("doomed", 1), ("faded", 2))}

    async def found_by_vector(key: str) -> bool:
        params = {"embedding": vectors[key], "limit": 20, "diversity_factor": 0}
        results = (await client.get("/recall", params=params)).json()["results"]
        return world[key] in {r["id"] for r in results}

    for key in vectors:  # the vector arm finds both before forgetting
        await wait_for(lambda key=key: found_by_vector(key))

    # Unscored memories are kept: nothing goes before decay has scored them.
    unscored = run_of(await consolidate(client, mode="forget", dry_run=False), "forget")
    assert (unscored["counts"]["deleted"], unscored["counts"]["archived"]) == (0, 0)
    await consolidate(client, mode="decay", dry_run=False)
    protected = {key: stable(await read(client, world[key])) for key in ("important", "young", "decision")}
    answer = await consolidate(client, mode="forget", dry_run=False)
    run = run_of(answer, "forget")
    assert (run["counts"]["deleted"], run["counts"]["archived"], run["counts"]["scanned"]) == (1, 1, 5)
    assert await read(client, world["doomed"]) is None
    faded = await read(client, world["faded"])
    assert faded["archived"] is True
    for key, record in protected.items():
        assert stable(await read(client, world[key])) == record, key

    async def withheld(key: str) -> bool:
        return not await found_by_vector(key)

    for key in vectors:  # the projection follows the events: gone from the vector arm too
        await wait_for(lambda key=key: withheld(key))
    text = (await client.get("/recall", params={"query": "faded note old sprint", "limit": 20})).json()["results"]
    assert world["faded"] not in {r["id"] for r in text} and world["doomed"] not in {r["id"] for r in text}
    # A second run finds nothing more to do.
    again = run_of(await consolidate(client, mode="forget", dry_run=False), "forget")
    assert (again["counts"]["deleted"], again["counts"]["archived"]) == (0, 0)


async def test_creative_association_links_a_related_pair_once(tokens, stack_settings):
    client = tokens[WRITE]
    size = stack_settings.vectors.vector_size
    first = await store(client, "Deploys go through the staging cluster", embedding=direction(size, 7))
    second = await store(client, "Staging deploys come first", embedding=direction(size, 8, near=7, noise=0.05))
    alone = await store(client, "Lunch is at noon", embedding=direction(size, 30))
    answer = await consolidate(client, mode="creative", dry_run=False)
    assert run_of(answer, "creative")["counts"]["associated"] == 1

    def linked(record: dict) -> set[str]:
        return {r["memory_id"] for r in record["relations"] if r["type"] in ("DISCOVERED", "CONTRADICTS")}

    assert linked(await read(client, first)) == {second}
    assert linked(await read(client, alone)) == set()
    again = run_of(await consolidate(client, mode="creative", dry_run=False), "creative")
    assert again["counts"]["associated"] == 0
    assert len([r for r in (await read(client, first))["relations"] if r["memory_id"] == second]) == 1


async def test_clustering_makes_a_meta_pattern(tokens, stack_settings):
    client = tokens[WRITE]
    size = stack_settings.vectors.vector_size
    members = [
        await store(client, f"Kubernetes rollout note {n}", embedding=direction(size, 11 + n, near=40, noise=0.05))
        for n in range(3)
    ]
    await store(client, "Unrelated lunch note", embedding=direction(size, 90))
    run = run_of(await consolidate(client, mode="cluster", dry_run=False), "cluster")
    assert (run["counts"]["clusters"], run["counts"]["clustered"]) == (1, 3)
    snapshot = await client.get("/graph/snapshot", params={"include_patterns": "true", "state_mode": "history"})
    assert snapshot.status_code == 200, snapshot.text
    nodes = snapshot.json()["nodes"]
    patterns = [n for n in nodes if n.get("kind") == "meta_pattern"]
    assert len(patterns) == 1, nodes
    pattern_edges = {e["target"] for e in snapshot.json()["edges"] if e["source"] == patterns[0]["id"]}
    pattern_edges |= {e["source"] for e in snapshot.json()["edges"] if e["target"] == patterns[0]["id"]}
    assert set(members) <= pattern_edges
    plain = (await client.get("/graph/snapshot")).json()["nodes"]
    assert not [n for n in plain if n.get("kind") == "meta_pattern"]


async def test_the_history_survives_a_restart_of_the_consolidate_service(tokens, stack_services, stack_settings):
    client = tokens[WRITE]
    await store(client, "Something to decay")
    await consolidate(client, mode="decay", dry_run=False)
    before = (await client.get("/consolidate/status")).json()
    assert len(before["history"]) == 1
    old = stack_services["consolidate"]
    port = old.port
    await old.stop()
    stack_services["consolidate"] = await start(
        "consolidate",
        BUILDERS["consolidate"](stack_settings),
        host="127.0.0.1",
        port=port,
        grace_seconds=1.0,
        plane=plane_of(stack_settings),
    )

    async def answered():
        reply = await client.get("/consolidate/status")
        return reply.json() if reply.status_code == 200 else None

    after = await wait_for(answered)
    assert after["history"] == before["history"]
    # The next decay counts from the recorded run (a task that never ran is due now, whenever asked).
    decay_before, decay_after = ({t["task"]: t for t in s["next_runs"]}["decay"] for s in (before, after))
    assert decay_after == decay_before and decay_after["last_run"] == before["history"][0]["started"]


async def test_modes_and_roles(tokens):
    reader, writer, admin, beta = tokens[READ], tokens[WRITE], tokens[ADMIN], tokens[B_WRITE]
    await store(writer, "Alpha's memory")
    await store(beta, "Beta's memory")
    unknown = await writer.post("/consolidate", json={"mode": "sleep"})
    assert unknown.status_code == 400 and "mode" in unknown.json()["message"], unknown.text
    assert unknown.json()["reason"] == "INVALID_MODE"
    refused = await reader.post("/consolidate", json={"mode": "decay"})
    assert refused.status_code == 403, refused.text
    assert (await reader.get("/consolidate/status")).status_code == 200
    for refused_role in (writer, admin):  # a tenant's admin is no operator
        every = await refused_role.post("/consolidate", json={"mode": "decay", "every_tenant": True})
        assert every.status_code == 403 and "every_tenant" in every.json()["message"], every.text
    answer = await consolidate(tokens[OPERATOR], mode="decay", dry_run=False, every_tenant=True)
    assert sorted(r["tenant"] for r in answer["runs"]) == ["alpha", "beta"]
    # Each tenant's status shows its own runs only.
    [beta_run] = (await beta.get("/consolidate/status")).json()["history"]
    assert beta_run["tenant"] == "beta"
    own = await consolidate(writer, mode="decay")
    assert [r["tenant"] for r in own["runs"]] == ["alpha"]
