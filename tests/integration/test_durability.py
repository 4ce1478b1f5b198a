"""Durability settings are explicit and checked: the stream's limits an
operator set survive a reconnect, the dead-letter stream is made beside the
events' one, the devstack's servers run with the fsync settings asked for,
and start-up reads back what the servers apply."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from benchmarks.soak_nats_heap import heap_alloc_kib
from devstack.servers import free_port, start_falkordb, start_nats, wait_for_port
from services.core.replica import stream_durables
from services.core.wiring import event_bus, graph_store
from tests.conftest import make_settings

pytestmark = pytest.mark.integration

HOUR = 3600.0


async def test_limits_an_operator_set_by_hand_survive_a_reconnect(settings):
    bus = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    await bus.connect()
    try:
        info = await bus.jetstream.stream_info(settings.bus.nats_stream)
        week = settings.bus.nats_stream_max_age_seconds
        assert info.config.max_age == week and bus.effective_limits == (week, float("inf"))
        # The operator raises retention by hand (nats stream edit).
        await bus.jetstream.update_stream(info.config.evolve(max_age=HOUR, max_bytes=1 << 30))
    finally:
        await bus.close()
    again = event_bus(settings.bus, settings.process, durables=stream_durables(settings))
    await again.connect()  # ensure_stream runs again, as on every (re)start
    try:
        config = (await again.jetstream.stream_info(settings.bus.nats_stream)).config
        assert config.max_age == HOUR and config.max_bytes == 1 << 30
        assert again.effective_limits == (HOUR, float(1 << 30))
        assert config.subjects == [f"{settings.bus.nats_subject_prefix}.>"]
    finally:
        await again.close()


async def test_the_settings_limits_apply_when_memgrid_creates_the_stream(settings):
    week = settings.override({"nats_stream_max_age_seconds": 7 * 86400.0})
    bus = event_bus(week.bus, week.process)
    await bus.connect()
    try:
        config = (await bus.jetstream.stream_info(settings.bus.nats_stream)).config
        assert config.max_age == 7 * 86400.0
        # Dead letters have their own stream, outside the events' subjects, with no retention limit.
        dlq = (await bus.jetstream.stream_info(bus.dead_letter_stream)).config
        assert dlq.subjects == [f"{settings.bus.nats_subject_prefix}_dlq.>"] and dlq.max_age in (None, 0)
    finally:
        await bus.close()


def varz(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/varz", timeout=5) as reply:
        return json.load(reply)


@pytest.mark.parametrize("interval, always, nanos", [("always", True, None), ("30s", None, 30_000_000_000)])
def test_the_devstack_nats_syncs_as_asked(tmp_path, interval, always, nanos):
    monitor = free_port()
    server = start_nats(free_port(), tmp_path / "nats", sync_interval=interval, monitor_port=monitor)
    try:
        wait_for_port(monitor, 10)
        config = varz(monitor)["jetstream"]["config"]
        assert config.get("sync_always") is always
        if nanos:
            assert config["sync_interval"] == nanos
    finally:
        server.stop()


def test_the_devstack_nats_runs_under_the_memory_limit_asked_for(tmp_path, settings):
    """NATS_MEMORY_LIMIT_MB reaches nats-server as Go's soft memory limit (its /varz reads it back)."""
    monitor = free_port()
    server = start_nats(free_port(), tmp_path / "limited", monitor_port=monitor, memory_limit_mb=48)
    try:
        wait_for_port(monitor, 10)
        assert varz(monitor)["gomemlimit"] == 48 * 1024**2
    finally:
        server.stop()
    assert type(settings.bus).model_fields["nats_memory_limit_mb"].default > 0  # the devstack's default sets one


def test_the_devstack_nats_takes_its_gogc_and_shows_its_heap_on_the_profiler_port(tmp_path):
    """NATS_GOGC reaches nats-server's environment, and NATS_PROFILE_PORT serves
    its heap profile, whose MemStats `make soak` reads the live heap from."""
    profile = free_port()
    server = start_nats(free_port(), tmp_path / "off", memory_limit_mb=48, gogc="off", profile_port=profile)
    try:
        variables = Path(f"/proc/{server.process.pid}/environ").read_text().split("\0")
        environ = dict(line.split("=", 1) for line in variables if "=" in line)
        assert (environ["GOGC"], environ["GOMEMLIMIT"]) == ("off", "48MiB")
        wait_for_port(profile, 10)
        url = f"http://127.0.0.1:{profile}/debug/pprof/heap?debug=1&gc=1"
        with urllib.request.urlopen(url, timeout=10) as reply:  # noqa: S310  a local server
            kib = heap_alloc_kib(reply.read().decode())
        assert kib is not None and 0 < kib < 48 * 1024
    finally:
        server.stop()


@pytest.mark.parametrize("appendfsync", ["everysec", "always"])
async def test_start_up_reads_back_falkordb_persistence(tmp_path, nats_server, appendfsync):
    server = start_falkordb(free_port(), tmp_path / "falkordb", appendfsync=appendfsync)
    settings = make_settings(server.port, nats_server.port, tmp_path / "data", falkordb_appendfsync=appendfsync)
    graph = graph_store(settings.graph, settings.process, recall=settings.recall, backup=settings.backup)
    try:
        await graph.lifecycle.ensure_schema()
        assert graph.connection.durability == ("yes", appendfsync)
    finally:
        await graph.lifecycle.close()
        server.stop()
