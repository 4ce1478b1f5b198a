"""Kill the enrich process in the middle of its work, in either stage
(embedding, then enrichment): the durable consumers redeliver what was not
acknowledged, and the end state is as if every memory had been embedded and
enriched once (no doubled tags or edges, nothing missing)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from devstack.servers import free_port
from tests.integration.enrich_stack import EnrichStack
from tests.integration.test_enrichment import enrich_settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
COUNT = 300


def enrich_process(settings, log: Path, **extra: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "FALKORDB_PORT": str(settings.graph.falkordb_port),
        "FALKORDB_GRAPH": settings.graph.falkordb_graph,
        "NATS_URL": settings.bus.nats_url,
        "NATS_STREAM": settings.bus.nats_stream,
        "NATS_SUBJECT_PREFIX": settings.bus.nats_subject_prefix,
        "RECALL_GRPC_PORT": str(settings.plane.recall_grpc_port),
        "SERVICE_CLAIM_KEY": settings.plane.service_claim_key.get_secret_value(),
        "ENRICH_GRPC_PORT": str(free_port()),
        "ENRICH_METRICS_PORT": str(free_port()),
        "EMBEDDING_PROVIDER": "placeholder",
        "ENRICHMENT_SPACY_BLANK": "true",
        "ENRICHMENT_BATCH_SIZE": "8",
        "EMBEDDING_WRITE_BATCH": "8",
        "CONSUMER_ACK_WAIT_SECONDS": "2",
        "ENRICHMENT_RECONCILE_SECONDS": "3600",
        "LOG_JSON": "false",
        **extra,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "services.enrich.main"],
        cwd=REPO,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


async def enriched_count(stack, ids) -> int:
    found = await stack.store.reader.get_memories("acme", ids)
    return sum(1 for m in found.values() if m.enriched_at is not None)


async def embedded_count(stack, ids) -> int:
    result = await stack.store.connection.query("MATCH (m:Memory) WHERE m.embedding IS NOT NULL RETURN count(m)")
    return int(result.result_set[0][0])


@pytest.mark.parametrize("stage", ["embedding", "enrichment"])
async def test_killing_enrich_mid_batch_loses_and_doubles_nothing(falkordb_server, nats_server, tmp_path, stage):
    counted = {"embedding": embedded_count, "enrichment": enriched_count}[stage]
    # The placeholder embeds 300 texts in no time; the real model takes long enough to be interrupted.
    provider = {"embedding": "local", "enrichment": "placeholder"}[stage]
    settings = enrich_settings(falkordb_server.port, nats_server.port, tmp_path / "data")
    stack = EnrichStack(settings)
    log = tmp_path / "enrich.log"
    process = None
    try:
        await stack.start("recall", "ingest")
        ids = [
            await stack.create(f"Note {i}: the deploy uses Docker and Terraform", type="Context") for i in range(COUNT)
        ]
        process = enrich_process(stack.settings, log, EMBEDDING_PROVIDER=provider)
        deadline = time.monotonic() + 60
        while (done := await counted(stack, ids)) == 0:
            assert time.monotonic() < deadline and process.poll() is None, log.read_text()[-2000:]
            await asyncio.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert done < COUNT, f"the {stage} stage finished before the kill; the test proves nothing"

        process = enrich_process(stack.settings, log, EMBEDDING_PROVIDER=provider)
        memories = await stack.wait_enriched(ids, within=60)
        for memory in memories.values():
            counts = Counter(t.lower() for t in memory.tags)
            assert all(n == 1 for n in counts.values()), memory.tags
            assert {"entity:tools:docker", "entity:tools:terraform"} <= set(memory.tags)
            assert memory.embedding is not None
        assert await stack.store.enrichment.count_unembedded("acme") == 0
        pairs = await stack.edges("PRECEDED_BY")
        assert len(pairs) == len(set(pairs)), "an edge was written twice"
    finally:
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=20)
        await stack.close()
