"""The current-state pass, the one place recall decides what is current
(docs/recall.md). Ranked recall, the listings, the
reads by id and the graph views all go through it.

The rules are the domain's (services/core/domain/state.py: `judge` on the
records and supersession edges around a memory); this pass reads what they
need from the graph, one batched read per hop of the longest chain, and
applies the verdicts: a memory kept, withheld (archived, expired, not yet
valid) or replaced by the head of its chain (a stand-in in its place).
"""

from __future__ import annotations

from datetime import datetime

from services.core.domain.model import Memory
from services.core.domain.recall_ranking import Candidate, stand_in
from services.core.domain.recall_request import Scope
from services.core.domain.state import Successor, Verdict, judge, to_load
from services.core.domain.trust import VISIBLE_BY_DEFAULT, visible
from services.core.ports.reads import SuccessorReads


class CurrentStatePass:
    """Verdicts on a tenant's memories at a time, and the pass over candidates."""

    def __init__(self, reader: SuccessorReads, max_hops: int):
        self._reader = reader
        self._max_hops = max_hops

    @property
    def max_hops(self) -> int:
        """The supersession edges the pass walks at most to find a chain's head."""
        return self._max_hops

    async def verdicts(
        self,
        tenant: str,
        memories: list[Memory],
        at: datetime,
        known: dict[str, list[Successor]] | None = None,
    ) -> dict[str, Verdict]:
        """The state of each memory at `at`: superseded ones walked to the
        last current memory of their chain, reading the records and edges of
        each hop's frontier in one batch. `known`: supersession edges already
        read (with the records, by hydration)."""
        ids = [m.id for m in memories]
        records = {m.id: m for m in memories}
        successors: dict[str, list[Successor]] = dict(known) if known is not None else {}
        missing = [i for i in ids if i not in successors]
        if missing:
            successors.update(await self._reader.successors(tenant, missing))
        for _ in range(self._max_hops + 1):
            needed = sorted(to_load(ids, successors, at, self._max_hops))
            if not needed:
                break
            found = await self._reader.read_candidates(tenant, needed)
            for memory_id in needed:  # one gone from the graph is loaded too: no record, no edges
                record, edges = found.get(memory_id, (None, []))
                successors[memory_id] = edges
                if record is not None:
                    records[memory_id] = record
        return {m.id: judge(m, successors, records, at, self._max_hops) for m in memories}

    async def apply(
        self,
        tenant: str,
        candidates: list[Candidate],
        scope: Scope,
        debug: dict,
        known: dict[str, list[Successor]] | None = None,
    ) -> list[Candidate]:
        """Withhold what is not current; put the head of a chain in the place
        of a superseded memory (debug lists both: state_filter). History mode
        keeps everything as found, but for the trust states the scope does
        not show (pending_review, rejected, deprecated by default), withheld
        in every mode."""
        candidates = self.trusted(candidates, scope.trust_states, debug)
        if scope.history or not candidates:
            return candidates
        verdicts = await self.verdicts(tenant, [c.hydrated for c in candidates], scope.at, known)
        kept: list[Candidate] = []
        for candidate in candidates:
            verdict = verdicts[candidate.id]
            head = verdict.head  # not None: replaced
            if verdict.kept:
                kept.append(candidate)
            elif head is not None and not visible(head.trust_state, scope.trust_states):
                # The replacement waits for review (or was rejected): neither stands for now.
                debug.setdefault("withheld", []).append(
                    {"id": candidate.id, "state": f"trust:{head.trust_state}", "head": head.id}
                )
            elif head is not None:
                kept.append(stand_in(candidate, head))
                debug.setdefault("replaced", []).append({"id": candidate.id, "head": head.id, "hops": verdict.hops})
            else:
                debug.setdefault("withheld", []).append({"id": candidate.id, "state": verdict.state.value})
        return kept

    @staticmethod
    def trusted(candidates: list[Candidate], states, debug: dict | None = None) -> list[Candidate]:
        """The candidates whose trust state is among `states` (the vector arm's
        hits and expansion's finds, which no graph scope filtered)."""
        kept = []
        for candidate in candidates:
            memory = candidate.memory
            if memory is None or visible(memory.trust_state, states):
                kept.append(candidate)
            elif debug is not None:
                debug.setdefault("withheld", []).append({"id": candidate.id, "state": f"trust:{memory.trust_state}"})
        return kept

    @staticmethod
    def trusted_memories(memories: list[Memory], states=VISIBLE_BY_DEFAULT) -> list[Memory]:
        """The memories a read shows by trust state (graph neighbours, related memories)."""
        return [m for m in memories if visible(m.trust_state, states)]

    async def page(self, tenant: str, memories: list[Memory], scope: Scope, via: str) -> list[Candidate]:
        """A listing through the pass; a head already listed is not repeated."""
        candidates = [Candidate(m.id, memory=m, via=via) for m in memories]
        passed = await self.apply(tenant, candidates, scope, {})
        seen: set[str] = set()
        listed = []
        for candidate in passed:
            if candidate.id not in seen:
                seen.add(candidate.id)
                listed.append(candidate)
        return listed
