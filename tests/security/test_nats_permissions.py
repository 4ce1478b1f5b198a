"""Prod's NATS gives each service a user of its own, allowed only the subjects
it uses, and the gateway none (issue 24, Deployment). Against a real
nats-server started with the prod overlay's own nats.conf (its JetStream
store moved to a temporary directory): each service's bus, consumers and
watches work as its user, and what a service does not use is refused."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import nats
import pytest
import yaml

from devstack.servers import free_port, wait_for_port
from services.core.adapters.nats_watch import JetStreamEventWatch
from services.core.domain.delivery import Outcome
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.watch import WatchOpened
from services.core.settings import BusSettings, ProcessSettings, Settings
from services.core.wiring import consumer_spec, dead_letter_queue, event_bus, event_consumer
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("ingest", "recall", "enrich", "consolidate")


def prod_nats_conf() -> str:
    docs = yaml.safe_load_all((ROOT / "deploy/k8s/overlays/prod/nats.yaml").read_text())
    return next(d for d in docs if d and d["kind"] == "ConfigMap")["data"]["nats.conf"]


@pytest.fixture
def server(tmp_path):
    """nats-server on the prod config; {service: password} as memgrid-nats would hold them."""
    passwords = {name: secrets.token_hex(16) for name in (*SERVICES, "operator")}
    conf = tmp_path / "nats.conf"
    conf.write_text(prod_nats_conf().replace('"/data"', f'"{tmp_path / "js"}"'))
    port = free_port()
    env = {**os.environ, **{f"NATS_{name.upper()}_PASSWORD": p for name, p in passwords.items()}}
    binary = Path(sys.executable).parent / "nats-server"
    process = subprocess.Popen(
        [str(binary), "-c", str(conf), "-a", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, 20)
        yield port, passwords
    finally:
        process.terminate()
        process.wait(timeout=10)


def bus_of(settings: Settings) -> tuple[BusSettings, ProcessSettings]:
    """What a bus is built from."""
    return settings.bus, settings.process


def settings_for(port: int, service: str | None, password: str | None) -> Settings:
    return Settings(
        _env_file=None,
        nats_url=f"nats://127.0.0.1:{port}",
        nats_user=service,
        nats_password=password,
        dependency_wait_seconds=3,
        consumer_fetch_timeout_seconds=0.2,
    )


async def settled(consumer) -> bool:
    return await consumer.pending() == 0


def event(memory_id: str) -> MemoryEvent:
    return MemoryEvent(f"{memory_id}:created", "acme", EventKind.CREATED, memory_id, 1, datetime.now(UTC))


async def test_each_service_does_its_work_as_its_own_user(server):
    port, passwords = server
    buses = {}
    for name in SERVICES:  # each ensures the streams at start-up
        buses[name] = event_bus(*bus_of(settings_for(port, name, passwords[name])))
        await buses[name].connect()
    try:
        for name in ("ingest", "enrich", "consolidate"):  # their outbox relays publish
            await buses[name].publish(event(f"{name}-1"))
        seen: list[str] = []

        async def handle(deliveries):
            seen.extend(d.event.memory_id for d in deliveries)
            return [Outcome.DONE for _ in deliveries]

        settings = settings_for(port, "enrich", passwords["enrich"])
        subjects = [buses["enrich"].subjects]
        for name, durable in (("enrich", "enrich"), ("enrich", "embed"), ("recall", "recall-projector")):
            consumer = event_consumer(
                settings.bus,
                buses[name],
                consumer_spec(settings.consumers, settings.bus, durable, subjects, 10),
                handle,
            )
            await consumer._subscribe()  # noqa: SLF001 - what start() does, without the loop
            assert await consumer.run_once() == 3
            await wait_for(lambda c=consumer: settled(c))  # its acknowledgements went through
        assert sorted(seen) == sorted(3 * ["ingest-1", "enrich-1", "consolidate-1"])
        # recall's watch: the tenant's own last event (a message get), then what follows.
        watch = JetStreamEventWatch(buses["recall"], stream="MEMORY_EVENTS", subject_prefix="memory.events")
        items = watch.watch("acme", None, [])
        opened = await anext(items)
        assert isinstance(opened, WatchOpened) and opened.after_sequence == 3
        await buses["ingest"].publish(event("ingest-2"))
        assert (await asyncio.wait_for(anext(items), 10)).event.memory_id == "ingest-2"
        await items.aclose()
        # The operator's user (no pod holds it) reads and re-drives the dead letters.
        async with dead_letter_queue(*bus_of(settings_for(port, "operator", passwords["operator"]))) as dead:
            assert await dead.list() == []
            await dead.replay()
    finally:
        for bus in buses.values():
            await bus.close()


async def test_what_a_service_does_not_use_is_refused(server):
    port, passwords = server
    with pytest.raises(Exception):  # noqa: B017 - no user of the gateway's (nor anyone without a password)
        await nats.connect(f"nats://127.0.0.1:{port}", user="gateway", password="x", allow_reconnect=False)
    with pytest.raises(Exception):  # noqa: B017
        await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
    ingest = event_bus(*bus_of(settings_for(port, "ingest", passwords["ingest"])))
    recall = event_bus(*bus_of(settings_for(port, "recall", passwords["recall"])))
    await ingest.connect()
    await recall.connect()
    try:
        errors: list[str] = []

        async def noted(exc: Exception) -> None:
            errors.append(str(exc))

        raw = await nats.connect(
            f"nats://127.0.0.1:{port}", user="ingest", password=passwords["ingest"], error_cb=noted
        )
        await raw.subscribe("memory.events.>")  # ingest reads no events
        await raw.flush()
        await asyncio.sleep(0.3)
        assert any("permissions violation" in e.lower() for e in errors), errors
        await raw.close()
        with pytest.raises(Exception):  # noqa: B017 - ingest makes no consumer
            await ingest.jetstream.add_consumer("MEMORY_EVENTS", durable_name="sneaky", timeout=1)
        with pytest.raises(Exception):  # noqa: B017 - recall publishes no memory events
            await recall.jetstream.publish("memory.events.acme.created", b"forged", timeout=1)
    finally:
        await ingest.close()
        await recall.close()
