"""Running each call of a gRPC method handler inside a context manager: what
the server's interceptors (errors and metrics, the claim check) share."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import grpc


def around_calls(handler, around: Callable[[object, object], AbstractAsyncContextManager]):
    """`handler` with each unary or server-streaming call run inside
    `around(request, context)`; None for any other kind (the interceptor decides)."""
    if handler.unary_unary is not None:
        unary = handler.unary_unary

        async def call(request, context):
            async with around(request, context):
                return await unary(request, context)

        return grpc.unary_unary_rpc_method_handler(
            call,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream is not None:
        stream = handler.unary_stream

        streamed: Callable[..., Any]
        if inspect.iscoroutinefunction(stream):
            # A handler that writes its stream with context.write (grpc's aio HealthServicer.Watch, which
            # the channels' client-side health checking calls): awaited, not iterated.
            async def awaited(request, context):
                async with around(request, context):
                    await stream(request, context)

            streamed = awaited
        else:

            async def iterated(request, context):
                async with around(request, context):
                    async for item in stream(request, context):
                        yield item

            streamed = iterated

        return grpc.unary_stream_rpc_method_handler(
            streamed,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    return None
