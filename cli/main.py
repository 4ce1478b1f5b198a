"""`memgrid`: the command-line tool (docs/cli.md). The global options, the
commands' registration, and run(), which turns every failure into one line
on stderr and a documented exit code."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer
from typer import rich_utils

# typer 0.29 carries its own copy of click: its errors are these, not the click package's.
from typer._click.exceptions import ClickException

from cli.client import USAGE, CliError, Target
from cli.commands import admin, mcp, memories, tokens, transfer
from cli.output import Session
from services.core.settings import GatewaySettings, ProcessSettings

#: The gateway `make run` starts: its host for a local stack, its port setting's default.
DEFAULT_URL = f"http://127.0.0.1:{GatewaySettings.model_fields['port'].default}"
#: Where `make run` saves the token it generates (gateway/auth.py), relative to the data directory.
TOKEN_FILE = "api_token"  # noqa: S105  a file name, not a password

app = typer.Typer(
    name="memgrid",
    help="memgrid from the shell: store and recall memories, import and export them, run the admin tasks.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _saved_token() -> str | None:
    """The token `make run` generated (MEMGRID_DATA_DIR/api_token), when there is one."""
    path = (
        Path(os.environ.get("MEMGRID_DATA_DIR") or ProcessSettings.model_fields["memgrid_data_dir"].default)
        / TOKEN_FILE
    )
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


@app.callback()
def main(
    ctx: typer.Context,
    url: str = typer.Option(DEFAULT_URL, "--url", envvar="MEMGRID_URL", help="The gateway's base URL."),
    token: str | None = typer.Option(
        None,
        "--token",
        envvar="MEMGRID_TOKEN",
        help="API token (default: MEMGRID_DATA_DIR/api_token, which `make run` writes).",
        show_default=False,
    ),
    admin_token: str | None = typer.Option(
        None,
        "--admin-token",
        envvar="MEMGRID_ADMIN_TOKEN",
        help="X-Admin-Token, for admin commands with AUTOMEM_API_TOKEN.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts instead of tables."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars or notes on stderr."),
    timeout: float = typer.Option(60.0, "--timeout", min=0.1, help="Seconds to wait for an answer."),
) -> None:
    ctx.obj = Session(Target(url, token or _saved_token(), admin_token, timeout), as_json=as_json, quiet=quiet)


app.command("store")(memories.store)
app.command("recall")(memories.recall)
app.command("get")(memories.get)
app.command("update")(memories.update)
app.command("delete")(memories.delete)
app.command("import")(transfer.import_memories)
app.command("export")(transfer.export_memories)
app.command("backup")(admin.backup)
app.command("restore")(admin.restore)
app.command("reindex")(admin.reindex)
app.command("consolidate")(admin.consolidate)
app.command("status")(admin.status)
app.command("mcp")(mcp.mcp)
app.add_typer(tokens.app, name="tokens")


def run(argv: list[str] | None = None) -> int:
    """The console script: the command's exit code (docs/cli.md). Usage
    errors are 1 (click's 2 is "not found" here); a refused or failed call
    prints its message and exits with the code CliError carries."""
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name="memgrid", standalone_mode=False)
    except CliError as error:
        typer.echo(f"memgrid: {error.message}", err=True)
        return error.code
    except ClickException as error:  # a usage error: a missing argument, an unknown option, a bad value
        rich_utils.rich_format_error(error)
        return USAGE
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("memgrid: interrupted", err=True)
        return 130
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(run())
