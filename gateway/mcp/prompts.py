"""MCP prompts: how to use memgrid's tools for what agents get wrong most."""

from __future__ import annotations

import mcp_types as types
from mcp.shared.exceptions import MCPError

RECORD_DECISION = "record_decision"

PROMPTS = (
    types.Prompt(
        name=RECORD_DECISION,
        title="Record a decision that replaces an older one",
        description="Steps to store a new decision so that the one it replaces stays in history and stops "
        "being recalled as current.",
        arguments=[
            types.PromptArgument(name="decision", description="The new decision, in a sentence or two.", required=True),
            types.PromptArgument(
                name="replaces", description="What it replaces: the older decision's id, or words to find it."
            ),
        ],
    ),
)

_STEPS = """Record this decision in memgrid: {decision}

1. Find the decision it replaces{replaces}: call `recall` with a short query about the topic (add
   `state_mode: history` if it may already be superseded) and pick the memory that the new decision
   makes obsolete. If none does, skip to step 3 without `supersedes_memory_id`.
2. Check it with `get` (its `state` must be current, not already `replaced_by` another memory; if it
   is, supersede the head of that chain instead).
3. Call `store` with `content` (the decision and its reason, self-contained), `type: Decision`,
   `importance` (0.8 or more for architecture and policy), `tags`, `supersedes_memory_id` (the old id),
   `supersede_reason` (why it changed) and `t_valid` (when it takes effect) when it is not now.
   Pass an `idempotency_key` so a retry does not store it twice.
4. Do not `update` or `delete` the old memory: a supersede keeps it in history (`history` shows both),
   and `recall` returns the new one in its place. Confirm with `recall` on the topic.
"""


def render_prompt(name: str, arguments: dict[str, str]) -> types.GetPromptResult:
    """The prompt `name` filled with `arguments`; an MCP error for an unknown one or a missing argument."""
    if name != RECORD_DECISION:
        raise MCPError(types.INVALID_PARAMS, f"no prompt named {name!r}; {RECORD_DECISION} is the one")
    decision = (arguments.get("decision") or "").strip()
    if not decision:
        raise MCPError(types.INVALID_PARAMS, "'decision' is required")
    replaces = (arguments.get("replaces") or "").strip()
    text = _STEPS.format(decision=decision, replaces=f" ({replaces})" if replaces else "")
    return types.GetPromptResult(
        description=PROMPTS[0].description,
        messages=[types.PromptMessage(role="user", content=types.TextContent(text=text))],
    )
