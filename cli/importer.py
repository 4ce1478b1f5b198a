"""Import memories from JSON or JSON Lines through POST /memory/batch,
resumable and free of duplicates.

Every item has an idempotency key: its own `idempotency_key`, else one
derived from its id and what it stores. The batch route keeps each item's
key (ingest's item_idempotency_keys): an item sent again, in whatever batch,
is answered by the memory it made the first time, not stored twice; so a
batch the server stored but whose answer was lost costs nothing to resend,
and neither does importing the same file twice. A state file next to the
input (`<input>.import-state.json`) records the input's checksum and how
many items were acknowledged, so `--resume` starts again after the last
acknowledged batch rather than at the top. Items the batch route cannot
carry whole (a validity window, an embedding, archived) go one at a time
through POST /memory with their key as its Idempotency-Key.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from cli.client import USAGE, Client, CliError

#: The fields of the REST memory shape a new memory takes (gateway/translate.py DRAFT_FIELDS and metadata).
DRAFT_FIELDS = (
    "content",
    "type",
    "confidence",
    "importance",
    "tags",
    "metadata",
    "timestamp",
    "t_valid",
    "t_invalid",
    "updated_at",
    "last_accessed",
    "embedding",
)
#: What POST /memory/batch does not keep (ingest drops them from batch items).
SINGLE_ONLY = ("t_valid", "t_invalid", "embedding")
STATE_SUFFIX = ".import-state.json"
STATE_VERSION = 1


@dataclass(slots=True)
class ImportState:
    """What an interrupted import needs to go on: the input it read, how it
    cut it into batches, and how far the server acknowledged it."""

    input: str
    checksum: str
    batch_size: int  # the interrupted run's (a resumed one may use another)
    offset: int = 0
    stored: int = 0
    replayed: int = 0
    version: int = STATE_VERSION


@dataclass(slots=True)
class ImportReport:
    input: str
    items: int
    stored: int
    replayed: int
    resumed_from: int
    elapsed_seconds: float

    @property
    def rate(self) -> float:
        done = self.items - self.resumed_from
        return done / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0


def state_path(path: Path) -> Path:
    return path.with_name(path.name + STATE_SUFFIX)


def detect_format(path: Path, fmt: str | None) -> str:
    """json or jsonl: as asked, else by the file's extension (.json: one document; anything else: lines)."""
    if fmt:
        return fmt
    return "json" if path.suffix.lower() == ".json" else "jsonl"


def checksum(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def read_items(path: Path, fmt: str) -> list[dict]:
    """Every item of the input, in order; a malformed one is a CliError naming its line or index."""
    items: list[dict] = []
    if fmt == "jsonl":
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except ValueError as exc:
                    raise CliError(f"{path}:{number}: not valid JSON ({exc})", USAGE) from None
                if not isinstance(item, dict):
                    raise CliError(f"{path}:{number}: a memory must be a JSON object", USAGE)
                items.append(item)
        return items
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CliError(f"{path}: not valid JSON ({exc})", USAGE) from None
    if isinstance(document, dict) and isinstance(document.get("memories"), list):
        document = document["memories"]
    if not isinstance(document, list):
        raise CliError(f"{path}: must be a JSON list of memories (or an object with a 'memories' list)", USAGE)
    for index, item in enumerate(document):
        if not isinstance(item, dict):
            raise CliError(f"{path}: item {index}: a memory must be a JSON object", USAGE)
    return document


def item_key(item: dict) -> str:
    """The item's idempotency key: its own, else a digest of its id and what it would store."""
    own = item.get("idempotency_key")
    if own is not None:
        if not isinstance(own, str) or not own:
            raise CliError("'idempotency_key' must be a non-empty string", USAGE)
        return own
    shaped = {"id": item.get("id"), **draft_of(item)}
    return hashlib.sha256(json.dumps(shaped, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def draft_of(item: dict) -> dict:
    """The fields of an item a new memory takes (id, tenant, version, state... are the server's)."""
    return {k: item[k] for k in DRAFT_FIELDS if item.get(k) is not None}


def write_state(path: Path, state: ImportState) -> None:
    """Atomically: a crash mid-write leaves the previous state, never half of one."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(asdict(state)))
    os.replace(temporary, path)


def read_state(path: Path) -> ImportState | None:
    try:
        raw = json.loads(path.read_text())
        return ImportState(**raw) if raw.get("version") == STATE_VERSION else None
    except (OSError, ValueError, TypeError):
        return None


@dataclass(slots=True)
class _Outcome:
    end: int
    stored: int
    replayed: int


class Importer:
    """Sends the input a batch at a time, `parallel` batches in flight,
    and records progress only up to the last batch that, with every batch
    before it, was acknowledged."""

    def __init__(
        self,
        client: Client,
        *,
        batch_size: int = 500,
        parallel: int = 4,
        on_progress: Callable[[int], None] | None = None,
    ):
        if batch_size < 1:
            raise CliError("--batch-size must be at least 1", USAGE)
        if parallel < 1:
            raise CliError("--parallel must be at least 1", USAGE)
        self._client = client
        self._batch_size = batch_size
        self._parallel = parallel
        self._on_progress = on_progress or (lambda _n: None)

    def prepare(self, path: Path, *, fmt: str | None = None, resume: bool = False) -> tuple[list[dict], ImportState]:
        """The input's items and the state to start from (the saved one with --resume)."""
        if not path.is_file():
            raise CliError(f"{path}: no such file", USAGE)
        items = read_items(path, detect_format(path, fmt))
        digest = checksum(path)
        saved = read_state(state_path(path)) if resume else None
        if resume and saved is None:
            raise CliError(f"{state_path(path)}: no import to resume (run without --resume)", USAGE)
        if saved is not None:
            if saved.checksum != digest:
                raise CliError(
                    f"{path} changed since the interrupted import (its checksum differs); run without --resume", USAGE
                )
            return items, saved
        return items, ImportState(str(path), digest, self._batch_size)

    def run(self, path: Path, items: list[dict], state: ImportState) -> ImportReport:
        """Import items[state.offset:], saving the state after each acknowledged batch; the state file
        is removed once everything is in."""
        started, resumed_from, where = time.perf_counter(), state.offset, state_path(path)
        write_state(where, state)
        pending: deque[Future[_Outcome]] = deque()

        def settle(future: Future[_Outcome]) -> None:
            outcome = future.result()
            self._on_progress(outcome.end - state.offset)
            state.offset, state.stored, state.replayed = (
                outcome.end,
                state.stored + outcome.stored,
                state.replayed + outcome.replayed,
            )
            write_state(where, state)

        with ThreadPoolExecutor(self._parallel, thread_name_prefix="memgrid-import") as pool:
            try:
                # The batches may differ from the interrupted run's: each item's key holds it to one memory.
                for start in range(state.offset, len(items), self._batch_size):
                    chunk = items[start : start + self._batch_size]
                    pending.append(pool.submit(self._send, start, chunk))
                    if len(pending) >= self._parallel:
                        settle(pending.popleft())
                while pending:
                    settle(pending.popleft())
            except BaseException:
                for future in pending:
                    future.cancel()
                raise
        where.unlink(missing_ok=True)
        return ImportReport(
            str(path), len(items), state.stored, state.replayed, resumed_from, time.perf_counter() - started
        )

    def _send(self, start: int, chunk: list[dict]) -> _Outcome:
        keys = [item_key(item) for item in chunk]
        batched = [(k, draft_of(i)) for k, i in zip(keys, chunk, strict=True) if not _needs_single(i)]
        singles = [(k, i) for k, i in zip(keys, chunk, strict=True) if _needs_single(i)]
        stored = replayed = 0
        where = f"items {start + 1}..{start + len(chunk)}"
        if batched:
            body = {"memories": [{**draft, "idempotency_key": key} for key, draft in batched]}
            reply = self._call(where, "/memory/batch", body, {})
            seen = len(batched) if reply.get("_replayed") else int(reply.get("replayed") or 0)
            replayed += seen
            stored += len(batched) - seen
        for key, item in singles:
            reply = self._call(where, "/memory", draft_of(item), {"Idempotency-Key": key})
            if reply.get("_replayed"):
                replayed += 1
            else:
                stored += 1
            if item.get("archived") is True:
                self._client.patch(f"/memory/{reply['memory_id']}", json={"archived": True})
        return _Outcome(start + len(chunk), stored, replayed)

    def _call(self, where: str, path: str, body: dict, headers: dict) -> dict:
        """The answer's body, with `_replayed` when the server answered a key it had seen."""
        try:
            reply = self._client.send("POST", path, json=body, headers=headers)
        except CliError as error:
            raise CliError(f"{where}: {error.message}", error.code, status=error.status, reason=error.reason) from None
        answer = reply.json()
        answer["_replayed"] = reply.headers.get("Idempotent-Replayed") == "true"
        return answer


def _needs_single(item: dict) -> bool:
    return item.get("archived") is True or any(item.get(k) is not None for k in SINGLE_ONLY)
