"""NATS_URL names one server or a cluster's several, comma-separated."""

from __future__ import annotations

import pytest

from services.core.adapters.nats_bus import nats_servers


def test_one_server():
    assert nats_servers("nats://127.0.0.1:4222") == ["nats://127.0.0.1:4222"]


def test_a_cluster_comma_separated_spaces_and_trailing_commas_aside():
    url = "nats://nats-0.nats:4222, nats://nats-1.nats:4222,nats://nats-2.nats:4222,"
    assert nats_servers(url) == ["nats://nats-0.nats:4222", "nats://nats-1.nats:4222", "nats://nats-2.nats:4222"]


def test_no_server_is_refused():
    with pytest.raises(ValueError, match="NATS_URL"):
        nats_servers(" , ")
