"""tokens create|revoke|list: the tokens file (MEMGRID_TOKENS_FILE, gateway/tokens_file.py).

The file holds only each token's sha256; a new token is printed once and
never stored. Every change is written to a temporary file beside it and
moved over it (os.replace), so the gateway, which re-reads the file when it
changes, sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import typer
from rich.console import Console

from cli.client import CONFLICT, NOT_FOUND, USAGE, CliError
from cli.output import session, table
from gateway.tokens_file import (
    OPERATOR,
    ROLES,
    TENANT_PATTERN,
    TOKEN_ID_PATTERN,
    TokensFileError,
    mint_token,
    parse_tokens,
    token_digest,
)

app = typer.Typer(help="Create, revoke and list the API tokens of the tokens file.", no_args_is_help=True)

FILE_OPTION = typer.Option(
    None, "--file", "-f", envvar="MEMGRID_TOKENS_FILE", help="The tokens file (MEMGRID_TOKENS_FILE)."
)
#: The digest prefix `list` shows and `revoke` accepts: enough to tell entries apart, nothing to log in with.
SHOWN_DIGEST = 12


def _path(file: Path | None) -> Path:
    if file is None:
        raise CliError("which tokens file? give --file or set MEMGRID_TOKENS_FILE", USAGE)
    return file


def _load(path: Path, *, missing_ok: bool = False) -> list[dict]:
    """The file's entries as JSON objects, checked as the gateway checks them."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        if missing_ok:
            return []
        raise CliError(f"{path}: no such tokens file", USAGE) from None
    try:
        parse_tokens(text)
    except TokensFileError as exc:
        raise CliError(f"{path}: {exc}", USAGE) from None
    return json.loads(text)


def _save(path: Path, entries: list[dict]) -> None:
    """Atomically replace the file (same directory, so os.replace is a rename), readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(entries, handle, indent=2)
            handle.write("\n")
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@app.command("create")
def create(
    ctx: typer.Context,
    tenant: str | None = typer.Option(None, "--tenant", help="The tenant the token works on (an operator: none)."),
    role: str = typer.Option("write", "--role", help=f"One of {', '.join(ROLES)}."),
    memory_limit: int | None = typer.Option(None, "--memory-limit", min=0, help="Memories the tenant may hold."),
    token_id: str | None = typer.Option(None, "--id", help="The token's name in the audit log (and for revoke)."),
    file: Path | None = FILE_OPTION,
) -> None:
    """Add a token; prints it once (only its sha256 is written)."""
    s = session(ctx)
    if role not in ROLES:
        raise CliError(f"--role must be one of {', '.join(ROLES)}", USAGE)
    if role == OPERATOR:  # across tenants: it belongs to none
        if tenant is not None or memory_limit is not None:
            raise CliError("an operator token belongs to no tenant: no --tenant or --memory-limit", USAGE)
    elif tenant is None or not TENANT_PATTERN.fullmatch(tenant):
        raise CliError("--tenant must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'", USAGE)
    if token_id is not None and not TOKEN_ID_PATTERN.fullmatch(token_id):
        raise CliError("--id must be 1-64 characters of A-Z, a-z, 0-9, '_', '.' or '-'", USAGE)
    path = _path(file)
    entries = _load(path, missing_ok=True)
    if token_id is not None and any(e.get("id") == token_id for e in entries):
        raise CliError(f"a token with id {token_id!r} is in the file already", CONFLICT)
    token = mint_token()
    digest = token_digest(token).hex()
    entry: dict[str, str | int] = {"token_sha256": digest, "role": role}
    if tenant is not None:
        entry = {"token_sha256": digest, "tenant": tenant, "role": role}
    if memory_limit is not None:
        entry["memory_limit"] = memory_limit
    if token_id is not None:
        entry["id"] = token_id
    _save(path, [*entries, entry])

    def render(out: Console) -> None:
        out.print(token)
        s.note(
            f"the {'operator token' if tenant is None else f'token for tenant {tenant} ({role})'}; "
            f"it is shown only now, {path} keeps its digest"
        )

    s.emit({"status": "success", "token": token, "token_sha256": digest, "tenant": tenant, "role": role}, render)


@app.command("list")
def list_tokens(ctx: typer.Context, file: Path | None = FILE_OPTION) -> None:
    """The entries: digest prefix, tenant, role, memory limit (never a token)."""
    s = session(ctx)
    entries = _load(_path(file))
    shown = [
        {"digest": e["token_sha256"][:SHOWN_DIGEST], "id": e.get("id"), "tenant": e.get("tenant"), "role": e["role"],
         "memory_limit": e.get("memory_limit")}
        for e in entries
    ]  # fmt: skip
    s.emit(
        {"status": "success", "tokens": shown},
        lambda out: out.print(table(("digest", "tenant", "role", "memory limit"), [tuple(e.values()) for e in shown])),
    )


@app.command("revoke")
def revoke(
    ctx: typer.Context,
    which: str = typer.Argument(
        ...,
        help="The token, its id, or its digest (8 characters or more, as `list` shows); "
        "one starting with '-' goes after `--`.",
    ),
    file: Path | None = FILE_OPTION,
) -> None:
    """Remove a token from the file; the gateway refuses it within TOKENS_FILE_CHECK_SECONDS."""
    s = session(ctx)
    path = _path(file)
    entries = _load(path)
    by_token = token_digest(which).hex()
    prefix = which.lower()
    matches = [e for e in entries if e["token_sha256"] == by_token] or [e for e in entries if e.get("id") == which]
    if not matches and len(prefix) >= 8 and all(c in "0123456789abcdef" for c in prefix):
        matches = [e for e in entries if e["token_sha256"].lower().startswith(prefix)]
    if not matches:
        raise CliError("no such token in the file", NOT_FOUND)
    if len(matches) > 1:
        raise CliError(f"{len(matches)} tokens start with {which}; give more of the digest", USAGE)
    gone = matches[0]
    _save(path, [e for e in entries if e is not gone])
    s.emit(
        {"status": "success", "revoked": gone["token_sha256"][:SHOWN_DIGEST], "tenant": gone["tenant"]},
        lambda out: out.print(f"revoked {gone['token_sha256'][:SHOWN_DIGEST]} (tenant {gone['tenant']})"),
    )
