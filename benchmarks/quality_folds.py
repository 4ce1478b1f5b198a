"""Leave-one-conversation-out over recall's own score components: the
weights of the fused score chosen on all conversations but one and measured
on the one left out, for each in turn (the held-out folds `make
bench-quality` reports).

memgrid's /recall answers each result with its score components; the
benchmark asks for a deep pool (the largest limit) once, and every weight
set is then tried on that pool here, offline, the way recall itself fuses
them: the weighted sum of the components times the trust weight, the
neighbourhood component (services/core/domain/recall_context.py) over that
first pass, within the served reach (seconds, and places before and after),
(own + w·t × best) / (1 + w·t), then the order. A weight is searched coordinate by coordinate
over a small grid, from the served defaults, to maximise R@10 + R@50 of
the training folds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from services.core.domain.recall_context import Timed, neighbourhood

#: The components whose weights the folds choose (the rest keep the served defaults).
FITTED = ("keyword", "speaker", "neighbourhood", "exact", "tag", "related")
GRID = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.55, 0.7, 0.85, 1.0)
ROUNDS = 2


@dataclass(frozen=True)
class PoolItem:
    """One result of a deep recall: the turn, its components, its time and trust weight."""

    dia_id: str
    components: Mapping[str, float]
    timestamp: float
    trust_weight: float = 1.0
    stored: float = 0.0  # when it was stored (orders equal timestamps, as recall does)


@dataclass(frozen=True)
class Reach:
    """How far the neighbourhood looks: RECALL_NEIGHBOURHOOD_SECONDS and _ADJACENT."""

    seconds: float
    adjacent: int = 0


def fused(pool: Sequence[PoolItem], weights: Mapping[str, float], reach: Reach) -> list[tuple[PoolItem, float]]:
    """The pool's items, best first, with the final score recall would give them with `weights`."""
    if not pool:
        return []
    spread = {name: w for name, w in weights.items() if name != "neighbourhood"}
    first = [item.trust_weight * sum(w * item.components.get(n, 0.0) for n, w in spread.items()) for item in pool]
    final = list(first)
    weight = weights.get("neighbourhood", 0.0)
    if weight > 0 and reach.seconds > 0:
        timed = [Timed(item.timestamp, score, item.stored) for item, score in zip(pool, first, strict=True)]
        best = neighbourhood(timed, reach.seconds, reach.adjacent)
        # As recall (recall_ranking.with_neighbourhood): (own + w·t × best) / (1 + w·t).
        lifts = [weight * item.trust_weight for item in pool]
        final = [(f + lift * b) / (1.0 + lift) for f, b, lift in zip(first, best, lifts, strict=True)]
    order = np.argsort(-np.array(final), kind="stable")
    return [(pool[i], float(final[i])) for i in order]


def fused_order(pool: Sequence[PoolItem], weights: Mapping[str, float], reach: Reach) -> list[str]:
    """The pool's dia_ids in the order recall would rank them with `weights`."""
    return [item.dia_id for item, _ in fused(pool, weights, reach)]


Objective = Callable[[dict[str, list[str]]], float]


def fit(
    pools: Mapping[str, Sequence[PoolItem]],
    objective: Objective,
    start: Mapping[str, float],
    reach: Reach,
    fitted: Sequence[str] = FITTED,
    grid: Sequence[float] = GRID,
) -> dict[str, float]:
    """The weights, from `start`, that maximise objective(rankings of `pools`)."""
    weights = dict(start)

    def score(candidate: Mapping[str, float]) -> float:
        return objective({key: fused_order(pool, candidate, reach) for key, pool in pools.items()})

    best = score(weights)
    for _ in range(ROUNDS):
        for name in fitted:
            for value in grid:
                trial = {**weights, name: value}
                found = score(trial)
                if found > best + 1e-9:
                    best, weights = found, trial
    return weights


def held_out(
    pools_by_conversation: Mapping[str, Mapping[str, Sequence[PoolItem]]],
    objective_for: Callable[[Sequence[str]], Objective],
    start: Mapping[str, float],
    reach: Reach,
) -> tuple[dict[str, list[str]], dict[str, dict[str, float]]]:
    """Each conversation ranked with the weights fitted on the others: the
    rankings by question key, and the weights each fold chose."""
    rankings: dict[str, list[str]] = {}
    chosen: dict[str, dict[str, float]] = {}
    for held in pools_by_conversation:
        training = [c for c in pools_by_conversation if c != held]
        train_pools = {k: p for c in training for k, p in pools_by_conversation[c].items()}
        weights = fit(train_pools, objective_for(training), start, reach)
        chosen[held] = weights
        for key, pool in pools_by_conversation[held].items():
            rankings[key] = fused_order(pool, weights, reach)
    return rankings, chosen
