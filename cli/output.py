"""What every command shares: the session (where, who, how to print) and the printing itself."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from cli.client import Client, Target


@dataclass(slots=True)
class Session:
    """The global options, as each command sees them."""

    target: Target
    as_json: bool = False
    quiet: bool = False
    out: Console = field(default_factory=lambda: Console(soft_wrap=True))
    err: Console = field(default_factory=lambda: Console(stderr=True))

    def client(self) -> Client:
        return Client(self.target)

    def emit(self, data: Any, render: Callable[[Console], None] | None = None) -> None:
        """`data` as one JSON document with --json; else `render` (or the JSON, pretty)."""
        if self.as_json or render is None:
            sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=None if self.as_json else 2) + "\n")
            sys.stdout.flush()
            return
        render(self.out)

    def note(self, message: str) -> None:
        """A line for a person, on stderr (never mixed into --json output)."""
        if not self.quiet:
            self.err.print(message, highlight=False)

    def progress(self, unit: str) -> Progress:
        """A progress bar with the rate, on stderr; silent with --json or --quiet or off a terminal."""
        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            RateColumn(unit),
            TimeRemainingColumn(),
            console=self.err,
            disable=self.as_json or self.quiet or not self.err.is_terminal,
            transient=False,
        )


class RateColumn(ProgressColumn):
    """Items a second, from rich's own speed estimate."""

    def __init__(self, unit: str):
        super().__init__()
        self._unit = unit

    def render(self, task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f} {self._unit}/s" if speed else f"- {self._unit}/s", style="progress.data.speed")


def session(ctx: typer.Context) -> Session:
    """The session the main callback put on the context."""
    root = ctx.find_root()
    assert isinstance(root.obj, Session), "the main callback sets the session"  # noqa: S101  an invariant (the main callback sets it), not an input check
    return root.obj


def table(columns: Iterable[str], rows: Iterable[Iterable[Any]], *, title: str | None = None) -> Table:
    """A plain table for people; None shows as an empty cell."""
    shown = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        shown.add_column(column, overflow="fold")
    for row in rows:
        shown.add_row(*("" if v is None else str(v) for v in row))
    return shown


def fields_table(values: dict[str, Any]) -> Table:
    """One record as two columns, field and value."""
    shown = Table(show_header=False, box=None, pad_edge=False)
    shown.add_column(style="bold")
    shown.add_column(overflow="fold")
    for name, value in values.items():
        if value is None or value == [] or value == {}:
            continue
        shown.add_row(name, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    return shown


def short(text: str | None, width: int = 80) -> str:
    """Text on one line, cut at `width` characters."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
