"""Domain errors -> gRPC status with a google.rpc.ErrorInfo, in one place."""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from services.core.domain.errors import DomainError

#: The ErrorInfo domain of every memgrid error.
ERROR_DOMAIN = "memgrid.v1"


def to_grpc_status(error: DomainError) -> grpc.Status:
    """A rich status: code, message, and ErrorInfo(reason, metadata)."""
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN, metadata=error.details)
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=getattr(code_pb2, error.status), message=error.message, details=[detail])
    return rpc_status.to_status(status)


def error_info(exc: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    """The ErrorInfo a failed call carries, if any (client side)."""
    status = rpc_status.from_call(exc) if hasattr(exc, "trailing_metadata") else None
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    return None
