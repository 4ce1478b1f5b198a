"""The `memgrid` command against the whole stack: the real console script in
a subprocess (the gateway runs in this test's event loop), its output and its
exit codes; import and export through the gateway, an interrupted import
resumed without duplicates, an export round-tripped into another tenant, and
the tokens file the gateway reads."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
from pathlib import Path

import httpx
import pytest

from cli.client import Client, CliError, Target
from cli.exporter import Exporter
from cli.exporter import state_path as export_state_path
from cli.importer import Importer, ImportState, read_state, state_path, write_state
from tests.e2e.conftest import API_TOKEN

pytestmark = pytest.mark.e2e

ALPHA, BETA, ALPHA_READ, ALPHA_ADMIN = "cli-alpha-write", "cli-beta-write", "cli-alpha-read", "cli-alpha-admin"
SCRIPT = Path(sys.executable).with_name("memgrid")
#: The fields an import carries over, compared on a round trip.
CARRIED = ("content", "type", "importance", "tags", "metadata", "timestamp", "t_valid", "t_invalid", "archived")


@pytest.fixture
def tokens_path(tmp_path) -> Path:
    path = tmp_path / "tokens.json"
    entries = [
        (ALPHA, "alpha", "write"),
        (BETA, "beta", "write"),
        (ALPHA_READ, "alpha", "read"),
        (ALPHA_ADMIN, "alpha", "admin"),
    ]
    path.write_text(
        json.dumps(
            [
                {"token_sha256": hashlib.sha256(t.encode()).hexdigest(), "tenant": tenant, "role": role}
                for t, tenant, role in entries
            ]
        )
    )
    return path


@pytest.fixture
def stack_settings(settings, tokens_path):
    return settings.override(
        {"enrichment_enabled": False, "memgrid_tokens_file": tokens_path, "tokens_file_check_seconds": 0.2}
    )


async def memgrid(url: str, token: str | None, *args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    """Run the console script; (exit code, stdout, stderr)."""
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "cli"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMGRID_")}
    env.update(MEMGRID_URL=url, MEMGRID_DATA_DIR="/nonexistent-memgrid-data")
    if token is not None:
        env["MEMGRID_TOKEN"] = token
    process = await asyncio.create_subprocess_exec(
        *command,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin), timeout=120)
    return process.returncode, out.decode(), err.decode()


async def json_of(url: str, token: str, *args: str) -> dict:
    code, out, err = await memgrid(url, token, "--json", *args)
    assert code == 0, err
    return json.loads(out)


def write_jsonl(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def sample(n: int, label: str = "cli") -> list[dict]:
    return [
        {
            "content": f"{label} memory {i}: the deploy script needs the {i}th flag",
            "type": "Context" if i % 2 else "Decision",
            "importance": round((i % 10) / 10, 1),
            "tags": [label, f"group-{i % 3}"],
            "metadata": {"n": i},
            "timestamp": f"2026-01-{1 + i % 28:02d}T10:00:00+00:00",
        }
        for i in range(n)
    ]


def exported(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def carried(memory: dict) -> tuple:
    return tuple(json.dumps(memory.get(k), sort_keys=True) for k in CARRIED)


async def test_one_memory_through_every_command(gateway_url):
    code, out, err = await memgrid(
        gateway_url, ALPHA, "store", "Chose PostgreSQL for ACID", "--type", "Decision", "--tag", "db", "--tag", "infra"
    )
    assert code == 0, err
    memory_id = out.strip()

    shown = await json_of(gateway_url, ALPHA, "get", memory_id)
    assert shown["memory"]["content"] == "Chose PostgreSQL for ACID"
    assert shown["memory"]["tags"] == ["db", "infra"]

    code, out, err = await memgrid(gateway_url, ALPHA, "get", memory_id)  # the table for people
    assert code == 0 and "PostgreSQL" in out and "Decision" in out

    updated = await json_of(gateway_url, ALPHA, "update", memory_id, "--importance", "0.9", "--tag", "database")
    assert updated["memory"]["importance"] == pytest.approx(0.9) and updated["memory"]["tags"] == ["database"]

    found = await json_of(gateway_url, ALPHA, "recall", "PostgreSQL")
    assert memory_id in [r["id"] for r in found["results"]]

    code, out, _ = await memgrid(gateway_url, ALPHA, "status")
    assert code == 0 and "memories" in out

    assert (await json_of(gateway_url, ALPHA, "delete", memory_id))["deleted"] == [memory_id]
    code, _, err = await memgrid(gateway_url, ALPHA, "get", memory_id)
    assert code == 2 and "not found" in err


async def test_errors_exit_with_their_documented_codes(gateway_url):
    code, _, err = await memgrid(gateway_url, "not-a-token", "get", "x")
    assert code == 3 and "401" in err
    code, _, err = await memgrid(gateway_url, ALPHA_READ, "store", "a read token cannot write")
    assert code == 3 and "403" in err
    code, _, err = await memgrid(gateway_url, ALPHA, "get", "6f1e1d5c-0000-4000-8000-000000000000")
    assert code == 2
    code, _, err = await memgrid("http://127.0.0.1:9", ALPHA, "get", "x")
    assert code == 5 and "cannot reach" in err
    code, _, err = await memgrid(gateway_url, ALPHA, "store")  # the content is missing
    assert code == 1 and "content" in err.lower()
    code, _, err = await memgrid(gateway_url, ALPHA, "frobnicate")
    assert code == 1
    code, _, err = await memgrid(gateway_url, ALPHA, "store", "x", "--timestamp", "yesterday-ish")  # the server's 400
    assert code == 1 and "400" in err and "timestamp" in err
    code, _, err = await memgrid(gateway_url, ALPHA, "store", "x", "--metadata", "[1]")
    assert code == 1 and "--metadata" in err
    first = await memgrid(gateway_url, ALPHA, "store", "keyed", "--idempotency-key", "k-1")
    assert first[0] == 0
    code, _, err = await memgrid(gateway_url, ALPHA, "store", "another body", "--idempotency-key", "k-1")
    assert code == 4 and "409" in err


async def test_export_imported_into_another_tenant_round_trips(gateway_url, tmp_path):
    items = sample(1100)
    items[5]["t_valid"] = "2026-01-01T00:00:00+00:00"  # a validity window: imported one at a time, kept
    items[5]["t_invalid"] = "2030-01-01T00:00:00+00:00"
    source = write_jsonl(tmp_path / "alpha.jsonl", items)
    report = await json_of(gateway_url, ALPHA, "import", str(source), "--batch-size", "250")
    assert (report["items"], report["stored"], report["replayed"]) == (1100, 1100, 0)
    assert not state_path(source).exists()

    out = tmp_path / "alpha-export.jsonl"
    assert (await json_of(gateway_url, ALPHA, "export", str(out), "--page-size", "300"))["count"] == 1100
    alpha = exported(out)
    assert len({m["id"] for m in alpha}) == 1100 and {m["tenant"] for m in alpha} == {"alpha"}
    assert [m["id"] for m in alpha] == sorted(m["id"] for m in alpha)

    assert (await json_of(gateway_url, BETA, "import", str(out)))["stored"] == 1100
    again = await json_of(gateway_url, BETA, "import", str(out))  # the same file again: nothing new
    assert (again["stored"], again["replayed"]) == (0, 1100)

    beta_out = tmp_path / "beta.json"
    assert (await json_of(gateway_url, BETA, "export", str(beta_out)))["count"] == 1100
    beta = json.loads(beta_out.read_text())  # .json: one list
    assert {m["tenant"] for m in beta} == {"beta"}
    assert sorted(map(carried, beta)) == sorted(map(carried, alpha))
    windowed = next(m for m in beta if m["content"] == items[5]["content"])
    assert windowed["t_invalid"].startswith("2030-01-01")

    # The tenants stay apart: alpha still holds its own 1100 only.
    assert (await json_of(gateway_url, ALPHA, "status"))["memory_count"] == 1100


class FailingTransport(httpx.HTTPTransport):
    """Passes the batch calls whose first item comes before item `fail_from`
    (by the sample's `metadata.n`); a later one reaches the server, which
    stores it, and then its answer is lost, as in a dropped connection.
    Deciding by content, not by arrival order, keeps batches sent in
    parallel from racing each other to the failure."""

    def __init__(self, fail_from: int):
        super().__init__()
        self._fail_from = fail_from

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/memory/batch":
            first = json.loads(request.read())["memories"][0]["metadata"]["n"]
            if first >= self._fail_from:
                super().handle_request(request).close()  # stored
                raise httpx.ReadError("connection lost", request=request)
        return super().handle_request(request)


async def test_an_interrupted_import_resumes_without_duplicates(gateway_url, tmp_path):
    items = sample(550, "resume")
    source = write_jsonl(tmp_path / "resume.jsonl", items)
    transport = FailingTransport(fail_from=200)
    client = Client(Target(gateway_url, ALPHA), transport=transport)
    importer = Importer(client, batch_size=100, parallel=1)
    loaded, state = importer.prepare(source)

    with pytest.raises(CliError) as failure:
        await asyncio.to_thread(importer.run, source, loaded, state)
    client.close()
    assert failure.value.code == 5
    saved = read_state(state_path(source))
    assert saved is not None and saved.offset == 200  # the third batch was stored, but never acknowledged

    code, _, err = await memgrid(gateway_url, ALPHA, "import", str(source))  # no --resume with a state: still safe
    assert code == 0, err
    code, _, _ = await memgrid(gateway_url, ALPHA, "import", "--resume", str(source))  # done: nothing to resume
    assert code == 1

    out = tmp_path / "out.jsonl"
    await json_of(gateway_url, ALPHA, "export", str(out))
    contents = [m["content"] for m in exported(out)]
    assert len(contents) == 550 and set(contents) == {i["content"] for i in items}


async def test_resume_picks_up_at_the_first_unacknowledged_batch(gateway_url, tmp_path):
    source = write_jsonl(tmp_path / "again.jsonl", sample(430, "again"))
    client = Client(Target(gateway_url, BETA), transport=FailingTransport(fail_from=100))
    importer = Importer(client, batch_size=100, parallel=2)
    loaded, state = importer.prepare(source)
    with pytest.raises(CliError):
        await asyncio.to_thread(importer.run, source, loaded, state)
    client.close()
    offset = read_state(state_path(source)).offset
    assert offset == 100

    report = await json_of(gateway_url, BETA, "import", "--resume", str(source))
    # The batch whose answer was lost is answered again, not stored again; the
    # batch that was in flight beside it may have been sent or not. The counts
    # are the whole file's, the interrupted run's 100 included.
    assert report["resumed_from"] == 100 and report["replayed"] in (100, 200)
    assert report["stored"] + report["replayed"] == 430
    assert (await json_of(gateway_url, BETA, "status"))["memory_count"] == 430

    # A state left by an earlier version of the file: --resume refuses it.
    write_state(state_path(source), ImportState(str(source), "0" * 64, 100, offset))
    code, _, err = await memgrid(gateway_url, BETA, "import", "--resume", str(source))
    assert code == 1 and "changed" in err


class FailingPages(httpx.HTTPTransport):
    """Fails the export's page number `fail_at` (1-based) once."""

    def __init__(self, fail_at: int):
        super().__init__()
        self._fail_at, self.pages = fail_at, 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/memories/export":
            self.pages += 1
            if self.pages == self._fail_at:
                raise httpx.ConnectError("connection refused", request=request)
        return super().handle_request(request)


async def test_an_interrupted_export_resumes_where_it_stopped(gateway_url, tmp_path):
    source = write_jsonl(tmp_path / "in.jsonl", sample(700, "export"))
    await json_of(gateway_url, ALPHA, "import", str(source))
    out = tmp_path / "out.json"
    client = Client(Target(gateway_url, ALPHA), transport=FailingPages(fail_at=3))
    with pytest.raises(CliError):
        await asyncio.to_thread(Exporter(client, page_size=200).to_file, out, "json")
    client.close()
    assert json.loads(export_state_path(out).read_text())["count"] == 400

    report = await json_of(gateway_url, ALPHA, "export", "--resume", str(out), "--page-size", "200")
    assert (report["resumed_from"], report["count"]) == (400, 700)
    memories = json.loads(out.read_text())
    assert len({m["id"] for m in memories}) == 700 and not export_state_path(out).exists()


async def test_export_to_stdout_imports_back(gateway_url, tmp_path):
    await json_of(gateway_url, ALPHA, "import", str(write_jsonl(tmp_path / "a.jsonl", sample(30, "piped"))))
    code, out, err = await memgrid(gateway_url, ALPHA, "export")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 30 and "exported 30" in err
    copy = tmp_path / "copy.jsonl"
    copy.write_text(out)
    assert (await json_of(gateway_url, BETA, "import", str(copy)))["stored"] == 30


async def test_tokens_the_gateway_accepts_and_then_refuses(gateway_url, tokens_path):
    created = await json_of(gateway_url, None, "tokens", "create", "--tenant", "gamma", "--role", "write",
                            "--id", "gamma-ci", "--file", str(tokens_path))  # fmt: skip
    token = created["token"]
    assert token not in tokens_path.read_text() and created["token_sha256"] in tokens_path.read_text()
    listed = await json_of(gateway_url, None, "tokens", "list", "--file", str(tokens_path))
    assert {"tenant": "gamma", "role": "write", "id": "gamma-ci"}.items() <= listed["tokens"][-1].items()
    code, _, _ = await memgrid(gateway_url, None, "tokens", "create", "--tenant", "gamma", "--id", "gamma-ci",
                               "--file", str(tokens_path))  # fmt: skip
    assert code == 4  # the id is taken

    await asyncio.sleep(0.3)  # the gateway re-reads the file (TOKENS_FILE_CHECK_SECONDS)
    code, out, err = await memgrid(gateway_url, token, "store", "gamma's first memory")
    assert code == 0, err

    revoked = await json_of(gateway_url, None, "tokens", "revoke", listed["tokens"][-1]["digest"],
                            "--file", str(tokens_path))  # fmt: skip
    assert revoked["tenant"] == "gamma"
    await asyncio.sleep(0.3)
    code, _, _ = await memgrid(gateway_url, token, "get", "x")
    assert code == 3
    code, _, _ = await memgrid(gateway_url, None, "tokens", "revoke", token, "--file", str(tokens_path))
    assert code == 2


async def test_the_single_token_reaches_its_own_tenant(gateway_url):
    code, out, err = await memgrid(gateway_url, API_TOKEN, "--json", "store", "default tenant's memory")
    assert code == 0, err
    assert json.loads(out)["memory_id"]


async def test_backup_list_download_and_restore(gateway_url, tmp_path):
    await json_of(gateway_url, ALPHA, "import", str(write_jsonl(tmp_path / "b.jsonl", sample(40, "backup"))))
    code, _, err = await memgrid(gateway_url, ALPHA, "backup")
    assert code == 3 and "403" in err  # a write token is no admin
    made = await json_of(gateway_url, ALPHA_ADMIN, "backup")
    assert made["memories"] == 40
    listed = await json_of(gateway_url, ALPHA_ADMIN, "backup", "--list")
    assert made["name"] in [b["name"] for b in listed["backups"]]
    archive = tmp_path / "archive.jsonl.gz"
    fetched = await json_of(gateway_url, ALPHA_ADMIN, "backup", "--download", made["name"], "-o", str(archive))
    assert fetched["size_bytes"] == archive.stat().st_size > 0

    out = tmp_path / "before.jsonl"
    await json_of(gateway_url, ALPHA, "export", str(out))
    exported_ids = [m["id"] for m in exported(out)]
    victim = exported_ids[0]
    await json_of(gateway_url, ALPHA, "delete", victim)

    code, _, err = await memgrid(gateway_url, ALPHA_ADMIN, "restore", made["name"])  # alpha holds memories
    assert code == 4 and "409" in err
    restored = await json_of(gateway_url, ALPHA_ADMIN, "restore", made["name"], "--merge")
    assert restored["created"] >= 1
    assert (await json_of(gateway_url, ALPHA, "get", victim))["memory"]["id"] == victim
    uploaded = await json_of(gateway_url, ALPHA_ADMIN, "restore", "--file", str(archive), "--merge")
    assert uploaded["created"] == 0 and uploaded["merge"] is True
    code, _, _ = await memgrid(gateway_url, ALPHA_ADMIN, "restore")
    assert code == 1
