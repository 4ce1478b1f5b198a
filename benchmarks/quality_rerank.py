"""The reranker (services/core/domain/rerank.py): fitted on the deep pools
`make bench-quality` saves, leave-one-conversation-out like the weights,
and written out as the model recall ships.

For each conversation held out, the first stage's weights are fitted on the
other two (quality_folds.fit), a LightGBM lambdarank ensemble is fitted on
the other two's first-stage top RECALL_RERANK_DEPTH, and the held-out
conversation is ranked by both: the first stage's order, then the same with
its top reordered by the ensemble. `--write` fits one ensemble on every
conversation, over the served weights' first stage, for recall to ship.

    python -m benchmarks.quality_rerank --from-pools build/pools.json [--write services/recall/rerank_model.json]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from benchmarks.quality_folds import PoolItem, Reach, fit, fused
from services.core.domain.rerank import TreeModel, features, from_lightgbm, model_order

#: LightGBM's settings: small trees, shrunk and subsampled (three conversations are little data).
PARAMS = {
    "objective": "lambdarank",
    "learning_rate": 0.05,
    "num_leaves": 7,
    "min_data_in_leaf": 20,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "feature_fraction": 0.8,
    "lambda_l2": 1.0,
    "lambdarank_truncation_level": 20,
    "num_threads": 1,
    "deterministic": True,
    "seed": 7,
    "verbose": -1,
}
ROUNDS = 100

Pools = Mapping[str, Sequence[PoolItem]]


def rerank_depth() -> int:
    """RECALL_RERANK_DEPTH as recall serves it."""
    from services.core.settings import Settings

    return Settings().recall.recall_rerank_depth


def _head(pool: Sequence[PoolItem], weights: Mapping[str, float], reach: Reach, depth: int):
    ranked = fused(pool, weights, reach)
    top = ranked[:depth]
    rows = features([item.components for item, _ in top], [score for _, score in top])
    return ranked, top, rows


def train(
    pools: Pools, evidence: Mapping[str, set[str]], weights: Mapping[str, float], reach: Reach, depth: int
) -> TreeModel:
    """An ensemble fitted on these pools' first-stage top `depth`."""
    import lightgbm

    blocks, labels, groups = [], [], []
    for key, pool in pools.items():
        _, top, rows = _head(pool, weights, reach, depth)
        if len(top) < 2:
            continue
        blocks.append(rows)
        labels.append([1 if item.dia_id in evidence[key] else 0 for item, _ in top])
        groups.append(len(top))
    data = lightgbm.Dataset(np.vstack(blocks), np.concatenate(labels), group=groups)
    booster = lightgbm.train(PARAMS, data, num_boost_round=ROUNDS)
    return from_lightgbm(booster.dump_model())


def reranked(pool: Sequence[PoolItem], weights: Mapping[str, float], reach: Reach, depth: int, model: TreeModel):
    """The pool's dia_ids: the first stage's top `depth` in the model's order, then the rest."""
    ranked, top, rows = _head(pool, weights, reach, depth)
    if len(top) < 2:
        return [item.dia_id for item, _ in ranked]
    order = model_order(model.predict(rows).tolist())
    return [top[i][0].dia_id for i in order] + [item.dia_id for item, _ in ranked[depth:]]


def held_out(
    pools_by_conversation: Mapping[str, Pools],
    evidence: Mapping[str, set[str]],
    objective_for: Callable[[Sequence[str]], Callable[[dict[str, list[str]]], float]],
    start: Mapping[str, float],
    reach: Reach,
    depth: int,
) -> dict[str, list[str]]:
    """Each conversation ranked by the first stage and ensemble fitted on the others."""
    rankings: dict[str, list[str]] = {}
    for held in pools_by_conversation:
        training = [c for c in pools_by_conversation if c != held]
        train_pools = {k: p for c in training for k, p in pools_by_conversation[c].items()}
        weights = fit(train_pools, objective_for(training), start, reach)
        model = train(train_pools, evidence, weights, reach, depth)
        for key, pool in pools_by_conversation[held].items():
            rankings[key] = reranked(pool, weights, reach, depth, model)
    return rankings


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.quality import (  # noqa: PLC0415  quality imports this module
        CATEGORIES,
        DEFAULT_DATA,
        OVERALL,
        figures,
        load,
        load_pools,
        objective_for,
        served_weights,
        table,
    )
    from benchmarks.quality_folds import held_out as linear_held_out

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from-pools", type=Path, required=True, help="pools saved by make bench-quality")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--write", type=Path, help="fit on every conversation and write the model here")
    args = parser.parse_args(argv)
    conversations, _ = load(args.data)
    questions = [q for c in conversations for q in c.questions]
    evidence = {q.key: set(q.evidence) for q in questions}
    _, pools = load_pools(args.from_pools)
    start, reach = served_weights()
    depth = rerank_depth()
    ks = (1, 5, 10, 50)
    counts = {name: sum(CATEGORIES[q.category] == name for q in questions) for name in CATEGORIES.values()}
    counts[OVERALL] = len(questions)
    linear, _ = linear_held_out(pools, objective_for(questions), start, reach)
    second = held_out(pools, evidence, objective_for(questions), start, reach, depth)
    print(table({"first stage, held-out folds": figures(linear, questions, ks)}, counts, ks))
    print(table({f"reranked top {depth}, held-out folds": figures(second, questions, ks)}, counts, ks))
    if args.write:
        every = {k: p for c in pools.values() for k, p in c.items()}
        model = train(every, evidence, start, reach, depth)
        args.write.write_text(json.dumps(model.to_dict(), separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"wrote {args.write}: {model.feature.shape[0]} trees, depth {model.depth}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
