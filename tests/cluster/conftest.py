"""The cluster tier: each part of memgrid run as several real processes on
loopback, one killed under load (make test-cluster; docs/scaling.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.servers import FalkorCluster, start_falkordb_cluster
from services.core.settings import Settings


@pytest.fixture(scope="module")
def falkordb_cluster(tmp_path_factory) -> Iterator[FalkorCluster]:
    """FalkorDB on a Redis Cluster of 3 masters, each with a replica, a master
    failed after 2 s unheard; per module, since a test kills its nodes."""
    timeout = Settings(_env_file=None).graph.falkordb_query_timeout_ms
    cluster = start_falkordb_cluster(
        tmp_path_factory.mktemp("falkordb-cluster"), 3, 1, node_timeout_ms=2000, query_timeout_ms=timeout
    )
    yield cluster
    cluster.stop()
