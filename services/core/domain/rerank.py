"""The second stage of a query's recall, pure: a learned reranker over the
score components recall already computes.

The first stage fuses the components linearly (the weighted sum, then the
neighbourhood). A linear sum cannot say "a strong keyword match counts for
more when the vector agrees" or "a memory ranked fifth by the vector but
first by the speaker"; a small boosted tree ensemble over the same
components, their ranks among the candidates and the first stage's own
order can. It reorders the first stage's best `depth` candidates among
themselves, so the set of those candidates (and R@depth) is unchanged.

The ensemble is fitted offline (benchmarks/quality_rerank.py, LightGBM's
lambdarank) and shipped as plain arrays; `TreeModel.predict` scores every
tree at once with numpy, so recall needs no model library. A test holds it
to LightGBM's own predictions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

#: The components read as they are: how each candidate matches the query.
#: What describes a memory whatever is asked (importance, confidence,
#: recency, trust, relevance, the context hint) is left to the first stage's
#: weights, which the first stage's own rank and score carry in: a model
#: fitted on one data set's ages and defaults would not carry to another's.
RAW = ("vector", "keyword", "metadata", "tag", "exact", "relation", "speaker", "neighbourhood", "related")
#: The components also read against the candidates': a share of the best, and a rank.
RELATIVE = ("vector", "keyword", "neighbourhood", "related", "speaker", "tag")
#: Every feature's name, in the model's column order.
FEATURES = (
    *RAW,
    *(f"{name}/best" for name in RELATIVE),
    *(f"{name} rank" for name in RELATIVE),
    "fused rank",
    "fused/best",
)

#: Leaves a tree may have: each is a bit of a 64-bit word in `TreeModel.predict`.
_MAX_LEAVES = 64
_ALL_LEAVES = np.uint64(2**64 - 1)


def features(components: Sequence[Mapping[str, float]], fused: Sequence[float]) -> np.ndarray:
    """One row of FEATURES per candidate, the candidates given best first by
    the first stage (`fused`: its final scores). Ranks are log(1 + place)."""
    count = len(components)
    table = np.array([[c.get(name, 0.0) for name in RAW] for c in components], dtype=np.float64)
    table = table.reshape(count, len(RAW))
    columns = [table]
    relative = table[:, [RAW.index(name) for name in RELATIVE]]
    best = relative.max(axis=0, initial=0.0)
    columns.append(relative / np.where(best > 0, best, 1.0))
    places = np.empty_like(relative)
    for column in range(relative.shape[1]):
        places[np.argsort(-relative[:, column], kind="stable"), column] = np.arange(count)
    columns.append(np.log1p(places))
    scores = np.asarray(fused, dtype=np.float64).reshape(count, 1)
    top = float(scores.max(initial=0.0))
    columns.append(np.log1p(np.arange(count, dtype=np.float64)).reshape(count, 1))
    columns.append(scores / (top if top > 0 else 1.0))
    return np.hstack(columns)


@dataclass(frozen=True)
class TreeModel:
    """Binary trees of `x[feature] <= threshold` splits, padded to one shape:
    per tree and internal node the feature, threshold and children (a child
    c >= 0 is an internal node, c < 0 the leaf ~c), and per tree the leaves'
    values. The score of a row is the sum of its leaves over the trees."""

    feature: np.ndarray  # (trees, nodes) int
    threshold: np.ndarray  # (trees, nodes) float
    left: np.ndarray  # (trees, nodes) int
    right: np.ndarray  # (trees, nodes) int
    leaf: np.ndarray  # (trees, leaves) float
    depth: int  # the deepest path, kept in the file (predict does not need it)
    names: tuple[str, ...] = FEATURES

    def predict(self, rows: np.ndarray) -> np.ndarray:
        """The ensemble's score of each row (rows: (n, len(names))).

        Every split is tested for every row at once, and each tree's leaf
        found from those tests without walking it (QuickScorer, Lucchese et
        al. 2015): a split that fails rules out the leaves of its left
        subtree, and a row ends in the leftmost leaf no failed split of its
        tree ruled out. About 5x faster than walking the trees level by level."""
        count, trees = rows.shape[0], self.feature.shape[0]
        if count == 0 or trees == 0:
            return np.zeros(count)
        nodes = self.feature.shape[1]
        feature, threshold, kept = self._splits
        failed = rows[:, feature] > threshold
        left = np.where(failed, kept, _ALL_LEAVES).reshape(count, nodes, trees)
        alive = left[:, 0]
        for node in range(1, nodes):
            alive = alive & left[:, node]
        lowest = alive & (~alive + np.uint64(1))
        leaf = np.log2(lowest.astype(np.float64)).astype(np.int64)
        return self.leaf.ravel()[np.arange(trees) * self.leaf.shape[1] + leaf].sum(axis=1)

    @cached_property
    def _splits(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The splits node-major (node 0 of every tree, then node 1, ...): each
        one's feature and threshold, and the leaves still possible when it
        fails (every leaf but its left subtree's; every leaf for a padding node)."""
        trees, nodes = self.feature.shape
        if self.leaf.shape[1] > _MAX_LEAVES:
            raise ValueError(f"the model's trees have {self.leaf.shape[1]} leaves; at most {_MAX_LEAVES} are read")
        kept = np.full((trees, nodes), _ALL_LEAVES, dtype=np.uint64)
        for tree in range(trees):
            if self.left[tree, 0] < 0 and self.left[tree, 0] == self.right[tree, 0]:
                continue  # a single leaf (from_lightgbm: both children of node 0 are leaf 0)
            pending = [0]
            while pending:
                node = pending.pop()
                kept[tree, node] = ~np.uint64(self._leaves_under(tree, int(self.left[tree, node])))
                pending.extend(int(c) for c in (self.left[tree, node], self.right[tree, node]) if c >= 0)
        return self.feature.T.ravel(), self.threshold.T.ravel(), kept.T.ravel()

    def _leaves_under(self, tree: int, child: int) -> int:
        """The bits of the leaves below `child` (itself, when it is a leaf)."""
        if child < 0:
            return 1 << ~child
        return self._leaves_under(tree, int(self.left[tree, child])) | self._leaves_under(
            tree, int(self.right[tree, child])
        )

    def to_dict(self) -> dict:
        return {
            "features": list(self.names),
            "depth": self.depth,
            "feature": self.feature.tolist(),
            "threshold": self.threshold.tolist(),
            "left": self.left.tolist(),
            "right": self.right.tolist(),
            "leaf": self.leaf.tolist(),
        }

    @staticmethod
    def from_dict(data: Mapping) -> TreeModel:
        """The model as `to_dict` wrote it; a ValueError names what does not fit."""
        names = tuple(data.get("features", ()))
        if names != FEATURES:
            raise ValueError(f"the model's features {list(names)[:3]}... are not this release's")
        model = TreeModel(
            feature=np.asarray(data["feature"], dtype=np.int64),
            threshold=np.asarray(data["threshold"], dtype=np.float64),
            left=np.asarray(data["left"], dtype=np.int64),
            right=np.asarray(data["right"], dtype=np.int64),
            leaf=np.asarray(data["leaf"], dtype=np.float64),
            depth=int(data["depth"]),
            names=names,
        )
        shapes = {a.shape for a in (model.feature, model.threshold, model.left, model.right)}
        if len(shapes) != 1 or model.leaf.shape[0] != model.feature.shape[0] or model.depth < 0:
            raise ValueError("the model's arrays do not have one shape")
        if model.feature.size and not (model.feature.min() >= 0 and model.feature.max() < len(FEATURES)):
            raise ValueError("the model splits on a feature it does not have")
        model._splits  # noqa: B018  built now: a model whose trees do not fit is refused here
        return model


def from_lightgbm(dump: Mapping) -> TreeModel:
    """A TreeModel of LightGBM's `Booster.dump_model()` (numerical `<=`
    splits only: the features are never missing)."""
    trees = [info["tree_structure"] for info in dump["tree_info"]]
    flat = [_flatten(tree) for tree in trees]
    nodes = max([len(f[0]) for f in flat] + [1])
    leaves = max([len(f[4]) for f in flat] + [1])
    shape = (len(flat), nodes)
    feature, left, right = (np.zeros(shape, dtype=np.int64) for _ in range(3))
    threshold = np.zeros(shape)
    leaf = np.zeros((len(flat), leaves))
    depth = 0
    for index, (feats, thresholds, lefts, rights, values, tree_depth) in enumerate(flat):
        size = len(feats)
        feature[index, :size], threshold[index, :size] = feats, thresholds
        left[index, :size], right[index, :size] = lefts, rights
        if size == 0:  # a single leaf: every row goes "left" to it
            left[index, 0] = right[index, 0] = -1
            threshold[index, 0] = np.inf
        leaf[index, : len(values)] = values
        depth = max(depth, tree_depth)
    return TreeModel(feature, threshold, left, right, leaf, depth + 1)


def _flatten(root: Mapping) -> tuple[list[int], list[float], list[int], list[int], list[float], int]:
    feats: list[int] = []
    thresholds: list[float] = []
    lefts: list[int] = []
    rights: list[int] = []
    values: list[float] = []
    deepest = 0

    def visit(node: Mapping, depth: int) -> int:
        nonlocal deepest
        deepest = max(deepest, depth)
        if "leaf_value" in node:
            values.append(float(node["leaf_value"]))
            return ~(len(values) - 1)
        if node.get("decision_type", "<=") != "<=":
            raise ValueError(f"split {node.get('decision_type')!r}: only numerical <= splits are read")
        index = len(feats)
        feats.append(int(node["split_feature"]))
        thresholds.append(float(node["threshold"]))
        lefts.append(0)
        rights.append(0)
        lefts[index] = visit(node["left_child"], depth + 1)
        rights[index] = visit(node["right_child"], depth + 1)
        return index

    visit(root, 0)
    return feats, thresholds, lefts, rights, values, deepest


def model_order(scores: Sequence[float]) -> list[int]:
    """The candidates' places, best first by the model's score; a tie keeps the first stage's order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def reordered(finals: Sequence[float], scores: Sequence[float]) -> list[float]:
    """The first stage's final scores handed out again in the reranker's
    order: the candidate it scores highest gets the highest of them, and so
    on. Scores keep their range and spread (min_score and the floors keep
    their meaning) and fall in the order the results are given."""
    ranked = sorted(finals, reverse=True)
    out = [0.0] * len(finals)
    for place, index in enumerate(model_order(scores)):
        out[index] = ranked[place]
    return out
