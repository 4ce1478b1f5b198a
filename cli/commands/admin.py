"""backup, restore, reindex, consolidate, status: the tenant's maintenance."""

from __future__ import annotations

from pathlib import Path

import typer

from cli.client import USAGE, CliError
from cli.output import fields_table, session, table

#: A long admin call (a reindex, a backup of a large tenant) may take this long by default.
LONG_TIMEOUT = 3600.0


def reindex(
    ctx: typer.Context,
    batch_size: int | None = typer.Option(None, "--batch-size", min=1, help="Points per upsert (server default)."),
) -> None:
    """Rebuild the tenant's vector index from the graph (POST /admin/reindex; admin)."""
    s = session(ctx)
    body = {"batch_size": batch_size} if batch_size else None
    with s.client() as client, s.err.status("reindexing...", spinner="dots") if not s.quiet else _nothing():
        reply = client.post("/admin/reindex", json=body, timeout=max(s.target.timeout, LONG_TIMEOUT))
    s.emit(
        reply,
        lambda out: out.print(
            f"indexed {reply['indexed']} of {reply['total']} ({reply['skipped']} skipped)"
            f" in {reply['elapsed_seconds']}s"
        ),
    )


def consolidate(
    ctx: typer.Context,
    mode: str = typer.Option("full", "--mode", help="full, decay, creative, cluster or forget."),
    apply: bool = typer.Option(False, "--apply", help="Make the changes (default: a dry run that reports them)."),
    every_tenant: bool = typer.Option(False, "--every-tenant", help="Every tenant's memories (an operator's)."),
    show_status: bool = typer.Option(False, "--status", help="Show runs in progress, next runs and history instead."),
) -> None:
    """Run consolidation now (POST /consolidate), or show its state (--status)."""
    s = session(ctx)
    with s.client() as client:
        if show_status:
            reply = client.get("/consolidate/status")
            s.emit(reply, lambda out: _render_consolidation_status(out, reply))
            return
        body = {"mode": mode, "dry_run": not apply, "every_tenant": every_tenant}
        with s.err.status(f"consolidating ({mode})...", spinner="dots") if not s.quiet else _nothing():
            reply = client.post("/consolidate", json=body, timeout=max(s.target.timeout, LONG_TIMEOUT))

    def render(out) -> None:
        rows = [
            (r.get("task"), r.get("tenant"), r.get("status"), r.get("processed"),
             ", ".join(f"{k}={v}" for k, v in (r.get("counts") or {}).items()))
            for r in reply.get("runs", [])
        ]  # fmt: skip
        title = f"consolidation {reply.get('mode')}" + (" (dry run: nothing changed)" if reply.get("dry_run") else "")
        out.print(table(("task", "tenant", "status", "processed", "counts"), rows, title=title))
        for run in reply.get("runs", []):
            for error in run.get("errors") or []:
                out.print(f"{run.get('task')} ({run.get('tenant')}): {error}")

    s.emit(reply, render)
    if reply.get("status") not in (None, "success"):
        raise typer.Exit(5)  # a run with errors (records skipped, a pass failed) is no plain success


def _render_consolidation_status(out, reply: dict) -> None:
    out.print(
        table(
            ("task", "every (s)", "last run", "next run"),
            [(t["task"], t["interval_seconds"], t["last_run"], t["next_run"]) for t in reply.get("next_runs", [])],
            title="schedule",
        )
    )
    if reply.get("running"):
        out.print(
            table(
                ("task", "tenant", "processed", "total"),
                [(r["task"], r["tenant"], r["processed"], r["total"]) for r in reply["running"]],
                title="running",
            )
        )


def status(ctx: typer.Context) -> None:
    """The stack's health (GET /health) and, with a token, the tenant's enrichment backlog."""
    s = session(ctx)
    with s.client() as client:
        health = client.send("GET", "/health", accept=(503,)).json()  # 503: degraded, with the same body
        enrichment = None
        if s.target.token:
            try:
                enrichment = client.get("/enrichment/status")
            except CliError as error:
                if error.code != 3:  # a token without read rights still sees the health
                    raise
    data = {**health, "enrichment": enrichment} if enrichment is not None else health

    def render(out) -> None:
        shown = {
            "status": health.get("status"),
            "memories": health.get("memory_count"),
            "falkordb": _component(health.get("falkordb")),
            "nats": _component(health.get("nats")),
            "qdrant": _component(health.get("qdrant")),
        }
        for name, value in (health.get("services") or {}).items():
            shown[f"service {name}"] = _component(value)
        if enrichment is not None:
            shown["enrichment pending"] = enrichment.get("pending")
        out.print(fields_table(shown))

    s.emit(data, render)
    if health.get("status") not in ("healthy", "ok"):
        raise typer.Exit(5)


def _component(value) -> str | None:
    if isinstance(value, dict):
        return str(value.get("status"))
    return None if value is None else str(value)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def backup(
    ctx: typer.Context,
    every_tenant: bool = typer.Option(False, "--every-tenant", help="One archive of every tenant's (an operator's)."),
    list_them: bool = typer.Option(False, "--list", help="List the archives instead (GET /backups)."),
    download: str | None = typer.Option(None, "--download", help="Download this archive (GET /backup/{name})."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Where --download writes (default: its name)."),
) -> None:
    """Write a backup archive on the server (POST /backup), list them, or download one; admin."""
    s = session(ctx)
    with s.client() as client:
        if list_them:
            reply = client.get("/backups")
            rows = [
                (b["name"], b.get("created_at"), b.get("scope"), b.get("tenant"), b["size_bytes"],
                 (b.get("nodes") or {}).get("Memory"))
                for b in reply["backups"]
            ]  # fmt: skip
            columns = ("name", "created", "scope", "tenant", "bytes", "memories")
            s.emit(reply, lambda out: out.print(table(columns, rows)))
            return
        if download:
            target = output or Path(download)
            written = _download(s, client, download, target)
            s.emit(
                {"status": "success", "name": download, "path": str(target), "size_bytes": written},
                lambda out: out.print(f"downloaded {download} to {target} ({written:,} bytes)"),
            )
            return
        body = {"every_tenant": True} if every_tenant else None
        with s.err.status("writing the backup...", spinner="dots") if not s.quiet else _nothing():
            reply = client.post("/backup", json=body, timeout=max(s.target.timeout, LONG_TIMEOUT))
    s.emit(
        reply,
        lambda out: out.print(
            f"backup {reply.get('name')}: {reply['memories']} memories, {reply['relations']} relations, "
            f"{reply['entities']} entities, {reply['patterns']} patterns"
        ),
    )


def _download(s, client, name: str, target: Path) -> int:
    """The archive's bytes to `target` (a partial file is removed on failure); the size written."""
    partial = target.with_name(target.name + ".part")
    written = 0
    try:
        with (
            client.stream("GET", f"/backup/{name}", timeout=max(s.target.timeout, LONG_TIMEOUT)) as reply,
            partial.open("wb") as out,
            s.progress("bytes") as bar,
        ):
            task = bar.add_task("download", total=int(reply.headers.get("content-length") or 0) or None)
            for chunk in reply.iter_bytes():
                out.write(chunk)
                written += len(chunk)
                bar.advance(task, len(chunk))
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return written


#: Bytes read from an archive per chunk of the upload.
UPLOAD_CHUNK = 1 << 20


def restore(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="A backup as `memgrid backup --list` shows it."),
    file: Path | None = typer.Option(None, "--file", "-f", help="Upload this archive instead (a .jsonl.gz)."),
    merge: bool = typer.Option(False, "--merge", help="Into tenants that hold memories: keep what is newer."),
    allow_unsigned: bool = typer.Option(
        False, "--allow-unsigned", help="Restore an archive this deployment did not sign (an operator's)."
    ),
) -> None:
    """Restore a backup (POST /restore; admin): a listed one by name, or an archive file."""
    s = session(ctx)
    if bool(name) == bool(file):
        raise CliError("give a backup name, or --file with an archive, not both and not neither", USAGE)
    timeout = max(s.target.timeout, LONG_TIMEOUT)
    with s.client() as client:
        if file is not None:
            if not file.is_file():
                raise CliError(f"{file}: no such file", USAGE)
            with s.progress("bytes") as bar:
                task = bar.add_task("upload", total=file.stat().st_size)

                def chunks():
                    with file.open("rb") as handle:
                        while data := handle.read(UPLOAD_CHUNK):
                            bar.advance(task, len(data))
                            yield data

                reply = client.post(
                    "/restore",
                    content=chunks(),
                    params={"merge": "true" if merge else None, "allow_unsigned": "true" if allow_unsigned else None},
                    headers={"Content-Type": "application/gzip"},
                    timeout=timeout,
                )
        else:
            with s.err.status(f"restoring {name}...", spinner="dots") if not s.quiet else _nothing():
                body = {"name": name, "merge": merge, **({"allow_unsigned": True} if allow_unsigned else {})}
                reply = client.post("/restore", json=body, timeout=timeout)

    def render(out) -> None:
        out.print(
            f"restored {reply['nodes']} nodes and {reply['edges']} edges ({reply['created']} created, "
            f"{reply['updated']} updated, {reply['kept']} kept) in {reply['elapsed_seconds']}s"
        )
        if reply.get("skipped") or reply.get("audit_left_out"):
            out.print(f"left out: {reply.get('skipped', 0)} records, {reply.get('audit_left_out', 0)} audit log nodes")
            for problem in reply.get("problems", []):
                out.print(f"  {problem}")
        rows = [(t["tenant"], t["memories"], t["indexed"], t["reembedding"]) for t in reply.get("tenants", [])]
        out.print(table(("tenant", "memories", "indexed", "re-embedding"), rows))

    s.emit(reply, render)
