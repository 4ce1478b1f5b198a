"""The least a Python HTTP-to-gRPC relay can do for POST /memory, as a
yardstick for the gateway's overhead: the same server (uvicorn with
httptools and uvloop) and the same gRPC client (grpc.aio, configured as the
gateway configures it), but no authentication, validation, routing,
middleware, metrics or error envelope. Its overhead over a direct gRPC call
is the floor any Python gateway on this machine starts from.

python -m benchmarks.bare_relay PORT INGEST_TARGET (the benchmark starts it)."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("GRPC_EXPERIMENTS", "-event_engine_client")  # as gateway/main.py, before grpc is imported

import grpc  # noqa: E402
import orjson  # noqa: E402
import uvicorn  # noqa: E402

from memgrid.v1 import ingest_service_pb2, ingest_service_pb2_grpc, memory_pb2  # noqa: E402
from services.core.grpc.claims import ClaimSigner  # noqa: E402


def relay(ingest_target: str, claim_key: bytes):
    """An ASGI app answering any POST with CreateMemory of its JSON body's content and type,
    each call with a claim signed as the gateway signs one (so the comparison stays fair)."""
    claims = ClaimSigner(claim_key, actor="bench:relay", audience="ingest")
    stub: list[ingest_service_pb2_grpc.IngestServiceStub] = []

    async def app(scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] == "lifespan.startup":
                stub.append(ingest_service_pb2_grpc.IngestServiceStub(grpc.aio.insecure_channel(ingest_target)))
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        fields = orjson.loads(body)
        draft = memory_pb2.MemoryDraft(content=fields["content"], type=fields.get("type", ""))
        reply = await stub[0].CreateMemory(
            ingest_service_pb2.CreateMemoryRequest(memory=draft), metadata=claims.metadata("default", "write")
        )
        out = orjson.dumps({"status": "success", "memory_id": reply.memory.id})
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]
        await send({"type": "http.response.start", "status": 201, "headers": headers})
        await send({"type": "http.response.body", "body": out})

    return app


if __name__ == "__main__":
    port, target = int(sys.argv[1]), sys.argv[2]
    uvicorn.run(
        relay(target, os.environ["SERVICE_CLAIM_KEY"].encode()),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
    )
