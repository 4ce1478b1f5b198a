"""The request body size limit (MAX_REQUEST_BYTES): 413 in the error envelope.

The default, 32 MiB, is sized for the largest request a client may rightly
send, a 500-item POST /memory/batch with embeddings: per item, content of at
most 2000 characters is at most 12 KB of JSON (six bytes for a \\uXXXX
escape), and a 1536-dimension embedding (OpenAI text-embedding-3-small; the
local model has 384) printed at up to ~20 bytes a number is ~31 KB, so ~43 KB
an item and ~22 MB for 500, leaving room for metadata. A bigger model's
embeddings (3072 dimensions) need a bigger setting.

A declared Content-Length over the limit is refused before anything is
read; a body without one (chunked) is counted as it arrives and refused as
soon as it passes the limit, so no more than the limit is ever buffered."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.envelope import ApiError, envelope


def too_large(limit: int) -> ApiError:
    return ApiError(413, f"request body is larger than the limit of {limit} bytes", "REQUEST_TOO_LARGE")


class BodyLimit:
    """ASGI middleware refusing request bodies over `limit` bytes."""

    def __init__(self, app: ASGIApp, limit: int, paths: dict[str, int] | None = None):
        """`paths`: a limit of its own for a path (POST /restore takes a whole archive)."""
        self.app = app
        self.limit = limit
        self.paths = paths or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.paths.get(scope.get("path", ""), self.limit)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            error = too_large(limit)
            await envelope(error.code, error.message, error.reason)(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # Raised inside the route's body read, so the envelope handler answers.
                    raise too_large(limit)
            return message

        await self.app(scope, counted, send)
