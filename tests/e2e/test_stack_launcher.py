"""`make run`'s launcher (python -m devstack) as a user runs it: start,
store, stop with a signal, start again, and the memory is still there."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from devstack.servers import free_port
from services.core.settings import SERVICE_NAMES

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def stack_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOMEM_API_TOKEN", "ADMIN_API_TOKEN")}
    env.update(
        MEMGRID_DATA_DIR=str(data_dir),
        FALKORDB_PORT=str(free_port()),
        NATS_URL=f"nats://127.0.0.1:{free_port()}",
        PORT=str(free_port()),
        GATEWAY_METRICS_PORT=str(free_port()),
        LOG_JSON="false",
    )
    for name in SERVICE_NAMES:
        env[f"{name.upper()}_GRPC_PORT"] = str(free_port())
        env[f"{name.upper()}_METRICS_PORT"] = str(free_port())
    return env


def launch(env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "devstack"], cwd=REPO, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT
    )


def wait_healthy(url: str, process: subprocess.Popen, log: Path, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"launcher exited early:\n{log.read_text()[-3000:]}"
        try:
            reply = httpx.get(f"{url}/health", timeout=2)
            if reply.status_code == 200:
                return reply.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"not healthy after {timeout}s:\n{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen, sig: int) -> int:
    process.send_signal(sig)
    return process.wait(timeout=40)


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_run_store_stop_restart_and_the_memory_survives(tmp_path):
    env = stack_env(tmp_path / "data")
    log = tmp_path / "stack.log"
    url = f"http://127.0.0.1:{env['PORT']}"
    ports = [int(env["PORT"]), int(env["FALKORDB_PORT"]), int(env["NATS_URL"].rsplit(":", 1)[1])] + [
        int(env[f"{n.upper()}_GRPC_PORT"]) for n in SERVICE_NAMES
    ]

    process = launch(env, log)
    try:
        health = wait_healthy(url, process, log)
        assert health["services"] == dict.fromkeys(SERVICE_NAMES, "SERVING")
        token = (tmp_path / "data" / "api_token").read_text().strip()
        assert token and token in log.read_text()  # generated on first run, saved and printed
        headers = {"X-API-Key": token}
        created = httpx.post(f"{url}/memory", json={"content": "survives a restart", "tags": ["t"]}, headers=headers)
        assert created.status_code == 201, created.text
        memory_id = created.json()["memory_id"]
        metrics = httpx.get(f"http://127.0.0.1:{env['INGEST_METRICS_PORT']}/metrics").text
        assert 'method="CreateMemory"' in metrics
    finally:
        code = stop(process, signal.SIGTERM)
    assert code == 0, log.read_text()[-3000:]
    assert not [p for p in ports if listening(p)], "a process outlived the launcher"

    process = launch(env, log)
    try:
        wait_healthy(url, process, log)
        again = httpx.get(f"{url}/memory/{memory_id}", headers=headers)
        assert again.status_code == 200, again.text
        assert again.json()["memory"]["content"] == "survives a restart"
    finally:
        code = stop(process, signal.SIGINT)
    assert code == 0
    assert not [p for p in ports if listening(p)]
