"""`make run`: the whole stack on one machine, with embedded defaults.

Starts FalkorDB and NATS (data under $MEMGRID_DATA_DIR), the four services
each in its own process, and the gateway; stops them all, in reverse order,
on SIGINT or SIGTERM, or when any of them dies.

`--replicas recall=2` (repeatable; ingest, recall, enrich) runs a service as
that many processes, replica i on its ports + 100 * i (recall's with a data
dir of its own under $MEMGRID_DATA_DIR, so an index and a durable of its
own), and every process dials them all by one list address
(devstack/replicas.py): `make run ARGS="--replicas recall=2 --replicas ingest=2"`.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.request

from devstack.replicas import address, parse_counts, replicas_of
from devstack.servers import ServerProcess, start_falkordb, start_nats
from services.core.grpc.plane import CLAIM_KEY_FILE_NAME, load_or_create_claim_key
from services.core.settings import SERVICE_NAMES, Settings

HEALTH_WAIT_SECONDS = 120


def say(message: str) -> None:
    print(f"[memgrid] {message}", flush=True)


def spawn(module: str, env: dict[str, str]) -> subprocess.Popen:
    """A service process; its own session, so only we decide when it stops."""
    return subprocess.Popen([sys.executable, "-m", module], env=env, start_new_session=True)  # noqa: S603  this venv's python -m on one of memgrid's own modules


def stop_process(name: str, process: subprocess.Popen, grace: float) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        say(f"{name} did not stop in {grace}s; killing it")
        process.kill()
        process.wait()


def wait_healthy(port: int, children: dict[str, subprocess.Popen], stopping) -> bool:
    deadline = time.monotonic() + HEALTH_WAIT_SECONDS
    url = f"http://127.0.0.1:{port}/health"
    while time.monotonic() < deadline and not stopping():
        if any(p.poll() is not None for p in children.values()):
            return False
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                if reply.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


#: Replica i of a service listens on the service's ports + REPLICA_PORT_STEP * i.
REPLICA_PORT_STEP = 100


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack", description="memgrid's whole stack on this machine")
    parser.add_argument("--replicas", action="append", default=[], metavar="SERVICE=N", help="run N of SERVICE")
    try:
        counts = parse_counts(parser.parse_args(argv).replicas)
    except ValueError as exc:
        parser.error(str(exc))
    settings = Settings()
    data_dir = settings.process.memgrid_data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MEMGRID_DATA_DIR": str(data_dir)}
    stop_requested = False

    def request_stop(signum, frame):
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    servers: list[ServerProcess] = []
    children: dict[str, subprocess.Popen] = {}
    code = 0
    try:
        say(f"data in {data_dir}")
        servers.append(
            start_falkordb(
                settings.graph.falkordb_port,
                data_dir / "falkordb",
                query_timeout_ms=settings.graph.falkordb_query_timeout_ms,
                appendfsync=settings.graph.falkordb_appendfsync,
            )
        )
        graph, bus, plane = settings.graph, settings.bus, settings.plane
        say(f"FalkorDB on 127.0.0.1:{graph.falkordb_port} (appendonly, appendfsync {graph.falkordb_appendfsync})")
        servers.append(
            start_nats(
                _port_of(bus.nats_url),
                data_dir / "nats",
                sync_interval=bus.nats_sync_interval,
                memory_limit_mb=bus.nats_memory_limit_mb,
                gogc=bus.nats_gogc,
                profile_port=bus.nats_profile_port,
            )
        )
        say(f"NATS JetStream on {bus.nats_url} (sync_interval {bus.nats_sync_interval})")
        if plane.service_claim_key is None:
            # Before any process starts, so all of them read the one key (the service plane's claims).
            load_or_create_claim_key(data_dir)
            say(f"service claim key in {data_dir / CLAIM_KEY_FILE_NAME}")
        replicas = {
            name: replicas_of(
                name,
                counts.get(name, 1),
                [
                    (
                        plane.grpc_port(name) + REPLICA_PORT_STEP * i,
                        plane.metrics_port(name) + REPLICA_PORT_STEP * i,
                    )
                    for i in range(counts.get(name, 1))
                ],
                data_dir,
            )
            for name in SERVICE_NAMES
        }
        if any(len(group) > 1 for group in replicas.values()):
            # A replica with a data dir of its own would mint a claim key of its own: every process gets the one.
            key = plane.service_claim_key
            env["SERVICE_CLAIM_KEY"] = key.get_secret_value() if key else load_or_create_claim_key(data_dir).decode()
            for name, group in replicas.items():
                if len(group) > 1:
                    env[f"{name.upper()}_ADDR"] = address(group)
        for name, group in replicas.items():
            for replica in group:
                children[replica.name] = spawn(f"services.{name}.main", {**env, **replica.env()})
                say(f"{replica.name} service on :{replica.grpc_port} (metrics :{replica.metrics_port})")
        children["gateway"] = spawn("gateway.main", env)
        say(f"gateway on :{settings.gateway.port} (metrics :{settings.gateway.gateway_metrics_port})")
        if wait_healthy(settings.gateway.port, children, lambda: stop_requested):
            say(f"ready: http://127.0.0.1:{settings.gateway.port}/health  (Ctrl-C stops everything)")
        elif not stop_requested:
            say("the stack did not become healthy; see the logs above")
        while not stop_requested:
            dead = [n for n, p in children.items() if p.poll() is not None]
            if dead:
                say(f"{', '.join(dead)} exited; stopping the stack")
                code = 1
                break
            time.sleep(0.2)
    except Exception as exc:
        say(f"start-up failed: {exc}")
        code = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        say("stopping")
        grace = settings.process.shutdown_grace_seconds + 5
        if "gateway" in children:
            stop_process("gateway", children.pop("gateway"), grace)
        for process in children.values():  # all at once, then wait for each
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for name, process in children.items():
            stop_process(name, process, grace)
        for server in reversed(servers):
            server.stop()
        say("stopped")
    return code


def _port_of(url: str) -> int:
    """The port of NATS_URL's first server: the devstack runs one node (a cluster: devstack.servers.NatsCluster)."""
    return int(url.split(",")[0].rsplit(":", 1)[1].split("/")[0])


if __name__ == "__main__":
    sys.exit(main())
