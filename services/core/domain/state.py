"""The current-state pass (spec 000; spec 002 sections 2 and 6), pure.

A memory stops being current when it is archived, when its validity window
has closed (t_invalid <= now) or not yet opened (t_valid > now), or when a
supersession edge (INVALIDATED_BY, EVOLVED_INTO) leads from it to a later
memory. A superseded memory is not dropped: the head of its chain stands in
its place. CONTRADICTS suppresses nothing.

The walk to the head is bounded (MAX hops, from settings) and cycle-safe;
the caller loads the edges of a whole frontier at once, so a pass costs at
most one graph read per hop, whatever the number of results.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from services.core.domain.errors import InvalidArgument
from services.core.domain.model import Memory


class State(StrEnum):
    CURRENT = "current"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"
    NOT_YET_VALID = "not_yet_valid"
    ARCHIVED = "archived"


_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def resolve_state_mode(state_mode: str | None, current_only: str | None = None) -> bool:
    """Whether a read is in history mode. state_mode is current | history;
    the legacy current_only is true | false; neither sent means current.
    Any other value is INVALID_ARGUMENT naming the field."""
    mode = (state_mode or "").strip().lower()
    if mode:
        if mode not in ("current", "history"):
            raise InvalidArgument(
                "INVALID_STATE_MODE",
                f"state_mode must be 'current' or 'history', not {state_mode!r}",
                field="state_mode",
            )
        return mode == "history"
    legacy = (current_only or "").strip().lower()
    if not legacy:
        return False
    if legacy in _TRUE:
        return False
    if legacy in _FALSE:
        return True
    raise InvalidArgument(
        "INVALID_CURRENT_ONLY", f"current_only must be true or false, not {current_only!r}", field="current_only"
    )


def window_state(memory: Memory, at: datetime) -> State:
    """The state a memory's own fields give it at `at` (supersession aside)."""
    if memory.archived and (memory.archived_at is None or memory.archived_at <= at):
        return State.ARCHIVED
    if memory.t_valid is not None and memory.t_valid > at:
        return State.NOT_YET_VALID
    if memory.t_invalid is not None and memory.t_invalid <= at:
        return State.EXPIRED
    return State.CURRENT


@dataclass(frozen=True, slots=True)
class Successor:
    """A supersession edge from some memory to `target_id`."""

    target_id: str
    type: str
    created_at: datetime | None


def next_in_chain(node: str, successors: Mapping[str, list[Successor]], visited: set[str], at: datetime) -> str | None:
    """The memory that superseded `node` as of `at`: the most recent edge's
    target not already on the path (cycle-safe); None at a head."""
    edges = [
        e
        for e in successors.get(node, ())
        if e.target_id not in visited and (e.created_at is None or e.created_at <= at)
    ]
    if not edges:
        return None
    return max(edges, key=lambda e: (e.created_at is not None, e.created_at or at, e.target_id)).target_id


@dataclass(slots=True)
class Chain:
    """The walk from a superseded memory towards the head of its chain."""

    start: str
    path: list[str] = field(default_factory=list)
    done: bool = False

    @property
    def tip(self) -> str:
        return self.path[-1]

    @property
    def hops(self) -> int:
        return len(self.path) - 1


def start_chains(ids: list[str], successors: Mapping[str, list[Successor]], at: datetime) -> dict[str, Chain]:
    """Chains for the memories superseded as of `at` (the rest are not)."""
    return {i: Chain(i, [i]) for i in ids if next_in_chain(i, successors, {i}, at) is not None}


def advance(
    chains: dict[str, Chain], successors: Mapping[str, list[Successor]], at: datetime, max_hops: int
) -> set[str]:
    """Move every unfinished chain one hop where its tip's edges are known.
    Returns the tips whose edges are still needed (load them, then call
    again); an empty set means every chain is done."""
    needed: set[str] = set()
    for chain in chains.values():
        while not chain.done:
            if chain.hops >= max_hops:
                chain.done = True
                break
            if chain.tip not in successors:
                needed.add(chain.tip)
                break
            following = next_in_chain(chain.tip, successors, set(chain.path), at)
            if following is None:
                chain.done = True
            else:
                chain.path.append(following)
    return needed


@dataclass(frozen=True, slots=True)
class Verdict:
    """The pass's decision about one memory: keep it, replace it by `head`,
    or withhold it (`state` says why)."""

    memory: Memory
    state: State
    head: Memory | None = None
    hops: int = 0

    @property
    def kept(self) -> bool:
        return self.state is State.CURRENT

    @property
    def replaced(self) -> bool:
        return self.head is not None


def judge(memory: Memory, chain: Chain | None, records: Mapping[str, Memory], at: datetime) -> Verdict:
    """A verdict from the memory, its chain (when superseded) and the
    records of chain heads. A superseded memory whose head is not current
    itself is withheld."""
    if chain is not None and chain.hops > 0:
        head = records.get(chain.tip)
        if head is not None and window_state(head, at) is State.CURRENT:
            return Verdict(memory, State.SUPERSEDED, head, chain.hops)
        return Verdict(memory, State.SUPERSEDED, None, chain.hops)
    return Verdict(memory, window_state(memory, at))
