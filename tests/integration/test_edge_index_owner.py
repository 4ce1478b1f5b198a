"""The embedded vector index belongs to one process: a second recall on the
same data directory refuses to start (deploy/k8s runs recall as one replica
without QDRANT_URL for this reason)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devstack.servers import free_port
from services.core.adapters.edge_index import EdgeVectorIndex
from services.core.adapters.edge_shard_lock import VectorIndexInUse

pytestmark = pytest.mark.integration

IN_USE = "is in use by another process"


def recall_env(settings, grpc_port: int, metrics_port: int) -> dict[str, str]:
    """The environment of a recall process on the test's stack and data directory."""
    return {
        **os.environ,
        "MEMGRID_DATA_DIR": str(settings.process.memgrid_data_dir),
        "FALKORDB_PORT": str(settings.graph.falkordb_port),
        "FALKORDB_GRAPH": settings.graph.falkordb_graph,
        "NATS_URL": settings.bus.nats_url,
        "NATS_STREAM": settings.bus.nats_stream,
        "NATS_SUBJECT_PREFIX": settings.bus.nats_subject_prefix,
        "RECALL_GRPC_PORT": str(grpc_port),
        "RECALL_METRICS_PORT": str(metrics_port),
        "EMBEDDING_PROVIDER": "placeholder",
        "DEPENDENCY_WAIT_SECONDS": "20",
        "SHUTDOWN_GRACE_SECONDS": "1",
        "LOG_JSON": "false",
        "RECALL_DF_WARM_SECONDS": "0",
    }


def spawn_recall(settings, tmp_path, name: str) -> tuple[subprocess.Popen, int, object]:
    port = free_port()
    log = (tmp_path / f"{name}.log").open("w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "services.recall.main"],
        env=recall_env(settings, port, free_port()),
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,  # no .env of the developer's
    )
    return process, port, log


def health_status(port: int) -> int | None:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
        except grpc.RpcError:
            return None
    return reply.status


def wait_serving(process: subprocess.Popen, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "the first recall exited before serving"
        if health_status(port) == health_pb2.HealthCheckResponse.SERVING:
            return
        time.sleep(0.2)
    raise AssertionError("the first recall did not serve in time")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def test_a_second_index_on_the_same_directory_is_refused_until_the_first_closes(tmp_path):
    path = tmp_path / "vectors" / "memories"
    first = EdgeVectorIndex(path=path, collection="memories", vector_size=4)
    first.open()
    await first.upsert([("00000000-0000-0000-0000-000000000001", [1.0, 0.0, 0.0, 0.0], {"tenant": "t"})])
    second = EdgeVectorIndex(path=path, collection="memories", vector_size=4)
    with pytest.raises(VectorIndexInUse, match=f"{IN_USE} \\(pid {os.getpid()}\\)"):
        second.open()
    assert await first.count() == 1  # the refused open touched nothing of the owner's
    await first.close()
    second.open()  # the lock went with the first's close
    assert await second.count() == 1
    await second.close()


def test_a_second_recall_process_on_one_embedded_index_refuses_to_start(settings, tmp_path):
    first, first_port, first_log = spawn_recall(settings, tmp_path, "first")
    try:
        wait_serving(first, first_port, timeout=90)
        second, _, second_log = spawn_recall(settings, tmp_path, "second")
        try:
            code = second.wait(timeout=90)
        finally:
            stop(second)
        second_log.seek(0)
        output = second_log.read()
        assert code != 0
        assert IN_USE in output and "QDRANT_URL" in output, output[-2000:]
        # The owner is unaffected: it still serves, on its index.
        assert first.poll() is None
        assert health_status(first_port) == health_pb2.HealthCheckResponse.SERVING
    finally:
        stop(first)
        first_log.seek(0)
        assert "Traceback" not in first_log.read()
