"""GET /recall's query parameters, each declared once: its name, its aliases,
how it is read and what it means. The route's OpenAPI entries and the
SearchMemoriesRequest it sends are both built from RECALL_PARAMETERS.

The table's order is the order the parameters are read in, so that of two
malformed parameters the same one is answered first; an alias is documented
right after its parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request

from gateway.openapi import (
    BOOLEAN,
    INTEGER,
    NUMBER,
    STATE_MODE,
    STRING,
    STRINGS,
    TAGS,
    TRUST_STATES,
    Schema,
    array,
    lenient_int,
    query,
)
from gateway.routes.query import (
    query_bool,
    query_embedding,
    query_float,
    query_int,
    query_limit,
    query_list,
    query_tags,
    query_text,
)
from memgrid.v1 import recall_service_pb2 as recall

#: How a parameter is read, from its names (itself, then its aliases); None leaves the field unset.
Reader = Callable[[Request, tuple[str, ...]], Any]
#: How a parameter is documented: (name, description) -> its OpenAPI entry.
Entry = Callable[[str, str], dict]


@dataclass(frozen=True)
class RecallParameter:
    """One query parameter of GET /recall, and the request field of the same name."""

    name: str
    read: Reader | None
    entry: Entry
    description: str
    #: Other names it is read under, documented as aliases, the first one sent counting.
    aliases: tuple[str, ...] = ()
    #: Names it is read under that the description does not list (kept for older clients).
    unlisted: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases, *self.unlisted)

    @property
    def field(self) -> str | None:
        """The SearchMemoriesRequest field it fills (None: accepted and ignored)."""
        return self.name if self.read is not None else None

    def entries(self) -> list[dict]:
        """Its OpenAPI entries: itself, then each alias."""
        return [
            self.entry(self.name, self.description),
            *(self.entry(alias, f"Alias of {self.name}.") for alias in self.aliases),
        ]


# Readers ------------------------------------------------------------------------------------------------------------


def _text(request: Request, names: tuple[str, ...]) -> str:
    """The first of the names sent non-empty."""
    return next((text for text in (query_text(request, n) for n in names) if text), "")


def _flag(request: Request, names: tuple[str, ...]) -> bool:
    """A flag under any of its names (the first one sent counts)."""
    name = next((n for n in names if query_text(request, n)), names[0])
    return query_bool(request, name)


def _optional_flag(request: Request, names: tuple[str, ...]) -> bool | None:
    """A flag when sent; None (the service's default) when not."""
    return query_bool(request, names[0]) if query_text(request, names[0]) else None


def _count(request: Request, names: tuple[str, ...]) -> int:
    """The first of the names that reads as a count other than 0."""
    return next((count for count in (query_int(request, n) for n in names) if count), 0)


def _limit(request: Request, names: tuple[str, ...]) -> int:
    return query_limit(request, names[0])


def _list(request: Request, names: tuple[str, ...]) -> list[str]:
    return query_list(request, names[0])


def _tags(request: Request, names: tuple[str, ...]) -> list[str]:
    return query_tags(request, names[0])


def _embedding(request: Request, names: tuple[str, ...]) -> list[float]:
    return query_embedding(request)


def _number(request: Request, names: tuple[str, ...]) -> float | None:
    return query_float(request, names[0])


#: recency_bias as AutoMem's MCP client sends it: auto and on keep the
#: intent's recency weight (recency is always part of the score), off is 0.
RECENCY_WORDS = {"auto": None, "on": None, "off": 0.0}


def _recency(request: Request, names: tuple[str, ...]) -> float | None:
    word = query_text(request, names[0]).lower()
    if word in RECENCY_WORDS:
        return RECENCY_WORDS[word]
    return query_float(request, names[0])


# OpenAPI entries ----------------------------------------------------------------------------------------------------


def _of(schema: Schema, *, explode: bool = True) -> Entry:
    return lambda name, description: query(name, schema, description, explode=explode)


def _flag_entry(name: str, description: str) -> dict:
    return query(name, BOOLEAN, f"{description} true|false (also 1|0, yes|no, on|off).")


def _number_entry(name: str, description: str) -> dict:
    return query(name, NUMBER, f"{description} Not a number: 400.")


def _counted(**bounds: int) -> Entry:
    return lambda name, description: lenient_int(name, description, **bounds)


_SORTS: Schema = {"enum": ["score", "time_desc", "time_asc", "updated_desc", "updated_asc"]}
_TIME_QUERY = (
    "A window over the memories' timestamp, in UTC: today, yesterday, this morning|afternoon|evening, tonight, "
    "last night, this|last week|weekend|month|quarter|year, Q1-Q4 (Q3 2024), a season (last summer, winter 2024; "
    "meteorological, northern hemisphere), last N hours|days|weeks|months|years, N days ago, a month name "
    "(march 2024), a year, an ISO date, since|before|after <phrase or date>, between <phrase or date> and "
    "<phrase or date>. Anything else is a 400 listing these forms; start and end override its bounds."
)
_IGNORED = "Sent by AutoMem's MCP client; accepted and ignored."

P = RecallParameter
RECALL_PARAMETERS: tuple[RecallParameter, ...] = (
    P("query", _text, _of(STRING), "Free text; `q` is an alias.", aliases=("q",)),
    P("queries", _list, _of(STRINGS), "Several queries at once, merged (repeatable)."),
    P(
        "embedding",
        _embedding,
        _of(array(NUMBER), explode=False),
        "A query vector of the index's dimension, comma-separated (brackets allowed).",
    ),
    P(
        "limit",
        _limit,
        _counted(minimum=1, maximum=100),
        "Results, 1..100 (default 5; 0 or less is 1, more than 100 is 100).",
    ),
    P("tags", _tags, _of(TAGS["schema"]), TAGS["description"]),
    P("tag_mode", _text, _of({"enum": ["any", "all"]}), "Any (default) or all of the tags."),
    P("tag_match", _text, _of({"enum": ["prefix", "exact"]}), "Prefix (default: `a` matches `a:b`) or exact."),
    P("exclude_tags", _tags, _of(STRINGS), "Leave out memories with any of these tags."),
    P("time_query", _text, _of(STRING), _TIME_QUERY, unlisted=("time",)),
    P("start", _text, _of(STRING), "Window start, ISO 8601."),
    P("end", _text, _of(STRING), "Window end, ISO 8601."),
    P("sort", _text, _of(_SORTS), "Default: score.", aliases=("order_by",)),
    P("state_mode", _text, _of(STATE_MODE["schema"]), STATE_MODE["description"]),
    P("current_only", _text, _of({"enum": ["true", "false"]}), "Legacy: false is state_mode=history."),
    P("state_debug", _flag, _flag_entry, "Add state_debug (the current-state pass and stage timings)."),
    P("priority_ids", _list, _of(STRINGS), "Memory ids to rank first when they match."),
    P("context_tags", _tags, _of(STRINGS), "Tags of the current context (the context score)."),
    P("context_types", _list, _of(STRINGS), "Memory types of the current context."),
    P(
        "expand_relations",
        _flag,
        _flag_entry,
        "Append memories one edge away from the results (match_type relation).",
        aliases=("expand_associations", "expand"),
    ),
    P(
        "relation_limit",
        _count,
        _counted(minimum=0),
        "Relations listed per result, and followed per result by expansion.",
    ),
    P(
        "expansion_limit",
        _count,
        _counted(minimum=0),
        "Memories each expansion appends at most.",
        aliases=("relation_expansion_limit",),
    ),
    P(
        "expand_entities",
        _flag,
        _flag_entry,
        "Append memories sharing the results' entities (match_type entity_expansion).",
        aliases=("entity_expansion",),
    ),
    P("as_of", _text, _of(STRING), "Recall what was current at this ISO 8601 time."),
    P("intent", _text, _of({"enum": ["recall", "browse"]}), "The weight set (default recall)."),
    P(
        "auto_decompose",
        _flag,
        _flag_entry,
        "A single question is searched again for its names and topics, which widen the candidates the question ranks.",
    ),
    P("per_query_limit", _count, _counted(minimum=1), "Results each query contributes at most (default: limit)."),
    P(
        "scope_fallback",
        _flag,
        _flag_entry,
        "With tags and too few results, fill from outside the tags (outside_tag_scope).",
    ),
    P(
        "expand_respect_tags",
        _flag,
        _flag_entry,
        "Expansion stays within the tags (by default only exclude_tags and the window apply).",
    ),
    P(
        "context",
        _text,
        _of(STRING),
        "A context label (coding-style, architecture...): its tags, or style notes, are boosted.",
    ),
    P(
        "language",
        _text,
        _of(STRING),
        "A programming language: its style notes are boosted; `lang` is an alias.",
        aliases=("lang",),
    ),
    P(
        "active_path",
        _text,
        _of(STRING),
        "The file being edited: its extension names the language.",
        aliases=("file_path", "focus_path"),
    ),
    P("trust_states", _list, _of(TRUST_STATES["schema"]), TRUST_STATES["description"]),
    P(
        "adaptive_floor",
        _optional_flag,
        _flag_entry,
        "Leave out results below a sharp drop of the scores (default RECALL_ADAPTIVE_FLOOR).",
    ),
    P("min_score", _number, _number_entry, "Leave out results scoring lower."),
    P("expand_min_strength", _number, _number_entry, "Least relation strength for expansion."),
    P("expand_min_importance", _number, _number_entry, "Least importance of an expanded memory."),
    P("diversity_factor", _number, _number_entry, "Interleaving over sources, 0 (off) .. 1 (default 0.15)."),
    P(
        "recency_bias",
        _recency,
        _of({"anyOf": [{"type": "number", "minimum": 0}, {"enum": ["auto", "on", "off"]}]}),
        "The recency weight; auto and on keep the intent's, off is 0 (the words AutoMem's MCP client sends).",
    ),
    P("format", None, _of(STRING), _IGNORED),
    P("offset", None, _of(INTEGER), _IGNORED),
)
del P


def openapi_parameters() -> tuple[dict, ...]:
    """The route's OpenAPI parameters, from the table."""
    return tuple(entry for parameter in RECALL_PARAMETERS for entry in parameter.entries())


def search_request(request: Request) -> recall.SearchMemoriesRequest:
    """The SearchMemoriesRequest the query parameters ask for, read in the table's order."""
    fields: dict[str, Any] = {}
    for parameter in RECALL_PARAMETERS:
        if parameter.read is None or parameter.field is None:
            continue
        value = parameter.read(request, parameter.names)
        if value is not None:
            fields[parameter.field] = value
    return recall.SearchMemoriesRequest(**fields)
