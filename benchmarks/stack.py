"""The embedded stack (python -m devstack) on free ports, for benchmarks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from devstack.servers import free_port
from services.core.settings import SERVICE_NAMES

TOKEN = "bench-token"


class BenchStack:
    def __init__(self, **env_overrides: str):
        self.data = Path(tempfile.mkdtemp(prefix="memgrid-bench-"))
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

    def grpc_target(self, service: str) -> str:
        return f"127.0.0.1:{self.env[f'{service.upper()}_GRPC_PORT']}"

    def __enter__(self) -> BenchStack:
        print(f"starting the stack in {self.data} ...", file=sys.stderr, flush=True)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "devstack"], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 120
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

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
