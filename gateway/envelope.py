"""The error envelope {"status": "error", "code": N, "message": "..."}, and
the mapping from gRPC status codes to HTTP, in one place."""

from __future__ import annotations

import grpc
import structlog
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from gateway.responses import Json
from services.core.domain.errors import DomainError
from services.core.grpc.errors import error_info

log = structlog.get_logger()

GRPC_TO_HTTP = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}


class ApiError(Exception):
    """An error the gateway itself answers (auth, malformed body)."""

    def __init__(self, code: int, message: str, reason: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason


def envelope(code: int, message: str, reason: str | None = None, details: dict | None = None) -> Json:
    body: dict = {"status": "error", "code": code, "message": message}
    if reason:
        body["reason"] = reason
    if details:
        body["details"] = details
    return Json(body, status_code=code)


def from_domain(error: DomainError) -> ApiError:
    """A domain rule's refusal, answered by the gateway with the status the
    services would give it (GRPC_TO_HTTP), its reason and its message: the
    rule and its words stay the domain's."""
    return ApiError(GRPC_TO_HTTP.get(grpc.StatusCode[error.status], 500), error.message, error.reason)


async def api_error_handler(request: Request, exc: ApiError) -> Json:
    return envelope(exc.code, exc.message, exc.reason)


async def grpc_error_handler(request: Request, exc: grpc.aio.AioRpcError) -> Json:
    code = GRPC_TO_HTTP.get(exc.code(), 500)
    info = error_info(exc)
    message = exc.details() or exc.code().name
    if exc.code() == grpc.StatusCode.UNAVAILABLE and info is None:
        message = "a backing service is unavailable"
    return envelope(code, message, info.reason if info else None, dict(info.metadata) if info else None)


async def http_error_handler(request: Request, exc: StarletteHTTPException) -> Json:
    messages = {
        404: f"no route for {request.url.path}",
        405: f"method {request.method} not allowed on {request.url.path}",
    }
    return envelope(exc.status_code, messages.get(exc.status_code, str(exc.detail)))


async def validation_error_handler(request: Request, exc: RequestValidationError) -> Json:
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path"))
    return envelope(400, f"invalid parameter '{where}': {first.get('msg', 'invalid')}", "INVALID_PARAMETER")


async def internal_error_handler(request: Request, exc: Exception) -> Json:
    """A bug: answered in the envelope without details (the server logs the traceback)."""
    log.error("unhandled error", method=request.method, path=request.url.path, error=repr(exc))
    return envelope(500, "internal error", "INTERNAL")


def install(app) -> None:
    """Register every handler so no framework error shape leaks out."""
    app.add_exception_handler(Exception, internal_error_handler)
    app.add_exception_handler(ApiError, api_error_handler)
    app.add_exception_handler(grpc.aio.AioRpcError, grpc_error_handler)
    app.add_exception_handler(StarletteHTTPException, http_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
