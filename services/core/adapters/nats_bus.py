"""NatsEventBus: memory events on NATS JetStream.

Subjects are <prefix>.<tenant>.<kind>; the stream captures <prefix>.>, is
file-backed and de-duplicates on Nats-Msg-Id (the event id), so a
re-published event is stored once. Its retention is bounded by the settings
(docs/operations.md, Retention); a consumer that falls behind it finds out
(services.core.adapters.nats_consumer) and repairs from the graph.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable
from typing import Any

import nats
import structlog
from nats.errors import ConnectionClosedError, NoServersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import StorageType, StreamConfig
from nats.js.errors import NotFoundError

from services.core.adapters.nats_retention import consumers_lag
from services.core.adapters.retry import with_backoff
from services.core.codec import event_to_pb
from services.core.domain.errors import Unavailable
from services.core.domain.model import ComponentStatus, EventKind, MemoryEvent

log = structlog.get_logger()

#: Longest a drain or close may take at shutdown.
CLOSE_TIMEOUT_SECONDS = 3.0

#: The stream metadata key holding the limits memgrid applied last: [max age seconds, max bytes], 0 unlimited.
LIMITS_KEY = "memgrid_limits"
#: JetStream's de-duplication window (no longer than the stream's max age, which JetStream requires).
DUPLICATE_WINDOW_SECONDS = 120.0


def event_subject(prefix: str, tenant: str, kind: str) -> str:
    """memory.events.<tenant>.<kind>; NATS tokens may not hold '.', '*', '>' or spaces."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in tenant) or "_"
    return f"{prefix}.{safe}.{kind}"


def kind_filters(prefix: str, kinds: Iterable[EventKind]) -> list[str]:
    """Subject filters taking these kinds of every tenant (event_subject's, with '*' for the tenant
    token), in EventKind's order."""
    wanted = set(kinds)
    return [f"{prefix}.*.{kind.value}" for kind in EventKind if kind in wanted]


def dead_letter_stream(stream: str) -> str:
    """The stream holding the dead letters of `stream`'s consumers."""
    return f"{stream}_DLQ"


def dead_letter_subject(prefix: str, durable: str) -> str:
    """Where the consumer `durable` dead-letters: <prefix>_dlq.<durable>, outside
    the events' <prefix>.> (so no consumer of events, nor /stream, sees it)."""
    return f"{prefix}_dlq.{durable}"


def nats_servers(url: str) -> list[str]:
    """NATS_URL's servers: one URL, or a cluster's several, comma-separated.
    The client connects to one and, when it goes, reconnects to another."""
    servers = [u.strip() for u in url.split(",") if u.strip()]
    if not servers:
        raise ValueError("NATS_URL names no server")
    return servers


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, (NoServersError, OSError, NatsTimeout, ConnectionClosedError, TimeoutError))


def _limit(value: float | int | None) -> float:
    """A stream limit as a number, unlimited (0, -1 or None in NATS) as infinity."""
    return float("inf") if value is None or value <= 0 else float(value)


def _limits_of(config: StreamConfig) -> tuple[float, float]:
    return _limit(config.max_age), _limit(config.max_bytes)


def _applied_limits(config: StreamConfig) -> tuple[float, float] | None:
    """The limits memgrid recorded when it last set them, or None (never: an older release's stream)."""
    try:
        age, size = json.loads((config.metadata or {})[LIMITS_KEY])
        return _limit(age), _limit(size)
    except (KeyError, TypeError, ValueError):
        return None


def limits_are_memgrids(config: StreamConfig) -> bool:
    """Whether the stream's retention is memgrid's to set: it is what memgrid
    applied last, or unlimited on a stream no release recorded limits on (an
    older memgrid's, whose default was no limit). Otherwise an operator
    changed it by hand (`nats stream edit`), and it is kept."""
    applied = _applied_limits(config)
    if applied is None:
        return _limits_of(config) == (float("inf"), float("inf"))
    return applied == _limits_of(config)


class NatsEventBus:
    """EventPublisher on JetStream."""

    def __init__(
        self,
        *,
        url: str,
        stream: str,
        subject_prefix: str,
        user: str | None = None,
        password: str | None = None,
        wait_seconds: float = 120.0,
        retry_initial_seconds: float = 0.1,
        retry_max_seconds: float = 2.0,
        publish_timeout_seconds: float = 2.0,
        stream_replicas: int = 1,
        stream_max_age_seconds: float = 0.0,
        stream_max_bytes: int = 0,
        durables: tuple[str, ...] = (),
    ):
        """`durables`: the durable consumers whose retention lag status() reports."""
        self._url = url
        self._servers = nats_servers(url)
        #: NATS_USER / NATS_PASSWORD: this process's own user (None: no authentication).
        self._auth = {"user": user, "password": password} if user else {}
        self._replicas = stream_replicas
        #: The stream's retention (0: unlimited), unless an operator changed it by hand.
        self._max_age = stream_max_age_seconds
        self._max_bytes = stream_max_bytes
        self._durables = durables
        #: The stream's retention as found at connect: (max age seconds, max bytes), inf: unlimited.
        self.effective_limits: tuple[float, float] | None = None
        self._stream = stream
        self._prefix = subject_prefix
        self._wait = wait_seconds
        self._initial = retry_initial_seconds
        self._max = retry_max_seconds
        self._publish_timeout = publish_timeout_seconds
        self._nc: nats.NATS | None = None
        self._js: JetStreamContext | None = None

    @property
    def stream(self) -> str:
        return self._stream

    @property
    def subject_prefix(self) -> str:
        return self._prefix

    @property
    def subjects(self) -> str:
        return f"{self._prefix}.>"

    async def connect(self) -> None:
        """Connect (retrying while the server comes up) and ensure the stream."""
        if self._nc is not None:
            return

        async def attempt():
            nc = await nats.connect(
                servers=self._servers,
                **self._auth,
                connect_timeout=2,
                max_reconnect_attempts=-1,
                reconnect_time_wait=1,
                allow_reconnect=True,
                drain_timeout=2,  # a stop must not wait long on a pull request in flight
            )
            return nc

        nc: nats.NATS = await with_backoff(
            "nats",
            attempt,
            retryable=_retryable,
            deadline_seconds=self._wait,
            initial_seconds=self._initial,
            max_seconds=self._max,
        )
        self._nc = nc
        self._js = nc.jetstream()
        await self.ensure_stream()

    @property
    def dead_letter_stream(self) -> str:
        return dead_letter_stream(self._stream)

    def _retention(self) -> dict:
        """The stream's retention fields as the settings want them (recorded in its metadata)."""
        window = DUPLICATE_WINDOW_SECONDS if not self._max_age else min(DUPLICATE_WINDOW_SECONDS, self._max_age)
        return {
            "max_age": self._max_age or None,
            "max_bytes": self._max_bytes or None,
            "duplicate_window": window,
            "metadata": {LIMITS_KEY: json.dumps([self._max_age, self._max_bytes])},
        }

    async def ensure_stream(self) -> None:
        """Create the events' stream and the dead-letter stream where absent.
        On an existing stream memgrid updates, in place (its events stay), the
        fields it owns: its subjects, its replicas, and its retention limits
        while they are memgrid's (limits_are_memgrids), so a stream an older
        release made without limits gets the settings' at start-up. Limits an
        operator set by hand are kept, which a reconnect used to reset
        (docs/operations.md, Retention); a warning says where they differ."""
        await self._ensure(
            StreamConfig(
                name=self._stream,
                subjects=[self.subjects],
                storage=StorageType.FILE,
                num_replicas=self._replicas,
                **self._retention(),
            ),
            limits_checked=True,
        )
        # Dead letters are kept until replayed (python -m services.core.dlq): no retention limit of memgrid's.
        await self._ensure(
            StreamConfig(
                name=self.dead_letter_stream,
                subjects=[f"{self._prefix}_dlq.>"],
                storage=StorageType.FILE,
                duplicate_window=120.0,
                num_replicas=self._replicas,
            )
        )

    async def _ensure(self, wanted: StreamConfig, *, limits_checked: bool = False) -> None:
        js, name = self._js, wanted.name
        assert js is not None and name is not None  # noqa: S101  narrows the types: called once connected, with a name
        try:
            info = await js.stream_info(name)
        except NotFoundError:
            await js.add_stream(wanted)
            info = await js.stream_info(name)
        else:
            current = info.config
            owned: dict[str, Any] = {"subjects": sorted(set(current.subjects or []) | set(wanted.subjects or []))}
            if wanted.num_replicas and wanted.num_replicas != current.num_replicas:
                owned["num_replicas"] = wanted.num_replicas
            retention = self._retention()
            if (
                limits_checked
                and limits_are_memgrids(current)
                and (_limits_of(current) != _limits_of(wanted) or _applied_limits(current) is None)
            ):
                log.info(
                    "the stream's retention set from the settings",
                    stream=wanted.name,
                    max_age_seconds=self._max_age or "unlimited",
                    max_bytes=self._max_bytes or "unlimited",
                )
                kept = {k: v for k, v in (current.metadata or {}).items() if not k.startswith("_nats")}
                owned.update(retention, metadata={**kept, **retention["metadata"]})
            if owned["subjects"] != sorted(current.subjects or []) or len(owned) > 1:
                # The stream as it is, with only memgrid's own fields changed.
                await js.update_stream(current.evolve(**owned))
                info = await js.stream_info(name)
        if not limits_checked:
            return
        config = info.config
        self.effective_limits = _limits_of(config)
        # The server's sync_interval is not visible to a client: docs/operations.md, Durability.
        log.info(
            "nats durability",
            stream=wanted.name,
            storage=str(getattr(config.storage, "value", config.storage)),
            replicas=config.num_replicas,
            max_age_seconds=config.max_age or "unlimited",
            max_bytes=config.max_bytes if config.max_bytes and config.max_bytes > 0 else "unlimited",
        )
        if self.effective_limits != (_limit(self._max_age), _limit(self._max_bytes)):
            log.warning(
                "the stream's retention differs from the settings; the stream's is kept (an operator set it)",
                stream=wanted.name,
                max_age_seconds=config.max_age,
                max_bytes=config.max_bytes,
                setting_max_age_seconds=self._max_age,
                setting_max_bytes=self._max_bytes,
                hint="an operator's limits are kept; to hand them back, set them to the settings' values",
            )

    @property
    def connected(self) -> bool:
        return self._nc is not None and self._nc.is_connected

    @property
    def nats(self):
        """The NATS connection (core subscriptions: JetStream's advisories)."""
        return self._nc

    @property
    def jetstream(self):
        """The JetStream context, for consumers built on this connection."""
        return self._js

    @property
    def reconnects(self) -> int:
        """How often the connection was re-established: a consumer made before
        a reconnect may be gone (a restarted server forgets ephemeral ones)."""
        return 0 if self._nc is None else int(self._nc.stats["reconnects"])

    async def publish(self, event: MemoryEvent) -> None:
        if self._js is None or self._nc is None or not self._nc.is_connected:
            raise Unavailable("NATS_UNAVAILABLE", "NATS is not connected")
        subject = event_subject(self._prefix, event.tenant, event.kind.value)
        data = event_to_pb(event).SerializeToString()
        try:
            await self._js.publish(
                subject, data, timeout=self._publish_timeout, headers={"Nats-Msg-Id": event.event_id}
            )
        except Exception as exc:
            raise Unavailable("NATS_UNAVAILABLE", f"publish to {subject} failed: {exc}") from exc

    async def publish_many(self, events: list[MemoryEvent]) -> list[bool]:
        """Publish a batch without waiting for each ack in turn (JetStream
        async publish); returns, per event, whether the stream acknowledged it."""
        if not events:
            return []
        if self._js is None or self._nc is None or not self._nc.is_connected:
            return [False] * len(events)
        futures: list[asyncio.Future | None] = []
        for event in events:
            subject = event_subject(self._prefix, event.tenant, event.kind.value)
            try:
                futures.append(
                    await self._js.publish_async(
                        subject,
                        event_to_pb(event).SerializeToString(),
                        wait_stall=self._publish_timeout,
                        headers={"Nats-Msg-Id": event.event_id},
                    )
                )
            except Exception as exc:
                log.warning("publish failed", subject=subject, error=str(exc))
                futures.append(None)
        pending = [f for f in futures if f is not None]
        if pending:
            await asyncio.wait(pending, timeout=self._publish_timeout)
        outcomes = []
        for future in futures:
            ok = future is not None and future.done() and not future.cancelled() and future.exception() is None
            if future is not None and not future.done():
                future.cancel()
            outcomes.append(ok)
        return outcomes

    async def status(self) -> ComponentStatus:
        if self._js is None or self._nc is None or not self._nc.is_connected:  # set and cleared together
            return ComponentStatus("nats", "unavailable", "not connected")
        try:
            info = await self._js.stream_info(self._stream)
            lag, behind = await consumers_lag(self._js, self._stream, self._durables)
        except Exception as exc:
            return ComponentStatus("nats", "unavailable", str(exc))
        # The node this process talks to now (a cluster's: one of NATS_URL's), without any credentials.
        where = self._nc.connected_url
        detail = f"nats://{where.hostname}:{where.port} stream {self._stream}" if where else f"stream {self._stream}"
        if behind:
            detail += f"; behind its retention (events lost, repair not finished): {', '.join(behind)}"
        return ComponentStatus("nats", "connected", detail, {"messages": float(info.state.messages), **lag})

    async def close(self) -> None:
        """Drain, then close; bounded, because a connection caught mid-reconnect
        (the server just restarted) can otherwise hold a shutdown for minutes."""
        if self._nc is not None and not self._nc.is_closed:
            try:
                await asyncio.wait_for(self._nc.drain(), timeout=CLOSE_TIMEOUT_SECONDS)
            except Exception as exc:  # closing must not mask the shutdown
                log.warning("nats drain failed", error=type(exc).__name__)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._nc.close(), timeout=CLOSE_TIMEOUT_SECONDS)
        self._nc = self._js = None
