"""The embedded stack (python -m devstack) on free ports, for benchmarks."""

from __future__ import annotations

import http.client
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import IO
from urllib.parse import urlencode, urlsplit

import httpx

from devstack.servers import free_port
from services.core.grpc.claims import OPERATOR_ROLE, claim_metadata
from services.core.settings import SERVICE_NAMES

TOKEN = "bench-token"  # noqa: S105  the token of a throwaway benchmark stack


def _process_name(pid: str) -> str:
    words = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    module = next((w for w in words if w.startswith(("services.", "gateway."))), None)
    if module:
        return module.split(".")[1] if module.startswith("services.") else "gateway"
    if any("multiprocessing" in w for w in words):
        return "spacy-worker"  # enrich's one worker process
    # redis-server rewrites its command line as "path host:port".
    return Path(words[0].split()[0]).name if words and words[0].strip() else pid


def _stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) one process has used so far."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(root: int) -> dict[str, float]:
    """CPU seconds (user + system) so far of each process under `root`, by
    name; empty where /proc is not there (not Linux)."""
    if not Path("/proc").is_dir():
        return {}
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                children[int(_stat(int(entry.name))[1])].append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    used: dict[str, float] = defaultdict(float)
    todo = [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            used[_process_name(str(pid))] += process_cpu_seconds(pid)
        except (OSError, IndexError, ValueError):
            continue
    return dict(used)


class BenchStack:
    def __init__(self, *devstack_args: str, log_path: Path | None = None, **env_overrides: str):
        """`devstack_args` go to python -m devstack (e.g. "--replicas", "recall=2");
        its output is kept at `log_path` when given (else shown only when it fails to start)."""
        self.devstack_args = devstack_args
        self.log_path = log_path
        self.data = Path(tempfile.mkdtemp(prefix="memgrid-bench-"))
        self.env = {
            **os.environ,
            "MEMGRID_DATA_DIR": str(self.data),
            "AUTOMEM_API_TOKEN": TOKEN,
            "LOG_LEVEL": "WARNING",
            "SERVICE_CLAIM_KEY": secrets.token_urlsafe(48),  # the benchmarks call the services directly too
        }
        self._overrides = env_overrides
        self._pick_ports()
        self.process: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None
        #: Where devstack runs (None: here); with PYTHONPATH, another checkout's code (benchmarks/write_ab.py).
        self.cwd: Path | None = None

    #: How long the stack may take to answer /health (recall optimises its index first).
    startup_seconds = 120.0

    def settle(self, quiet_share: float = 0.1, window_seconds: float = 2.0, longest_seconds: float = 180.0) -> float:
        """Wait until the stack's processes together use less than `quiet_share`
        of one core over a window (after a bulk load: the vector index's
        clean-up, FalkorDB's AOF rewrite), at most `longest_seconds`; returns
        the seconds waited. A latency figure then measures queries, not the
        load's aftermath."""
        assert self.process is not None  # noqa: S101  an invariant of the benchmark (started), not an input check
        started = time.monotonic()
        while time.monotonic() - started < longest_seconds:
            before = sum(cpu_seconds(self.process.pid).values())
            time.sleep(window_seconds)
            if sum(cpu_seconds(self.process.pid).values()) - before < quiet_share * window_seconds:
                break
        return time.monotonic() - started

    def grpc_target(self, service: str) -> str:
        return f"127.0.0.1:{self.env[f'{service.upper()}_GRPC_PORT']}"

    def claim(self, tenant: str | None = "default", role: str = OPERATOR_ROLE) -> tuple[tuple[str, str], ...]:
        """Call metadata for a direct gRPC call: a claim signed with the stack's key for
        every service, valid for the longest benchmark (a loop reuses it)."""
        key = self.env["SERVICE_CLAIM_KEY"].encode()
        return claim_metadata(key, tenant, role, actor="bench", ttl=6 * 3600, audience=SERVICE_NAMES)

    def _pick_ports(self) -> None:
        """Fresh free ports for every server of the stack (a port given in the overrides stays)."""
        ports = ["PORT", "GATEWAY_METRICS_PORT", "FALKORDB_PORT"]
        ports += [f"{name.upper()}_{kind}_PORT" for name in SERVICE_NAMES for kind in ("GRPC", "METRICS")]
        self.env.update({name: str(free_port()) for name in ports})
        self.env["NATS_URL"] = f"nats://127.0.0.1:{free_port()}"
        self.env.update(self._overrides)
        self.url = f"http://127.0.0.1:{self.env['PORT']}"

    def __enter__(self) -> BenchStack:
        print(f"starting the stack in {self.data} ...", file=sys.stderr, flush=True)
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        exited, tail = self._start()
        if exited is not None:
            # A probed port can be taken again before a server binds it (a client's ephemeral
            # port): a stack that exited at once starts once more on fresh ports.
            print(f"devstack exited with {exited}; starting again on fresh ports:\n{tail}", file=sys.stderr, flush=True)
            self._pick_ports()
            shutil.rmtree(self.data, ignore_errors=True)  # and on a clean data directory
            self.data.mkdir()
            exited, tail = self._start()
        if tail is None:
            return self
        self.__exit__()
        why = f"devstack exited with {exited}" if exited is not None else f"no answer in {self.startup_seconds:.0f} s"
        raise RuntimeError(f"the stack did not become healthy ({why}); devstack's last output:\n{tail}")

    def _start(self) -> tuple[int | None, str | None]:
        """Start devstack and wait for /health: (None, None) once healthy, else devstack's
        exit code (None: still running) and the tail of its output."""
        # devstack's output, shown when it fails to start
        log = self.log_path.open("w+b") if self.log_path is not None else tempfile.TemporaryFile()  # noqa: SIM115  open while devstack runs
        self._log = log
        self.process = subprocess.Popen(  # noqa: S603  this venv's python -m devstack, the benchmark's arguments
            [sys.executable, "-m", "devstack", *self.devstack_args],
            env=self.env,
            cwd=self.cwd,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        deadline = time.monotonic() + self.startup_seconds
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return None, None
            except httpx.HTTPError:
                pass
            exited = self.process.poll()
            if time.monotonic() > deadline or exited is not None:
                log.flush()
                log.seek(0)
                tail = log.read().decode(errors="replace")[-4000:]
                log.close()
                self._log = None
                return exited, tail
            time.sleep(0.3)

    def __exit__(self, *exc) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)
        shutil.rmtree(self.data, ignore_errors=True)  # a 100k run leaves half a gigabyte
        if self._log is not None:
            self._log.close()
            self._log = None

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
