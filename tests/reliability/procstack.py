"""The whole stack as separate OS processes on free ports, each one killable
(SIGKILL, as a crash) and restartable on its own, with the same data dirs.

devstack runs everything under one supervisor that stops the stack when a
child dies; a fault test needs the opposite, so this starts the same
processes the same way (devstack.servers for FalkorDB and NATS, one
node or a loopback cluster of `nats_nodes`,
`python -m services.<name>.main` and `python -m gateway.main` for the rest)
and keeps each one's handle. The service claim key is set in the
environment, so every process signs and checks with the one key. FalkorDB
may be a Redis Cluster on loopback (`falkordb_cluster`), whose nodes are
the processes falkordb-0, falkordb-1, ...
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from devstack.replicas import Replica, address, replicas_of
from devstack.servers import (
    FalkorCluster,
    NatsCluster,
    ServerProcess,
    free_port,
    start_falkordb,
    start_nats,
    wait_for_port,
)
from services.core.domain.graph_layout import GraphLayout
from services.core.settings import SERVICE_NAMES, Settings

TOKEN = "reliability-token"
#: Every process of a stack, in start order.
PROCESSES = ("falkordb", "nats", *SERVICE_NAMES, "gateway")


class ProcessStack:
    """FalkorDB, NATS, the four services and the gateway, each its own process.

    With `nats_nodes` > 1, NATS is a JetStream cluster on loopback whose nodes
    are the processes nats-0, nats-1, ... (self.nats_cluster), each killable
    on its own, and NATS_URL lists them all. With `replicas` ({"recall": 2}),
    a service runs as that many processes (recall, recall-1, ...: devstack.replicas),
    each killable on its own, and its *_ADDR lists them all. With
    `falkordb_cluster` ((masters, replicas each)), FalkorDB is a Redis Cluster
    on loopback (self.falkor_cluster, devstack.servers.FalkorCluster) whose
    nodes are the processes falkordb-0, falkordb-1, ..., each killable on its
    own, and FALKORDB_HOST lists them all."""

    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        nats_nodes: int = 1,
        replicas: dict[str, int] | None = None,
        falkordb_cluster: tuple[int, int] | None = None,
        **env_overrides: str,
    ):
        self._owns_dir = data_dir is None
        self.data = data_dir or Path(tempfile.mkdtemp(prefix="memgrid-reliability-"))
        self.falkordb_port = free_port()
        self.nats_port = free_port()
        sync_interval = env_overrides.get("NATS_SYNC_INTERVAL", "always")
        self.nats_cluster = NatsCluster(self.data / "nats", nats_nodes, sync_interval) if nats_nodes > 1 else None
        nats_names = [f"nats-{i}" for i in range(nats_nodes)] if self.nats_cluster else ["nats"]
        self.falkor_cluster = (
            FalkorCluster(
                self.data / "falkordb",
                *falkordb_cluster,
                appendfsync=env_overrides.get("FALKORDB_APPENDFSYNC", "everysec"),
                # TIMEOUT_MAX at the queries' own timeout, as the devstack and the manifests load the module.
                query_timeout_ms=Settings(_env_file=None).graph.falkordb_query_timeout_ms,
            )
            if falkordb_cluster
            else None
        )
        cluster = self.falkor_cluster
        falkor_names = [f"falkordb-{i}" for i in range(cluster.size)] if cluster else ["falkordb"]
        counts = {name: 1 for name in SERVICE_NAMES} | (replicas or {})
        #: Each service's replicas (one process each), with their ports and data dirs.
        self.replicas: dict[str, list[Replica]] = {
            name: replicas_of(name, n, [(free_port(), free_port()) for _ in range(n)], self.data)
            for name, n in counts.items()
        }
        self._replica = {r.name: r for group in self.replicas.values() for r in group}
        #: Every process of this stack, in start order.
        self.processes = (*falkor_names, *nats_names, *self._replica, "gateway")
        nats_url = self.nats_cluster.url if self.nats_cluster else f"nats://127.0.0.1:{self.nats_port}"
        self.env = {
            **os.environ,
            "MEMGRID_DATA_DIR": str(self.data),
            "AUTOMEM_API_TOKEN": TOKEN,
            "PORT": str(free_port()),
            "GATEWAY_METRICS_PORT": str(free_port()),
            "FALKORDB_PORT": str(self.falkordb_port),
            **(
                {"FALKORDB_HOST": ",".join(f"127.0.0.1:{p}" for p in self.falkor_cluster.ports)}
                if self.falkor_cluster
                else {}
            ),
            "NATS_URL": nats_url,
            "SERVICE_CLAIM_KEY": secrets.token_urlsafe(48),
            "LOG_LEVEL": "WARNING",
            "LOG_JSON": "false",
            # Fast stand-ins for the models: the placeholder embedder is deterministic
            # (a vector search with a memory's exact text finds it first).
            "EMBEDDING_PROVIDER": "placeholder",
            "ENRICHMENT_SPACY_BLANK": "true",
            "ENRICHMENT_ENTITY_PROCESS": "false",
            "CONSUMER_FETCH_TIMEOUT_SECONDS": "0.2",
            "SHUTDOWN_GRACE_SECONDS": "1",
            **env_overrides,
        }
        for name, group in self.replicas.items():
            # The first replica's ports (as a stack of one process each had them), and where all are dialled.
            self.env[f"{name.upper()}_GRPC_PORT"] = str(group[0].grpc_port)
            self.env[f"{name.upper()}_METRICS_PORT"] = str(group[0].metrics_port)
            self.env[f"{name.upper()}_ADDR"] = address(group)
        self.url = f"http://127.0.0.1:{self.env['PORT']}"
        self.servers: dict[str, ServerProcess] = {}
        self.children: dict[str, subprocess.Popen] = {}

    # -- processes ---------------------------------------------------------------------------------

    def start(self, name: str) -> None:
        """Start (or restart) one process and wait until it listens."""
        if name == "falkordb":
            self.servers[name] = start_falkordb(
                self.falkordb_port,
                self.data / "falkordb",
                appendfsync=self.env.get("FALKORDB_APPENDFSYNC", "everysec"),
            )
        elif self.falkor_cluster and name.startswith("falkordb-"):
            self.servers[name] = self.falkor_cluster.start_node(int(name.removeprefix("falkordb-")))
        elif self.nats_cluster and name.startswith("nats-"):
            self.servers[name] = self.nats_cluster.start_node(int(name.removeprefix("nats-")))
        elif name == "nats":
            self.servers[name] = start_nats(
                self.nats_port, self.data / "nats", sync_interval=self.env.get("NATS_SYNC_INTERVAL", "always")
            )
        else:
            replica = self._replica.get(name)
            module = "gateway.main" if replica is None else f"services.{replica.service}.main"
            env = self.env if replica is None else {**self.env, **replica.env()}
            log = open(self.data / f"{name}.log", "ab")  # noqa: SIM115 (the child keeps it)
            self.children[name] = subprocess.Popen(
                [sys.executable, "-m", module],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # Not the checkout: a developer's .env there must not reach the test's stack
                # (the venv's .pth file makes the code importable from anywhere).
                cwd=self.data,
            )
            log.close()
            port = int(self.env["PORT"]) if replica is None else replica.grpc_port
            self._wait_listening(name, port, 120)

    def _wait_listening(self, name: str, port: int, within: float) -> None:
        """Wait for the child to listen; fail at once, with its log's tail, if it exits first."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.children[name].poll() is not None:
                raise RuntimeError(f"{name} exited ({self.children[name].returncode}) on start:\n{self.log_tail(name)}")
            try:
                wait_for_port(port, 0.5)
                return
            except TimeoutError:
                continue
        raise TimeoutError(f"{name} not listening on {port} after {within}s:\n{self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.data / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def pid(self, name: str) -> int | None:
        if name in self.servers:
            return self.servers[name].pid()
        process = self.children.get(name)
        return process.pid if process is not None and process.poll() is None else None

    def pids(self) -> dict[str, int]:
        """The pid of every process that runs."""
        return {n: p for n in self.processes if (p := self.pid(n)) is not None}

    def kill(self, name: str) -> None:
        """SIGKILL one process, as a crash would, and reap it."""
        if name in self.servers:
            self.servers[name].kill()
            return
        process = self.children[name]
        if process.poll() is None:
            process.kill()
        process.wait()

    def stop(self, name: str) -> None:
        if name in self.servers:
            self.servers.pop(name).stop()
            return
        process = self.children.pop(name, None)
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    # -- the stack ---------------------------------------------------------------------------------

    def __enter__(self) -> ProcessStack:
        try:
            for name in self.processes:
                if self.falkor_cluster and name.startswith("falkordb-"):
                    continue
                if self.falkor_cluster and name == self.processes[self.falkor_cluster.size]:
                    self.falkor_cluster.start()  # every node, joined: every slot served and replicated
                    self.servers |= {f"falkordb-{i}": node for i, node in self.falkor_cluster.nodes.items()}
                self.start(name)
                if self.nats_cluster and name == f"nats-{self.nats_cluster.size - 1}":
                    self.nats_cluster.wait_healthy(60)  # JetStream up (a meta leader) before the services start
            self.wait_healthy(180)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for name in reversed(self.processes):
            try:
                self.stop(name)
            except Exception:  # a stop that fails must not hide the test's own failure
                pass
        if self._owns_dir and not os.environ.get("MEMGRID_KEEP_RELIABILITY_DATA"):
            shutil.rmtree(self.data, ignore_errors=True)

    def health(self) -> tuple[int, dict]:
        reply = httpx.get(f"{self.url}/health", headers=self.headers, timeout=10)
        return reply.status_code, reply.json()

    def wait_healthy(self, within: float) -> float:
        """Wait until /health answers 200 (every service serving, every store
        connected); the seconds waited."""
        started = time.monotonic()
        while True:
            try:
                if self.health()[0] == 200:
                    return time.monotonic() - started
            except (httpx.HTTPError, ValueError):
                pass
            if time.monotonic() - started > within:
                raise TimeoutError(f"the stack was not healthy within {within}s (logs in {self.data})")
            time.sleep(0.2)

    def graph_query(self, cypher: str) -> list[list]:
        """A read-only query's rows over every graph of the stack's layout (FALKORDB_GRAPH_LAYOUT), each
        graph asked of the master serving it now: what the graph holds, read straight from FalkorDB."""
        import redis

        layout = GraphLayout(
            self.env.get("FALKORDB_GRAPH", "memories"),
            self.env.get("FALKORDB_GRAPH_LAYOUT", "shared"),
            int(self.env.get("FALKORDB_GRAPH_BUCKETS", "64")),
        )
        rows: list[list] = []
        for graph in layout.graphs():
            if self.falkor_cluster:
                port = self.falkor_cluster.ports[self.falkor_cluster.master_of_slot(self.falkor_cluster.keyslot(graph))]
            else:
                port = self.falkordb_port
            client = redis.Redis(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=10)
            try:
                rows.extend(client.execute_command("GRAPH.RO_QUERY", graph, cypher)[1])
            except redis.ResponseError as exc:
                if "empty key" not in str(exc):  # a graph nothing was written to yet holds no rows
                    raise
            finally:
                client.close()
        return rows

    def projector_durable(self, name: str = "recall") -> str:
        """The durable consumer feeding recall replica `name`'s embedded index (services/core/replica.py)."""
        return f"{self.env.get('PROJECTOR_DURABLE', 'recall-projector')}-{name}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN}"}

    def rss_kib(self) -> dict[str, int]:
        """VmRSS of each running process, in KiB (/proc/<pid>/status)."""
        sizes = {}
        for name, pid in self.pids().items():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        sizes[name] = int(line.split()[1])
            except OSError:
                continue
        return sizes
