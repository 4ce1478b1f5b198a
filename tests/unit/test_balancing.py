"""A service address naming several replicas: the gRPC target it becomes and
the service config that balances, health-checks and retries calls to it."""

from __future__ import annotations

import json

import pytest

from services.core.grpc.balancing import RETRYABLE, RetryPolicy, channel_options, channel_target, service_config
from services.core.settings import Settings


@pytest.mark.parametrize(
    ("address", "target"),
    [
        ("recall:50052", "recall:50052"),
        ("127.0.0.1:50052", "127.0.0.1:50052"),
        ("dns:///recall-headless.memgrid.svc:50052", "dns:///recall-headless.memgrid.svc:50052"),
        ("127.0.0.1:1, 127.0.0.1:2", "ipv4:127.0.0.1:1,127.0.0.1:2"),
        ("10.0.0.5:50052,10.0.0.6:50052,", "ipv4:10.0.0.5:50052,10.0.0.6:50052"),
        ("[::1]:1,[::1]:2", "ipv6:[::1]:1,[::1]:2"),
    ],
)
def test_an_address_becomes_a_target_grpc_resolves(address, target):
    assert channel_target(address) == target


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("recall-0:50052,recall-1:50052", "one DNS name"),
        ("127.0.0.1:1,[::1]:2", "all IPv4 or all IPv6"),
        ("127.0.0.1:1,127.0.0.1", "not address:port"),
        ("dns:///a:1,127.0.0.1:2", "scheme"),
        (" , ", "empty"),
    ],
)
def test_a_list_gRPC_cannot_resolve_is_refused_saying_why(address, why):
    with pytest.raises(ValueError, match=why):
        channel_target(address)


def method_configs(config: dict) -> dict[tuple[str, str | None], dict]:
    """Each named method (or whole service: None) and the retry policy it gets."""
    return {
        (name["service"], name.get("method")): entry["retryPolicy"]
        for entry in config["methodConfig"]
        for name in entry["name"]
    }


def test_the_service_config_balances_round_robin_over_healthy_replicas():
    config = json.loads(service_config("memgrid.v1.RecallService", RetryPolicy()))
    assert config["loadBalancingConfig"] == [{"round_robin": {}}]
    # The main service's health, not the process's (""): a recall still catching up is NOT_SERVING for it.
    assert config["healthCheckConfig"] == {"serviceName": "memgrid.v1.RecallService"}
    assert "healthCheckConfig" not in json.loads(service_config(None, RetryPolicy()))


def test_reads_and_keyed_creates_are_retried_on_unavailable_and_nothing_else():
    retry = RetryPolicy(max_attempts=4, initial_backoff_seconds=0.1, max_backoff_seconds=2)
    named = method_configs(json.loads(service_config("memgrid.v1.IngestService", retry)))
    policy = named[("memgrid.v1.IngestService", "CreateMemory")]
    assert policy == {
        "maxAttempts": 4,
        "initialBackoff": "0.1s",
        "maxBackoff": "2s",
        "backoffMultiplier": 2.0,
        "retryableStatusCodes": ["UNAVAILABLE"],
    }
    assert ("memgrid.v1.RecallService", "SearchMemories") in named
    assert ("memgrid.v1.AuditService", None) in named  # every method: all reads
    for not_safe in ("DeleteMemory", "UpdateMemory", "DeleteMemoriesByTag", "ReviewMemory"):
        assert ("memgrid.v1.IngestService", not_safe) not in named
    for own_retry in ("RebuildIndex", "WatchMemoryEvents"):
        assert ("memgrid.v1.RecallService", own_retry) not in named


def test_every_retried_method_exists_in_its_service():
    from memgrid.v1 import (
        audit_service_pb2,
        consolidate_service_pb2,
        enrich_service_pb2,
        ingest_service_pb2,
        recall_service_pb2,
    )

    services = {
        d.full_name: {m.name for m in d.methods}
        for module in (
            audit_service_pb2,
            consolidate_service_pb2,
            enrich_service_pb2,
            ingest_service_pb2,
            recall_service_pb2,
        )
        for d in module.DESCRIPTOR.services_by_name.values()
    }
    for service, methods in RETRYABLE.items():
        if service.startswith("grpc."):
            continue
        assert service in services, service
        assert set(methods or ()) <= services[service], (service, set(methods or ()) - services[service])


def test_the_gateway_channel_carries_the_attempts_setting():
    settings = Settings(_env_file=None, grpc_retry_attempts=5)
    options = dict(channel_options("recall", RetryPolicy(max_attempts=settings.plane.grpc_retry_attempts)))
    config = json.loads(options["grpc.service_config"])
    assert {p["maxAttempts"] for p in method_configs(config).values()} == {5}
    assert options["grpc.enable_retries"] == 1
