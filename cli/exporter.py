"""Export every memory of the tenant to JSON Lines or JSON through
GET /memories/export, a page at a time, resumable.

Pages follow the memories' ids (the server's next_page_token), so an
export interrupted after some pages goes on from the last page written:
a state file next to the output (`<output>.export-state.json`) holds the
token and the output's size at that point, and `--resume` cuts the output
back to that size (a page half written is dropped) and asks for the next
page. Each line (or list item) is the REST shape of a memory, which
`memgrid import` reads back.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from cli.client import USAGE, Client, CliError

STATE_SUFFIX = ".export-state.json"
STATE_VERSION = 1


@dataclass(slots=True)
class ExportState:
    output: str
    format: str
    page_token: str = ""
    size: int = 0  # bytes of the output written when page_token was reached
    count: int = 0
    done: bool = False  # the last page is written (what is left: closing a JSON list)
    version: int = STATE_VERSION


@dataclass(slots=True)
class ExportReport:
    output: str
    count: int
    resumed_from: int
    elapsed_seconds: float


def state_path(path: Path) -> Path:
    return path.with_name(path.name + STATE_SUFFIX)


def _write_state(path: Path, state: ExportState) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(asdict(state)))
    os.replace(temporary, path)


def _read_state(path: Path) -> ExportState | None:
    try:
        raw = json.loads(path.read_text())
        return ExportState(**raw) if raw.get("version") == STATE_VERSION else None
    except (OSError, ValueError, TypeError):
        return None


class Exporter:
    def __init__(
        self,
        client: Client,
        *,
        page_size: int = 2000,
        with_embedding: bool = False,
        on_progress: Callable[[int], None] | None = None,
    ):
        if page_size < 1:
            raise CliError("--page-size must be at least 1", USAGE)
        self._client = client
        self._page_size = page_size
        self._with_embedding = with_embedding
        self._on_progress = on_progress or (lambda _n: None)

    def total(self) -> int | None:
        """The tenant's memory count (GET /health with the token), for the progress bar."""
        try:
            return self._client.get("/health").get("memory_count")
        except CliError:
            return None

    def pages(self, token: str):
        """(memories, next token) for each page from `token` on."""
        while True:
            params = {"limit": self._page_size, "page_token": token or None}
            if self._with_embedding:
                params["with_embedding"] = "true"
            reply = self._client.get("/memories/export", params=params)
            token = reply.get("next_page_token") or ""
            yield reply["memories"], token
            if not token:
                return

    def to_stream(self, out: IO[str], fmt: str) -> ExportReport:
        """Every page to an open text stream (stdout); not resumable."""
        started, count = time.perf_counter(), 0
        first = True
        if fmt == "json":
            out.write("[")
        for memories, _ in self.pages(""):
            for memory in memories:
                out.write(_encoded(memory, fmt, first))
                first = False
            count += len(memories)
            self._on_progress(len(memories))
        if fmt == "json":
            out.write("\n]\n")
        out.flush()
        return ExportReport("-", count, 0, time.perf_counter() - started)

    def to_file(self, path: Path, fmt: str, *, resume: bool = False) -> ExportReport:
        """Every page to `path`, the state saved after each; with resume, on from the saved page."""
        started, where = time.perf_counter(), state_path(path)
        state = _read_state(where) if resume else None
        if resume and state is None:
            raise CliError(f"{where}: no export to resume (run without --resume)", USAGE)
        if state is not None and state.format != fmt:
            raise CliError(
                f"the interrupted export wrote {state.format}; resume it with --format {state.format}", USAGE
            )
        state = state or ExportState(str(path), fmt)
        resumed_from = state.count
        if resume and not path.is_file():
            raise CliError(f"{path}: the interrupted export's output is gone; run without --resume", USAGE)
        # Bytes, so the recorded size is an offset to cut back to.
        with path.open("r+b" if resume else "wb") as out:
            out.seek(state.size)
            out.truncate()
            if fmt == "json" and state.size == 0:
                out.write(b"[")
            self._on_progress(state.count)
            for memories, token in () if state.done else self.pages(state.page_token):
                for memory in memories:
                    out.write(_encoded(memory, fmt, state.count == 0).encode())
                    state.count += 1
                out.flush()
                state.page_token, state.size, state.done = token, out.tell(), not token
                _write_state(where, state)
                self._on_progress(len(memories))
            if fmt == "json":
                out.write(b"\n]\n")
        where.unlink(missing_ok=True)
        return ExportReport(str(path), state.count, resumed_from, time.perf_counter() - started)


def _encoded(memory: dict, fmt: str, first: bool) -> str:
    text = json.dumps(memory, ensure_ascii=False, separators=(",", ":"))
    if fmt == "jsonl":
        return text + "\n"
    return ("\n" if first else ",\n") + text
