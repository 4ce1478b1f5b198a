"""Writes docs/configuration.md from `Settings`: every field's environment
variable, type, default and the comment settings.py gives it.

The comments are read from the source (tokenize) rather than from
`Field(description=...)`: settings.py documents each setting with a comment,
as the house style asks, and several people add settings to it at once;
reading the comments keeps that one habit and needs no rewrite of the file.

Rules the source follows (and this reader relies on): a blank line starts a
section, whose first comment block (when it has one) is the section's title
and introduction; a comment block right above a field, and a comment at the
end of its line, describe that field.

    python -m services.core.settings_doc           # writes docs/configuration.md
    python -m services.core.settings_doc --check   # exits 1 when it is stale
"""

from __future__ import annotations

import ast
import io
import json
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from annotated_types import Ge, Gt, Le, Lt

from services.core import settings as settings_module
from services.core.settings import Settings

SOURCE = Path(settings_module.__file__)
TARGET = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
#: Tool directives, not documentation.
_DIRECTIVES = ("fmt:", "noqa", "type:")

HEADER = """\
# Configuration

<!-- Generated from services/core/settings.py by `make docs`
     (`python -m services.core.settings_doc`); edit the comments there, not this file. -->

Every setting is an environment variable (or a line of a `.env` file in the
working directory), read once at start-up by `services/core/settings.py`. The
variable is the field's name in upper case, any case accepted. Lists and maps
are given as JSON, e.g. `STARTUP_LESSON_TAGS='["critical","lesson"]'`. A value
out of its range (the bounds in the type column) stops the process at start-up
with a message naming the variable.
"""


@dataclass
class Section:
    """Fields between two blank lines of the class body, with their introduction."""

    intro: str = ""
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)

    @property
    def title(self) -> str:
        if not self.intro:
            return "Other"
        cut = min((i for i in (self.intro.find(c) for c in ":.(") if i > 0), default=len(self.intro))
        return self.intro[:cut].strip()


def _comments(source: str) -> tuple[dict[int, str], set[int]]:
    """Comment text by line, and the lines holding nothing but a comment."""
    texts: dict[int, str] = {}
    alone: set[int] = set()
    lines = source.splitlines()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        text = token.string.lstrip("#").strip()
        if text.startswith(_DIRECTIVES):
            continue
        line = token.start[0]
        texts[line] = text
        if not lines[line - 1][: token.start[1]].strip():
            alone.add(line)
    return texts, alone


def _block_above(line: int, alone: set[int], texts: dict[int, str]) -> tuple[str, int]:
    """The comment block ending right above `line`, and the first line above it."""
    start = line
    while start - 1 in alone:
        start -= 1
    return " ".join(texts[n] for n in range(start, line)), start - 1


def _type(annotation: ast.expr, info) -> str:
    shown = ast.unparse(annotation)
    bounds = {Ge: ("ge", "≥"), Gt: ("gt", ">"), Le: ("le", "≤"), Lt: ("lt", "<")}
    for item in info.metadata:
        for kind, (attribute, sign) in bounds.items():
            if isinstance(item, kind):
                shown += f", {sign} {getattr(item, attribute)}"
    return shown


def _default(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, Path):
        return f"`{value}`"
    if isinstance(value, (dict, list, bool)):
        return f"`{json.dumps(value)}`"
    return f"`{value}`"


def _cell(text: str, *, code: bool = False) -> str:
    """Markdown table cell text: a pipe would end the cell; outside a code
    span, a < would start an HTML tag and a * emphasis."""
    text = text.replace("|", "\\|")
    return text if code else _prose(text)


def _prose(text: str) -> str:
    return text.replace("<", "&lt;").replace("*", "\\*")


def sections(source: str | None = None) -> list[Section]:
    """The class body of Settings, as sections of documented rows."""
    source = SOURCE.read_text() if source is None else source
    lines = source.splitlines()
    texts, alone = _comments(source)
    tree = ast.parse(source)
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == Settings.__name__).body
    result: list[Section] = []
    for node in body:
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        name = node.target.id
        block, above = _block_above(node.lineno, alone, texts)
        new_section = not result or not lines[above - 1].strip()
        if new_section:
            result.append(Section(intro=block))
            block = ""
        inline = [texts[n] for n in range(node.lineno, node.end_lineno + 1) if n in texts and n not in alone]
        description = " ".join(part for part in (block, *inline) if part)
        info = Settings.model_fields[name]
        result[-1].rows.append((name.upper(), _type(node.annotation, info), _default(info.default), description))
    return result


def render(source: str | None = None) -> str:
    """docs/configuration.md's text."""
    out = [HEADER]
    for section in sections(source):
        out.append(f"\n## {section.title}\n")
        if section.intro and section.intro.rstrip(".") != section.title:
            out.append(f"\n{_prose(section.intro)}\n")
        out.append("\n| variable | type | default | what it does |\n|---|---|---|---|\n")
        for env, kind, default, description in section.rows:
            out.append(
                f"| `{env}` | `{_cell(kind, code=True)}` | {_cell(default, code=True)} | {_cell(description)} |\n"
            )
    return "".join(out)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not TARGET.exists() or TARGET.read_text() != text:
            print(f"{TARGET} is stale: run `make docs`", file=sys.stderr)
            return 1
        return 0
    TARGET.parent.mkdir(exist_ok=True)
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
