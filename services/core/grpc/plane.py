"""The service plane: what a process needs to serve and to call the others
safely. The claim key (SERVICE_CLAIM_KEY, or a file generated on first
start), the claim's lifetime, and optional TLS (GRPC_TLS_*_FILE).

Servers verify every call's claim in ClaimInterceptor (signed, for this
service, with the role the method needs: services/core/grpc/method_roles.py)
and keep it for the call (services/core/grpc/tenant.py reads it); clients
sign with plane.signer(actor, audience)."""

from __future__ import annotations

from contextlib import asynccontextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from services.core.actor import reset_actor, set_actor, system_actor
from services.core.domain.errors import PermissionDenied, Unauthenticated
from services.core.grpc.balancing import channel_target
from services.core.grpc.claims import (
    CLAIM_METADATA_KEY,
    Claim,
    ClaimRefused,
    ClaimSigner,
    check_key,
    verify_claim,
)
from services.core.grpc.method_roles import refusal, rule_of
from services.core.grpc.wrapping import around_calls
from services.core.key_files import load_or_create_key_file
from services.core.observability import GRPC_REFUSED

if TYPE_CHECKING:
    from services.core.settings import PlaneSettings

#: Where the generated claim key is kept, under MEMGRID_DATA_DIR.
CLAIM_KEY_FILE_NAME = "service_claim_key"
#: Services a call to needs no claim: probes and tooling must reach them.
OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

#: The verified claim of the call being served (set by ClaimInterceptor, in
#: the call's own task, so concurrent calls never see each other's).
CURRENT_CLAIM: ContextVar[Claim | None] = ContextVar("memgrid_claim", default=None)
#: The service serving the call, for the refusal counter.
CURRENT_SERVICE: ContextVar[str] = ContextVar("memgrid_service", default="unknown")


def current_claim() -> Claim | None:
    """The verified claim of the call being served; None outside a call."""
    return CURRENT_CLAIM.get()


def current_service() -> str:
    """The service serving the current call."""
    return CURRENT_SERVICE.get()


def count_refusal(reason: str) -> None:
    """Count a call refused for its claim (or its role) under the serving service."""
    GRPC_REFUSED.labels(CURRENT_SERVICE.get(), reason).inc()


def load_or_create_claim_key(data_dir: Path) -> bytes:
    """The claim key saved under the data dir, minted on first start (0600)."""
    return load_or_create_key_file(data_dir / CLAIM_KEY_FILE_NAME, lambda saved: check_key(saved.encode()))


@dataclass(frozen=True)
class ServicePlane:
    """The claim key and lifetime, and the TLS files (None: plaintext)."""

    key: bytes
    ttl_seconds: float = 60.0
    #: Keys a claim may also be signed with (a rotation under way); never signed with.
    accepted_keys: tuple[bytes, ...] = ()
    skew_seconds: float = 5.0
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_ca_file: Path | None = None
    tls_server_name: str | None = None

    @classmethod
    def from_settings(cls, plane: PlaneSettings, data_dir: Path) -> ServicePlane:
        """From SERVICE_CLAIM_KEY, or the key file generated under `data_dir`; the TLS settings."""
        if plane.service_claim_key is not None:
            key = check_key(plane.service_claim_key.get_secret_value().encode())
        else:
            key = load_or_create_claim_key(data_dir)
        previous = plane.service_claim_previous_key
        return cls(
            key=key,
            accepted_keys=() if previous is None else (check_key(previous.get_secret_value().encode()),),
            ttl_seconds=plane.service_claim_ttl_seconds,
            skew_seconds=plane.service_claim_skew_seconds,
            tls_cert_file=plane.grpc_tls_cert_file,
            tls_key_file=plane.grpc_tls_key_file,
            tls_ca_file=plane.grpc_tls_ca_file,
            tls_server_name=plane.grpc_tls_server_name,
        )

    @property
    def tls(self) -> bool:
        """Whether servers and channels use TLS."""
        return self.tls_cert_file is not None and self.tls_key_file is not None

    def signer(self, actor: str | None = None, audience: str = "") -> ClaimSigner:
        """Signs this plane's claims for the service `audience` (ClaimSigner.for_service
        names another); `actor` is the default actor (`system:<service>`)."""
        return ClaimSigner(self.key, self.ttl_seconds, actor, audience)

    def verify(self, token: str | None, audience: str) -> Claim:
        """The claim `token` carries, signed with the key or an accepted one,
        for the service `audience`; ClaimRefused when it does not stand."""
        try:
            return verify_claim(self.key, token, audience=audience, skew=self.skew_seconds)
        except ClaimRefused as exc:
            if exc.reason != "BAD_SIGNATURE" or not self.accepted_keys:
                raise
            for key in self.accepted_keys:
                try:
                    return verify_claim(key, token, audience=audience, skew=self.skew_seconds)
                except ClaimRefused as again:
                    if again.reason != "BAD_SIGNATURE":
                        raise
            raise

    def _read(self, path: Path | None) -> bytes | None:
        return None if path is None else Path(path).read_bytes()

    def add_port(self, server: grpc.aio.Server, address: str) -> int:
        """Bind `address`, with TLS when configured (client certificates
        required when a CA is); the bound port."""
        if not self.tls:
            return server.add_insecure_port(address)
        ca = self._read(self.tls_ca_file)
        credentials = grpc.ssl_server_credentials(
            [(self._read(self.tls_key_file), self._read(self.tls_cert_file))],
            root_certificates=ca,
            require_client_auth=ca is not None,
        )
        return server.add_secure_port(address, credentials)

    def channel(self, target: str, options: list | None = None) -> grpc.aio.Channel:
        """A channel to another service, with TLS when configured (this
        process's certificate as its client certificate). `target` is a
        service's address: one host:port, a comma-separated list of IP
        address:ports, or a target with its scheme (balancing.channel_target)."""
        target = channel_target(target)
        options = list(options or [])
        if not self.tls:
            return grpc.aio.insecure_channel(target, options=options)
        if self.tls_server_name:
            options.append(("grpc.ssl_target_name_override", self.tls_server_name))
        credentials = grpc.ssl_channel_credentials(
            root_certificates=self._read(self.tls_ca_file),
            private_key=self._read(self.tls_key_file),
            certificate_chain=self._read(self.tls_cert_file),
        )
        return grpc.aio.secure_channel(target, credentials, options=options)


def _claim_token(handler_call_details) -> str | None:
    for name, value in handler_call_details.invocation_metadata or ():
        if name == CLAIM_METADATA_KEY:
            return value
    return None


class ClaimInterceptor(grpc.aio.ServerInterceptor):
    """Refuses every call without a valid claim for this service
    (UNAUTHENTICATED, counted by reason), and a claim without the role the
    method needs (PERMISSION_DENIED, ROLE_REQUIRED: method_roles.py), except
    health and reflection; keeps the claim for the call.

    Placed inside ErrorAndMetricsInterceptor, so a refusal is mapped and
    counted like any other domain error."""

    def __init__(self, service: str, plane: ServicePlane):
        self._service = service
        self._plane = plane

    def _verified(self, token: str | None) -> Claim:
        CURRENT_SERVICE.set(self._service)
        try:
            return self._plane.verify(token, self._service)
        except ClaimRefused as exc:
            count_refusal(exc.reason)
            raise Unauthenticated(f"CLAIM_{exc.reason}", exc.message) from None

    @asynccontextmanager
    async def _claimed(self, method: str, token: str | None, request):
        """The call runs with its verified claim and its actor (the audit log's "who"),
        once the claim's role is what the method (and the request's fields) need."""
        claim = self._verified(token)
        rule = rule_of(method)
        why = f"{method} has no role in the method table" if rule is None else refusal(rule, claim, request)
        if why is not None:
            count_refusal("ROLE")
            raise PermissionDenied("ROLE_REQUIRED", why)
        reset = CURRENT_CLAIM.set(claim)
        acting = set_actor(claim.actor or system_actor(self._service))
        try:
            yield
        finally:
            # A stream's generator may be closed from another context (a cancelled call): then there is
            # nothing of this call's to restore.
            with suppress(ValueError):
                reset_actor(acting)
            with suppress(ValueError):
                CURRENT_CLAIM.reset(reset)

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(OPEN_SERVICES):
            return handler
        token = _claim_token(handler_call_details)
        method = handler_call_details.method
        wrapped = around_calls(handler, lambda request, _context: self._claimed(method, token, request))
        if wrapped is not None:
            return wrapped
        # No client- or bidi-streaming method of ours carries tenant data: refuse one rather than serve it unchecked.
        return grpc.stream_stream_rpc_method_handler(
            _unchecked,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


async def _unchecked(request_iterator, context):
    await context.abort(grpc.StatusCode.UNIMPLEMENTED, "streaming requests are not served")
    yield  # an async generator, as a stream handler is
