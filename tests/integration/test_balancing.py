"""gRPC's own balancing over replicas, as the gateway's channels configure it
(services/core/grpc/balancing.py), against real gRPC servers on loopback:
calls spread round robin, a replica NOT_SERVING for the dialled service gets
none until it serves, and a call a replica refuses with UNAVAILABLE is retried
on another when the method is safe to repeat, and only then."""

from __future__ import annotations

import asyncio
from collections import Counter

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from services.core.grpc.balancing import RetryPolicy, channel_options
from services.core.grpc.plane import ServicePlane
from services.core.grpc.server import MAX_MESSAGE_BYTES, server_options
from tests.conftest import TEST_CLAIM_KEY

pytestmark = pytest.mark.integration

SERVICE = "memgrid.v1.IngestService"
SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


class Replica:
    """A server answering CreateMemory and DeleteMemory with its name, optionally refusing UNAVAILABLE."""

    def __init__(self, name: str):
        self.name = name
        self.calls: Counter[str] = Counter()
        self.peers: set[str] = set()  # the client connections calls came on (address:port)
        self.refuse = False

    async def start(self, status=SERVING, options=None) -> Replica:
        self.server = grpc.aio.server(options=options)
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)

        def method(name):
            async def handle(request: bytes, context) -> bytes:
                self.calls[name] += 1
                self.peers.add(context.peer())
                if self.refuse:
                    await context.abort(grpc.StatusCode.UNAVAILABLE, f"{self.name} is going")
                return self.name.encode()

            return grpc.unary_unary_rpc_method_handler(handle)

        handlers = {name: method(name) for name in ("CreateMemory", "DeleteMemory")}
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        await self.health.set(SERVICE, status)
        return self

    async def stop(self) -> None:
        await self.server.stop(0)


@pytest.fixture
async def replicas():
    started = [await Replica(name).start() for name in ("a", "b", "c")]
    yield started
    for replica in started:
        await replica.stop()


def channel_to(replicas: list[Replica]) -> grpc.aio.Channel:
    """The gateway's channel to ingest, over a list address naming the replicas."""
    plane = ServicePlane(key=TEST_CLAIM_KEY.encode())
    address = ",".join(f"127.0.0.1:{r.port}" for r in replicas)
    return plane.channel(address, options=channel_options("ingest", RetryPolicy(initial_backoff_seconds=0.01)))


async def answers(channel: grpc.aio.Channel, method: str, n: int) -> Counter[str]:
    call = channel.unary_unary(f"/{SERVICE}/{method}")
    return Counter([(await call(b"", timeout=5)).decode() for _ in range(n)])


async def wait_until_spread(channel, names: set[str], within: float = 5.0) -> None:
    """Health watches and connections come up asynchronously: wait until every replica of `names` answers."""
    deadline = asyncio.get_running_loop().time() + within
    while set(await answers(channel, "CreateMemory", 12)) != names:
        assert asyncio.get_running_loop().time() < deadline, f"not every replica of {names} answered"
        await asyncio.sleep(0.05)


async def test_calls_go_round_robin_over_every_replica(replicas):
    async with channel_to(replicas) as channel:
        await wait_until_spread(channel, {"a", "b", "c"})
        assert await answers(channel, "CreateMemory", 30) == Counter({"a": 10, "b": 10, "c": 10})


async def test_a_replica_not_serving_takes_no_call_until_it_serves(replicas):
    await replicas[2].health.set(SERVICE, NOT_SERVING)
    async with channel_to(replicas) as channel:
        await wait_until_spread(channel, {"a", "b"})
        assert set(await answers(channel, "CreateMemory", 30)) == {"a", "b"}
        await replicas[2].health.set(SERVICE, SERVING)
        await wait_until_spread(channel, {"a", "b", "c"})


async def test_a_refused_create_is_retried_on_another_replica(replicas):
    async with channel_to(replicas) as channel:
        await wait_until_spread(channel, {"a", "b", "c"})
        replicas[0].refuse = True
        before = replicas[0].calls["CreateMemory"]
        assert set(await answers(channel, "CreateMemory", 30)) == {"b", "c"}  # no caller saw a's refusals
        assert replicas[0].calls["CreateMemory"] > before  # a was tried, and its refusals retried


async def test_a_refused_delete_is_not_retried(replicas):
    async with channel_to(replicas) as channel:
        await wait_until_spread(channel, {"a", "b", "c"})
        replicas[0].refuse = True
        call = channel.unary_unary(f"/{SERVICE}/DeleteMemory")
        codes = Counter()
        for _ in range(30):
            try:
                await call(b"", timeout=5)
                codes["OK"] += 1
            except grpc.aio.AioRpcError as exc:
                codes[exc.code().name] += 1
        assert codes == Counter({"OK": 20, "UNAVAILABLE": 10}), codes


async def test_a_stopped_replica_leaves_the_others_every_call(replicas):
    async with channel_to(replicas) as channel:
        await wait_until_spread(channel, {"a", "b", "c"})
        await replicas[1].stop()
        assert set(await answers(channel, "CreateMemory", 30)) == {"a", "c"}


async def test_a_connection_past_its_age_is_replaced_and_no_call_fails():
    # GRPC_MAX_CONNECTION_AGE_SECONDS: the client reconnects (resolving the name again), calls go on.
    replica = await Replica("a").start(options=server_options(MAX_MESSAGE_BYTES, max_connection_age_seconds=0.3))
    try:
        async with channel_to([replica]) as channel:
            for _ in range(12):
                assert await answers(channel, "CreateMemory", 3) == Counter({"a": 3})
                await asyncio.sleep(0.1)
        assert len(replica.peers) >= 2, replica.peers  # more than one connection over 1.2 s
    finally:
        await replica.stop()
