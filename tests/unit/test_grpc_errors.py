"""Domain errors -> gRPC status with ErrorInfo, and gRPC codes -> HTTP."""

from __future__ import annotations

import json

import grpc
import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2

from gateway.envelope import GRPC_TO_HTTP, grpc_error_handler
from services.core.domain.errors import (
    AlreadyExists,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from services.core.grpc.errors import ERROR_DOMAIN, error_info, to_grpc_status

DETAILS_KEY = "grpc-status-details-bin"


def rich_status(status: grpc.Status) -> status_pb2.Status:
    trailers = dict(status.trailing_metadata)
    return status_pb2.Status.FromString(trailers[DETAILS_KEY])


def packed_info(status: grpc.Status) -> error_details_pb2.ErrorInfo:
    rich = rich_status(status)
    assert len(rich.details) == 1
    info = error_details_pb2.ErrorInfo()
    assert rich.details[0].Unpack(info)
    return info


def test_invalid_argument_carries_code_message_reason_and_metadata():
    error = InvalidArgument(
        "CONTENT_TOO_LONG", "'content' is 2001 characters; the limit is 2000", field="content", length=2001, limit=2000
    )
    status = to_grpc_status(error)
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT
    assert status.details == "'content' is 2001 characters; the limit is 2000"
    rich = rich_status(status)
    assert rich.code == code_pb2.INVALID_ARGUMENT
    assert rich.message == status.details
    info = packed_info(status)
    assert info.reason == "CONTENT_TOO_LONG"
    assert info.domain == ERROR_DOMAIN == "memgrid.v1"
    assert dict(info.metadata) == {"field": "content", "length": "2001", "limit": "2000"}


@pytest.mark.parametrize(
    ("error_class", "code"),
    [
        (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
        (NotFound, grpc.StatusCode.NOT_FOUND),
        (AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
        (FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
        (ResourceExhausted, grpc.StatusCode.RESOURCE_EXHAUSTED),
        (Unavailable, grpc.StatusCode.UNAVAILABLE),
        (DeadlineExceeded, grpc.StatusCode.DEADLINE_EXCEEDED),
        (Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    ],
)
def test_each_domain_error_maps_to_its_grpc_code(error_class, code):
    status = to_grpc_status(error_class("SOME_REASON", "what happened"))
    assert status.code == code
    assert rich_status(status).code == code.value[0]
    info = packed_info(status)
    assert info.reason == "SOME_REASON"
    assert dict(info.metadata) == {}


class FakeCall(grpc.RpcError):
    """What a client sees when a call fails: code, details and trailers."""

    def __init__(self, code: grpc.StatusCode, details: str, trailers: tuple = ()):
        self._code, self._details, self._trailers = code, details, trailers

    @classmethod
    def from_status(cls, status: grpc.Status) -> FakeCall:
        return cls(status.code, status.details, status.trailing_metadata)

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._trailers


def test_error_info_reads_back_what_the_server_packed():
    status = to_grpc_status(NotFound("MEMORY_NOT_FOUND", "memory m1 not found", field="id", id="m1"))
    info = error_info(FakeCall.from_status(status))
    assert info is not None
    assert info.reason == "MEMORY_NOT_FOUND"
    assert dict(info.metadata) == {"field": "id", "id": "m1"}


def test_error_info_is_none_without_rich_details():
    assert error_info(FakeCall(grpc.StatusCode.UNAVAILABLE, "down", (("other-key", "value"),))) is None


@pytest.mark.parametrize(
    ("code", "http"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, 400),
        (grpc.StatusCode.NOT_FOUND, 404),
        (grpc.StatusCode.UNAUTHENTICATED, 401),
        (grpc.StatusCode.UNIMPLEMENTED, 501),
        (grpc.StatusCode.UNAVAILABLE, 503),
        (grpc.StatusCode.DEADLINE_EXCEEDED, 504),
    ],
)
def test_grpc_codes_map_to_http(code, http):
    assert GRPC_TO_HTTP[code] == http


class FakeAioCall(FakeCall, grpc.aio.AioRpcError):
    """The same, as the gateway's aio channel raises it."""

    def __init__(self, code: grpc.StatusCode, details: str, trailers: tuple = ()):
        FakeCall.__init__(self, code, details, trailers)


async def test_a_graph_query_timeout_is_a_504_in_the_envelope():
    error = DeadlineExceeded("FALKORDB_QUERY_TIMEOUT", "the graph query did not finish within 50 ms", timeout_ms=50)
    status = to_grpc_status(error)
    assert status.code == grpc.StatusCode.DEADLINE_EXCEEDED
    reply = await grpc_error_handler(None, FakeAioCall(status.code, status.details, status.trailing_metadata))
    assert reply.status_code == 504
    assert json.loads(reply.body) == {
        "status": "error",
        "code": 504,
        "message": "the graph query did not finish within 50 ms",
        "reason": "FALKORDB_QUERY_TIMEOUT",
        "details": {"timeout_ms": "50"},
    }
