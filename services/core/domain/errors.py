"""Domain errors: a stable machine reason, a message naming the field, and
the numbers that explain it. Mapped to gRPC status in one place
(services.core.grpc.errors) and to the HTTP envelope in one place (gateway)."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """Base of every error the domain raises on purpose."""

    #: Canonical status name (gRPC code name); subclasses set it.
    status = "INTERNAL"

    def __init__(self, reason: str, message: str, *, field: str | None = None, **details: Any):
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.field = field
        self.details = {k: str(v) for k, v in details.items()}
        if field:
            self.details.setdefault("field", field)


class InvalidArgument(DomainError):
    status = "INVALID_ARGUMENT"


class NotFound(DomainError):
    status = "NOT_FOUND"


class AlreadyExists(DomainError):
    status = "ALREADY_EXISTS"


class FailedPrecondition(DomainError):
    status = "FAILED_PRECONDITION"


class ResourceExhausted(DomainError):
    status = "RESOURCE_EXHAUSTED"


class Unavailable(DomainError):
    status = "UNAVAILABLE"


class DeadlineExceeded(DomainError):
    """A store did not answer within its time limit (the work was stopped)."""

    status = "DEADLINE_EXCEEDED"


class Unauthenticated(DomainError):
    status = "UNAUTHENTICATED"


class PermissionDenied(DomainError):
    """The caller is known but may not do this (e.g. restore another tenant's records)."""

    status = "PERMISSION_DENIED"


class Aborted(DomainError):
    """A concurrent write won; the caller may retry."""

    status = "ABORTED"


class Unimplemented(DomainError):
    """A method whose feature has not landed yet."""

    status = "UNIMPLEMENTED"
