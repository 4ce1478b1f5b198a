"""`make reindex`: rebuild recall's vector index from the graph alone.

Asks the running recall service (RebuildIndex) and prints its progress; the
index is a projection, so nothing but the graph is read. Start the stack
first (`make run`); RECALL_ADDR says where recall listens. It signs an operator's
claim for recall with the service key (SERVICE_CLAIM_KEY, or the key file in the data
directory `make run` generated), as `system:reindex`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import grpc

from memgrid.v1 import recall_service_pb2, recall_service_pb2_grpc
from services.core.grpc.claims import OPERATOR_ROLE
from services.core.grpc.plane import ServicePlane
from services.core.settings import Settings


async def rebuild(
    target: str, batch_size: int, plane: ServicePlane, out=sys.stdout
) -> recall_service_pb2.RebuildIndexProgress | None:
    """Stream the rebuild's progress to `out`; returns the last report."""
    last = None
    metadata = plane.signer("system:reindex", "recall").metadata(None, OPERATOR_ROLE)
    async with plane.channel(target) as channel:
        stub = recall_service_pb2_grpc.RecallServiceStub(channel)
        async for progress in stub.RebuildIndex(
            recall_service_pb2.RebuildIndexRequest(batch_size=batch_size, every_tenant=True), metadata=metadata
        ):
            last = progress
            share = (
                f"{100 * (progress.indexed + progress.skipped) / progress.total:5.1f}%" if progress.total else "  -  "
            )
            print(
                f"{share}  indexed {progress.indexed}  skipped (no vector yet) {progress.skipped}  "
                f"of {progress.total}  {progress.elapsed_seconds:.1f}s" + ("  done" if progress.done else ""),
                file=out,
                flush=True,
            )
    return last


def main() -> int:
    settings = Settings.load("process", "plane", "recall")
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--target", default=settings.plane.grpc_target("recall"), help="recall's gRPC address")
    parser.add_argument("--batch-size", type=int, default=settings.recall.reindex_batch_size)
    args = parser.parse_args()
    try:
        last = asyncio.run(
            rebuild(
                args.target,
                args.batch_size,
                ServicePlane.from_settings(settings.plane, settings.process.memgrid_data_dir),
            )
        )
    except grpc.aio.AioRpcError as exc:
        print(f"reindex failed: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1
    return 0 if last is not None and last.done else 1


if __name__ == "__main__":
    sys.exit(main())
