"""store, recall, get, update, delete: one memory at a time, as the REST routes do it."""

from __future__ import annotations

import json
from typing import Any

import typer

from cli.client import USAGE, CliError
from cli.output import fields_table, session, short, table

TAG_HELP = "A tag (repeat for several)."


def _json_object(text: str | None, what: str) -> dict | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CliError(f"--{what} must be a JSON object: {exc}", USAGE) from None
    if not isinstance(value, dict):
        raise CliError(f"--{what} must be a JSON object", USAGE)
    return value


def _content(text: str) -> str:
    """The content argument; '-' reads it from stdin."""
    if text == "-":
        text = typer.get_text_stream("stdin").read()
    if not text.strip():
        raise CliError("the content is empty", USAGE)
    return text


def store(
    ctx: typer.Context,
    content: str = typer.Argument(..., help="What to remember ('-': read it from stdin)."),
    type_: str | None = typer.Option(None, "--type", "-t", help="Decision, Pattern, Preference, Style, Habit, ..."),
    tag: list[str] = typer.Option([], "--tag", help=TAG_HELP),
    importance: float | None = typer.Option(None, "--importance", min=0.0, max=1.0),
    confidence: float | None = typer.Option(None, "--confidence", min=0.0, max=1.0),
    metadata: str | None = typer.Option(None, "--metadata", help="A JSON object."),
    timestamp: str | None = typer.Option(None, "--timestamp", help="When it happened (ISO 8601)."),
    t_valid: str | None = typer.Option(None, "--valid-from", help="Start of the validity window (ISO 8601)."),
    t_invalid: str | None = typer.Option(None, "--valid-until", help="End of the validity window (ISO 8601)."),
    supersedes: str | None = typer.Option(None, "--supersedes", help="The id of a memory this one replaces."),
    idempotency_key: str | None = typer.Option(None, "--idempotency-key", help="A retry with it stores nothing new."),
) -> None:
    """Store a memory (POST /memory); prints its id."""
    s = session(ctx)
    body: dict[str, Any] = {
        "content": _content(content),
        "type": type_,
        "tags": tag or None,
        "importance": importance,
        "confidence": confidence,
        "metadata": _json_object(metadata, "metadata"),
        "timestamp": timestamp,
        "t_valid": t_valid,
        "t_invalid": t_invalid,
        "supersedes_memory_id": supersedes,
    }
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    with s.client() as client:
        reply = client.post("/memory", json={k: v for k, v in body.items() if v is not None}, headers=headers)
    s.emit(reply, lambda out: out.print(reply["memory_id"]))


def recall(
    ctx: typer.Context,
    query: str | None = typer.Argument(None, help="What to look for (omitted: the most relevant by tags/time)."),
    tag: list[str] = typer.Option([], "--tag", help=TAG_HELP),
    limit: int | None = typer.Option(None, "--limit", "-n", min=1, help="Results (the server's default: 5)."),
    history: bool = typer.Option(False, "--history", help="Superseded and expired memories too."),
) -> None:
    """Ranked recall (GET /recall): a table of scores, ids and contents."""
    s = session(ctx)
    params = {"query": query, "tags": tag or None, "limit": limit, "state_mode": "history" if history else None}
    with s.client() as client:
        reply = client.get("/recall", params=params)

    def render(out) -> None:
        rows = [
            (f"{r.get('final_score', 0):.3f}", r["id"], r["memory"].get("type"), short(r["memory"].get("content")),
             ", ".join(r["memory"].get("tags") or []))
            for r in reply.get("results", [])
        ]  # fmt: skip
        out.print(table(("score", "id", "type", "content", "tags"), rows))
        out.print(f"{len(rows)} result(s)")

    s.emit(reply, render)


def get(ctx: typer.Context, memory_id: str = typer.Argument(..., help="The memory's id.")) -> None:
    """One memory with every stored field (GET /memory/{id})."""
    s = session(ctx)
    with s.client() as client:
        reply = client.get(f"/memory/{memory_id}")
    memory = reply["memory"]

    def render(out) -> None:
        shown = {k: v for k, v in memory.items() if k not in ("embedding", "relations")}
        out.print(fields_table(shown))
        if memory.get("relations"):
            rows = [(r["type"], r["direction"], r["memory_id"], f"{r['strength']:.2f}") for r in memory["relations"]]
            out.print(table(("relation", "direction", "memory", "strength"), rows))

    s.emit(reply, render)


def update(
    ctx: typer.Context,
    memory_id: str = typer.Argument(..., help="The memory's id."),
    content: str | None = typer.Option(None, "--content"),
    type_: str | None = typer.Option(None, "--type", "-t"),
    tag: list[str] | None = typer.Option(None, "--tag", help="The new tags (repeat; replaces them all)."),
    importance: float | None = typer.Option(None, "--importance", min=0.0, max=1.0),
    confidence: float | None = typer.Option(None, "--confidence", min=0.0, max=1.0),
    metadata: str | None = typer.Option(None, "--metadata", help="A JSON object; replaces the metadata."),
    archive: bool | None = typer.Option(None, "--archive/--unarchive", help="Archive it, or bring it back."),
) -> None:
    """Change some fields of a memory (PATCH /memory/{id}); the others stay."""
    s = session(ctx)
    body = {
        "content": content,
        "type": type_,
        "tags": tag or None,
        "importance": importance,
        "confidence": confidence,
        "metadata": _json_object(metadata, "metadata"),
        "archived": archive,
    }
    body = {k: v for k, v in body.items() if v is not None}
    if not body:
        raise CliError("nothing to change: give at least one of --content, --type, --tag, ...", USAGE)
    with s.client() as client:
        reply = client.patch(f"/memory/{memory_id}", json=body)
    s.emit(reply, lambda out: out.print(f"updated {reply['memory_id']} (version {reply['memory'].get('version')})"))


def delete(
    ctx: typer.Context,
    memory_ids: list[str] = typer.Argument(None, help="Ids of the memories to delete."),
    tag: list[str] = typer.Option([], "--tag", help="Delete every memory with any of these tags instead."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before deleting by tag."),
) -> None:
    """Delete memories by id, or every memory with a tag (DELETE /memory/...)."""
    s = session(ctx)
    if bool(memory_ids) == bool(tag):
        raise CliError("give memory ids, or --tag, not both and not neither", USAGE)
    with s.client() as client:
        if tag:
            if not (yes or s.as_json) and not typer.confirm(f"delete every memory tagged {', '.join(tag)}?"):
                raise typer.Exit(USAGE)
            reply = client.delete("/memory/by-tag", params={"tags": ",".join(tag)})
            s.emit(reply, lambda out: out.print(f"deleted {reply['deleted_count']} memories"))
            return
        deleted = [client.delete(f"/memory/{memory_id}")["memory_id"] for memory_id in memory_ids]
    s.emit({"status": "success", "deleted": deleted}, lambda out: out.print(f"deleted {', '.join(deleted)}"))
