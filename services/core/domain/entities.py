"""Entities of a memory (`metadata.entities`), their tags, the rules
that find them without a model, and person resolution (merge rules).

The stored shape is a plain dict, `{category: [names]}`, with every category
of ENTITY_CATEGORIES present; names are de-duplicated case-insensitively, the
first spelling kept, in first-seen order.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from services.core.domain.tags import normalize_tags

ENTITY_CATEGORIES: tuple[str, ...] = ("tools", "projects", "people", "concepts", "organizations")
#: What every tag enrichment derives begins with: entity:<category>:<slug> (entity_tags).
ENTITY_TAG_PREFIX = "entity:"

EntityMap = dict[str, list[str]]

_DATA_STORES = (
    "PostgreSQL", "MySQL", "MariaDB", "SQLite", "MongoDB", "Redis", "Memcached", "Elasticsearch",
    "OpenSearch", "Cassandra", "DynamoDB", "CockroachDB", "ClickHouse", "Neo4j", "FalkorDB", "Qdrant",
    "Pinecone", "Weaviate", "Milvus", "Supabase", "Kafka", "RabbitMQ", "NATS",
)  # fmt: skip
_INFRASTRUCTURE = (
    "Docker", "Podman", "Kubernetes", "Helm", "Terraform", "Ansible", "Nginx", "Envoy", "Istio",
    "Prometheus", "Grafana", "Jenkins", "GitHub Actions", "GitLab CI", "Git", "GitHub", "GitLab", "Linux",
    "AWS Lambda", "Vercel",
)  # fmt: skip
_LANGUAGES = (
    "Python", "TypeScript", "JavaScript", "Golang", "Rust", "Java", "Kotlin", "Swift", "Ruby", "C++",
    "PHP", "Scala", "Elixir", "Haskell", "SQL", "GraphQL", "Bash", "gRPC", "protobuf", "OAuth", "JWT",
    "WebSocket",
)  # fmt: skip
_FRAMEWORKS = (
    "React", "Vue.js", "Angular", "Svelte", "Next.js", "Node.js", "Django", "Flask", "FastAPI",
    "Spring Boot", "Pydantic", "SQLAlchemy", "Celery", "pandas", "NumPy", "PyTorch", "TensorFlow",
    "scikit-learn", "Jupyter", "spaCy", "LangChain", "LlamaIndex", "Tailwind CSS", "Airflow", "Spark",
)  # fmt: skip
_DEVELOPER_TOOLS = (
    "pytest", "Jest", "mypy", "Ruff", "ESLint", "Webpack", "Vite", "npm", "Poetry", "VS Code", "Vim",
    "Emacs", "Jira", "Confluence", "Notion", "Figma", "Postman", "Slack", "Ollama", "ChatGPT", "GPT-4",
)  # fmt: skip

#: Well-known technologies in their canonical spelling; matched case-insensitively unless AMBIGUOUS_TERMS.
TECH_TERMS: tuple[str, ...] = _DATA_STORES + _INFRASTRUCTURE + _LANGUAGES + _FRAMEWORKS + _DEVELOPER_TOOLS

#: Organisations the small model often misses or mislabels. The spec's own
#: example files "OpenAI" under organizations, so vendors are not tools.
KNOWN_ORGANIZATIONS: tuple[str, ...] = (
    "OpenAI", "Anthropic", "Google", "Microsoft", "Amazon", "Apple", "Meta", "Netflix", "IBM", "Nvidia",
    "Intel", "Mozilla", "Hugging Face", "DeepMind", "Mistral AI",
)  # fmt: skip

#: Terms that are also everyday words: matched only in their canonical casing.
AMBIGUOUS_TERMS: frozenset[str] = frozenset(
    {"Rust", "Java", "Swift", "Ruby", "React", "Flask", "Spark", "Helm", "Envoy", "Celery", "Bash",
     "Airflow", "Poetry", "Notion", "Jest", "Apple", "Meta", "Amazon", "Slack"}
)  # fmt: skip

#: Other spellings, mapped to the canonical term.
TECH_ALIASES: Mapping[str, str] = {
    "postgres": "PostgreSQL", "k8s": "Kubernetes", "mongo": "MongoDB", "nodejs": "Node.js",
    "vscode": "VS Code", "sklearn": "scikit-learn", "elastic search": "Elasticsearch",
}  # fmt: skip

_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))
_NON_WORD = re.compile(r"[\W_]+")
_EDGE_JUNK = re.compile(r"^[\W_]+|(?:'s|’s)?[\W_]*$")


def _strip_accents(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))


def clean_name(name: str) -> str:
    """An entity name as stored: zero-width characters removed, whitespace
    collapsed, surrounding punctuation and a trailing possessive dropped."""
    text = " ".join(name.translate(_ZERO_WIDTH).split())
    # Keep the trailing symbols of names such as C++ or Node.js.
    if re.search(r"[\w][+#]+$", text):
        return text
    return _EDGE_JUNK.sub("", text)


def slugify(name: str) -> str:
    """Lowercase, accents stripped, runs of non-alphanumerics turned into one
    '-', trimmed of '-'. Letters without a decomposition (ø, 北) are kept."""
    return _NON_WORD.sub("-", _strip_accents(name).lower()).strip("-")


def empty_entities() -> EntityMap:
    """Every category, each with no names."""
    return {category: [] for category in ENTITY_CATEGORIES}


def merge_entities(*parts: Mapping[str, Iterable[str]] | None) -> EntityMap:
    """The union of entity maps in the stored shape. Unknown categories,
    non-string and blank names are dropped; repeats within a category are
    compared case-insensitively and the first spelling wins."""
    merged = empty_entities()
    seen: dict[str, set[str]] = {category: set() for category in ENTITY_CATEGORIES}
    for part in parts:
        for category, names in (part or {}).items():
            if category not in merged or isinstance(names, str):
                continue
            for raw in names:
                name = clean_name(raw) if isinstance(raw, str) else ""
                if name and name.casefold() not in seen[category]:
                    seen[category].add(name.casefold())
                    merged[category].append(name)
    return merged


def entity_tags(entities: Mapping[str, Iterable[str]]) -> list[str]:
    """`entity:<category>:<slug>` for each entity, categories in the order of
    ENTITY_CATEGORIES; names whose slug is empty give no tag."""
    tags: dict[str, None] = {}
    for category, names in merge_entities(entities).items():
        for name in names:
            slug = slugify(name)
            if slug:
                tags.setdefault(f"{ENTITY_TAG_PREFIX}{category}:{slug}", None)
    return list(tags)


def merge_tags(existing: list[str] | str | None, new: Iterable[str]) -> list[str]:
    """The enrichment rewrite: the stored tags normalised (split on
    commas, trimmed, blanks and repeats dropped), then each new tag (usually
    from entity_tags) not already present, compared case-insensitively."""
    tags = normalize_tags(existing or [])
    present = {tag.casefold() for tag in tags}
    for tag in normalize_tags(list(new)):
        if tag.casefold() not in present:
            present.add(tag.casefold())
            tags.append(tag)
    return tags


@dataclass(frozen=True, slots=True)
class LexiconEntry:
    """One spelling of a known term and what it stands for."""

    text: str
    canonical: str
    category: str
    case_sensitive: bool


def lexicon(
    tech_terms: Iterable[str] = TECH_TERMS,
    organizations: Iterable[str] = KNOWN_ORGANIZATIONS,
    aliases: Mapping[str, str] = TECH_ALIASES,
) -> tuple[LexiconEntry, ...]:
    """Every spelling to look for: terms (tools), organisations and aliases."""
    entries = [LexiconEntry(t, t, "tools", t in AMBIGUOUS_TERMS) for t in tech_terms]
    entries += [LexiconEntry(o, o, "organizations", o in AMBIGUOUS_TERMS) for o in organizations]
    known = {e.canonical for e in entries}
    entries += [LexiconEntry(a, c, "tools", False) for a, c in aliases.items() if c in known]
    return tuple(entries)


@dataclass(frozen=True, slots=True)
class Mention:
    """A name found in a text, with the character span of the whole phrase."""

    name: str
    start: int
    end: int


class TermMatcher:
    """Finds lexicon terms in text with word boundaries that suit names such as
    C++, Node.js or gRPC; ambiguous terms only in their canonical casing."""

    def __init__(self, entries: Iterable[LexiconEntry]) -> None:
        self.entries = tuple(entries)
        self._folded = {e.text.casefold(): e for e in self.entries if not e.case_sensitive}
        self._exact = {e.text: e for e in self.entries if e.case_sensitive}
        self._patterns = [
            re.compile(self._alternation(self._folded), re.IGNORECASE) if self._folded else None,
            re.compile(self._alternation(self._exact)) if self._exact else None,
        ]

    @staticmethod
    def _alternation(texts: Iterable[str]) -> str:
        terms = sorted(texts, key=len, reverse=True)
        body = "|".join(re.escape(t).replace(r"\ ", r"\s+") for t in terms)
        return rf"(?<![\w.@#+])(?:{body})(?![\w+#@]|\.\w)"

    def lookup(self, name: str) -> LexiconEntry | None:
        """The entry for a name, if it is a known term."""
        text = " ".join(name.split())
        return self._exact.get(text) or self._folded.get(text.casefold())

    def find(self, text: str) -> list[tuple[Mention, LexiconEntry]]:
        """Every known term in the text, in order, outside emails, URLs and handles."""
        noise = noise_spans(text)
        found = []
        for pattern in filter(None, self._patterns):
            for m in pattern.finditer(text):
                entry = self.lookup(m.group())
                if entry and not overlaps(m.start(), m.end(), noise):
                    found.append((Mention(entry.canonical, m.start(), m.end()), entry))
        return sorted(found, key=lambda item: item[0].start)


DEFAULT_MATCHER = TermMatcher(lexicon())

# Linear time on any text: every repetition is bounded (an email's local part, a DNS label, a domain's
# labels), so a match attempt reads a bounded stretch whatever follows; unbounded, `a.a.a...` made each
# of its positions read to the end of the text (docs/performance.md, Hostile inputs).
_LOCAL_CHARS = 64  # an email's local part (RFC 5321)
_LABEL_CHARS = 63  # a DNS label
_LABELS = 16  # a domain's labels before its top level (more than any in use)
_EMAIL = re.compile(
    # An address starts where its run of local-part characters does (one longer than 64 is none).
    rf"(?<![\w.+-])[\w.+-]{{1,{_LOCAL_CHARS}}}@[\w-]{{1,{_LABEL_CHARS}}}(?:\.[\w-]{{1,{_LABEL_CHARS}}}){{1,{_LABELS}}}"
)
_URL = re.compile(r"\b(?:https?://|www\.)\S+", re.IGNORECASE)
_DOMAIN = re.compile(
    # Not from inside a label or a chain of labels: a chain is read once, from its first label.
    r"(?<![a-z0-9])(?<![a-z0-9]\.)"
    rf"\b(?:[a-z0-9-]{{1,{_LABEL_CHARS}}}\.){{1,{_LABELS}}}"
    r"(?:com|org|net|io|dev|ai|app|co|edu|gov|me|info|xyz|cloud|tech)\b(?:/\S*)?",
    re.IGNORECASE,
)
_HANDLE = re.compile(r"(?<![\w@.])@[A-Za-z0-9_][\w.-]*")


def find_emails(text: str) -> list[str]:
    """Email addresses, in order (identifiers for contacts, never people names)."""
    return [m.group().rstrip(".") for m in _EMAIL.finditer(text)]


def find_handles(text: str) -> list[str]:
    """@handles, in order (not people: they are account names)."""
    return [m.group().rstrip(".-") for m in _HANDLE.finditer(text)]


def find_urls(text: str) -> list[str]:
    """URLs and bare domains, in order (not the domain of an email address)."""
    emails = [m.span() for m in _EMAIL.finditer(text)]  # once: per match it made the search quadratic
    starts = [start for start, _ in emails]
    spans = _merge_spans(
        [m.span() for p in (_URL, _DOMAIN) for m in p.finditer(text) if not _inside(m.start(), emails, starts)]
    )
    return [text[s:e].rstrip(".,;:)") for s, e in spans]


def _inside(position: int, spans: list[tuple[int, int]], starts: list[int]) -> bool:
    """Whether `position` falls in one of the (sorted, disjoint) spans; `starts` their starts."""
    index = bisect_right(starts, position) - 1
    return index >= 0 and position < spans[index][1]


def noise_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of emails, URLs, domains and handles, which no entity
    may overlap."""
    return _merge_spans([m.span() for p in (_EMAIL, _URL, _DOMAIN, _HANDLE) for m in p.finditer(text)])


def _merge_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def overlaps(start: int, end: int, spans: Iterable[tuple[int, int]]) -> bool:
    """Whether [start, end) shares a character with any of the spans."""
    return any(start < s_end and s_start < end for s_start, s_end in spans)


#: Words before "project" that describe a kind of project rather than name one.
_NOT_PROJECT_NAMES = frozenset({
    "a", "an", "the", "this", "that", "these", "those", "my", "our", "your", "their", "his", "her", "its", "i",
    "we", "you", "they", "he", "she", "it", "new", "old", "next", "last", "first", "final", "current", "whole",
    "same", "other", "another", "every", "any", "each", "some", "which", "what", "side", "pet", "big", "small",
    "main", "personal", "team", "group", "school", "class", "research", "work", "home", "open-source",
    "internal", "existing", "entire", "huge", "large", "one",
})  # fmt: skip
_PROJECT_WORDS = frozenset({
    "manager", "management", "lead", "plan", "planning", "owner", "team", "meeting", "update", "status",
    "board", "roadmap",
})  # fmt: skip
_NAME = r"[A-Za-z][\w.+-]*[\w+]|[A-Za-z]"
_PROJECT_AFTER = re.compile(rf"\b([Pp]roject)\s*:?\s+(?:[\"'`“]([^\"'`”\n]{{1,40}})[\"'`”]|({_NAME}))")
_PROJECT_BEFORE = re.compile(
    r"(?:\b((?:[A-Z][\w.-]*\s+){0,2}[A-Z][\w.+-]*)"
    r"|\b(?i:the|a|an|our|my|your|their|his|her|its|this|that)\s+([a-z][\w.+-]*[\w+]))\s+([Pp]roject)\b"
)


def project_mentions(text: str, matcher: TermMatcher = DEFAULT_MATCHER) -> list[Mention]:
    """Projects named as "project X", "project: X", 'project "X Y"' or "X project".

    After "project", an unquoted name must be capitalised or code-like (a
    digit, '-', '_' or '.'), so "project manager" is not a project. Before
    "project", a lowercase name needs a determiner ("the billing project"),
    and determiners, pronouns and kind words ("side", "team") are not names;
    when a name follows the same "project", the word before it is not one
    ("Started project Apollo"). Known technologies are tools, never projects.
    """
    found: list[Mention] = []
    named_after: set[int] = set()
    for m in _PROJECT_AFTER.finditer(text):
        quoted, bare = m.group(2), m.group(3)
        if bare and (bare.lower() in _PROJECT_WORDS or not (bare[0].isupper() or re.search(r"[\d_.-]", bare))):
            continue
        named_after.add(m.start(1))
        found.append(Mention(clean_name(quoted or bare), m.start(), m.end()))
    for m in _PROJECT_BEFORE.finditer(text):
        words = (m.group(1) or m.group(2)).split()
        while words and words[0].lower() in _NOT_PROJECT_NAMES:
            words.pop(0)  # "The Memory Grid project" names Memory Grid
        if m.start(3) in named_after or not words:
            continue
        found.append(Mention(clean_name(" ".join(words)), m.start(), m.end()))
    noise = noise_spans(text)
    return [
        mention
        for mention in sorted(found, key=lambda x: x.start)
        if mention.name and matcher.lookup(mention.name) is None and not overlaps(mention.start, mention.end, noise)
    ]


def extract_with_rules(text: str, matcher: TermMatcher = DEFAULT_MATCHER) -> EntityMap:
    """What the rules find without a model: known tools and organisations,
    and projects. People and concepts need the model."""
    found: EntityMap = empty_entities()
    for mention, entry in matcher.find(text):
        found[entry.category].append(mention.name)
    found["projects"] = [m.name for m in project_mentions(text, matcher)]
    return merge_entities(found)


def person_key(name: str | None) -> str | None:
    """The merge key of a display name: accents
    stripped, zero-width characters removed, lowercased, whitespace collapsed.
    None for a name of fewer than two words, which never merges."""
    if not name:
        return None
    key = " ".join(_strip_accents(name.translate(_ZERO_WIDTH)).lower().split())
    return key if len(key.split()) >= 2 else None


def email_key(email: str | None) -> str | None:
    """The merge key of an email address: trimmed and lowercased; None when
    it is not an address."""
    key = (email or "").strip().lower()
    return key if _EMAIL.fullmatch(key) else None


def _contact_emails(contact: Mapping[str, Any]) -> set[str]:
    raw = [contact.get("email"), *(contact.get("emails") or ())]
    return {key for key in map(email_key, raw) if key}


def resolve_person(
    existing: Sequence[Mapping[str, Any]], *, name: str | None = None, email: str | None = None
) -> Mapping[str, Any] | None:
    """The existing contact a new mention merges into, or None.

    An equal email (any of `email` / `emails`) merges first; otherwise a name
    of two or more words merges when its key equals the contact's `key` (or,
    without one, the key of its `name`). A single first name never merges.
    """
    wanted_email = email_key(email)
    if wanted_email:
        for contact in existing:
            if wanted_email in _contact_emails(contact):
                return contact
    wanted_name = person_key(name)
    if wanted_name:
        for contact in existing:
            if (contact.get("key") or person_key(contact.get("name"))) == wanted_name:
                return contact
    return None


def shared_entity_tags(entities: Mapping[str, Iterable[str]]) -> list[str]:
    """The entity tags that may stand for one shared Entity node per tenant.

    People resolve by the merge rules: a full name (two words or more) is
    one person whatever its accents or case; a single first name never
    auto-merges, so it gets no shared node (it stays a tag on its memory)."""
    shared = {key: list(names) for key, names in entities.items() if key != "people"}
    shared["people"] = [name for name in entities.get("people", ()) if person_key(name)]
    return entity_tags(shared)
