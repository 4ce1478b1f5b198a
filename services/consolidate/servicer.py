"""ConsolidateService: every RPC answers UNIMPLEMENTED until its issue lands."""

from __future__ import annotations

from memgrid.v1 import consolidate_service_pb2_grpc as pb_grpc


class ConsolidateServicer(pb_grpc.ConsolidateServiceServicer):
    """RPCs not overridden here answer UNIMPLEMENTED."""
