"""import and export: the tenant's memories from and to JSON or JSON Lines."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from cli.client import USAGE, CliError
from cli.exporter import Exporter
from cli.importer import Importer, detect_format, state_path
from cli.output import session

FORMATS = ("json", "jsonl")


def _format(value: str | None) -> str | None:
    if value is not None and value not in FORMATS:
        raise CliError(f"--format must be json or jsonl, not {value!r}", USAGE)
    return value


def import_memories(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="A .jsonl file (one memory a line) or a .json list of memories."),
    resume: bool = typer.Option(False, "--resume", help="Go on from where an interrupted import of this file stopped."),
    batch_size: int = typer.Option(500, "--batch-size", min=1, help="Memories per POST /memory/batch (at most 500)."),
    parallel: int = typer.Option(4, "--parallel", min=1, max=16, help="Batches in flight at once."),
    fmt: str | None = typer.Option(None, "--format", help="json or jsonl (default: by the file's extension)."),
) -> None:
    """Import memories (the REST shape: what `memgrid export` writes), without duplicates on a retry."""
    s = session(ctx)
    with s.client() as client, s.progress("memories") as bar:
        task = bar.add_task("import", total=None)
        importer = Importer(
            client, batch_size=batch_size, parallel=parallel, on_progress=lambda n: bar.advance(task, n)
        )
        items, state = importer.prepare(path, fmt=_format(fmt), resume=resume)
        if not resume and state_path(path).exists():
            s.note(f"an earlier import of {path} was interrupted; starting over (keys make the repeat harmless)")
        bar.update(task, total=len(items), completed=state.offset)
        try:
            report = importer.run(path, items, state)
        except CliError as error:
            raise CliError(
                f"{error.message}\nimport stopped after {state.offset} of {len(items)} memories; "
                f"`memgrid import --resume {path}` goes on from there",
                error.code,
            ) from None
        except KeyboardInterrupt:
            s.note(f"interrupted after {state.offset} of {len(items)}; `memgrid import --resume {path}` goes on")
            raise
    data = {
        "status": "success",
        "input": report.input,
        "format": detect_format(path, fmt),
        "items": report.items,
        "stored": report.stored,
        "replayed": report.replayed,
        "resumed_from": report.resumed_from,
        "elapsed_seconds": round(report.elapsed_seconds, 3),
        "memories_per_second": round(report.rate, 1),
    }
    s.emit(
        data,
        lambda out: out.print(
            f"imported {report.items - report.resumed_from} memories ({report.stored} stored, {report.replayed} "
            f"already there) in {report.elapsed_seconds:.1f}s, {report.rate:,.0f}/s"
        ),
    )


def export_memories(
    ctx: typer.Context,
    path: str = typer.Argument("-", help="Output file ('-': stdout)."),
    resume: bool = typer.Option(False, "--resume", help="Go on from where an interrupted export to this file stopped."),
    fmt: str | None = typer.Option(None, "--format", help="json or jsonl (default: by the extension; stdout: jsonl)."),
    with_embedding: bool = typer.Option(False, "--with-embedding", help="Include each memory's embedding."),
    page_size: int = typer.Option(2000, "--page-size", min=1, help="Memories per GET /memories/export page."),
) -> None:
    """Export every memory of the tenant (archived and superseded ones too), in id order."""
    s = session(ctx)
    fmt = _format(fmt) or ("jsonl" if path == "-" else detect_format(Path(path), None))
    with s.client() as client, s.progress("memories") as bar:
        task = bar.add_task("export", total=None)
        exporter = Exporter(
            client, page_size=page_size, with_embedding=with_embedding, on_progress=lambda n: bar.advance(task, n)
        )
        bar.update(task, total=exporter.total())
        if path == "-":
            if resume:
                raise CliError("--resume needs an output file", USAGE)
            report = exporter.to_stream(sys.stdout, fmt)
            s.note(f"exported {report.count} memories")
            return
        report = exporter.to_file(Path(path), fmt, resume=resume)
    data = {
        "status": "success",
        "output": report.output,
        "format": fmt,
        "count": report.count,
        "resumed_from": report.resumed_from,
        "elapsed_seconds": round(report.elapsed_seconds, 3),
    }
    s.emit(data, lambda out: out.print(f"exported {report.count} memories to {path} in {report.elapsed_seconds:.1f}s"))
