"""Trust state: how far a memory may be relied on (docs/trust.md), pure.

Every memory has one of seven states. A new memory is `active`, or
`pending_review` when the review policy holds it back (review_policy.py);
the review decides `verified` or `rejected`. A CONTRADICTS edge makes the
older of its two memories `disputed`; a supersede makes the replaced one
`superseded`; a PATCH (or the MCP client's metadata.deprecated /
metadata.superseded_by keys) makes it `deprecated`. Recall withholds the
states in WITHHELD_BY_DEFAULT unless the caller asks for them
(trust_states=), and down-weights a disputed memory (recall_ranking).

A record written before trust states existed has none: it reads as active.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum

from services.core.domain.errors import FailedPrecondition, InvalidArgument


class TrustState(StrEnum):
    ACTIVE = "active"
    VERIFIED = "verified"
    DISPUTED = "disputed"
    DEPRECATED = "deprecated"
    SUPERSEDED = "superseded"
    PENDING_REVIEW = "pending_review"
    REJECTED = "rejected"


#: What recall, the listings and the graph views leave out unless asked for.
WITHHELD_BY_DEFAULT = frozenset({TrustState.PENDING_REVIEW, TrustState.REJECTED, TrustState.DEPRECATED})
#: What they show by default (a superseded memory stays: the state pass puts its head in its place).
VISIBLE_BY_DEFAULT = tuple(s.value for s in TrustState if s not in WITHHELD_BY_DEFAULT)
#: Every state, in declaration order (the value of trust_states=all).
ALL_STATES = tuple(s.value for s in TrustState)

#: The moves allowed, from -> to. A system cause (an edge, a supersede) that
#: is not allowed leaves the state as it is (see `moved`); a client's request
#: that is not allowed is refused (see `require_move`).
TRANSITIONS: Mapping[TrustState, frozenset[TrustState]] = {
    # pending_review: a review rule that holds only once the memory exists (a CONTRADICTS edge).
    TrustState.ACTIVE: frozenset(
        {
            TrustState.VERIFIED,
            TrustState.DISPUTED,
            TrustState.DEPRECATED,
            TrustState.SUPERSEDED,
            TrustState.PENDING_REVIEW,
        }
    ),
    TrustState.VERIFIED: frozenset({TrustState.DISPUTED, TrustState.DEPRECATED, TrustState.SUPERSEDED}),
    TrustState.DISPUTED: frozenset(
        {TrustState.ACTIVE, TrustState.VERIFIED, TrustState.DEPRECATED, TrustState.SUPERSEDED}
    ),
    # Un-deprecating (PATCH trust_state: active) is a client's correction.
    TrustState.DEPRECATED: frozenset({TrustState.ACTIVE, TrustState.SUPERSEDED}),
    TrustState.SUPERSEDED: frozenset({TrustState.DEPRECATED}),
    TrustState.PENDING_REVIEW: frozenset({TrustState.VERIFIED, TrustState.REJECTED}),
    TrustState.REJECTED: frozenset(),
}
#: The states a client may set through PATCH /memory/{id} (the rest follow from edges and reviews).
PATCHABLE = (TrustState.ACTIVE, TrustState.DEPRECATED)


def trust_of(value: str | None) -> TrustState:
    """The state stored as `value`; a missing or unknown one is active (records
    written before trust states existed)."""
    try:
        return TrustState(value) if value else TrustState.ACTIVE
    except ValueError:
        return TrustState.ACTIVE


def can_move(current: TrustState, target: TrustState) -> bool:
    return current == target or target in TRANSITIONS[current]


def moved(current: TrustState, target: TrustState) -> TrustState:
    """The state after a system cause asks for `target`: it, when allowed, else
    `current` (a CONTRADICTS edge leaves a pending or rejected memory as it is)."""
    return target if can_move(current, target) else current


def require_move(current: TrustState, target: TrustState, *, field: str = "trust_state") -> TrustState:
    """`target`, when a client may move a memory there from `current`;
    FAILED_PRECONDITION otherwise (e.g. approving a memory not under review)."""
    if not can_move(current, target):
        raise FailedPrecondition(
            "TRUST_TRANSITION_NOT_ALLOWED",
            f"a memory in trust state '{current.value}' cannot become '{target.value}'",
            field=field,
            current=current.value,
            requested=target.value,
        )
    return target


def parse_patch_state(value) -> TrustState:
    """The trust_state a PATCH sent: one of PATCHABLE."""
    if isinstance(value, str):
        try:
            state = TrustState(value.strip().lower())
        except ValueError:
            state = None
        if state in PATCHABLE:
            return state
    names = ", ".join(f"'{s.value}'" for s in PATCHABLE)
    raise InvalidArgument("INVALID_TRUST_STATE", f"'trust_state' may be set to {names} only", field="trust_state")


def from_metadata(metadata: Mapping | None) -> TrustState | None:
    """The state the MCP client's metadata keys mean: metadata.superseded_by
    (an id) is superseded, a true metadata.deprecated is deprecated; None
    when neither is set."""
    if not isinstance(metadata, Mapping):
        return None
    superseded_by = metadata.get("superseded_by")
    if isinstance(superseded_by, str) and superseded_by.strip():
        return TrustState.SUPERSEDED
    deprecated = metadata.get("deprecated")
    if deprecated is True or (isinstance(deprecated, str) and deprecated.strip().lower() in ("true", "1", "yes")):
        return TrustState.DEPRECATED
    return None


def parse_trust_states(values: Iterable[str]) -> tuple[str, ...]:
    """The states a read asked for (trust_states=, comma-separated or
    repeated; "all" for every one); none asked: VISIBLE_BY_DEFAULT. An
    unknown name is INVALID_ARGUMENT naming the field."""
    wanted: list[str] = []
    for value in values:
        for part in str(value).split(","):
            name = part.strip().lower()
            if not name:
                continue
            if name == "all":
                return ALL_STATES
            if name not in ALL_STATES:
                raise InvalidArgument(
                    "INVALID_TRUST_STATE",
                    f"trust_states: unknown state {part.strip()!r}; one of {', '.join(ALL_STATES)} or 'all'",
                    field="trust_states",
                )
            if name not in wanted:
                wanted.append(name)
    return tuple(wanted) if wanted else VISIBLE_BY_DEFAULT


def visible(trust_state: str | None, states: Iterable[str]) -> bool:
    """Whether a memory in `trust_state` is among the `states` a read shows."""
    return trust_of(trust_state).value in states
