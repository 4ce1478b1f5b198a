"""The current-state pass (docs/recall.md), pure.

A memory stops being current when it is archived, when its validity window
has closed (t_invalid <= now) or not yet opened (t_valid > now), or when a
supersession edge (INVALIDATED_BY, EVOLVED_INTO) leads from it to a memory
that is still current ("an active replacement"). A superseded memory is
not dropped: the head of its chain, the last memory along it that is
current, stands in its place. A successor that has
expired, is archived or is not yet valid supersedes nothing. CONTRADICTS
suppresses nothing.

The walk to the head is bounded (max hops, from settings) and cycle-safe;
the caller loads the records and edges of a whole frontier at once, so a
pass costs at most one graph read per hop, whatever the number of results.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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


#: Which state a memory is in when several hold, first first: the order of
#: window_state, after supersession (the analysis summary's Cypher is built from it).
PRECEDENCE = (State.SUPERSEDED, State.ARCHIVED, State.NOT_YET_VALID, State.EXPIRED)


_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def resolve_state_mode(
    state_mode: str | None, current_only: str | None = None, *, default_history: bool = False
) -> bool:
    """Whether a read is in history mode. state_mode is current | history;
    the legacy current_only is true | false; neither sent means current
    (history for a read whose default is every memory, flagged: by-tag).
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
        return default_history
    if legacy in _TRUE:
        return False
    if legacy in _FALSE:
        return True
    raise InvalidArgument(
        "INVALID_CURRENT_ONLY", f"current_only must be true or false, not {current_only!r}", field="current_only"
    )


def is_archived(memory: Memory, at: datetime) -> bool:
    """Whether the memory is archived as of `at` (an archive dated later is not yet in force)."""
    return memory.archived and (memory.archived_at is None or memory.archived_at <= at)


def window_state(memory: Memory, at: datetime) -> State:
    """The state a memory's own fields give it at `at` (supersession aside)."""
    if is_archived(memory, at):
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


def edges_at(node: str, successors: Mapping[str, list[Successor]], at: datetime) -> list[Successor]:
    """The supersession edges leaving `node` that exist as of `at`, most
    recent first (dated before undated, then the greater target id, so the
    order never depends on how the graph returned them)."""
    edges = [
        e for e in successors.get(node, ()) if e.target_id != node and (e.created_at is None or e.created_at <= at)
    ]
    return sorted(edges, key=lambda e: (e.created_at is not None, e.created_at or at, e.target_id), reverse=True)


def to_load(starts: list[str], successors: Mapping[str, list[Successor]], at: datetime, max_hops: int) -> set[str]:
    """The memories within `max_hops` supersession edges of `starts` whose
    record and edges are not loaded yet (a memory counts as loaded once it
    is in `successors`, even when the graph no longer has it). Load them all
    (one batched read), then call again: an empty set means the walk has
    everything, so a pass costs at most one read per hop. Every branch of a
    fork is loaded: which one leads to a current memory is not known before."""
    needed: set[str] = set()
    for start in starts:
        seen, level = {start}, [start]
        for _ in range(max_hops):
            following = []
            for node in level:
                if node not in successors:
                    needed.add(node)
                    continue
                for edge in edges_at(node, successors, at):
                    if edge.target_id not in seen:
                        seen.add(edge.target_id)
                        following.append(edge.target_id)
            level = following
        needed.update(node for node in level if node not in successors)
    return needed


def find_head(
    start: str, successors: Mapping[str, list[Successor]], records: Mapping[str, Memory], at: datetime, max_hops: int
) -> tuple[Memory, int] | None:
    """The head of `start`'s chain as of `at` and its distance in hops: the
    last memory along the chain that is current itself. A link that is not
    current (the supersede flow closes every replaced memory's window) is
    walked through; at a fork the most recent edge that leads to a current
    memory wins. None when no current memory lies within `max_hops`: a
    memory is superseded only by an active successor. A memory is walked
    again only when reached in fewer hops than before (a shorter path leaves
    more of the budget beyond it: a fork's longer branch must not hide what
    the shorter one reaches within max_hops), so a cycle ends the walk."""
    fewest = {start: 0}

    def deepest(node: str, hops: int) -> tuple[Memory, int] | None:
        if hops >= max_hops:
            return None
        for edge in edges_at(node, successors, at):
            target = edge.target_id
            if fewest.get(target, max_hops + 1) <= hops + 1:
                continue
            fewest[target] = hops + 1
            found = deepest(target, hops + 1)
            if found is not None:
                return found
            record = records.get(target)
            if record is not None and window_state(record, at) is State.CURRENT:
                return record, hops + 1
        return None

    return deepest(start, 0)


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


def judge(
    memory: Memory,
    successors: Mapping[str, list[Successor]],
    records: Mapping[str, Memory],
    at: datetime,
    max_hops: int,
) -> Verdict:
    """A verdict from the memory and the supersession edges and records
    loaded around it (see to_load): replaced by the head of its chain when
    a current memory supersedes it, whatever its own window (the supersede
    flow closes it); otherwise the state of its own fields, so a memory
    whose successors are all expired, archived or not yet valid stays
    current."""
    found = find_head(memory.id, successors, records, at, max_hops)
    if found is not None:
        head, hops = found
        return Verdict(memory, State.SUPERSEDED, head, hops)
    return Verdict(memory, window_state(memory, at))
