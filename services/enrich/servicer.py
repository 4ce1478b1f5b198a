"""EnrichService: every RPC answers UNIMPLEMENTED until its issue lands."""

from __future__ import annotations

from memgrid.v1 import enrich_service_pb2_grpc as pb_grpc


class EnrichServicer(pb_grpc.EnrichServiceServicer):
    """RPCs not overridden here answer UNIMPLEMENTED."""
