"""Bounded decompression and uploads, played as a hostile uploader would:
a 4 MB gzip that unpacks to 4 GB in one endless line, and one of lines just
under the line cap; a JSON body that never ends; a body of another type;
uploads abandoned half-way. And what the backup leaves for others to find:
its files' modes, and the server path its answer used to name.

The bombs run in a child process with its address space capped (a reader
that buffered the line would die there, not take the test machine down),
which reports how long the refusal took and how much its resident memory grew."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import stat
import struct
import subprocess
import sys
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.consolidate.archive_reader import read_archive
from services.consolidate.backup_files import BackupFiles
from services.consolidate.bootstrap import build_app as build_consolidate
from services.core.domain.archive import ArchiveError
from services.core.domain.archive_decoder import ArchiveDecoder
from services.core.domain.errors import FailedPrecondition, InvalidArgument
from services.core.grpc.server import start
from tests.conftest import plane_of
from tests.e2e import conftest as e2e

pytestmark = pytest.mark.integration

#: The whole stack's fixtures (tests/e2e/conftest.py), for the gateway's part.
stack_services, gateway_url, client = e2e.stack_services, e2e.gateway_url, e2e.client

ADMIN = "operator-secret"
AS_OPERATOR = {"X-Admin-Token": ADMIN}
HEADER = b'{"format":"memgrid-backup","version":2,"created_at":"x","scope":"tenant","tenant":"alpha","snapshot":""}\n'


def bomb(path: Path, total_bytes: int = 4 << 30) -> Path:
    """A gzip archive of one endless line, `total_bytes` unpacked, made without packing them: deflate
    blocks after a full flush start afresh, so one compressed 1 MB block repeated is 1 MB more each
    time. The trailer's CRC is left 0: a reader that got that far has already lost."""
    chunk = b"a" * (1 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    start = HEADER + b'{"node":0,"labels":["Memory"],"properties":{"tenant":"alpha","content":"'
    body = packer.compress(start) + packer.flush(zlib.Z_FULL_FLUSH)
    packer.compress(chunk)
    block = packer.flush(zlib.Z_FULL_FLUSH)
    count = total_bytes // len(chunk)
    with path.open("wb") as out:
        out.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + body)
        for _ in range(count):
            out.write(block)
        out.write(packer.flush() + struct.pack("<II", 0, (len(start) + count * len(chunk)) & 0xFFFFFFFF))
    return path


def records(path: Path, count: int, line_bytes: int) -> Path:
    """An archive of `count` valid node lines of about `line_bytes` each, and no manifest."""
    filler = "a" * (line_bytes - 100)
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(HEADER)
        for ref in range(count):
            props = {"tenant": "alpha", "id": f"{ref}", "content": filler}
            out.write(json.dumps({"node": ref, "labels": ["Entity"], "properties": props}).encode() + b"\n")
    return path


CHILD = """
import asyncio, json, resource, sys, time
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))
from services.consolidate.archive_reader import read_archive
from services.consolidate.restore import Restorer
from services.core.domain.errors import DomainError

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024

async def main():
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # the peak resident size starts again from here
    before = status("VmRSS")
    restorer = Restorer(graph=None, read=read_archive, page_size=100, max_unpacked_bytes=int(sys.argv[2]))
    began = time.perf_counter()
    try:
        async for _ in restorer.restore(Path(sys.argv[1]), caller="alpha", every_tenant=False, merge=False):
            pass
        reason = "RESTORED"
    except DomainError as exc:
        reason = exc.reason
    except MemoryError:
        reason = "MemoryError"
    seconds = time.perf_counter() - began
    grown = status("VmHWM") - before
    print(json.dumps({"reason": reason, "seconds": seconds, "rss_growth_bytes": grown}))

asyncio.run(main())
"""


def restore_in_a_child(path: Path, max_unpacked_bytes: int = 16 << 30) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(max_unpacked_bytes)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-2000:]
    return json.loads(lines[-1])


def test_a_gzip_bomb_with_one_endless_line_is_refused_in_well_under_a_second(tmp_path):
    path = bomb(tmp_path / "bomb.jsonl.gz")
    assert path.stat().st_size < 5 << 20  # 4 MB that unpack to 4 GB
    result = restore_in_a_child(path)
    assert result["reason"] == "ARCHIVE_LINE_TOO_LONG", result
    assert result["seconds"] < 1.0, result
    assert result["rss_growth_bytes"] < 64 << 20, result  # RESTORE_MAX_LINE_BYTES (16 MB) and buffers (34 MB)


def test_a_bomb_of_lines_under_the_line_cap_is_refused_at_the_unpacked_cap(tmp_path):
    path = records(tmp_path / "lines.jsonl.gz", 64, 1 << 20)
    result = restore_in_a_child(path, max_unpacked_bytes=32 << 20)
    assert result["reason"] == "ARCHIVE_TOO_LARGE", result
    assert result["seconds"] < 1.0, result
    assert result["rss_growth_bytes"] < 64 << 20, result  # a batch of lines is bounded in bytes too


def test_a_gzip_header_whose_name_never_ends_is_refused_at_c_speed(tmp_path):
    """gzip.GzipFile reads a member header's name field a byte per Python call: 64 MB of name
    without its NUL kept a core busy for half a minute before any line (an 8 GB upload, for hours)."""
    path = tmp_path / "name.jsonl.gz"
    with path.open("wb") as out:
        out.write(b"\x1f\x8b\x08\x08\x00\x00\x00\x00\x02\xff")  # FLG.FNAME: a name follows
        for _ in range(64):
            out.write(b"n" * (1 << 20))
    result = restore_in_a_child(path)
    assert result["reason"] in {"ARCHIVE_TRUNCATED", "ARCHIVE_CORRUPT"}, result
    assert result["seconds"] < 1.0, result


async def test_no_more_is_read_than_the_manifest_declares(tmp_path):
    path = records(tmp_path / "lines.jsonl.gz", 2000, 4096)
    with pytest.raises(ArchiveError) as refused:
        async for _ in read_archive(path, ArchiveDecoder(), max_line_bytes=8192, declared_bytes=100_000):
            pass
    assert refused.value.reason == "ARCHIVE_TOO_LARGE" and "manifest" in refused.value.message


# -- the gateway's POST /restore -------------------------------------------------------------------


@pytest.fixture
def stack_settings(settings):
    return settings.override({"enrichment_enabled": False, "admin_api_token": ADMIN})


async def _raw_post(url: str, content_type: str, declared: int, send: int) -> tuple[bytes, int]:
    """POST /restore declaring `declared` bytes, sending up to `send` a chunk at a time while watching
    for an answer: (the answer's first bytes, the bytes sent when it came)."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (
        f"POST /restore HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {e2e.API_TOKEN}\r\n"
        f"X-Admin-Token: {ADMIN}\r\nContent-Type: {content_type}\r\nContent-Length: {declared}\r\n\r\n"
    )
    writer.write(head.encode())
    sent, chunk = 0, b'{"name": "' + b"x" * (64 * 1024)
    answer = b""
    try:
        while sent < send:
            writer.write(chunk)
            await writer.drain()
            sent += len(chunk)
            try:
                answer = await asyncio.wait_for(reader.read(200), timeout=0.05)
            except TimeoutError:
                continue
            if answer:
                break
        if not answer:
            answer = await asyncio.wait_for(reader.read(200), timeout=2)
    except (ConnectionError, TimeoutError):
        pass
    finally:
        writer.close()
    return answer, sent


async def test_a_json_body_is_refused_past_its_bound_without_being_read_whole(gateway_url):
    answer, sent = await _raw_post(gateway_url, "application/json", declared=256 << 20, send=32 << 20)
    assert answer.startswith(b"HTTP/1.1 413"), answer
    assert sent < 4 << 20  # answered long before the 256 MB it declared, or the 32 MB sent, were read


async def test_a_body_of_another_type_is_refused_unread(gateway_url):
    answer, sent = await _raw_post(gateway_url, "text/plain", declared=256 << 20, send=32 << 20)
    assert answer.startswith(b"HTTP/1.1 415"), answer
    assert sent < 4 << 20


async def test_the_bomb_uploaded_through_the_gateway_is_refused_in_well_under_a_second(client, tmp_path):
    data = bomb(tmp_path / "bomb.jsonl.gz").read_bytes()
    began = time.perf_counter()
    refused = await client.post(
        "/restore", content=data, headers={**AS_OPERATOR, "Content-Type": "application/gzip"}, timeout=30
    )
    seconds = time.perf_counter() - began
    assert refused.status_code == 400 and refused.json()["reason"] == "ARCHIVE_LINE_TOO_LONG", refused.text
    assert "RESTORE_MAX_LINE_BYTES" in refused.json()["message"] and seconds < 1.0, seconds


# -- abandoned uploads -----------------------------------------------------------------------------


async def test_abandoned_upload_parts_are_swept_at_start_up_and_periodically(settings):
    settings = settings.override(
        {"restore_upload_max_age_seconds": 3.0, "restore_upload_sweep_seconds": 0.2, "enrichment_enabled": False}
    )
    files = BackupFiles(settings.backup.backups_dir(settings.process.memgrid_data_dir))
    old, _ = files.append_upload("", 0, b"half an archive", False, _now())
    os.utime(files.uploads / (old + ".partial"), (time.time() - 3600, time.time() - 3600))
    fresh, _ = files.append_upload("", 0, b"another half", False, _now())
    service = await start(
        "consolidate",
        build_consolidate(settings),
        host="127.0.0.1",
        port=0,
        grace_seconds=1.0,
        plane=plane_of(settings),
    )
    try:
        left = sorted(p.name for p in files.uploads.iterdir())
        assert left == [fresh + ".partial"]  # the hour-old part went at start-up
        for _ in range(100):
            await asyncio.sleep(0.1)
            if not any(files.uploads.iterdir()):
                break
        assert not any(files.uploads.iterdir())  # and the fresh one, once abandoned, periodically
    finally:
        await service.stop()


def test_a_complete_upload_is_never_written_again(tmp_path):
    files = BackupFiles(tmp_path / "backups")
    upload, size = files.append_upload("", 0, b"the checked archive", True, _now())
    with pytest.raises(FailedPrecondition) as refused:
        files.append_upload(upload, 0, b"a forgery", True, _now())
    assert refused.value.reason == "UPLOAD_COMPLETE"
    assert (files.uploads / upload).read_bytes() == b"the checked archive"


def test_an_upload_past_the_cap_is_refused_and_its_part_removed(tmp_path):
    files = BackupFiles(tmp_path / "backups", max_upload_bytes=100)
    upload, size = files.append_upload("", 0, b"x" * 60, False, _now())
    with pytest.raises(InvalidArgument) as refused:
        files.append_upload(upload, size, b"x" * 60, False, _now())
    assert refused.value.reason == "UPLOAD_TOO_LARGE" and refused.value.field == "archive"
    assert not any(files.uploads.iterdir())


def _now() -> datetime:
    return datetime.now(UTC)


# -- what a backup leaves --------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_backup_and_an_upload_are_the_owners_alone_and_the_answer_names_no_path(client, stack_settings):
    previous = os.umask(0o022)  # the usual umask: files would be world-readable
    try:
        made = await client.post("/memory", json={"content": "a secret of the default tenant"})
        assert made.status_code == 201, made.text
        answer = await client.post("/backup", headers=AS_OPERATOR)
        assert answer.status_code == 200, answer.text
        listed = await client.get("/backups", headers=AS_OPERATOR)
        data_dir = str(stack_settings.process.memgrid_data_dir.resolve())
        for reply in (answer, listed):
            assert "path" not in json.dumps(reply.json()) and data_dir not in reply.text, reply.text
        name = answer.json()["name"]
        directory = stack_settings.backup.backups_dir(stack_settings.process.memgrid_data_dir)
        assert _mode(directory / name) == 0o600 and _mode(directory / (name + ".manifest.json")) == 0o600
        assert _mode(directory) == 0o700
        files = BackupFiles(directory)
        upload, _ = files.append_upload("", 0, gzip.compress(b"x"), False, _now())
        assert _mode(files.uploads / (upload + ".partial")) == 0o600 and _mode(files.uploads) == 0o700
    finally:
        os.umask(previous)
