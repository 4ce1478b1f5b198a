"""Context hints of a recall, pure: `context`, `language` and `active_path`
(AutoMem's MCP client sends them from the agent's editor) become priority
tags, types and keywords that the context score component boosts.

A language (named, or read from the file's extension or the query) favours
that language's style memories; a context or query about style favours the
style and preference memories; any other context label is a priority tag.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePath

#: Each language's name and the words that name it.
LANGUAGES: dict[str, frozenset[str]] = {
    "python": frozenset({"python", "py"}),
    "typescript": frozenset({"typescript", "ts", "tsx"}),
    "javascript": frozenset({"javascript", "js", "jsx"}),
    "go": frozenset({"go", "golang"}),
    "rust": frozenset({"rust"}),
    "java": frozenset({"java"}),
    "csharp": frozenset({"csharp", "c#", "cs"}),
    "cpp": frozenset({"c++", "cpp", "cc", "cxx"}),
    "swift": frozenset({"swift"}),
}
EXTENSIONS = {
    ".py": "python", ".ts": "typescript", ".tsx": "typescript", ".js": "javascript", ".jsx": "javascript",
    ".go": "go", ".rs": "rust", ".java": "java", ".cs": "csharp", ".cpp": "cpp", ".cc": "cpp", ".cxx": "cpp",
    ".swift": "swift",
}  # fmt: skip
#: Words of a context or query that ask for style and conventions.
STYLE_WORDS = frozenset(
    {"style", "styles", "guideline", "guidelines", "pep8", "formatting", "lint", "preference", "preferences"}
)
#: What a style focus favours.
STYLE_TAGS = ("coding-style", "style", "style-guide", "preferences", "preference:coding")
STYLE_TYPES = ("style", "preference")

_WORDS = re.compile(r"[a-z0-9_\-+#.]+")


def _words(text: str) -> set[str]:
    return set(_WORDS.findall(text.lower()))


@dataclass(frozen=True, slots=True)
class ContextProfile:
    """What the context hints favour: tags (by prefix), types (lowercase),
    keywords (in the content), and what they were read from."""

    tags: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    language: str | None = None
    label: str = ""

    def __bool__(self) -> bool:
        return bool(self.tags or self.types or self.keywords)


def detect_language(language: str, context: str, query: str, active_path: str) -> str | None:
    """The language named (explicitly, then by the context label), else the
    file's extension, else a language word of the query; None if none."""
    for named in (language.strip().lower(), context.strip().lower()):
        if named:
            for name, aliases in LANGUAGES.items():
                if named == name or named in aliases:
                    return name
    suffix = PurePath(active_path.strip()).suffix.lower() if active_path.strip() else ""
    if suffix in EXTENSIONS:
        return EXTENSIONS[suffix]
    query_words = _words(query)
    for name, aliases in LANGUAGES.items():
        if query_words & aliases:
            return name
    return None


def context_profile(
    *,
    tags: Iterable[str],
    types: Iterable[str],
    language: str = "",
    context: str = "",
    active_path: str = "",
    query: str = "",
) -> ContextProfile:
    """The priority tags, types and keywords of the hints (`tags` and `types`
    are the caller's context_tags and context_types). The query is read for
    a language or style words only when a hint came with it: unprompted,
    everyday words ("go") would boost one language's notes in every recall."""
    label = context.strip().lower()
    hinted = bool(language.strip() or label or active_path.strip())
    query = query if hinted else ""
    wanted_tags = dict.fromkeys(t.strip().lower() for t in tags if t.strip())
    wanted_types = dict.fromkeys(t.strip().lower() for t in types if t.strip())
    keywords: dict[str, None] = {}
    detected = detect_language(language, label, query, active_path)
    style = False
    if detected:
        wanted_tags.update(dict.fromkeys((detected, f"{detected}-style", f"{detected}:style")))
        keywords[detected] = None
        style = True
    if (_words(label) | _words(query)) & STYLE_WORDS:
        style = True
    if style:
        wanted_tags.update(dict.fromkeys(STYLE_TAGS))
        wanted_types.update(dict.fromkeys(STYLE_TYPES))
    elif label:
        wanted_tags[label] = None
    return ContextProfile(tuple(wanted_tags), tuple(wanted_types), tuple(keywords), detected, label)
