"""Writes docs/configuration.md from the settings groups: every field's
environment variable, type, default and the comment its module gives it,
one part per group (services/core/settings/composed.py GROUPS, in order).

The comments are read from the source (tokenize) rather than from
`Field(description=...)`: the groups document each setting with a comment,
as the house style asks; reading the comments keeps that one habit.

Rules the source follows (and this reader relies on): a group's docstring is
its part's introduction, the group's `## ` title its first sentence; in the
class body a blank line starts a section, whose first comment block (when it
has one) is the section's title and introduction, up to a bare `#` line when
the first field's own comment follows it; a comment block right above a
field, and a comment at the end of its line, describe that field.

    python -m services.core.settings_doc           # writes docs/configuration.md
    python -m services.core.settings_doc --check   # exits 1 when it is stale
"""

from __future__ import annotations

import ast
import inspect
import io
import json
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from annotated_types import Ge, Gt, Le, Lt

from services.core.settings import GROUPS, all_fields

TARGET = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
#: Tool directives, not documentation.
_DIRECTIVES = ("fmt:", "noqa", "type:")

HEADER = """\
# Configuration

<!-- Generated from services/core/settings/ by `make docs`
     (`python -m services.core.settings_doc`); edit the comments there, not this file. -->

Every setting is an environment variable (or a line of a `.env` file in the
working directory), read once at start-up by the group of
`services/core/settings/` that owns it; a process reads only the groups it uses.
The variable is the field's name in upper case, any case accepted. Lists and maps
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


def _block_above(line: int, alone: set[int]) -> tuple[list[int], int]:
    """The comment lines right above `line`, and the first line above them."""
    start = line
    while start - 1 in alone:
        start -= 1
    return list(range(start, line)), start - 1


def _joined(lines: list[int], texts: dict[int, str]) -> str:
    return " ".join(texts[n] for n in lines if texts[n])


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


@dataclass
class Part:
    """One group of settings: its title, its introduction and its sections."""

    title: str
    intro: str
    sections: list[Section]


def _class_sections(source: str, cls: ast.ClassDef) -> list[Section]:
    lines = source.splitlines()
    texts, alone = _comments(source)
    fields = all_fields()
    result: list[Section] = []
    for node in cls.body:
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        name = node.target.id
        block, above = _block_above(node.lineno, alone)
        new_section = not result or not lines[above - 1].strip()
        if new_section:
            bare = next((n for n in block if not texts[n]), None)
            intro, block = (block, []) if bare is None else (block[: block.index(bare)], block[block.index(bare) + 1 :])
            result.append(Section(intro=_joined(intro, texts)))
        inline = [
            texts[n] for n in range(node.lineno, (node.end_lineno or node.lineno) + 1) if n in texts and n not in alone
        ]
        description = " ".join(part for part in (_joined(block, texts), *inline) if part)
        info = fields[name]
        result[-1].rows.append((name.upper(), _type(node.annotation, info), _default(info.default), description))
    return result


def _classes(source: str) -> list[ast.ClassDef]:
    return [node for node in ast.parse(source).body if isinstance(node, ast.ClassDef)]


def parts() -> list[Part]:
    """Every settings group, in GROUPS' order, as a part of sections."""
    result = []
    for model in GROUPS.values():
        path = inspect.getsourcefile(model)
        assert path is not None  # noqa: S101  narrows the type: a settings group is defined in a source file
        source = Path(path).read_text()
        cls = next(node for node in _classes(source) if node.name == model.__name__)
        doc = " ".join((inspect.getdoc(model) or "").split())
        result.append(Part(title=_first_sentence(doc), intro=doc, sections=_class_sections(source, cls)))
    return result


def _first_sentence(text: str) -> str:
    cut = min((i for i in (text.find(c) for c in ":.(") if i > 0), default=len(text))
    return text[:cut].strip()


def sections(source: str | None = None) -> list[Section]:
    """The sections of every class in `source` (None: of every settings group)."""
    if source is None:
        return [section for part in parts() for section in part.sections]
    return [section for cls in _classes(source) for section in _class_sections(source, cls)]


def render() -> str:
    """docs/configuration.md's text."""
    out = [HEADER]
    for part in parts():
        out.append(f"\n## {part.title}\n")
        if part.intro.rstrip(".") != part.title:
            out.append(f"\n{_prose(part.intro)}\n")
        for section in part.sections:
            if section.intro:
                out.append(f"\n### {section.title}\n")
                if section.intro.rstrip(".") != section.title:
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
