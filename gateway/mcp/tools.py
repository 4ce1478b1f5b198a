"""The MCP tools: each one REST operation of the gateway, with a description
written for the model that will choose among them. Their input and output
schemas are read from the operation's OpenAPI description (schemas.py)."""

from __future__ import annotations

from dataclasses import dataclass

import mcp_types as types

from gateway.mcp.schemas import Operation, operation
from services.core.domain.model import AUTHORABLE_RELATIONS


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    method: str
    path: str
    description: str
    body: str | None = None  # the component the body is read as, when the route takes several shapes
    only: tuple[str, ...] | None = None
    omit: tuple[str, ...] = ()
    read_only: bool = False
    destructive: bool = False


SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "store",
        "Store a memory",
        "POST",
        "/memory",
        "Remember something worth keeping across sessions: a decision, preference, pattern, lesson or fact. "
        "Give `content` in one self-contained sentence or two, a `type` when you know it, `importance` 0-1 and "
        "`tags`. When this replaces an older memory (a changed decision, a corrected fact), pass its id as "
        "`supersedes_memory_id`: the old one stays in history and recall shows the new one. `t_valid`/`t_invalid` "
        "bound when it holds; `idempotency_key` makes a retry return the first result instead of a duplicate. "
        "Returns the new `memory_id`; `trust_state` pending_review means a reviewer must approve it first.",
    ),
    ToolSpec(
        "recall",
        "Recall memories",
        "GET",
        "/recall",
        "Search memories before answering or deciding: hybrid (meaning, keywords, tags, time, graph). Pass a "
        "natural-language `query`; narrow with `tags`, `time_query` ('last week') or `start`/`end`. By default "
        "only what is current and trusted comes back; `as_of` (ISO time) shows what was current then, "
        "`state_mode=history` everything. Returns `results`, each with `memory`, `final_score` and why it matched.",
        omit=("format", "offset"),  # accepted from AutoMem's clients and ignored
        read_only=True,
    ),
    ToolSpec(
        "get",
        "Read one memory",
        "GET",
        "/memory/{memory_id}",
        "Read one memory by id, every field, whatever its trust state, with its strongest relations, its `state` "
        "and, when it was replaced, `replaced_by`. `state_mode=current` answers with the head of its chain.",
        read_only=True,
    ),
    ToolSpec(
        "update",
        "Update a memory",
        "PATCH",
        "/memory/{memory_id}",
        "Change fields of a memory in place (a typo, tags, importance, metadata, archived). Only the fields "
        "given change; metadata is replaced whole. To record that something changed its meaning (a new "
        "decision), store a new memory with `supersedes_memory_id` instead, so the history keeps the old one.",
    ),
    ToolSpec(
        "delete",
        "Delete a memory",
        "DELETE",
        "/memory/{memory_id}",
        "Delete a memory (its node, relations and vector). With `reason: rejected` (or `tombstone: true`) its "
        "content is tombstoned and cannot be stored again without review. Prefer `update` with archived or "
        "`set_trust_state` deprecated when the memory may matter later.",
        destructive=True,
    ),
    ToolSpec(
        "associate",
        "Relate two memories",
        "POST",
        "/associate",
        f"Record a relation between two memories: `type` one of {', '.join(AUTHORABLE_RELATIONS)} (default "
        "RELATES_TO); `strength` 0-1; other arguments are the relation's properties (`reason`, `context`). "
        "CONTRADICTS marks the older memory disputed.",
        body="AssociationIn",
    ),
    ToolSpec(
        "history",
        "A memory's history",
        "GET",
        "/memory/{memory_id}/history",
        "The audit trail of one memory, oldest first: who created, changed, superseded, reviewed or deleted it "
        "and when, with each change's `diff`. Use it to explain why a memory says what it says.",
        read_only=True,
    ),
    ToolSpec(
        "review_list",
        "Memories awaiting review",
        "GET",
        "/review",
        "The tenant's memories a review rule held back (pending_review, not recalled until decided), oldest "
        "first, each with the `review_rule` that caught it. Needs a token with the review role.",
        read_only=True,
    ),
    ToolSpec(
        "review_approve",
        "Approve a memory",
        "POST",
        "/review/{memory_id}/approve",
        "Approve a pending memory: it becomes verified and is recalled. An optional `note` says why. Review role.",
    ),
    ToolSpec(
        "review_reject",
        "Reject a memory",
        "POST",
        "/review/{memory_id}/reject",
        "Reject a pending memory: it becomes rejected and its content tombstoned, so it is not stored again. "
        "An optional `note` says why. Review role.",
        destructive=True,
    ),
    ToolSpec(
        "set_trust_state",
        "Change a memory's trust state",
        "PATCH",
        "/memory/{memory_id}",
        "Deprecate a memory that should no longer be relied on (`trust_state: deprecated`, withheld from recall) "
        "or undo that (`active`). Other moves are made by review and relations; a move not allowed is refused "
        "with TRUST_TRANSITION_NOT_ALLOWED.",
        only=("trust_state",),
    ),
    ToolSpec(
        "health",
        "Service health",
        "GET",
        "/health",
        "Whether memgrid and its stores are up (`status` healthy or degraded), and how many memories the "
        "caller's tenant holds.",
        read_only=True,
    ),
)


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    operation: Operation

    def listed(self) -> types.Tool:
        return types.Tool(
            name=self.spec.name,
            title=self.spec.title,
            description=self.spec.description,
            input_schema=self.operation.input_schema,
            output_schema=self.operation.output_schema,
            annotations=types.ToolAnnotations(
                title=self.spec.title,
                read_only_hint=self.spec.read_only,
                destructive_hint=self.spec.destructive,
                idempotent_hint=self.spec.read_only,
                open_world_hint=False,
            ),
        )


def build_tools(spec: dict) -> dict[str, Tool]:
    """Every tool, by name, from the OpenAPI document `spec` (app.openapi())."""
    return {s.name: Tool(s, operation(spec, s.method, s.path, body=s.body, only=s.only, omit=s.omit)) for s in SPECS}
