"""Losing one node of a 3-node NATS cluster loses nothing and stops nothing.

The whole stack runs against a JetStream cluster on loopback (NATS_URL lists
the three nodes, NATS_STREAM_REPLICAS=3). Under a steady write load through
the gateway, the stream's leader is killed with SIGKILL, moved first onto
the node leading the most durable consumers, so their leaders go with it.
While it is down:
no write is refused, a new leader is elected, every client connection of the
dead node (the relays', the consumers') reconnects to a survivor, and every
write acknowledged so far is enriched, embedded and found by recall, so every
consumer went on. Then the node is started again on its store: it rejoins
(stream info lists two current replicas again), and at the end every
acknowledged write is in the graph exactly once and found. The figures go to
build/reliability/nats_cluster.json and are printed (pytest -s).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import nats
import pytest

from tests.reliability.procstack import ProcessStack
from tests.reliability.writes import Outcome, converged, duplicated_and_lost, found, write_load
from tests.waiting import wait_for

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(300)]

NODES = 3
STREAM = "MEMORY_EVENTS"  # NATS_STREAM's default
DURABLES = ("embed", "enrich")  # the consumers that must go on, with recall's own (Observer.durables)
RATE = 5.0
#: Load before the kill, with the node down, and after it rejoined.
WARM_SECONDS, DOWN_SECONDS, AFTER_SECONDS = 3.0, 8.0, 3.0
#: Bounds: a new stream leader, the survivors' connections, convergence (outbox re-drive included), rejoin.
ELECT_WITHIN, RECONNECT_WITHIN, CONVERGE_WITHIN, REJOIN_WITHIN = 20.0, 20.0, 90.0, 60.0
FIGURES = Path("build/reliability/nats_cluster.json")


@dataclass
class Figures:
    killed: str = ""
    killed_led: tuple = ()  # what the killed node led: the stream, and which durables
    writes: int = 0
    acknowledged: int = 0
    refused: int = 0
    found: int = 0
    duplicated: int = 0
    lost: int = 0
    write_p50_before_ms: float = 0.0
    write_p50_down_ms: float = 0.0
    write_max_down_ms: float = 0.0  # the failover gap a writer saw: the slowest write while the node was down
    elect_seconds: float = 0.0  # kill until stream info names a new leader
    publish_resumed_seconds: float = 0.0  # kill until the stream takes an event again
    reconnect_seconds: float = 0.0  # kill until the survivors hold every client connection again
    converge_down_seconds: float = 0.0  # kill until every write so far is enriched and embedded, one node down
    rejoin_seconds: float = 0.0  # restart until the node is a current replica again


@pytest.fixture(scope="module")
def stack():
    env = {
        "NATS_STREAM_REPLICAS": str(NODES),
        "CONSUMER_ACK_WAIT_SECONDS": "6",
        "CONSUMER_HEARTBEAT_SECONDS": "2",
        "CONSOLIDATION_TICK_SECONDS": "0",
    }
    with ProcessStack(nats_nodes=NODES, **env) as s:
        yield s


class Observer:
    """The test's own client of the cluster: stream and consumer info, whichever node answers."""

    def __init__(self, stack: ProcessStack):
        self.cluster = stack.nats_cluster
        self.durables = (stack.projector_durable(), *DURABLES)
        self.nc = None

    async def __aenter__(self) -> Observer:
        self.nc = await nats.connect(servers=self.cluster.urls, reconnect_time_wait=0.2, max_reconnect_attempts=-1)
        self.js = self.nc.jetstream(timeout=2)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.nc.close()

    async def stream(self):
        """The stream's info, or None while no node can answer (mid-election)."""
        try:
            return await self.js.stream_info(STREAM)
        except Exception:
            return None

    async def consumer_leaders(self) -> dict[str, str]:
        """Each durable's leader (server name)."""
        infos = [await self.js.consumer_info(STREAM, d) for d in self.durables]
        return {d: i.cluster.leader for d, i in zip(self.durables, infos, strict=True)}

    async def lead_from(self, server_name: str) -> None:
        """Ask the stream's leader to step down in favour of `server_name` (JetStream's preferred placement)."""
        request = json.dumps({"placement": {"preferred": server_name}}).encode()
        await self.nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{STREAM}", request, timeout=5)

    async def replicas_current(self) -> bool:
        """Whether the stream has a leader and every other node is a current, online replica."""
        info = await self.stream()
        if info is None or info.cluster is None or not info.cluster.leader:
            return False
        peers = info.cluster.replicas or []
        return len(peers) == NODES - 1 and all(p.current and not p.offline for p in peers)

    async def consumers_caught_up(self) -> bool:
        """Whether every durable has nothing pending and nothing unacknowledged."""
        try:
            infos = [await self.js.consumer_info(STREAM, d) for d in self.durables]
        except Exception:
            return False
        return all(i.num_pending == 0 and i.num_ack_pending == 0 for i in infos)


def connections(stack: ProcessStack, alive: list[int]) -> int:
    return sum(stack.nats_cluster.connections(i) for i in alive)


def p50_ms(outcomes: list[Outcome]) -> float:
    return 1000 * statistics.median(o.latency for o in outcomes) if outcomes else 0.0


def record(figures: Figures) -> None:
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps(asdict(figures), indent=2))
    print(f"\nkill -9 the stream leader: {asdict(figures)}")


async def until(predicate, within: float, what: str) -> None:
    """Poll `predicate` (async) every 0.1 s until true, or fail naming `what`."""
    deadline = time.monotonic() + within
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {within}s")
        await asyncio.sleep(0.1)


async def test_killing_the_stream_leader_loses_no_write(stack):
    cluster = stack.nats_cluster
    figures = Figures()
    async with Observer(stack) as observer:
        await until(observer.replicas_current, 30, "three current replicas at the start")
        leaders = await observer.consumer_leaders()
        busiest = max(set(leaders.values()), key=list(leaders.values()).count)
        if (await observer.stream()).cluster.leader != busiest:
            await observer.lead_from(busiest)

            async def moved():
                info = await observer.stream()
                return info is not None and info.cluster.leader == busiest and await observer.replicas_current()

            await until(moved, 30, f"the stream's leader moved to {busiest}")
        info = await observer.stream()
        assert info.config.num_replicas == NODES, info.config
        leader = cluster.index_of(info.cluster.leader)
        alive = [i for i in range(NODES) if i != leader]
        figures.killed = cluster.server_name(leader)
        figures.killed_led = (STREAM, *(d for d, at in leaders.items() if at == figures.killed))
        clients_before = await asyncio.to_thread(connections, stack, list(range(NODES)))

        async with httpx.AsyncClient(base_url=stack.url, headers=stack.headers, timeout=30) as client:
            stop = asyncio.Event()
            load = asyncio.create_task(write_load(client, "nats-cluster", stop, RATE))
            await asyncio.sleep(WARM_SECONDS)
            messages_at_kill = (await observer.stream()).state.messages
            killed_at = time.monotonic()
            stack.kill(figures.killed)

            async def new_leader():
                now = await observer.stream()
                return now is not None and now.cluster.leader not in (None, "", figures.killed)

            async def publishing():
                now = await observer.stream()
                return now is not None and now.state.messages > messages_at_kill

            async def reconnected():
                try:
                    return await asyncio.to_thread(connections, stack, alive) >= clients_before
                except OSError:
                    return False

            await until(new_leader, ELECT_WITHIN, f"a stream leader other than {figures.killed}")
            figures.elect_seconds = time.monotonic() - killed_at
            await until(publishing, ELECT_WITHIN, "the stream taking events again")
            figures.publish_resumed_seconds = time.monotonic() - killed_at
            await until(reconnected, RECONNECT_WITHIN, f"every client of {figures.killed} reconnected to a survivor")
            figures.reconnect_seconds = time.monotonic() - killed_at
            await asyncio.sleep(max(0.0, DOWN_SECONDS - (time.monotonic() - killed_at)))

            # Every consumer goes on with one node down: what was written so far is enriched and embedded.
            stop.set()
            before_restart = await load
            acked = {o.memory_id: o.content for o in before_restart if o.memory_id}
            await wait_for(lambda: converged(stack, acked), within=CONVERGE_WITHIN, every=0.5)
            figures.converge_down_seconds = time.monotonic() - killed_at

            restarted_at = time.monotonic()
            await asyncio.to_thread(stack.start, figures.killed)
            stop = asyncio.Event()
            load = asyncio.create_task(write_load(client, "nats-rejoined", stop, RATE))
            await until(observer.replicas_current, REJOIN_WITHIN, f"{figures.killed} a current replica again")
            figures.rejoin_seconds = time.monotonic() - restarted_at
            await asyncio.sleep(AFTER_SECONDS)
            stop.set()
            outcomes = before_restart + await load

            acked = {o.memory_id: o.content for o in outcomes if o.memory_id}
            refused = [o for o in outcomes if not o.memory_id]
            rows = await wait_for(lambda: converged(stack, acked), within=CONVERGE_WITHIN, every=0.5)
            await until(observer.consumers_caught_up, CONVERGE_WITHIN, f"the durables {observer.durables} caught up")
            figures.writes, figures.acknowledged, figures.refused = len(outcomes), len(acked), len(refused)
            figures.duplicated, figures.lost = duplicated_and_lost(rows, acked)
            figures.found = await found(client, acked)
            down = [o for o in before_restart if o.started >= killed_at]
            figures.write_p50_before_ms = p50_ms([o for o in before_restart if o.started < killed_at])
            figures.write_p50_down_ms = p50_ms(down)
            figures.write_max_down_ms = 1000 * max((o.latency for o in down), default=0.0)

    record(figures)
    assert figures.acknowledged > 0
    assert not refused, f"writes do not wait on NATS, yet some were refused: {refused[:3]}"
    assert figures.lost == 0 and figures.duplicated == 0, figures
    assert figures.found == figures.acknowledged, figures
