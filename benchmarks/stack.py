"""The embedded stack (python -m devstack) on free ports, for benchmarks."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import httpx

from devstack.servers import free_port
from services.core.settings import SERVICE_NAMES

TOKEN = "bench-token"


class BenchStack:
    def __init__(self, **env_overrides: str):
        self.data = Path(tempfile.mkdtemp(prefix="memgrid-bench-"))
        self.owns_data = True  # removed on exit (a subclass reusing a directory sets False)
        self.env = {
            **os.environ,
            "MEMGRID_DATA_DIR": str(self.data),
            "AUTOMEM_API_TOKEN": TOKEN,
            "PORT": str(free_port()),
            "FALKORDB_PORT": str(free_port()),
            "NATS_URL": f"nats://127.0.0.1:{free_port()}",
            "LOG_LEVEL": "WARNING",
            **env_overrides,
        }
        for name in SERVICE_NAMES:
            self.env[f"{name.upper()}_GRPC_PORT"] = str(free_port())
            self.env[f"{name.upper()}_METRICS_PORT"] = str(free_port())
        self.url = f"http://127.0.0.1:{self.env['PORT']}"
        self.process: subprocess.Popen | None = None

    #: How long the stack may take to answer /health (recall optimises its index first).
    startup_seconds = 120.0

    def settle(self, quiet_share: float = 0.1, window_seconds: float = 2.0, longest_seconds: float = 180.0) -> float:
        """Wait until the stack's processes together use less than `quiet_share`
        of one core over a window (after a bulk load: the vector index's
        clean-up, FalkorDB's AOF rewrite), at most `longest_seconds`; returns
        the seconds waited. A latency figure then measures queries, not the
        load's aftermath."""
        from benchmarks.enrichment import cpu_seconds  # enrichment imports this module

        assert self.process is not None
        started = time.monotonic()
        while time.monotonic() - started < longest_seconds:
            before = sum(cpu_seconds(self.process.pid).values())
            time.sleep(window_seconds)
            if sum(cpu_seconds(self.process.pid).values()) - before < quiet_share * window_seconds:
                break
        return time.monotonic() - started

    def grpc_target(self, service: str) -> str:
        return f"127.0.0.1:{self.env[f'{service.upper()}_GRPC_PORT']}"

    def __enter__(self) -> BenchStack:
        print(f"starting the stack in {self.data} ...", file=sys.stderr, flush=True)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "devstack"], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + self.startup_seconds
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.__exit__()
                raise RuntimeError("the stack did not become healthy")
            time.sleep(0.3)

    def __exit__(self, *exc) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)
        if self.owns_data:  # a 100k run leaves half a gigabyte
            shutil.rmtree(self.data, ignore_errors=True)

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)


class KeepAlive:
    """A minimal HTTP/1.1 client on one kept-alive connection (the standard
    library's): httpx spends about 1.1 ms of CPU a request on its own, which
    a latency figure would count, and which takes CPU from the stack it
    measures on a machine of few cores."""

    def __init__(self, url: str, token: str):
        address = urlsplit(url)
        self._connection = http.client.HTTPConnection(address.hostname, address.port, timeout=60)
        self._headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def request(self, method: str, path: str, body: dict | None = None, params: dict | None = None) -> dict:
        payload = json.dumps(body).encode() if body is not None else None
        if params:
            path = f"{path}?{urlencode(params)}"
        self._connection.request(method, path, body=payload, headers=self._headers)
        reply = self._connection.getresponse()
        data = reply.read()
        if reply.status >= 400:
            raise RuntimeError(f"{method} {path}: {reply.status} {data[:200]!r}")
        return json.loads(data)

    def close(self) -> None:
        self._connection.close()
